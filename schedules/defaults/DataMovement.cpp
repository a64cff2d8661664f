// Default schedule of a materialized data-movement stage that moves a
// tensor's innermost axis (a transpose): lanes x lanes blocks.
//
// The generic root schedule vectorizes the stage's innermost dim. When that
// dim walks a read tensor along one of its outer axes (out(i, j) = X(j, i)),
// each vector is a gather of `lanes` rows, one element per cache line, and
// the rows are re-read for every column: 1024 x 1024 f32 took 6-10 ms, where
// ONNX Runtime takes 1.2 ms. A lanes x lanes block over the two dims, the
// read tensor's innermost dim unrolled and the stage's vectorized, reads
// `lanes` whole cache lines per block and writes `lanes` whole vectors (LLVM
// turns the unrolled strided loads into vector loads and shuffles): 1.0 ms,
// where 8 x 16 blocks took 1.3 ms and 32 x 16 with an unroll of 8 took 3-5 ms
// (measured on a 2-core Sapphire Rapids, interleaved, three rounds each).
// A block is lanes^2 values, 16 of AVX-512's 32 vector registers, 8 of
// AVX2's 16: it fits the register file of every x86 target at its own width.
#include <algorithm>
#include <optional>

#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Rules.h"

namespace pto::defaults {

std::optional<std::string> transposed_dim(const Stage& st) {
  struct Finder : IRVisitor {
    const Stage& st;
    std::optional<std::string> dim;
    explicit Finder(const Stage& s) : st(s) {}
    void visit_access(const AccessNode& n) override {
      IRVisitor::visit_access(n);
      const VarNode* last = n.args.empty() ? nullptr : n.args.back().as<VarNode>();
      if (dim || !last) return;
      for (size_t k = 0; k + 1 < st.vars.size(); ++k)
        if (st.vars[k] == last->name) dim = last->name;
    }
  } f(st);
  f.visit(st.value);
  return f.dim;
}

void blocked_transpose(const Stage& st, const Target& t, Schedule& s) {
  if (st.kind != OpKind::DataMovement || st.reduce || st.vars.size() < 2 || hosts_placements(s, st.name)) return;
  const StageSchedule* cur = s.find(st.name);
  if (!cur || cur->compute.kind != Placement::Kind::Root) return;
  const auto v = transposed_dim(st);
  if (!v) return;
  const int lanes = t.vector_lanes(st.dtype == DType::Bool ? DType::U8 : st.dtype);
  const std::string& inner = st.vars.back();
  const auto vk = std::find(st.vars.begin(), st.vars.end(), *v) - st.vars.begin();
  const int64_t ev = static_extent(st.shape[static_cast<size_t>(vk)]), ei = static_extent(st.shape.back());
  // Symbolic dims take the blocks too: their tails are guarded, and the
  // specialize directive runs whole blocks where the extents hold one.
  const auto narrow = [&](int64_t e) { return e > 0 && e < lanes; };
  if (lanes < 2 || narrow(ev) || narrow(ei)) return;
  LoopSchedule ls;
  ls.tile[*v] = {lanes};
  ls.tile[inner] = {lanes};
  // Dims outside the block keep their order; the block's two loops go inside them.
  for (const std::string& d : st.vars)
    if (d != *v && d != inner) ls.order.push_back(d);
  ls.order.insert(ls.order.end(), {outer_loop(*v), outer_loop(inner), inner_loop(*v), inner_loop(inner)});
  ls.vectorize = inner_loop(inner);
  ls.vector_width = lanes;
  ls.unroll[inner_loop(*v)] = 0;
  // Where parallel_vectorized found the stage worth threads, the outermost
  // loop with more than one iteration runs across cores.
  if (!cur->loops.parallel.empty()) {
    for (const Loop& l : loop_nest(st, ls, false)) {
      if (l.extent == 1) continue;
      ls.parallel = {l.name};
      break;
    }
  }
  s[st.name].loops = ls;
}

}  // namespace pto::defaults
