#include "debug/StageProfile.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace pto::debug {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Totals {
  double ms = 0, productions = 0;
  size_t bytes = 0;
  std::string parent;  // the stage whose production it ran inside; empty for root stages
  int order = 0;       // of first production (1, 2, ...); 0: never produced
};

// Collects the events of the runs: per thread a stack of open productions.
// A production with none open on the calling thread is at root; one on
// another thread (a parallel loop's task) is inside the root production open
// at that moment.
class Recorder {
 public:
  explicit Recorder(std::thread::id main) : main_(main) {}

  void on(const StageEvent& e) {
    const auto now = Clock::now();
    thread_local std::vector<Frame> stack;
    std::lock_guard<std::mutex> lock(mu_);
    Totals& t = totals_[e.stage];
    switch (e.kind) {
      case StageEvent::Kind::Realize:
        t.bytes = std::max(t.bytes, e.bytes);
        return;
      case StageEvent::Kind::EndRealize:
        return;
      case StageEvent::Kind::Produce: {
        const bool root = stack.empty() && std::this_thread::get_id() == main_;
        if (!t.order) t.order = ++produced_;
        if (!root && t.parent.empty())
          t.parent = stack.empty() ? current_root_ : *stack.back().stage;
        if (root) current_root_ = e.stage;
        stack.push_back({&e.stage, now});
        return;
      }
      case StageEvent::Kind::EndProduce:
        if (stack.empty()) return;
        t.ms += ms_between(stack.back().start, now);
        t.productions += 1;
        stack.pop_back();
        return;
    }
  }

  const std::map<std::string, Totals>& totals() const { return totals_; }

 private:
  struct Frame {
    const std::string* stage;
    Clock::time_point start;
  };
  const std::thread::id main_;
  std::mutex mu_;
  std::map<std::string, Totals> totals_;
  std::string current_root_;
  int produced_ = 0;
};

std::string human_bytes(size_t b) {
  char buf[32];
  if (b >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%zu B", b);
  return buf;
}

// Output buffers for `k` on inputs of these shapes, their storage in `storage`.
std::vector<BufferRef> output_buffers(const Kernel& k, const std::vector<BufferRef>& inputs,
                                      std::vector<std::vector<uint8_t>>& storage) {
  std::vector<std::vector<int64_t>> in_shapes;
  for (const BufferRef& b : inputs) in_shapes.push_back(b.shape);
  const auto shapes = k.output_shapes(in_shapes);
  const auto outs = k.program().outputs();
  std::vector<BufferRef> r;
  storage.reserve(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    int64_t n = 1;
    for (int64_t e : shapes[i]) n *= e;
    const DType dt = k.program().stage(outs[i]).dtype;
    storage.emplace_back(static_cast<size_t>(n * bytes(dt)));
    r.push_back({storage.back().data(), dt, shapes[i], {}});
  }
  return r;
}

}  // namespace

StageProfile profile_stages(const Program& p, const Schedule& s, const Target& t,
                            const std::vector<BufferRef>& inputs, double min_seconds) {
  std::vector<std::vector<uint8_t>> storage;
  // 1. Structure: every stage traced, one run.
  Recorder structure(std::this_thread::get_id());
  {
    const Kernel all(p, s, t, [](const std::string&) { return true; });
    const auto outputs = output_buffers(all, inputs, storage);
    all.run_traced(inputs, outputs, [&](const StageEvent& e) { structure.on(e); });
  }
  std::set<std::string> roots;
  for (const auto& [name, tot] : structure.totals())
    if (tot.order && tot.parent.empty()) roots.insert(name);

  // 2. Times: the root stages traced, repeated runs.
  const Kernel k(p, s, t, [&](const std::string& stage) { return roots.count(stage) > 0; });
  const auto outputs = output_buffers(k, inputs, storage);
  k.run(inputs, outputs);  // warm-up: first touch of the buffers, the thread pool
  Recorder rec(std::this_thread::get_id());
  const StageSink sink = [&](const StageEvent& e) { rec.on(e); };
  StageProfile r;
  r.program = p.name();
  double total_ms = 0;
  const auto begin = Clock::now();
  while (r.runs < 3 || ms_between(begin, Clock::now()) < min_seconds * 1e3) {
    const auto t0 = Clock::now();
    const RunStats st = k.run_traced(inputs, outputs, sink);
    total_ms += ms_between(t0, Clock::now());
    r.peak_bytes = std::max(r.peak_bytes, st.peak_bytes);
    ++r.runs;
  }
  r.run_ms = total_ms / r.runs;

  std::vector<std::pair<int, StageTime>> rows;
  for (const auto& [name, tot] : structure.totals()) {
    if (!p.find_stage(name)) continue;
    StageTime st;
    st.stage = name;
    st.op = p.stage(name).op;
    st.placement = tot.parent.empty() ? "root" : "inside " + tot.parent;
    st.productions = tot.productions;
    st.buffer_bytes = tot.bytes;
    if (const auto it = rec.totals().find(name); it != rec.totals().end() && tot.parent.empty()) {
      st.ms = it->second.ms / r.runs;
      st.share = r.run_ms > 0 ? st.ms / r.run_ms : 0;
    }
    rows.emplace_back(tot.order > 0 ? tot.order : 1 << 30, std::move(st));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [order, st] : rows) r.stages.push_back(std::move(st));
  for (const Stage& st : p.stages())
    if (!structure.totals().count(st.name))
      r.stages.push_back({st.name, st.op, "inlined", 0, 0, 0, 0});
  return r;
}

std::string StageProfile::report() const {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "%s: %.4g ms per run (%d runs, root stages traced), heap peak %s\n",
                program.c_str(), run_ms, runs, human_bytes(peak_bytes).c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-24s %-14s %-24s %10s %7s %9s %10s\n", "stage", "op",
                "placement", "ms", "% run", "produced", "buffer");
  out += line;
  for (const StageTime& s : stages) {
    const bool root = s.placement == "root", inlined = s.placement == "inlined";
    char ms[32] = "-", share[16] = "", produced[32] = "-";
    if (root) {
      std::snprintf(ms, sizeof ms, "%.4f", s.ms);
      std::snprintf(share, sizeof share, "%.0f%%", s.share * 100);
    }
    if (!inlined) std::snprintf(produced, sizeof produced, "%.0f", s.productions);
    std::snprintf(line, sizeof line, "%-24s %-14s %-24s %10s %7s %9s %10s\n", s.stage.c_str(),
                  s.op.c_str(), s.placement.c_str(), ms, share, produced,
                  s.buffer_bytes ? human_bytes(s.buffer_bytes).c_str() : "-");
    out += line;
  }
  out += "(a root stage's time includes the stages computed inside its loops)\n";
  return out;
}

}  // namespace pto::debug
