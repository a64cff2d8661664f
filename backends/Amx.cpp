#include "backends/Amx.h"

#include "dsl/Error.h"
#include "schedules/directives/Amx.h"

namespace pto {

using Halide::Func;
using Halide::TailStrategy;
using Halide::Var;
using HExpr = Halide::Expr;

Func lower_amx(const Program& p, const Stage& st, const std::string& func_name,
               const FusedLowering& l, bool schedule) {
  std::string why;
  const auto c = directives::amx_contraction(p, st, &why);
  if (!c) throw ScheduleError("stage '" + st.name + "': amx: " + why);
  const std::string pre = func_name + "__amx_";
  const size_t n = st.vars.size();
  // Tiles of 16 x 16 f32 and steps of 32 k (64-byte rows): Halide 21
  // extracts AMX operations from whole 16-row tiles only, and not from steps
  // of one pair, so the rows are padded to whole tiles and k to whole steps,
  // the padding of k zero in both packed factors.
  constexpr int kTile = 16, kStep = 32;
  const int depth = static_cast<int>(c->depth);
  const int padded_depth = (depth + kStep - 1) / kStep * kStep;
  const auto in_depth = [&](const HExpr& k, const HExpr& v) {
    return depth == padded_depth ? v : Halide::select(k < depth, v, Halide::cast(v.type(), 0));
  };
  const auto clamp_depth = [&](const HExpr& k) {
    return depth == padded_depth ? k : Halide::min(k, depth - 1);
  };

  // The stage's Func keeps its dims' names (other stages may be computed at them).
  std::vector<Var> lead;  // batch dims, DSL order
  for (size_t d = 0; d + 2 < n; ++d) lead.emplace_back(st.vars[d]);
  const Var vi(c->i), vj(c->j);
  // Halide argument lists are innermost first, the batch dims last (outermost first reversed).
  const auto with_lead = [&](std::vector<HExpr> inner, const std::vector<Var>& b) {
    for (auto it = b.rbegin(); it != b.rend(); ++it) inner.push_back(*it);
    return inner;
  };
  const auto lead_map = [&](std::map<std::string, HExpr> m, const std::vector<Var>& b) {
    for (size_t d = 0; d < b.size(); ++d) m[st.vars[d]] = b[d];
    return m;
  };

  // L rounded to bf16, [.., i, k]; the padding rows repeat the last row.
  std::vector<Var> ab;
  for (size_t d = 0; d < lead.size(); ++d) ab.emplace_back(pre + "ab" + std::to_string(d));
  const Var ak(pre + "ak"), ai(pre + "ai");
  const HExpr row = c->m % kTile ? Halide::min(ai, static_cast<int>(c->m) - 1) : HExpr(ai);
  Func lhs(pre + "lhs");
  lhs(with_lead({ak, ai}, ab)) = in_depth(
      ak, Halide::cast(Halide::BFloat(16),
                       l.lower(c->lhs, lead_map({{c->i, row}, {c->k, clamp_depth(ak)}}, ab), {})));

  // R rounded to bf16 in AMX's pair layout [.., j / 16, k / 2, 16, 2].
  std::vector<Var> bb;
  for (size_t d = 0; d < lead.size(); ++d) bb.emplace_back(pre + "bb" + std::to_string(d));
  const Var k2(pre + "k2"), ji(pre + "ji"), kp(pre + "kp"), jo(pre + "jo");
  Func rhs(pre + "rhs");
  const HExpr kk = 2 * kp + k2;
  rhs(with_lead({k2, ji, kp, jo}, bb)) = in_depth(
      kk,
      Halide::cast(
          Halide::BFloat(16),
          l.lower(c->rhs, lead_map({{c->k, clamp_depth(kk)}, {c->j, kTile * jo + ji}}, bb), {})));

  // The accumulator tile and the Func its tiles are stored to: the stage's
  // own when its rows are whole tiles, else a strip of tiles whose real rows
  // the stage's Func copies.
  const Halide::RDom r(0, padded_depth, pre + "k");
  const std::vector<HExpr> args = with_lead({vj, vi}, lead);
  Func acc(pre + "acc");
  acc(args) = Halide::cast(Halide::Float(32), 0);
  acc(args) += Halide::cast(Halide::Float(32), lhs(with_lead({r.x, vi}, lead))) *
               Halide::cast(Halide::Float(32),
                            rhs(with_lead({r.x % 2, vj % kTile, r.x / 2, vj / kTile}, lead)));
  const bool whole_rows = c->m % kTile == 0;
  Func out(func_name), tiles(pre + "tiles");
  if (whole_rows) {
    out(args) = acc(args);
  } else {
    tiles(args) = acc(args);
    out(args) = tiles(args);
  }
  if (!schedule) return out;

  const Var js(pre + "strip"), jv(pre + "jv"), tj(pre + "tj"), ti(pre + "ti"), uj(pre + "uj"),
      ui(pre + "ui"), zj(pre + "zj"), zi(pre + "zi");
  const Halide::RVar ko(pre + "ko"), kin(pre + "ki");
  // Strips of 16 columns in parallel (and the outermost batch dim); in a
  // strip, the tiles of rows reuse its packed R (k x 16 bf16) from L1 / L2.
  const Var strip = whole_rows ? vj : js;
  std::vector<Halide::VarOrRVar> order = {jv, vi, js};
  if (whole_rows) order = {tj, ti, vi, vj};
  for (auto it = lead.rbegin(); it != lead.rend(); ++it) order.emplace_back(*it);
  if (whole_rows) {
    // Strip vj, tile row vi; the tile's 16 x 16 store is one tilestored.
    out.tile(vj, vi, tj, ti, kTile, kTile).vectorize(tj).vectorize(ti).reorder(order).parallel(vj);
    acc.compute_at(out, vi);
  } else {
    out.split(vj, js, jv, kTile).vectorize(jv).reorder(order).parallel(js);
    // Rows of 32 floats, half of them unused: with rows of exactly one
    // tile's width Halide flattens the tile's store into one dense vector,
    // which is not a tile store.
    tiles.compute_at(out, js)
        .align_storage(vj, 2 * kTile)
        .tile(vj, vi, tj, ti, kTile, kTile, TailStrategy::RoundUp)
        .vectorize(tj)
        .vectorize(ti);
    acc.compute_at(tiles, vj);
  }
  if (!lead.empty() && !st.shape.front().is_symbolic() && st.shape.front().value > 1)
    out.parallel(lead.front());
  acc.store_in(Halide::MemoryType::AMXTile);
  acc.tile(vj, vi, zj, zi, kTile, kTile).vectorize(zj).vectorize(zi);
  std::vector<Halide::VarOrRVar> uorder = {kin, uj, ui, ko, vj, vi};
  for (auto it = lead.rbegin(); it != lead.rend(); ++it) uorder.emplace_back(*it);
  acc.update()
      .tile(vj, vi, uj, ui, kTile, kTile, TailStrategy::GuardWithIf)
      .split(r.x, ko, kin, kStep)
      .reorder(uorder)
      .atomic()
      .vectorize(kin)
      .vectorize(uj)
      .vectorize(ui);
  lhs.compute_root().vectorize(ak, kTile).parallel(ai);
  rhs.compute_at(out, strip).vectorize(ji).unroll(k2);
  return out;
}

}  // namespace pto
