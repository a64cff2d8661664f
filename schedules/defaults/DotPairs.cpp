// bf16 dot products in pairs: a sum over k that reads a bf16 operand laid out
// in pairs along k (its last index is k % 2, as in the blocked-pair weights
// [O/B, KH, KW, C/2, B, 2] of block_weight_pairs) runs k as adjacent pairs per
// vector lane (the dot_pairs directive). On avx512_bf16 Halide emits one
// vdpbf16ps per pair: two bf16 products summed into each f32 lane, where the
// converting path widens both operands and issues two FMAs. The layout is the
// program's choice; the default only follows it. A bf16 operand the stage
// computes inline (activations rounded to bf16, BERT's mixed precision) is
// materialized once instead.
//
// ResNet-50 bf16 convolutions (bench_resnet50 --bf16): 0.25x oneDNN bf16 on
// the median layer with the converting path; with pairs, 3x3 layers run at
// ~1000-1060 GFLOP/s, oneDNN bf16's speed.
#include <algorithm>

#include "dsl/Analysis.h"
#include "schedules/defaults/Rules.h"

namespace pto::defaults {

void dot_pairs(const Program& p, const Target& t, Schedule& s) {
  if (!t.avx512_bf16 || t.has_device()) return;
  for (const Stage& st : p.stages()) {
    if (!st.reduce || *st.reduce != ReduceOp::Sum) continue;
    if (!s.find(st.name)) continue;
    StageSchedule* ss = &s[st.name];
    if (!ss->dot_pairs.empty() || !ss->update || ss->update->vectorize.empty() || ss->rfactor) continue;
    const auto k = pair_rvar(st, DType::BF16);
    if (!k) continue;
    LoopSchedule& up = *ss->update;
    if (up.unroll.count(*k) || std::count(up.parallel.begin(), up.parallel.end(), *k)) continue;
    if (p.is_output(st.name) && ss->accumulator_at.empty()) continue;  // Validate.cpp: aligned accumulator loads
    bool even = false;
    for (const RVar& r : st.rvars) even |= r.name == *k && static_extent(r.extent) > 0 && static_extent(r.extent) % 2 == 0;
    // Under dot_pairs the loop k counts pairs: a tile of k channels becomes one of k / 2 pairs.
    std::vector<int64_t>* tile = up.tile.count(*k) ? &up.tile.at(*k) : nullptr;
    if (!even || (tile && std::any_of(tile->begin(), tile->end(), [](int64_t f) { return f % 2; }))) continue;
    if (tile)
      for (int64_t& f : *tile) f /= 2;
    ss->dot_pairs = *k;
    // A bf16 operand computed inline (a rounding cast of f32 activations)
    // would be converted again in every reduction step: materialize it once.
    for (const std::string& r : st.reads()) {
      const Stage* in = p.find_stage(r);
      const StageSchedule* rs = s.find(r);
      if (!in || in->reduce || in->dtype != DType::BF16 || !rs || rs->compute.kind != Placement::Kind::Inline) continue;
      StageSchedule& ms = s[r];
      ms = StageSchedule{};
      ms.loops = parallel_vectorized(*in, t);
    }
  }
}

}  // namespace pto::defaults
