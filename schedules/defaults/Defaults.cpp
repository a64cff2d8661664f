#include "schedules/defaults/Defaults.h"

#include <algorithm>

namespace pto {
namespace {

bool is_output(const Program& p, const std::string& n) {
  const auto o = p.outputs();
  return std::find(o.begin(), o.end(), n) != o.end();
}

int64_t static_extent(const Dim& d) { return d.is_symbolic() ? -1 : d.value; }

// Parallel outer dim, vectorized inner dim: the generic root-stage schedule.
LoopSchedule parallel_vectorized(const Stage& st, const Target& t) {
  LoopSchedule ls;
  if (st.vars.empty()) return ls;
  const int lanes = t.vector_lanes(st.dtype == DType::Bool ? DType::U8 : st.dtype);
  const std::string inner = st.vars.back();
  const int64_t e = static_extent(st.shape.back());
  if (e >= lanes && lanes > 1) {
    ls.vectorize = inner;
    ls.vector_width = lanes;
  }
  if (st.vars.size() >= 2) ls.parallel.push_back(st.vars.front());
  return ls;
}

// mm computed per register tile of its elementwise epilogue `e`.
void matmul_with_epilogue(const Stage& mm, const Stage& e, const Target& t, Schedule& s) {
  const int lanes = t.vector_lanes(DType::F32);
  const size_t r = e.vars.size();
  const std::string row = e.vars[r - 2], col = e.vars[r - 1];
  const int64_t rows = static_extent(e.shape[r - 2]), cols = static_extent(e.shape[r - 1]);
  // 6 x (4 vectors) accumulators fill 24 of AVX-512's 32 registers; fewer columns on narrower targets.
  const int64_t tr = std::min<int64_t>(rows > 0 ? rows : 6, 6);
  const int64_t tc = std::min<int64_t>(cols > 0 ? cols : 4 * lanes, (t.vector_bits >= 512 ? 4 : 3) * lanes);
  StageSchedule& es = s[e.name];
  es.loops.tile[row] = {tr};
  es.loops.tile[col] = {tc};
  es.loops.order = {col + "_o", row + "_o", row + "_i", col + "_i"};
  if (tc >= lanes) {
    es.loops.vectorize = col + "_i";
    es.loops.vector_width = lanes;
  }
  es.loops.parallel = {col + "_o"};
  StageSchedule& ms = s[mm.name];
  ms.compute = {Placement::Kind::At, e.name, row + "_o"};
  const std::string mrow = mm.vars[mm.vars.size() - 2], mcol = mm.vars.back();
  ms.loops.vectorize = mcol;
  ms.loops.vector_width = lanes;
  LoopSchedule up;
  std::vector<std::string> order(mm.vars.begin(), mm.vars.end() - 2);
  for (const RVar& rv : mm.rvars) order.push_back(rv.name);
  order.push_back(mrow);
  order.push_back(mcol);
  up.order = order;
  up.vectorize = mcol;
  up.vector_width = lanes;
  // Full unrolls need the register tile to be constant-size, which holds when
  // the epilogue's tiles are (static extents: the last tile shifts inwards).
  if (rows > 0) up.unroll[mrow] = 0;
  if (cols > 0) up.unroll[mcol] = 0;
  ms.update = up;
}

}  // namespace

Schedule plain_schedule(const Program&) { return Schedule{}; }

Schedule default_schedule(const Program& p, const Target& t) {
  Schedule s;
  for (const Stage& st : p.stages()) {
    if (s.find(st.name)) continue;  // already placed by a consumer's rule
    const auto cons = p.consumers(st.name);
    const bool out = is_output(p, st.name);
    if (!st.reduce && !out && (st.kind == OpKind::Elementwise || st.kind == OpKind::DataMovement)) {
      s[st.name].compute.kind = Placement::Kind::Inline;
      continue;
    }
    if (!st.reduce) {
      s[st.name].loops = parallel_vectorized(st, t);
      continue;
    }
    s[st.name];  // root
  }
  // Contractions: find the elementwise chain that consumes them and fuse.
  for (const Stage& st : p.stages()) {
    if (st.kind != OpKind::Contraction || !st.reduce || st.vars.size() < 2 || is_float(st.dtype) == false) continue;
    // Follow single-consumer inline elementwise stages down to the root stage that materializes them.
    std::string cur = st.name;
    const Stage* root = nullptr;
    while (true) {
      const auto cons = p.consumers(cur);
      if (cons.size() != 1) break;
      const Stage& c = p.stage(cons[0]);
      if (c.reduce || c.shape != st.shape || c.kind != OpKind::Elementwise) break;
      const StageSchedule* cs = s.find(c.name);
      if (cs && cs->compute.kind == Placement::Kind::Root) {
        root = &c;
        break;
      }
      cur = c.name;
    }
    const int64_t n = static_extent(st.shape.back());
    if (root && (n < 0 || n >= t.vector_lanes(DType::F32))) {
      s.stages.erase(root->name);
      matmul_with_epilogue(st, *root, t, s);
    }
  }
  return s;
}

}  // namespace pto
