// Cutting a scheduled Program into parts (Partition.h): stages are grouped
// (union-find) with every stage their schedule ties them to; a cut between
// two consecutive stages of the program's order is allowed where no group
// spans it; a part takes up to max_stages stages with code and ends at the
// last cut allowed; inlined stages are copied into every part that reads
// them. A stage read outside its extents is grouped with its reader.
#include "schedules/Partition.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "dsl/Analysis.h"
#include "dsl/ZeroPadding.h"
#include "schedules/Validate.h"
#include "schedules/directives/OnlineSoftmax.h"

namespace pto {
namespace {

struct Groups {
  std::vector<int> parent;
  explicit Groups(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int i) { return parent[i] == i ? i : parent[i] = find(parent[i]); }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

// The stages `st`'s schedule entry ties it to: where it is computed or
// stored, the stage whose buffer or loop it shares and, under
// online_softmax, the softmax stages the fused loop recomputes.
std::vector<std::string> ties(const Program& p, const Stage& st, const StageSchedule& ss) {
  std::vector<std::string> t;
  if (ss.compute.kind == Placement::Kind::At) t.push_back(ss.compute.stage);
  if (ss.store && ss.store->kind == Placement::Kind::At) t.push_back(ss.store->stage);
  if (!ss.store_in.empty()) t.push_back(ss.store_in);
  if (ss.compute_with) t.push_back(ss.compute_with->stage);
  if (ss.online_softmax)
    if (const auto sc = directives::softmax_contraction(p, st)) {
      for (const Stage* s : {sc->probs, sc->max, sc->exp, sc->sum, sc->scores})
        if (s) t.push_back(s->name);
      if (p.find_stage(sc->x)) t.push_back(sc->x);
    }
  return t;
}

}  // namespace

std::vector<Part> partition(const Program& program, const Schedule& schedule, const Target& target,
                            const PartitionOptions& options) {
  const std::vector<Stage>& stages = program.stages();
  const int n = static_cast<int>(stages.size());
  std::map<std::string, int> index;
  for (int i = 0; i < n; ++i) index[stages[static_cast<size_t>(i)].name] = i;
  // Stages no output depends on are never computed (as in one kernel).
  std::vector<bool> live(static_cast<size_t>(n), false);
  for (const std::string& o : program.outputs()) live[static_cast<size_t>(index.at(o))] = true;
  for (int i = n - 1; i >= 0; --i)
    if (live[static_cast<size_t>(i)])
      for (const std::string& r : stages[static_cast<size_t>(i)].reads())
        if (auto it = index.find(r); it != index.end())
          live[static_cast<size_t>(it->second)] = true;
  // An inlined stage has no code of its own: it goes into every part that
  // has a stage reading it, and takes no place in the order (nor does a dead one).
  auto inlined = [&](int i) {
    const StageSchedule* ss = schedule.find(stages[static_cast<size_t>(i)].name);
    return !live[static_cast<size_t>(i)] || (ss && ss->compute.kind == Placement::Kind::Inline);
  };

  // Group the stages a schedule ties together.
  Groups g(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const Stage& st = stages[static_cast<size_t>(i)];
    if (const StageSchedule* ss = schedule.find(st.name))
      for (const std::string& t : ties(program, st, *ss))
        if (auto it = index.find(t); it != index.end()) g.join(i, it->second);
  }
  // A stage read outside its extents stays a stage of the reader's part (as
  // a part's input it would be a buffer of its extents), through inlined
  // stages too: one read outside its extents may read anything outside.
  std::map<int, std::vector<std::string>> outside;
  std::set<std::tuple<int, int, bool>> seen;
  const std::function<void(int, int, bool)> tie_outside = [&](int c, int s, bool all) {
    if (!seen.insert({c, s, all}).second) return;
    auto o = outside.find(s);
    if (o == outside.end())
      o = outside.emplace(s, reads_outside(program, stages[static_cast<size_t>(s)])).first;
    for (const std::string& r : stages[static_cast<size_t>(s)].reads()) {
      const auto it = index.find(r);
      if (it == index.end()) continue;  // a program input
      const bool out = all || std::find(o->second.begin(), o->second.end(), r) != o->second.end();
      if (inlined(it->second))
        tie_outside(c, it->second, out);
      else if (out)
        g.join(c, it->second);
    }
  };
  // skip_padding reads the padded producer's definition, and its source
  // unclamped (Lower: the steps that would read padding are skipped, which
  // Halide's bounds do not see): the padded stage and what it reads stay with
  // it. (Its other operands, a convolution's weights, are read within their
  // extents: they may be another part's, pre-packed at load.)
  for (int i = 0; i < n; ++i)
    if (!inlined(i)) {
      const Stage& st = stages[static_cast<size_t>(i)];
      const StageSchedule* ss = schedule.find(st.name);
      const auto padded = ss && !ss->skip_padding.empty() ? padded_read(program, st) : std::nullopt;
      const auto it = padded ? index.find(padded->stage->name) : index.end();
      tie_outside(i, i, padded && it == index.end());
      if (it != index.end()) {
        if (!inlined(it->second)) g.join(i, it->second);
        tie_outside(i, it->second, true);  // the padded stage's own source, read unclamped
      }
    }
  // Stages computed from constants alone, whose group is all such stages,
  // run once at load (weights laid out in the blocked form a kernel reads).
  std::vector<bool> constant(static_cast<size_t>(n), false), hoist(static_cast<size_t>(n), false);
  std::set<std::string> known_sizes;  // symbolic sizes the constants bind
  for (const std::string& c : options.constants)
    if (program.has_tensor(c))
      for (const Dim& d : program.tensor(c).shape)
        if (d.is_symbolic()) known_sizes.insert(d.sym);
  auto sizes_known = [&](const Stage& st) {
    for (const Dim& d : st.shape)
      if (d.is_symbolic() && !known_sizes.count(d.sym)) return false;
    for (const RVar& r : st.rvars)
      if (r.extent.is_symbolic() && !known_sizes.count(r.extent.sym)) return false;
    return true;
  };
  for (int i = 0; i < n; ++i) {
    bool c = !options.constants.empty() && sizes_known(stages[static_cast<size_t>(i)]);
    for (const std::string& r : stages[static_cast<size_t>(i)].reads()) {
      const auto it = index.find(r);
      c = c && (it == index.end() ? options.constants.count(r) > 0
                                  : constant[static_cast<size_t>(it->second)]);
    }
    constant[static_cast<size_t>(i)] = c;
  }
  std::map<int, bool> all_constant;  // per group root
  for (int i = 0; i < n; ++i)
    if (!inlined(i)) {
      auto [it, fresh] = all_constant.emplace(g.find(i), true);
      it->second = it->second && constant[static_cast<size_t>(i)];
    }
  for (int i = 0; i < n; ++i)
    hoist[static_cast<size_t>(i)] = !inlined(i) && all_constant[g.find(i)];
  // Stages with code that run in the parts, in order.
  auto placed = [&](int i) { return !inlined(i) && !hoist[static_cast<size_t>(i)]; };

  std::vector<int> last(static_cast<size_t>(n), -1);  // per group root: its last stage
  for (int i = 0; i < n; ++i)
    if (placed(i)) last[static_cast<size_t>(g.find(i))] = i;
  // cut_ok[i]: a cut just before stage i separates no group.
  std::vector<bool> cut_ok(static_cast<size_t>(n) + 1, false);
  int reach = -1;  // the furthest last stage of a group begun so far
  for (int i = 0; i < n; ++i) {
    cut_ok[static_cast<size_t>(i)] = reach < i;
    if (placed(i)) reach = std::max(reach, last[static_cast<size_t>(g.find(i))]);
  }
  cut_ok[static_cast<size_t>(n)] = true;

  // Runs [begin, end) of up to max_stages stages with code, ended at the last
  // cut allowed; the load-time part first.
  std::vector<std::vector<int>> code;
  std::vector<int> at_load;
  for (int i = 0; i < n; ++i)
    if (hoist[static_cast<size_t>(i)]) at_load.push_back(i);
  if (!at_load.empty()) code.push_back(at_load);
  const int most = std::max(1, options.max_stages);
  for (int begin = 0; begin < n;) {
    int end = -1, best = -1;
    for (int i = begin, counted = 0; i < n && end < 0; ++i) {
      counted += placed(i) ? 1 : 0;
      if (cut_ok[static_cast<size_t>(i) + 1]) best = i + 1;
      if (counted >= most && best > begin) end = best;
    }
    if (end < 0) end = n;
    std::vector<int> run;
    for (int i = begin; i < end; ++i)
      if (placed(i)) run.push_back(i);
    if (!run.empty()) code.push_back(run);  // inlined stages alone go where they are read
    begin = end;
  }
  if (code.empty()) code.push_back({});
  if (code.size() == 1 && at_load.empty()) {
    Part whole{program, schedule, {}, program.outputs()};
    for (const TensorInfo& t : program.inputs()) whole.inputs.push_back(t.name);
    return {whole};
  }

  // Each part's stages: its stages with code, and the inlined stages they
  // read (through other inlined stages too), in program order.
  std::vector<std::vector<int>> members(code.size());
  for (size_t k = 0; k < code.size(); ++k) {
    std::set<int> in(code[k].begin(), code[k].end());
    std::vector<int> work = code[k];
    while (!work.empty()) {
      const int i = work.back();
      work.pop_back();
      for (const std::string& r : stages[static_cast<size_t>(i)].reads())
        if (auto it = index.find(r);
            it != index.end() && inlined(it->second) && in.insert(it->second).second)
          work.push_back(it->second);
    }
    members[k].assign(in.begin(), in.end());
  }

  // What each part reads from outside it; a stage is an output of its part
  // where another part reads it or the program returns it.
  std::vector<std::vector<std::string>> reads(code.size());
  const std::vector<std::string> outs = program.outputs();
  std::set<std::string> read_elsewhere(outs.begin(), outs.end());
  for (size_t k = 0; k < code.size(); ++k) {
    std::set<std::string> mine, seen;
    for (int i : members[k]) mine.insert(stages[static_cast<size_t>(i)].name);
    for (int i : members[k])
      for (const std::string& r : stages[static_cast<size_t>(i)].reads())
        if (!mine.count(r) && seen.insert(r).second) {
          reads[k].push_back(r);
          read_elsewhere.insert(r);
        }
  }
  // A symbolic size is bound by the first input that has it: a part whose
  // stages have a size its inputs do not also reads the program input that does.
  const auto symbols = program.symbols();
  for (size_t k = 0; k < code.size(); ++k) {
    std::set<std::string> need, bound;
    for (int i : members[k]) {
      const Stage& st = stages[static_cast<size_t>(i)];
      for (const Dim& d : st.shape)
        if (d.is_symbolic()) need.insert(d.sym);
      for (const RVar& r : st.rvars)
        if (r.extent.is_symbolic()) need.insert(r.extent.sym);
    }
    for (const std::string& r : reads[k])
      for (const Dim& d : program.tensor(r).shape)
        if (d.is_symbolic()) bound.insert(d.sym);
    const bool load = k == 0 && !at_load.empty();
    for (const std::string& sym : need) {
      if (bound.count(sym)) continue;
      std::string from;  // the load-time part binds its sizes from constants
      if (load) {
        for (const std::string& c : options.constants)
          if (program.has_tensor(c))
            for (const Dim& d : program.tensor(c).shape)
              if (from.empty() && d.is_symbolic() && d.sym == sym) from = c;
      } else if (auto it = symbols.find(sym); it != symbols.end()) {
        from = it->second.first;
      }
      if (from.empty()) continue;
      reads[k].push_back(from);
      for (const Dim& d : program.tensor(from).shape)
        if (d.is_symbolic()) bound.insert(d.sym);
    }
  }
  std::vector<Part> parts;
  for (size_t k = 0; k < code.size(); ++k) {
    Part part;
    part.program = Program(program.name() + "_part" + std::to_string(k));
    part.schedule.options = schedule.options;
    part.at_load = k == 0 && !at_load.empty();
    for (const std::string& r : reads[k]) {
      const TensorInfo& info = program.tensor(r);
      part.program.input(r, info.shape, info.dtype);
      part.inputs.push_back(r);
    }
    for (int i : members[k]) {
      const Stage& st = stages[static_cast<size_t>(i)];
      part.program.add_stage(st);
      if (const StageSchedule* ss = schedule.find(st.name)) part.schedule.stages[st.name] = *ss;
      if (!inlined(i) && read_elsewhere.count(st.name)) {
        part.program.output(st.name);
        part.outputs.push_back(st.name);
      }
    }
    validate(part.program, part.schedule,
             &target);  // a tie this file missed is an error here, not a wrong kernel
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace pto
