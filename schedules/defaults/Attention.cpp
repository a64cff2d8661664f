// Attention, and any contraction over the softmax of a score matrix
// (O = softmax(X) V): FlashAttention's fused loop (the online_softmax
// directive, schedules/directives/OnlineSoftmax.h) where the materialized
// form would not keep the score matrix in cache.
//
// Materialized, one head's Lq x Lk scores are written by the score
// contraction and passed over four more times (max, exp, sum, the product
// with V); while they fit in half a core's L2 those passes hit L2 and the
// plain stages, each at its own best schedule, are as fast (BERT's 128 x 128
// heads). Past that every pass streams from L3 or memory, and the fused loop
// keeps each block's scores in L1 instead; with a causal mask it also leaves
// out the key blocks past each tile's last row, half the work at long
// sequences. Symbolic lengths get the fused loop: it is right at any length
// and has no Lq x Lk buffer to allocate.
#include <algorithm>

#include "schedules/defaults/Rules.h"
#include "schedules/directives/OnlineSoftmax.h"

namespace pto::defaults {

OnlineSoftmax online_softmax_block(const Target& t) {
  // Keys: two register tiles' width of the score block (8 vectors). Each
  // block ends in an update of the tile's running output, max and sum, with
  // two exponentials per output vector: per row, 2 x D / lanes of them per
  // block against keys / lanes for P itself, so 4 vectors of keys would spend
  // as much on the rescaling as on the softmax. Rows: a multiple of the
  // register tile's 6 rows whose scores and exponentials (2 x rows x keys
  // floats) fill half of L1, the other half holding the K and V rows of the
  // block as they stream; at least 4 tiles, so that each K and V block
  // fetched from L2 serves 24 rows.
  const int lanes = std::max(1, t.vector_lanes(DType::F32));
  const int64_t keys = 8 * lanes;
  const int64_t tile = 6;
  const int64_t rows = std::max<int64_t>(4 * tile, (t.l1_bytes / 2) / (2 * keys * 4) / tile * tile);
  return OnlineSoftmax{rows, keys};
}

void online_softmax_attention(const Program& p, const Target& t, Schedule& s) {
  for (const Stage& st : p.stages()) {
    if (st.dtype != DType::F32) continue;
    const auto sc = directives::softmax_contraction(p, st);
    if (!sc) continue;
    const Dim& lq = st.shape[st.shape.size() - 2];
    const Dim& lk = st.rvars[0].extent;
    const bool fits = !lq.is_symbolic() && !lk.is_symbolic() && lq.value * lk.value * 4 <= t.l2_bytes / 2;
    if (fits) continue;
    StageSchedule ss;
    ss.online_softmax = online_softmax_block(t);
    // The stages the fused loop replaces are not computed: no entries.
    for (const Stage* dead : {sc->probs, sc->exp, sc->sum, sc->max, sc->scores})
      if (dead) s.stages.erase(dead->name);
    if (p.find_stage(sc->x)) s.stages.erase(sc->x);
    s[st.name] = ss;
  }
}

}  // namespace pto::defaults
