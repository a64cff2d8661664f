// Schedule fuzzing: mutated schedule JSON through parse, round trip, validate
// and explain, against several programs. Every input must either be accepted
// or rejected with a pto::Error; anything else (another exception type, a
// crash, a sanitizer report) is a bug. Shared by the Catch test
// (test_schedule_fuzz.cpp) and the standalone `fuzz_schedule` executable that
// CI runs in the AddressSanitizer + UBSan build (scripts/fuzz_sanitized.sh).
//
// Mutations start from valid schedules (default and random valid ones) so
// that many cases get past the parser into validation: text-level (flip,
// delete, insert or duplicate bytes, truncate, a program's names and JSON
// keys spliced in, deep nesting) and structure-level (a value replaced by one
// of another type, huge / negative / non-integer numbers, keys deleted,
// renamed or invented, names swapped for other names of the program, deep
// nesting, invalid UTF-8 in strings).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "dsl/Error.h"
#include "dsl/Workloads.h"
#include "schedules/Explain.h"
#include "schedules/LoopNest.h"
#include "schedules/RandomSchedule.h"
#include "schedules/ScheduleJson.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/directives/RFactor.h"

namespace pto::fuzz {

struct FuzzReport {
  int cases = 0;
  int parsed = 0;     // accepted by the JSON parser
  int valid = 0;      // ... and by validation
  int explained = 0;  // ... and explained
  int rejected = 0;   // a pto::Error
  int foreign = 0;    // any other exception: a bug
  std::string first_foreign;  // its message and input
};

struct FuzzProgram {
  Program program;
  std::vector<std::string> seeds;       // valid schedule JSON texts
  std::vector<std::string> vocabulary;  // stage, loop, dim and tensor names
};

inline std::vector<FuzzProgram> fuzz_programs(const Target& t, uint64_t seed) {
  const std::vector<std::pair<std::string, std::map<std::string, int64_t>>> specs = {
      {"matmul_bias_relu", {{"M", 24}, {"N", 40}, {"K", 8}}},
      {"matmul", {{"M", 0}, {"N", 32}, {"K", 8}}},  // a symbolic size
      {"batched_matmul", {{"Bt", 2}, {"M", 8}, {"N", 32}, {"K", 8}}},
      {"softmax", {{"R", 4}, {"C", 40}}},
      {"layer_norm", {{"R", 4}, {"C", 40}}},
      {"attention", {{"S", 16}, {"D", 8}}},
      {"mlp", {{"S", 4}, {"H", 16}, {"F", 32}}},
      {"conv2d", {{"N", 1}, {"C", 3}, {"H", 8}, {"W", 8}, {"O", 4}}},
  };
  std::mt19937_64 rng(seed);
  std::vector<FuzzProgram> r;
  for (const auto& [name, sizes] : specs) {
    FuzzProgram fp{make_workload(name, sizes), {}, {}};
    const Program& p = fp.program;
    fp.seeds.push_back(schedule_to_json_string(default_schedule(p, t), -1));
    fp.seeds.push_back(schedule_to_json_string(plain_schedule(p), -1));
    for (int i = 0; i < 6; ++i) fp.seeds.push_back(schedule_to_json_string(random_schedule(p, t, rng), -1));
    // A seed with every rfactor-able reduction rfactored (when that validates), so
    // that mutations reach the directive's fields and combination rules.
    {
      Schedule rf = plain_schedule(p);
      for (const Stage& st : p.stages()) {
        if (st.rvars.empty()) continue;
        const auto valid = directives::rfactor_candidates(st, &t, stage_precision(p, rf, st.name).accumulate);
        for (const int f : {8, 4, 2})
          if (std::find(valid.begin(), valid.end(), RFactor{st.rvars.back().name, f}) != valid.end()) {
            rf[st.name].rfactor = RFactor{st.rvars.back().name, f};
            break;
          }
      }
      try {
        validate(p, rf, &t);
        fp.seeds.push_back(schedule_to_json_string(rf, -1));
      } catch (const ScheduleError&) {
      }
    }
    for (const auto& in : p.inputs()) fp.vocabulary.push_back(in.name);
    for (const Stage& st : p.stages()) {
      fp.vocabulary.push_back(st.name);
      for (const auto& v : st.vars) {
        fp.vocabulary.push_back(v);
        for (const char* suf : {"_o", "_i", "_m"}) fp.vocabulary.push_back(v + suf);
      }
      for (const auto& rv : st.rvars)
        for (const char* suf : {"", "_o", "_lane"}) fp.vocabulary.push_back(rv.name + suf);
    }
    r.push_back(std::move(fp));
  }
  return r;
}

class ScheduleMutator {
 public:
  explicit ScheduleMutator(uint64_t seed) : rng_(seed) {}

