#include "schedules/ScheduleJson.h"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "dsl/Error.h"

namespace pto {
using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& msg) {
  throw ScheduleError("schedule JSON " + path + ": " + msg);
}

// Schedules are a few levels deep; much deeper input is hostile, and
// nlohmann's dump() (used in messages) recurses once per level.
constexpr int kMaxDepth = 64;

// Nesting depth of `j`, stopping once past kMaxDepth; iterative, so that any depth is safe.
int depth(const json& j) {
  std::vector<std::pair<const json*, int>> todo{{&j, 1}};
  int deepest = 0;
  while (!todo.empty()) {
    const auto [n, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    if (deepest > kMaxDepth) return deepest;
    if (n->is_structured())
      for (const auto& c : *n) todo.emplace_back(&c, d + 1);
  }
  return deepest;
}

// A value for an error message: short, and printable even when a string
// holds invalid UTF-8 (which strict dump() rejects with its own exception).
std::string show(const json& j) {
  std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

void check_keys(const json& j, const std::string& path, std::initializer_list<const char*> allowed) {
  if (!j.is_object()) fail(path, "must be an object, got " + std::string(j.type_name()));
  for (const auto& [k, v] : j.items()) {
    bool ok = false;
    for (const char* a : allowed) ok |= k == a;
    if (!ok) {
      std::string valid;
      for (const char* a : allowed) valid += (valid.empty() ? "" : ", ") + std::string(a);
      fail(path, "unknown key '" + k + "'; valid keys: " + valid);
    }
  }
}

std::string get_string(const json& j, const std::string& path) {
  if (!j.is_string()) fail(path, "must be a string, got " + show(j));
  return j.get<std::string>();
}
int64_t get_int(const json& j, const std::string& path, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) fail(path, "must be an integer, got " + show(j));
  // Unsigned values past int64 would wrap to negative numbers in get<int64_t>.
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(path, "value " + show(j) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi)
    fail(path, "value " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
  return v;
}
bool get_bool(const json& j, const std::string& path) {
  if (!j.is_boolean()) fail(path, "must be true or false, got " + show(j));
  return j.get<bool>();
}
std::vector<std::string> get_names(const json& j, const std::string& path) {
  if (!j.is_array()) fail(path, "must be a list of loop names");
  std::vector<std::string> r;
  for (size_t i = 0; i < j.size(); ++i) r.push_back(get_string(j[i], path + "[" + std::to_string(i) + "]"));
  return r;
}
DType get_dtype(const json& j, const std::string& path) {
  try {
    return parse_dtype(get_string(j, path));
  } catch (const DTypeError& e) {
    fail(path, e.what());
  }
}

json placement_to_json(const Placement& p) {
  switch (p.kind) {
    case Placement::Kind::Root: return "root";
    case Placement::Kind::Inline: return "inline";
    case Placement::Kind::At: return json{{"at", p.stage}, {"loop", p.loop}};
  }
  return "root";
}
Placement placement_from_json(const json& j, const std::string& path) {
  Placement p;
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "root") return p;
    if (s == "inline") {
      p.kind = Placement::Kind::Inline;
      return p;
    }
    fail(path, "'" + s + "' is not a placement; valid: \"root\", \"inline\", {\"at\": stage, \"loop\": loop}");
  }
  check_keys(j, path, {"at", "loop"});
  if (!j.contains("at") || !j.contains("loop")) fail(path, "needs both \"at\" and \"loop\"");
  p.kind = Placement::Kind::At;
  p.stage = get_string(j["at"], path + ".at");
  p.loop = get_string(j["loop"], path + ".loop");
  return p;
}

