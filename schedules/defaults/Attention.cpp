// Attention, and any contraction over the softmax of a score matrix
// (O = softmax(X) V): FlashAttention's fused loop (the online_softmax
// directive, schedules/directives/OnlineSoftmax.h) where the materialized
// form would not keep the score matrix in cache.
//
// Materialized, the Lq x Lk scores of every head are written by the score
// contraction and passed over four more times (max, exp, sum, the product
// with V), each pass over all heads; while they fit in half a core's L2
// those passes hit L2 and the plain stages, each at its own best schedule,
// are as fast (BERT's 12 heads of 128 x 128). Past that every pass streams from L3 or memory, and
// the fused loop keeps each block's scores in L1 instead. With a causal mask it also leaves out the
// key blocks past each tile's last row, half the work at long sequences, which pays before the
// scores outgrow L2. Symbolic lengths get the fused loop: it is right at any length and has no Lq x
// Lk buffer to allocate. Without a mask to skip by, a static key length whose row block fits L2 is
// one key block: materialization of one tile's rows of scores, with nothing to rescale.
#include <algorithm>

#include "schedules/defaults/Rules.h"
#include "schedules/directives/OnlineSoftmax.h"

namespace pto::defaults {
namespace {
constexpr int64_t kMaxKeys = 4096;  // the directive's largest block (OnlineSoftmax.cpp)
}  // namespace

OnlineSoftmax online_softmax_block(const Target& t) {
  // Keys: one register tile's width of the score block (4 vectors, as the
  // contraction micro-kernel). Rows: a multiple of the tile's 6 rows whose
  // scores and exponentials (2 x rows x keys floats) fill half of L1, the
  // other half holding the K and V rows of the block as they stream: 48 x 64
  // on a 48 KB L1. Measured on 12 heads x 1024 x 64 (same process, 2
  // threads): 48 x 64 204 ms, 48 x 128 208, 24 x 64 209, 24 x 128 241 (fewer
  // rows fetch each K and V block from L2 for fewer rows).
  const int lanes = std::max(1, t.vector_lanes(DType::F32));
  const int64_t keys = 4 * lanes;
  const int64_t tile = 6;
  const int64_t rows = std::max<int64_t>(tile, (t.l1_bytes / 2) / (2 * keys * 4) / tile * tile);
  return OnlineSoftmax{rows, keys};
}

void online_softmax_attention(const Program& p, const Target& t, Schedule& s) {
  for (const Stage& st : p.stages()) {
    if (st.dtype != DType::F32) continue;
    const auto sc = directives::softmax_contraction(p, st);
    if (!sc) continue;
    const Dim& lq = st.shape[st.shape.size() - 2];
    const Dim& lk = st.rvars[0].extent;
    const OnlineSoftmax block = online_softmax_block(t);
    // The materialized stages are each computed over every head before the
    // next one reads them, so what must stay in cache between the passes is
    // the whole score tensor (all batch dims), not one head's: 12 heads x 384
    // x 384 non-causal (590 KB a head, 7 MB in all): 5.9 ms fused, 6.5-7.9
    // materialized; 12 x 128 x 128 (786 KB in all) causal: 0.52 materialized,
    // 1.02 fused (same process, 2 threads, Sapphire Rapids, 2 MB L2).
    int64_t scores = lq.is_symbolic() || lk.is_symbolic() ? -1 : lq.value * lk.value * 4;
    for (size_t k = 0; k + 2 < st.shape.size() && scores >= 0; ++k)
      scores = st.shape[k].is_symbolic() ? -1 : scores * st.shape[k].value;
    const bool fits = scores >= 0 && scores <= t.l2_bytes / 2;
    // Causal: the fused loop visits about 1/2 + (rows + keys) / (2 Lq) of the
    // blocks; from Lq = 2 (rows + keys) on that is at most 3/4 of the work
    // the materialized form does. 12 heads x 512 x 64 causal: 48 ms fused,
    // 72 ms materialized; x 128: 1.25 ms fused, 0.89 ms materialized.
    const bool skips =
        sc->causal_offset && !lq.is_symbolic() && lq.value >= 2 * (block.rows + block.keys);
    if (fits && !skips) continue;
    StageSchedule ss;
    ss.online_softmax = block;
    // Without a causal mask to skip blocks by, one block of every key where
    // the tile's scores and exponentials (2 x rows x Lk floats) fit half of
    // L2: the running max, sum and output are then rescaled once per tile
    // instead of once per 64 keys (each rescale is an exp and a pass over the
    // tile's rows x D outputs, and the block max and sum restart), and P V
    // accumulates over all Lk keys in registers. 12 heads x 384 x 64
    // non-causal (same process, 2 threads, Sapphire Rapids, loaded machine,
    // ratio to ONNX Runtime over 3 rounds): 48 x 64 0.70x, 48 x 192 0.85x,
    // 48 x 384 0.96x, 24 x 384 0.94x, 96 x 384 (147 KB a block of scores
    // too) slower than 48 x 384; 12 x 1024 x 64: 48 x 64 0.89x, 48 x 256
    // 1.21x, 48 x 1024 1.14x (within noise of each other).
    // With the single block lowered without the running state (O = P V / l,
    // backends/OnlineSoftmax.cpp), vector row max and sum and a floor-free
    // exp: 12 x 384 x 64 at 48 x 384, one thread, 2 x 8 rounds interleaved
    // with ONNX Runtime: 0.83x before, 1.00x after (symbolic 0.76x, 0.88x).
    if (!sc->causal_offset && !lk.is_symbolic() && 2 * block.rows * lk.value * 4 <= t.l2_bytes / 2)
      ss.online_softmax->keys = std::min(lk.value, kMaxKeys);
    // A symbolic key length: the largest such block, in multiples of the
    // block's width; the lowering splits the keys at run time into equal
    // blocks no longer than it (one block up to 2688 keys on a 2 MB L2).
    // Dynamic kernel, 12 heads x 384 x 64 non-causal, CPU time a call
    // (loaded machine, same process): 48 x 64 9.4 ms, 48 x 128 8.1; in
    // bench_suite (5 rounds) dynamic / static 1.12 with 48 x 64, 1.00 with
    // this block (one block of 384).
    if (!sc->causal_offset && lk.is_symbolic())
      ss.online_softmax->keys =
          std::clamp((t.l2_bytes / 2) / (2 * block.rows * 4) / block.keys * block.keys, block.keys,
                     kMaxKeys / block.keys * block.keys);
    // The stages the fused loop replaces are not computed: no entries.
    for (const Stage* dead : {sc->probs, sc->exp, sc->sum, sc->max, sc->scores})
      if (dead) s.stages.erase(dead->name);
    if (p.find_stage(sc->x)) s.stages.erase(sc->x);
    s[st.name] = ss;
  }
}

}  // namespace pto::defaults