  // A mutated JSON value (structure level), from a valid one.
  // `deep_ok`: nesting may reach 100,000 levels (only for values that are
  // not dumped to text afterwards: nlohmann's dump recurses).
  nlohmann::json mutate(nlohmann::json j, const std::vector<std::string>& vocab, bool deep_ok) {
    const int n = below(2) ? 1 : 2 + static_cast<int>(below(3));
    for (int k = 0; k < n; ++k) mutate_node(pick_node(j), vocab, deep_ok);
    return j;
  }

  // A mutated text (byte level).
  std::string mutate_text(std::string s, const std::vector<std::string>& vocab) {
    const int n = 1 + static_cast<int>(below(3));
    for (int k = 0; k < n; ++k) {
      const size_t pos = s.empty() ? 0 : below(s.size());
      switch (below(8)) {
        case 0: if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << below(8))); break;
        case 1: s.erase(pos, 1 + below(8)); break;
        case 2: s.insert(pos, 1, static_cast<char>(below(256))); break;
        case 3: s.insert(pos, token(vocab)); break;
        case 4: s.insert(pos, s.substr(pos, below(32))); break;
        case 5: s.resize(pos); break;
        case 6: s.insert(pos, std::string(below(8) == 0 ? 100000 : below(200), "[{\"1:,"[below(6)])); break;
        default: s.insert(pos, std::to_string(static_cast<int64_t>(rng_()))); break;
      }
    }
    return s;
  }

  uint64_t below(uint64_t n) { return n == 0 ? 0 : rng_() % n; }

 private:
  std::string token(const std::vector<std::string>& vocab) {
    static const std::vector<std::string> keys = {
        "\"schema\"", "\"stages\"", "\"options\"", "\"compute\"", "\"store\"", "\"tile\"", "\"order\"",
        "\"vectorize\"", "\"unroll\"", "\"parallel\"", "\"update\"", "\"accumulator_at\"", "\"rfactor\"", "\"rvar\"", "\"factor\"", "\"cache\"", "\"tensor\"", "\"precision\"", "\"pipeline\"",
        "\"device\"", "\"gpu\"", "\"at\"", "\"loop\"", "\"width\"", "\"root\"", "\"inline\"", "\"bf16\"",
        "\"ring_buffer\"", "\"prefetch\"", "\"async\"", "null", "true", "-1", "1e308", "18446744073709551615",
        "\"\\u0000\"", ":", ",", "{", "}", "[", "]"};
    if (!vocab.empty() && below(2)) return "\"" + vocab[below(vocab.size())] + "\"";
    return keys[below(keys.size())];
  }

  // A uniformly chosen node of the tree (reservoir sampling over a walk).
  nlohmann::json& pick_node(nlohmann::json& root) {
    nlohmann::json* chosen = &root;
    uint64_t seen = 0;
    std::vector<nlohmann::json*> todo{&root};
    while (!todo.empty()) {
      nlohmann::json* n = todo.back();
      todo.pop_back();
      if (below(++seen) == 0) chosen = n;
      if (n->is_structured())
        for (auto& c : *n) todo.push_back(&c);
    }
    return *chosen;
  }

  nlohmann::json random_value(const std::vector<std::string>& vocab, int depth = 0) {
    switch (below(depth > 2 ? 9 : 11)) {
      case 0: return nullptr;
      case 1: return below(2) == 1;
      case 2: return std::numeric_limits<int64_t>::max();
      case 3: return -static_cast<int64_t>(below(1000)) - 1;
      case 4: return std::numeric_limits<uint64_t>::max();
      case 5: return static_cast<int64_t>(below(80));
      case 6: return below(2) ? 1e308 : 2.5;
      case 7: return vocab.empty() ? std::string("x") : vocab[below(vocab.size())];
      case 8: return std::string("\xff\xfe") + (vocab.empty() ? "" : vocab[below(vocab.size())]);  // invalid UTF-8
      case 9: {
        nlohmann::json a = nlohmann::json::array();
        for (uint64_t k = below(4); k > 0; --k) a.push_back(random_value(vocab, depth + 1));
        return a;
      }
      default: {
        nlohmann::json o = nlohmann::json::object();
        for (uint64_t k = below(4); k > 0; --k)
          o[vocab.empty() ? "k" : vocab[below(vocab.size())]] = random_value(vocab, depth + 1);
        return o;
      }
    }
  }

  void mutate_node(nlohmann::json& n, const std::vector<std::string>& vocab, bool deep_ok) {
    // Half the mutations keep the structure and swap a name or a number, so
    // that they reach validation; the rest break the structure.
    const uint64_t kind = below(2) ? 3 : below(7);
    switch (kind) {
      case 0: n = random_value(vocab); break;
      case 1:  // delete a key / element
        if (n.is_object() && !n.empty()) {
          auto it = n.begin();
          std::advance(it, static_cast<long>(below(n.size())));
          n.erase(it.key());
        } else if (n.is_array() && !n.empty()) {
          n.erase(below(n.size()));
        }
        break;
      case 2:  // insert or rename a key
        if (n.is_object()) {
          const std::string k = vocab.empty() || below(3) == 0 ? "unknown" : vocab[below(vocab.size())];
          if (!n.empty() && below(2)) {
            auto it = n.begin();
            std::advance(it, static_cast<long>(below(n.size())));
            nlohmann::json v = std::move(it.value());
            n.erase(it.key());
            n[k] = v;
          } else {
            n[k] = random_value(vocab);
          }
        } else if (n.is_array()) {
          n.push_back(random_value(vocab));
        }
        break;
      case 3:  // a name swapped for another name of the program
        if (n.is_string() && !vocab.empty()) n = vocab[below(vocab.size())];
        else if (n.is_number_integer()) n = static_cast<int64_t>(below(70)) - 3;
        break;
      case 4: {  // deep nesting
        const uint64_t depth = deep_ok && below(8) == 0 ? 100000 : below(300);
        nlohmann::json v = std::move(n);
        for (uint64_t k = 0; k < depth; ++k) v = nlohmann::json::array({std::move(v)});
        n = std::move(v);
        break;
      }
      case 5:  // numbers at the edges
        n = std::vector<nlohmann::json>{0, -1, 1, 1 << 30, int64_t{1} << 40, std::numeric_limits<int64_t>::min(),
                                        std::numeric_limits<uint64_t>::max(), 3.0, -0.0, 257, 1025}[below(11)];
        break;
      default:  // swap the types of two siblings
        if (n.is_object() && n.size() >= 2) {
          auto a = n.begin(), b = std::next(n.begin());
          std::swap(a.value(), b.value());
        } else if (n.is_array() && n.size() >= 2) {
          std::swap(n[0], n[1]);
        }
        break;
    }
  }

  std::mt19937_64 rng_;
};