json loops_to_json(const LoopSchedule& l) {
  json j = json::object();
  if (!l.tile.empty()) j["tile"] = l.tile;
  if (!l.order.empty()) j["order"] = l.order;
  if (!l.vectorize.empty()) j["vectorize"] = {{"loop", l.vectorize}, {"width", l.vector_width}};
  if (!l.unroll.empty()) j["unroll"] = l.unroll;
  if (!l.parallel.empty()) j["parallel"] = l.parallel;
  return j;
}
void loops_from_json(const json& j, const std::string& path, LoopSchedule& l) {
  if (j.contains("tile")) {
    const json& t = j["tile"];
    if (!t.is_object()) fail(path + ".tile", "must map dim names to [size] or [outer, inner]");
    for (const auto& [dim, sizes] : t.items()) {
      const std::string p = path + ".tile." + dim;
      if (sizes.is_number_integer()) {
        l.tile[dim] = {get_int(sizes, p, 1, int64_t{1} << 40)};
        continue;
      }
      if (!sizes.is_array() || sizes.empty() || sizes.size() > 2)
        fail(p, "must be a size or a list of 1 or 2 sizes, got " + show(sizes));
      std::vector<int64_t> v;
      for (size_t i = 0; i < sizes.size(); ++i)
        v.push_back(get_int(sizes[i], p + "[" + std::to_string(i) + "]", 1, int64_t{1} << 40));
      l.tile[dim] = v;
    }
  }
  if (j.contains("order")) l.order = get_names(j["order"], path + ".order");
  if (j.contains("vectorize")) {
    const json& v = j["vectorize"];
    if (v.is_string()) {
      l.vectorize = v.get<std::string>();
    } else {
      check_keys(v, path + ".vectorize", {"loop", "width"});
      if (!v.contains("loop")) fail(path + ".vectorize", "needs \"loop\"");
      l.vectorize = get_string(v["loop"], path + ".vectorize.loop");
      if (v.contains("width"))
        l.vector_width = static_cast<int>(get_int(v["width"], path + ".vectorize.width", 0, 1024));
    }
    // An empty name would mean "no vectorize" and silently drop the width
    // (found by the fuzzer: the schedule changed in a JSON round trip).
    if (l.vectorize.empty()) fail(path + ".vectorize", "must name a loop, got an empty name");
  }
  if (j.contains("unroll")) {
    const json& u = j["unroll"];
    if (u.is_array()) {
      for (const auto& n : get_names(u, path + ".unroll")) l.unroll[n] = 0;
    } else if (u.is_object()) {
      for (const auto& [n, f] : u.items())
        l.unroll[n] = static_cast<int>(get_int(f, path + ".unroll." + n, 0, 1024));
    } else {
      fail(path + ".unroll", "must be a list of loops or {loop: factor}");
    }
  }
  if (j.contains("parallel")) l.parallel = get_names(j["parallel"], path + ".parallel");
}

}  // namespace

std::string to_string(const Placement& p) { return placement_to_json(p).dump(-1, ' ', false, json::error_handler_t::replace); }

json schedule_to_json(const Schedule& s) {
  json j;
  j["schema"] = kScheduleSchemaVersion;
  const ScheduleOptions d;
  json o = json::object();
  o["opt_level"] = s.options.opt_level;
  if (s.options.bounds_checks != d.bounds_checks) o["bounds_checks"] = s.options.bounds_checks;
  if (s.options.threads != d.threads) o["threads"] = s.options.threads;
  if (s.options.profile) o["profile"] = true;
  if (s.options.check_numerics) o["check_numerics"] = true;
  j["options"] = o;
  j["stages"] = json::object();
  for (const auto& [name, st] : s.stages) {
    json js = loops_to_json(st.loops);
    js["compute"] = placement_to_json(st.compute);
    if (st.store) js["store"] = placement_to_json(*st.store);
    if (st.update) js["update"] = loops_to_json(*st.update);
    if (!st.accumulator_at.empty()) js["accumulator_at"] = st.accumulator_at;
    if (st.rfactor) js["rfactor"] = {{"rvar", st.rfactor->rvar}, {"factor", st.rfactor->factor}};
    if (!st.skip_padding.empty()) js["skip_padding"] = st.skip_padding;
    if (!st.dot_pairs.empty()) js["dot_pairs"] = st.dot_pairs;
    for (const auto& c : st.cache) {
      json jc = {{"tensor", c.tensor}, {"loop", c.loop}};
      if (c.transpose) jc["transpose"] = true;
      js["cache"].push_back(jc);
    }
    json prec = json::object();
    if (st.precision.storage) prec["storage"] = to_string(*st.precision.storage);
    if (st.precision.compute) prec["compute"] = to_string(*st.precision.compute);
    if (st.precision.accumulate) prec["accumulate"] = to_string(*st.precision.accumulate);
    if (!prec.empty()) js["precision"] = prec;
    const Pipelining& pl = st.pipeline;
    if (pl.ring_buffer || pl.async || !pl.prefetch.empty()) {
      json p = json::object();
      if (pl.ring_buffer) p["ring_buffer"] = pl.ring_buffer;
      if (pl.async) p["async"] = true;
      for (const auto& f : pl.prefetch)
        p["prefetch"].push_back({{"tensor", f.tensor}, {"loop", f.loop}, {"distance", f.distance}});
      js["pipeline"] = p;
    }
    if (st.device != "cpu") js["device"] = st.device;
    if (!st.gpu.blocks.empty() || !st.gpu.threads.empty())
      js["gpu"] = {{"blocks", st.gpu.blocks}, {"threads", st.gpu.threads}};
    j["stages"][name] = js;
  }
  return j;
}

