#include "backends/OnlineSoftmax.h"

#include <algorithm>
#include <limits>
#include <set>

#include "backends/Exp.h"
#include "dsl/Error.h"
#include "dsl/IRVisitor.h"
#include "schedules/directives/OnlineSoftmax.h"

namespace pto {
namespace {

using HExpr = Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::TailStrategy;
using Halide::Var;

HExpr f32(double v) {
  return Halide::Internal::make_const(Halide::Float(32), v);
}
const double kInf = std::numeric_limits<double>::infinity();
const int32_t kNegInfBits = static_cast<int32_t>(0xff800000u);  // -inf as f32 bits

// Which Halide dim of tensor `t`'s accesses in `e` holds variable `v` when it
// is not the innermost one (a strided vector operand): that dim, else -1.
int strided_dim(const pto::Expr& e, const std::string& t, const std::string& v) {
  struct Finder : IRVisitor {
    const std::string &t, &v;
    int found = -1;
    Finder(const std::string& tensor, const std::string& var) : t(tensor), v(var) {}
    void visit_access(const AccessNode& a) override {
      if (a.tensor == t && !a.args.empty()) {
        const auto* last = a.args.back().as<VarNode>();
        if (!last || last->name != v)
          for (size_t k = 0; k + 1 < a.args.size(); ++k)
            if (const auto* av = a.args[k].as<VarNode>(); av && av->name == v)
              found = static_cast<int>(a.args.size() - 1 - k);
      }
      IRVisitor::visit_access(a);
    }
  } f(t, v);
  f.visit(e);
  return f.found;
}

// Whether an access in `e` to a tensor outside `safe` indexes with variable
// `v` (anywhere in its arguments): then `v` past the tensor's extent (a
// block rounded up) must be clamped before that read.
bool reads_unsafe(const pto::Expr& e, const std::set<std::string>& safe, const std::string& v) {
  // Does an expression mention variable `v`?
  struct Uses : IRVisitor {
    const std::string& v;
    bool found = false;
    explicit Uses(const std::string& var) : v(var) {}
    void visit_var(const VarNode& n) override { found = found || n.name == v; }
  };
  struct Finder : IRVisitor {
    const std::set<std::string>& safe;
    const std::string& v;
    bool found = false;
    Finder(const std::set<std::string>& s, const std::string& var) : safe(s), v(var) {}
    void visit_access(const AccessNode& a) override {
      if (!found && !safe.count(a.tensor)) {
        Uses u(v);
        for (const auto& y : a.args) u.visit(y);
        found = u.found;
      }
      IRVisitor::visit_access(a);
    }
  } f(safe, v);
  f.visit(e);
  return f.found;
}

// A register tile of the target: `cols` vectors across, as many rows as the
// rest of the register file holds (one broadcast and the column operands
// besides the accumulators): 6 x 4 on AVX-512's 32 registers.
int tile_rows(const Target& t, int cols) {
  return std::clamp((t.vector_registers - cols - 1) / std::max(1, cols), 1, 8);
}

// Vectors of d in a P V register tile: 1 at a symbolic D; at a static D the
// width that tiles D's vectors with the fewest columns past D, then the most
// accumulators. A tile wider than D reads V past its columns, through a clamp
// per lane (a gather per load) unless V is padded: D = 80 in tiles of 4
// vectors (two tiles, 128 columns) took 4.6 ms for 6 heads x 463 causal, in 5
// x 5 tiles 1.0 ms. A symbolic D (every dim of a `@pypto.kernel` call is) in
// tiles of 4 vectors ran D = 32 and 80 at 24x and 7x the static kernel's time
// (4 heads x 256 causal, 2 threads); in tiles of one vector, every head dim
// that is whole vectors runs within 1.3x of it (D = 32, 64, 80, 128), and a
// version specialized for whole 4-vector tiles serves 64 and 128 (below).
int pv_vectors(const Target& t, const Dim& dd) {
  const int lanes = t.vector_lanes(DType::F32);
  if (dd.is_symbolic()) return 1;
  const int64_t vecs = std::max<int64_t>(1, (dd.value + lanes - 1) / lanes);
  int best = 1;
  int64_t best_waste = -1, best_acc = 0;
  for (int c = 1; c <= std::min<int64_t>(vecs, 8); ++c) {
    const int64_t waste = (vecs + c - 1) / c * c * lanes - dd.value;
    const int64_t acc = static_cast<int64_t>(c) * tile_rows(t, c);
    if (c * 2 + 1 > t.vector_registers) break;
    if (best_waste < 0 || waste < best_waste || (waste == best_waste && acc > best_acc)) {
      best = c;
      best_waste = waste;
      best_acc = acc;
    }
  }
  return best;
}

}  // namespace

Func lower_online_softmax(const Program& p, const Stage& st, const OnlineSoftmax& os,
                          const Target& t, const std::string& func_name, const FusedLowering& l,
                          bool schedule) {
  std::string why;
  const auto sc = directives::softmax_contraction(p, st, &why);
  if (!sc) throw ScheduleError("stage '" + st.name + "': online_softmax: " + why);
  const size_t n = st.vars.size();
  const std::string pre = func_name + "__";
  const Dim& dq = st.shape[n - 2];
  const Dim& dk = st.rvars[0].extent;
  const Dim& dd = st.shape[n - 1];
  const HExpr Lq = l.extent(dq), Lk = l.extent(dk);
  // Blocks no larger than the static extents (a sequence of 1 is one row).
  int64_t R = os.rows, K = os.keys;
  if (!dq.is_symbolic()) R = std::max<int64_t>(1, std::min(R, dq.value));
  if (!dk.is_symbolic()) K = std::max<int64_t>(1, std::min(K, dk.value));
  const int lanes = t.vector_lanes(DType::F32);
  // At a symbolic key length, a block longer than a score tile's width (4
  // vectors) and a multiple of it is the largest block: the keys are split
  // into ceil(Lk / keys) blocks of equal size, rounded up to the tile width,
  // so a length a little past a block wastes at most a tile per row rather
  // than most of a block. Static lengths and other blocks use keys as given.
  const int tile_keys = 4 * lanes;
  HExpr KE = static_cast<int>(K);
  if (dk.is_symbolic() && K > tile_keys && K % tile_keys == 0) {
    const HExpr blocks = (Lk + static_cast<int>(K) - 1) / static_cast<int>(K);
    KE = ((Lk + blocks - 1) / blocks + (tile_keys - 1)) / tile_keys * tile_keys;
  }
  const HExpr nb = (Lk + KE - 1) / KE;

  // Halide vars: batch dims (DSL order), the query row, key, output column.
  std::vector<Var> hb;
  for (size_t k = 0; k + 2 < n; ++k) hb.emplace_back(pre + "b" + std::to_string(k));
  const Var hi(pre + "i"), hj(pre + "j"), hd(pre + "d"), hkb(pre + "kb"), hii(pre + "ii"),
      hqt(pre + "qt");
  // Halide argument lists are innermost first.
  const auto args = [&](std::vector<HExpr> inner) {
    for (auto it = hb.rbegin(); it != hb.rend(); ++it) inner.push_back(*it);
    return inner;
  };
  const auto loops = [&](std::vector<Var> inner) {
    std::vector<Halide::VarOrRVar> r(inner.begin(), inner.end());
    for (auto it = hb.rbegin(); it != hb.rend(); ++it) r.emplace_back(*it);
    return r;
  };
  const HExpr ic = Halide::min(hi, Lq - 1), jc = Halide::min(hj, Lk - 1);

  // The softmax input X(j, i, b..) at clamped indices (reads stay inside the
  // inputs for the rows and keys a partial tile or block rounds up to), with
  // the score contraction computed by a Func of our own, per block.
  std::map<std::string, Func> over;
  Func sacc(pre + "scores_acc"), sfun(pre + "scores");
  std::vector<std::pair<Halide::Func, int>> packs;
  const Stage* xs = p.find_stage(sc->x);
  if (sc->scores) {
    const Stage& s = *sc->scores;
    std::map<std::string, HExpr> v;
    for (size_t k = 0; k + 2 < n; ++k) v[s.vars[k]] = hb[k];
    v[s.vars[n - 2]] = ic;
    std::vector<Halide::Internal::ReductionVariable> rv;
    for (auto it = s.rvars.rbegin(); it != s.rvars.rend(); ++it)
      rv.push_back({pre + it->name, 0, l.extent(it->extent)});
    const RDom rd{Halide::Internal::ReductionDomain(rv)};
    for (size_t k = 0; k < s.rvars.size(); ++k)
      v[s.rvars[s.rvars.size() - 1 - k].name] = rd[static_cast<int>(k)];
    // Operands read with the key index outside their contiguous dim (k in
    // q k^T) would be gathered per vector: read them from a copy with that
    // dim innermost, made once.
    std::map<std::string, Func> packed;
    for (const std::string& r : s.reads()) {
      const int dim = strided_dim(s.value, r, s.vars[n - 1]);
      if (dim < 0 || !schedule) continue;
      size_t rank = 0;
      if (const Stage* ps = p.find_stage(r))
        rank = ps->shape.size();
      else
        for (const TensorInfo& in : p.inputs())
          if (in.name == r) rank = in.shape.size();
      std::vector<Var> a;
      for (size_t k = 0; k < rank; ++k) a.emplace_back(pre + r + "_" + std::to_string(k));
      std::vector<HExpr> ae(a.begin(), a.end());
      // The key dim clamped here, once, so that the score tile reads the
      // copy at unclamped (rounded-up) keys: a clamp per lane in the tile
      // would make every vector load a gather where Lk is symbolic (7x).
      ae[static_cast<size_t>(dim)] = Halide::min(ae[static_cast<size_t>(dim)], Lk - 1);
      Func pk(pre + "packed_" + r);
      if (const auto in = l.input(r))
        pk(a) = (*in)(ae);
      else
        pk(a) = l.stage_func(r)(ae);
      packed[r] = pk;
      packs.emplace_back(pk, dim);
    }
    std::set<std::string> safe;
    for (const auto& [r, f] : packed) safe.insert(r);
    v[s.vars[n - 1]] = reads_unsafe(s.value, safe, s.vars[n - 1]) ? jc : HExpr(hj);
    std::map<std::string, Func> sover = packed;
    sacc(args({hj, hi})) = f32(0);
    sacc(args({hj, hi})) += Halide::cast(Halide::Float(32), l.lower(s.value, v, sover));
    sfun(args({hj, hi})) = sacc(args({hj, hi}));
    over[s.name] = sfun;
  }
  Func xv(pre + "x");
  if (xs && sc->scores == xs) {
    xv = sfun;
  } else {
    std::map<std::string, HExpr> v;
    const std::vector<std::string> xvars =
        xs ? xs->vars : std::vector<std::string>{};  // an input x: indexed as (b.., i, j)
    std::vector<HExpr> idx;
    for (size_t k = 0; k + 2 < n; ++k) idx.push_back(hb[k]);
    idx.push_back(ic);
    // The score stage is defined at every key (its reads clamp): past Lk
    // only other reads need the clamp, which costs a gather per vector.
    const bool xsafe =
        xs && sc->scores && !reads_unsafe(xs->value, {sc->scores->name}, xs->vars[n - 1]);
    idx.push_back(xsafe ? HExpr(hj) : jc);
    if (xs) {
      for (size_t k = 0; k < n; ++k) v[xs->vars[k]] = idx[k];
      xv(args({hj, hi})) = Halide::cast(Halide::Float(32), l.lower(xs->value, v, over));
    } else {
      std::vector<HExpr> hargs(idx.rbegin(), idx.rend());
      xv(args({hj, hi})) = Halide::cast(Halide::Float(32), (*l.input(sc->x))(hargs));
    }
  }

  // Per block kb of K keys: its row max, exponentials, row sum and P V.
  // The max and the sum accumulate W lanes per row in vectors (up to 4
  // vectors: independent chains) and reduce across lanes once per row; a
  // reduction of each vector as it is read was a shuffle tree per vector, on
  // one scalar chain per row. Lanes past the block (a block that is not a
  // multiple of W) and past Lk are masked.
  const int W = lanes * static_cast<int>(std::clamp<int64_t>((K + lanes - 1) / lanes, 1, 4));
  const RDom rjv(0, (KE + W - 1) / W, pre + "rjv");
  const RDom ru(0, W, pre + "ru");
  const Var hu(pre + "u");
  const HExpr j0 = hkb * KE, jv = rjv.x * W + hu;
  const HExpr live = dk.is_symbolic() || K % W != 0 ? jv < KE && j0 + jv < Lk : j0 + jv < Lk;
  Halide::RVar pv_r;
  std::vector<Func> pads;
  Func bmv(pre + "block_max_lanes"), bm(pre + "block_max"), pb(pre + "p"),
      lbv(pre + "block_sum_lanes"), lb(pre + "block_sum"), pvacc(pre + "pv_acc"), pv(pre + "pv");
  bmv(args({hu, hi, hkb})) = f32(-kInf);
  bmv(args({hu, hi, hkb})) = Halide::max(bmv(args({hu, hi, hkb})),
                                         Halide::select(live, xv(args({j0 + jv, hi})), f32(-kInf)));
  bm(args({hi, hkb})) = f32(-kInf);
  bm(args({hi, hkb})) = Halide::max(bm(args({hi, hkb})), bmv(args({ru.x, hi, hkb})));
  // A block with every score masked has max -inf: its exponentials are 0,
  // as e^(-inf - 0). The test is on the bits: Halide compiles float code as
  // if no value were infinite, so m == -inf (or max(m, -FLT_MAX)) folded
  // away, giving e^(-inf + inf) = NaN.
  const auto shift = [&](HExpr i, HExpr kb) {
    const HExpr m = bm(args({std::move(i), std::move(kb)}));
    return Halide::select(Halide::reinterpret(Halide::Int(32), m) == kNegInfBits, f32(0), m);
  };
  // P at the key j0 + jj of block kb (indexed within the block: the block
  // of a key would be a division per lane, scalarized where K is not a
  // constant); zero past Lk, so that P V may run a rounded-up block unmasked.
  pb(args({hj, hi, hkb})) = Halide::select(
      j0 + hj < Lk, exp_nonpositive(xv(args({j0 + hj, hi})) - shift(hi, hkb)), f32(0));
  lbv(args({hu, hi, hkb})) = f32(0);
  lbv(args({hu, hi, hkb})) += Halide::select(live, pb(args({jv, hi, hkb})), f32(0));
  lb(args({hi, hkb})) = f32(0);
  lb(args({hi, hkb})) += lbv(args({ru.x, hi, hkb}));
  {
    RDom rvw(0, KE, pre + "rv");
    std::map<std::string, HExpr> v;
    for (size_t k = 0; k + 2 < n; ++k) v[st.vars[k]] = hb[k];
    v[st.vars[n - 2]] = hi;
    // The product reads the probabilities at (i, key): a stand-in Func,
    // its calls then rewritten to pb's (key - j0, i, kb).
    Func probs_at(pre + "probs_at");
    probs_at(args({hj, hi})) = f32(0);
    std::map<std::string, Func> pover{{sc->probs->name, probs_at}};
    // V's rows past Lk (a rounded-up key block) and columns past D (a
    // rounded-up tile of d) are clamped. Where D is symbolic, a clamp per
    // lane makes every load of V a gather (2x on the whole kernel), and a
    // clamped key makes every block's buffers variable-size where Lk is:
    // read instead a copy of V clamped in every dim, made once (Lk x D
    // floats against the Lq x Lk work), at indices past its extents.
    std::set<std::string> safe{sc->probs->name};
    const bool d_past = !dd.is_symbolic() && dd.value % (pv_vectors(t, dd) * lanes) != 0;
    if ((dd.is_symbolic() || dk.is_symbolic() || d_past) && schedule)
      for (const std::string& r : st.reads()) {
        if (r == sc->probs->name) continue;
        std::vector<Dim> shape;
        if (const Stage* ps = p.find_stage(r))
          shape = ps->shape;
        else
          for (const TensorInfo& in : p.inputs())
            if (in.name == r) shape = in.shape;
        if (shape.empty()) continue;
        std::vector<Var> a;
        for (size_t k = 0; k < shape.size(); ++k)
          a.emplace_back(pre + r + "_pad" + std::to_string(k));
        std::vector<HExpr> ae;
        for (size_t k = 0; k < shape.size(); ++k)
          ae.push_back(Halide::min(a[k], l.extent(shape[shape.size() - 1 - k]) - 1));
        Func pk(pre + "padded_" + r);
        if (const auto in = l.input(r))
          pk(a) = (*in)(ae);
        else
          pk(a) = l.stage_func(r)(ae);
        pover[r] = pk;
        safe.insert(r);
        pads.push_back(pk);
      }
    v[st.vars[n - 1]] = reads_unsafe(st.value, safe, st.vars[n - 1])
                            ? Halide::min(hd, l.extent(dd) - 1)
                            : HExpr(hd);
    if (reads_unsafe(st.value, safe, st.rvars[0].name)) {
      rvw.where(j0 + rvw.x < Lk);
      v[st.rvars[0].name] = Halide::min(j0 + rvw.x, Lk - 1);
    } else {
      v[st.rvars[0].name] = j0 + rvw.x;  // pb is 0 there
    }
    pvacc(args({hd, hi, hkb})) = f32(0);
    struct InBlock : Halide::Internal::IRMutator {
      std::string name;
      Func target;
      HExpr j0, kb;
      using IRMutator::visit;
      HExpr visit(const Halide::Internal::Call* c) override {
        if (c->name != name) return IRMutator::visit(c);
        std::vector<HExpr> a;
        for (const HExpr& x : c->args) a.push_back(mutate(x));
        a[0] = Halide::Internal::simplify(a[0] - j0);
        a.insert(a.begin() + 2, kb);
        return Halide::Internal::Call::make(target.function(), a);
      }
    } in_block;
    in_block.name = probs_at.name();
    in_block.target = pb;
    in_block.j0 = j0;
    in_block.kb = hkb;
    pvacc(args({hd, hi, hkb})) +=
        Halide::cast(Halide::Float(32), in_block.mutate(l.lower(st.value, v, pover)));
    pv(args({hd, hi, hkb})) = pvacc(args({hd, hi, hkb}));
    pv_r = rvw.x;
  }

  // The running state of a tile's rows over the key blocks: (acc, max, sum).
  // With a single block (a static key length within one block) there is
  // nothing to rescale: O = P V / l of that block, without the state's
  // buffers and its two exponentials per output (per row and column, as the
  // state is vectorized along d: a third as many as P has at 384 keys and D 64).
  const bool one_block = !dk.is_symbolic() && K >= dk.value;
  Func state(pre + "state");
  const HExpr row = hqt * static_cast<int>(R) + hii;
  RDom rk(0, nb, pre + "rk");
  Func out(func_name);
  if (one_block) {
    out(args({hd, hi})) = pv(args({hd, hi, 0})) / lb(args({hi, 0}));
  } else {
    state(args({hd, hii, hqt})) = Halide::Tuple(f32(0), f32(-kInf), f32(0));
    if (sc->causal_offset)  // keys past the tile's last row (+ offset) are -inf: not visited
      rk.where(rk.x * KE <=
               hqt * static_cast<int>(R) + static_cast<int>(R - 1 + *sc->causal_offset));
    const auto cur = state(args({hd, hii, hqt}));
    const HExpr o = cur[0], m = cur[1], s = cur[2];
    const HExpr mb = bm(args({row, rk.x}));
    const HExpr mn = Halide::max(m, mb);
    const HExpr a = Halide::select(m == mn, f32(1), exp_nonpositive(m - mn));
    const HExpr b = Halide::select(mb == mn, f32(1), exp_nonpositive(mb - mn));
    state(args({hd, hii, hqt})) =
        Halide::Tuple(o * a + b * pv(args({hd, row, rk.x})), mn, s * a + b * lb(args({row, rk.x})));
    const auto fin = state(args({hd, hi % static_cast<int>(R), hi / static_cast<int>(R)}));
    out(args({hd, hi})) = fin[0] / fin[2];
  }
  if (!schedule) return out;

  // Schedule. Vectors along the output column d (V's contiguous dim), guarded
  // where D is not a multiple of the lanes.
  const bool dvec = dd.is_symbolic() || dd.value >= lanes;
  const Var qo(pre + "qo"), qi(pre + "qi");
  out.split(hi, qo, qi, static_cast<int>(R), TailStrategy::GuardWithIf);
  out.reorder(loops({hd, qi, qo}));
  Var fused = qo;
  for (auto it = hb.rbegin(); it != hb.rend(); ++it) {
    const Var f(fused.name() + "_" + it->name());
    out.fuse(fused, *it, f);
    fused = f;
  }
  out.parallel(fused);
  if (dvec) out.vectorize(hd, lanes, TailStrategy::GuardWithIf);

  // Where the per-block Funcs are computed: at the state's block loop, or
  // with a single block at the tile.
  const Halide::RVar rkx(rk.x);
  Halide::LoopLevel at = Halide::LoopLevel(out, fused);
  if (!one_block) {
    state.compute_at(out, fused);
    if (dvec) state.vectorize(hd, lanes, TailStrategy::GuardWithIf);
    state.update(0).reorder(hd, hii, rk.x);
    if (dvec) state.update(0).vectorize(hd, lanes, TailStrategy::GuardWithIf);
    at = Halide::LoopLevel(state, rkx);
  }

  // Score block: register tiles of `rows` x 4 vectors, accumulated over the
  // head dim in registers (the contraction micro-kernel's shape), the row
  // tiles inside the key tiles: each key tile's K columns (4 vectors x D)
  // are read from L1 by every row tile, and the block's rows of Q (rows x
  // D) stay there too.
  if (sc->scores) {
    const int cols = 4;
    const int rows = tile_rows(t, cols);
    const Var jo(pre + "jo"), ji(pre + "ji"), io(pre + "io"), iin(pre + "iin");
    sfun.compute_at(at);
    sfun.tile(hj, hi, jo, io, ji, iin, cols * lanes, rows, TailStrategy::RoundUp);
    sfun.reorder(loops({ji, iin, io, jo}));
    sfun.vectorize(ji, lanes);
    sacc.compute_at(sfun, io);
    sacc.vectorize(hj, lanes).unroll(hj).unroll(hi);
    std::vector<Halide::VarOrRVar> order{hj, hi};
    for (int k = 0; k < static_cast<int>(sc->scores->rvars.size()); ++k)
      order.emplace_back(
          Halide::RVar(pre + sc->scores->rvars[sc->scores->rvars.size() - 1 - k].name));
    sacc.update().reorder(order).vectorize(hj, lanes).unroll(hj).unroll(hi);
    for (auto& [pk, dim] : packs) {
      std::vector<Var> a = pk.args();
      std::vector<Var> so{a[static_cast<size_t>(dim)]};
      for (size_t k = 0; k < a.size(); ++k)
        if (static_cast<int>(k) != dim) so.push_back(a[k]);
      pk.compute_root().reorder_storage(so);
      // The transposition in tiles of lanes x lanes: each key vector a gather
      // along the copied dim, the tile's lanes gathers unrolled (4x faster
      // than the element loop, which stored every element to another line:
      // 9% of 12 heads x 384 x 64 non-causal attention, 4% so).
      const Var kv = a[static_cast<size_t>(dim)], dv = a[0];
      const Var kvo(pre + "pko"), kvi(pre + "pki"), dvo(pre + "pdo"), dvi(pre + "pdi");
      if (dim != 0)
        pk.tile(kv, dv, kvo, dvo, kvi, dvi, lanes, lanes, TailStrategy::GuardWithIf)
            .reorder(kvi, dvi, kvo, dvo)
            .vectorize(kvi)
            .unroll(dvi);
      if (a.size() >= 3) pk.parallel(a.back());
    }
  }
  for (Func& pk : pads) {
    pk.compute_root().vectorize(pk.args()[0], lanes, TailStrategy::GuardWithIf);
    if (pk.args().size() >= 3) pk.parallel(pk.args().back());
  }
  bmv.compute_at(at).vectorize(hu);
  bmv.update().reorder(hu, rjv.x, hi).vectorize(hu);
  bm.compute_at(at);
  bm.update().atomic().vectorize(ru.x);
  // W lanes per step: up to 4 independent exponentials in flight.
  pb.compute_at(at).vectorize(hj, W, TailStrategy::RoundUp);
  lbv.compute_at(at).vectorize(hu);
  lbv.update().reorder(hu, rjv.x, hi).vectorize(hu);
  lb.compute_at(at);
  lb.update().atomic().vectorize(ru.x);
  // P V: register tiles of `rows` x up to 4 vectors of d, accumulated over the block.
  {
    const int dcols = pv_vectors(t, dd);
    const Var d_o(pre + "do"), d_i(pre + "di"), io(pre + "pio"), iin(pre + "piin");
    pv.compute_at(at);
    if (dvec) {
      const auto tile = [&](Halide::Stage st, int cols) {
        st.split(hd, d_o, d_i, cols * lanes, TailStrategy::RoundUp)
            .split(hi, io, iin, tile_rows(t, cols), TailStrategy::RoundUp);
        st.reorder(loops({d_i, iin, d_o, io, hkb}));
        st.vectorize(d_i, lanes);
      };
      // A symbolic D that is whole 4-vector tiles (64, 128) takes them, in a
      // version of its own (12 heads x 384 at D = 64, 2 threads: 1.27x the
      // static kernel's time in 1-vector tiles, 1.16x so).
      if (dd.is_symbolic()) tile(pv.specialize(l.extent(dd) % (4 * lanes) == 0), 4);
      tile(pv, dcols);
      pvacc.compute_at(pv, d_o);
      pvacc.vectorize(hd, lanes).unroll(hd).unroll(hi);
      pvacc.update().reorder(hd, hi, pv_r).vectorize(hd, lanes).unroll(hd).unroll(hi);
    } else {
      pvacc.compute_at(pv, hi);
    }
  }
  return out;
}

}  // namespace pto