// Runs one input: parse (from text or from a JSON value), round trip, validate, explain.
inline void fuzz_one(const Program& p, const Target& t, const std::string* text, const nlohmann::json* value,
                     FuzzReport& r) {
  ++r.cases;
  try {
    const Schedule s = text ? schedule_from_json_string(*text) : schedule_from_json(*value);
    ++r.parsed;
    const Schedule back = schedule_from_json_string(schedule_to_json_string(s));
    if (!(back == s)) throw std::logic_error("schedule changed in a JSON round trip");
    validate(p, s, &t);
    ++r.valid;
    const std::string e = explain(p, s, &t);
    if (e.empty()) throw std::logic_error("empty explanation");
    ++r.explained;
  } catch (const Error&) {
    ++r.rejected;
  } catch (const std::exception& e) {
    if (r.foreign++ == 0) {
      std::string in = text ? *text : value->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      if (in.size() > 2000) in = in.substr(0, 2000) + "...";
      r.first_foreign = std::string(e.what()) + "\n  program " + p.name() + ", input: " + in;
    }
  }
}

// `cases` mutated schedules spread over the fuzz programs; deterministic in `seed`.
inline FuzzReport fuzz_schedules(int cases, uint64_t seed) {
  const Target t = parse_target("host");
  const auto programs = fuzz_programs(t, seed);
  ScheduleMutator m(seed);
  FuzzReport r;
  for (int i = 0; i < cases; ++i) {
    const FuzzProgram& fp = programs[m.below(programs.size())];
    const std::string& seed_text = fp.seeds[m.below(fp.seeds.size())];
    const uint64_t mode = m.below(3);
    if (mode == 0) {
      const std::string text = m.mutate_text(seed_text, fp.vocabulary);
      fuzz_one(fp.program, t, &text, nullptr, r);
    } else {
      const nlohmann::json j = m.mutate(nlohmann::json::parse(seed_text), fp.vocabulary, mode == 1);
      if (mode == 1) {
        fuzz_one(fp.program, t, nullptr, &j, r);
      } else {
        // Through text too (invalid UTF-8 cannot be dumped strictly: replace it).
        const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        fuzz_one(fp.program, t, &text, nullptr, r);
      }
    }
  }
  return r;
}

}  // namespace pto::fuzz