Schedule schedule_from_json(const json& j) {
  Schedule s;
  if (depth(j) > kMaxDepth) fail("(top)", "is nested deeper than " + std::to_string(kMaxDepth) + " levels");
  check_keys(j, "(top)", {"schema", "options", "stages"});
  if (!j.contains("schema")) fail("(top)", "missing \"schema\" (expected " + std::to_string(kScheduleSchemaVersion) + ")");
  if (get_int(j["schema"], "schema", 0, 1 << 20) != kScheduleSchemaVersion)
    fail("schema", "version " + show(j["schema"]) + " is not supported; expected " +
                       std::to_string(kScheduleSchemaVersion));
  if (j.contains("options")) {
    const json& o = j["options"];
    check_keys(o, "options", {"opt_level", "bounds_checks", "threads", "profile", "check_numerics"});
    if (o.contains("opt_level")) s.options.opt_level = static_cast<int>(get_int(o["opt_level"], "options.opt_level", 0, 3));
    if (o.contains("bounds_checks")) s.options.bounds_checks = get_bool(o["bounds_checks"], "options.bounds_checks");
    if (o.contains("threads")) s.options.threads = static_cast<int>(get_int(o["threads"], "options.threads", 0, 4096));
    if (o.contains("profile")) s.options.profile = get_bool(o["profile"], "options.profile");
    if (o.contains("check_numerics")) s.options.check_numerics = get_bool(o["check_numerics"], "options.check_numerics");
  }
  if (j.contains("stages")) {
    const json& stages = j["stages"];
    if (!stages.is_object()) fail("stages", "must map stage names to stage schedules");
    for (const auto& [name, js] : stages.items()) {
      const std::string path = "stages." + name;
      check_keys(js, path, {"compute", "store", "tile", "order", "vectorize", "unroll", "parallel",
                            "update", "accumulator_at", "rfactor", "skip_padding", "dot_pairs", "cache", "precision", "pipeline", "device", "gpu"});
      StageSchedule st;
      if (js.contains("compute")) st.compute = placement_from_json(js["compute"], path + ".compute");
      if (js.contains("store")) st.store = placement_from_json(js["store"], path + ".store");
      loops_from_json(js, path, st.loops);
      if (js.contains("accumulator_at")) st.accumulator_at = get_string(js["accumulator_at"], path + ".accumulator_at");
      if (js.contains("skip_padding")) st.skip_padding = get_names(js["skip_padding"], path + ".skip_padding");
      if (js.contains("dot_pairs")) st.dot_pairs = get_string(js["dot_pairs"], path + ".dot_pairs");
      if (js.contains("rfactor")) {
        const json& r = js["rfactor"];
        const std::string rp = path + ".rfactor";
        check_keys(r, rp, {"rvar", "factor"});
        if (!r.contains("rvar") || !r.contains("factor")) fail(rp, "needs \"rvar\" and \"factor\"");
        st.rfactor = RFactor{get_string(r["rvar"], rp + ".rvar"), static_cast<int>(get_int(r["factor"], rp + ".factor", 2, 1024))};
      }
      if (js.contains("cache")) {
        const std::string cp = path + ".cache";
        if (!js["cache"].is_array()) fail(cp, "must be a list of {\"tensor\", \"loop\"}");
        for (size_t i = 0; i < js["cache"].size(); ++i) {
          const json& c = js["cache"][i];
          const std::string ip = cp + "[" + std::to_string(i) + "]";
          check_keys(c, ip, {"tensor", "loop", "transpose"});
          if (!c.contains("tensor") || !c.contains("loop")) fail(ip, "needs \"tensor\" and \"loop\"");
          st.cache.push_back({get_string(c["tensor"], ip + ".tensor"), get_string(c["loop"], ip + ".loop"),
                              c.contains("transpose") && get_bool(c["transpose"], ip + ".transpose")});
        }
      }
      if (js.contains("update")) {
        check_keys(js["update"], path + ".update", {"tile", "order", "vectorize", "unroll", "parallel"});
        st.update.emplace();
        loops_from_json(js["update"], path + ".update", *st.update);
      }
      if (js.contains("precision")) {
        const json& p = js["precision"];
        check_keys(p, path + ".precision", {"storage", "compute", "accumulate"});
        if (p.contains("storage")) st.precision.storage = get_dtype(p["storage"], path + ".precision.storage");
        if (p.contains("compute")) st.precision.compute = get_dtype(p["compute"], path + ".precision.compute");
        if (p.contains("accumulate")) st.precision.accumulate = get_dtype(p["accumulate"], path + ".precision.accumulate");
      }
      if (js.contains("pipeline")) {
        const json& p = js["pipeline"];
        check_keys(p, path + ".pipeline", {"ring_buffer", "async", "prefetch"});
        if (p.contains("ring_buffer")) st.pipeline.ring_buffer = static_cast<int>(get_int(p["ring_buffer"], path + ".pipeline.ring_buffer", 0, 8));
        if (p.contains("async")) st.pipeline.async = get_bool(p["async"], path + ".pipeline.async");
        if (p.contains("prefetch")) {
          if (!p["prefetch"].is_array()) fail(path + ".pipeline.prefetch", "must be a list");
          for (const auto& f : p["prefetch"]) {
            const std::string fp = path + ".pipeline.prefetch";
            check_keys(f, fp, {"tensor", "loop", "distance"});
            if (!f.contains("tensor") || !f.contains("loop")) fail(fp, "needs \"tensor\" and \"loop\"");
            Prefetch pf{get_string(f["tensor"], fp + ".tensor"), get_string(f["loop"], fp + ".loop"), 1};
            if (f.contains("distance")) pf.distance = static_cast<int>(get_int(f["distance"], fp + ".distance", 1, 64));
            st.pipeline.prefetch.push_back(pf);
          }
        }
      }
      if (js.contains("device")) st.device = get_string(js["device"], path + ".device");
      if (js.contains("gpu")) {
        const json& g = js["gpu"];
        check_keys(g, path + ".gpu", {"blocks", "threads"});
        if (g.contains("blocks")) st.gpu.blocks = get_names(g["blocks"], path + ".gpu.blocks");
        if (g.contains("threads")) st.gpu.threads = get_names(g["threads"], path + ".gpu.threads");
      }
      s.stages[name] = st;
    }
  }
  return s;
}

std::string schedule_to_json_string(const Schedule& s, int indent) {
  try {
    return schedule_to_json(s).dump(indent);
  } catch (const json::exception& e) {  // a name that is not valid UTF-8
    throw ScheduleError(std::string("schedule cannot be written as JSON: ") + e.what());
  }
}

Schedule schedule_from_json_string(const std::string& text) {
  json j;
  try {
    // Reject deep nesting while parsing, before anything recurses over it.
    j = json::parse(text, [](int d, json::parse_event_t, json&) {
      if (d > kMaxDepth)
        throw ScheduleError("schedule JSON is nested deeper than " + std::to_string(kMaxDepth) + " levels");
      return true;
    });
  } catch (const json::exception& e) {
    throw ScheduleError(std::string("schedule JSON does not parse: ") + e.what());
  }
  return schedule_from_json(j);
}

Schedule load_schedule_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ScheduleError("cannot open schedule file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return schedule_from_json_string(ss.str());
  } catch (const ScheduleError& e) {
    throw ScheduleError(path + ": " + e.what());
  }
}

}  // namespace pto
