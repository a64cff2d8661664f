#include "schedules/defaults/Defaults.h"

#include <algorithm>
#include <optional>
#include <set>

#include "dsl/ZeroPadding.h"
#include "schedules/LoopNest.h"
#include "schedules/defaults/Gpu.h"
#include "schedules/defaults/Rules.h"
#include "schedules/directives/RFactor.h"
#include "schedules/directives/Specialize.h"
#include "schedules/directives/StoreIn.h"

namespace pto {
namespace defaults {

int64_t static_extent(const Dim& d) {
  return d.is_symbolic() ? -1 : d.value;
}

// Is `st` a contraction's or convolution's reduction, or the zero padding of
// one that only such reductions read (a channels-last convolution's input:
// its reduction reads through the padding, skip_padding)?
bool reduction_reads(const Program& p, const Stage& st) {
  const auto contraction = [](const Stage& c) {
    return c.reduce && (c.kind == OpKind::Contraction || c.kind == OpKind::Convolution);
  };
  if (contraction(st)) return true;
  if (st.op != "pad" || st.reduce || p.is_output(st.name)) return false;
  const auto readers = p.consumers(st.name);
  if (readers.empty()) return false;
  for (const auto& c : readers)
    if (!contraction(p.stage(c))) return false;
  return true;
}

bool hosts_placements(const Schedule& s, const std::string& stage) {
  for (const auto& [name, ss] : s.stages) {
    if (ss.compute.kind == Placement::Kind::At && ss.compute.stage == stage) return true;
    if (ss.store && ss.store->kind == Placement::Kind::At && ss.store->stage == stage) return true;
  }
  return false;
}

int row_vector_width(int64_t extent, int lanes) {
  if (lanes < 2) return 0;
  if (extent < 0 || extent >= lanes) return lanes;
  if (extent < 4) return 0;
  int w = 4;
  while (w * 2 <= extent && w * 2 < lanes) w *= 2;
  return w;
}

// Parallel outer dim, vectorized inner dim: the generic root-stage schedule.
LoopSchedule parallel_vectorized(const Stage& st, const Target& t, int64_t min_elements) {
  LoopSchedule ls;
  if (st.vars.empty()) return ls;
  const int lanes = t.vector_lanes(st.dtype == DType::Bool ? DType::U8 : st.dtype);
  const std::string inner = st.vars.back();
  const int64_t e = static_extent(st.shape.back());
  // A symbolic inner dim is vectorized too: its last vector shifts inwards in
  // the version specialized for extents of at least one vector
  // (specialize_symbolic), and is guarded below that.
  if (const int w = row_vector_width(e, lanes)) {
    ls.vectorize = inner;
    ls.vector_width = w;
  }
  // Each core gets one contiguous block of the outermost dim that has more
  // than one iteration (a batch of 1 would leave every thread but one idle).
  // Blocks, not one task per iteration: with a task per row, BERT's [128,
  // 768] residual add took 0.0084 ms on one thread and longer on two (the
  // tasks contend for the pool's queue), while two blocks take 0.0036 ms.
  // Below kMinParallelElements a stage takes about as long as waking a thread.
  const int64_t n = static_numel(st.shape);
  if (n > 0 && n < min_elements) return ls;
  for (size_t k = 0; k + 1 < st.vars.size(); ++k) {
    const int64_t ek = static_extent(st.shape[k]);
    if (ek == 1) continue;
    const std::string& v = st.vars[k];
    if (int64_t chunk = parallel_chunk(ek, 1, t); chunk > 0 && chunk < ek) {
      // A last block shifted inwards recomputes what its neighbour did: where
      // that is over 1/8 of the work (3 rows on 2 cores: 4 computed), one
      // task per iteration instead, as short a critical path with no
      // duplicates (softmax over 3 x 100003, 2 threads: 0.089 -> 0.076 ms).
      if ((chunk * t.cores - ek) * 8 > ek) chunk = 1;
      ls.tile[v] = {chunk};
      ls.parallel.push_back(outer_loop(v));
    } else {
      ls.parallel.push_back(v);
    }
    break;
  }
  return ls;
}

// Root stages whose loops split a symbolic dim (a tile, vector lanes, an
// unroll factor) get a version specialized for extents that hold those splits
// (directives/Specialize.h), so that a kernel compiled once for every size
// runs the static kernel's loops: unguarded vectors, constant-size tiles.
void specialize_symbolic(const Program& p, Schedule& s) {
  for (const Stage& st : p.stages()) {
    StageSchedule* ss = s.stages.count(st.name) ? &s.stages.at(st.name) : nullptr;
    // A fused online softmax owns the stage's loops (OnlineSoftmax.h).
    if (!ss || ss->compute.kind != Placement::Kind::Root || ss->device != "cpu" ||
        !ss->pipeline.prefetch.empty() || ss->online_softmax)
      continue;
    // A stage another is stored in guards its tails (directives/StoreIn.h).
    if (directives::holds_stored_stage(p, st.name, [&](const std::string& n) { return s.find(n); }))
      continue;
    if (!directives::specialize_bounds(st, ss->loops).empty()) ss->specialize = true;
  }
}

// Does evaluating the stage, with the producers `s` inlines into it,
// compute a transcendental function?
bool evaluates_transcendental(const Program& p, const Stage& st, const Schedule& s) {
  if (transcendental(st)) return true;
  for (const std::string& r : st.reads()) {
    const Stage* in = p.find_stage(r);
    const StageSchedule* rs = in ? s.find(r) : nullptr;
    const bool inlined = in && !in->reduce && (!rs || rs->compute.kind == Placement::Kind::Inline);
    if (inlined && evaluates_transcendental(p, *in, s)) return true;
  }
  return false;
}

// A vectorized stage that evaluates exp, tanh, erf... is a chain of a few
// dozen dependent vector ops per vector: several vectors per step give the
// core independent chains to interleave (and one loop's overhead per
// several vectors). 4 vectors per step, fewer where the row holds fewer:
// GPT-2's softmax over 8 x 50257 logits, its exp pass at 1 vector per step
// 0.173 ms, at 2 0.160, at 4 0.153; GELU over [512, 3072] 0.535 -> 0.510;
// at 4 vectors the polynomial's live values (about 6 registers per vector)
// still fit AVX-512's 32 registers.
// A reduction that evaluates one inline (log_softmax's sum of exp) keeps at
// most 4 vectors of partials for the same reason: 8 spill the polynomial's
// values (log_softmax over [312, 1029], 2 threads: 8 vectors 0.067 ms, 4
// 0.058; ONNX Runtime 0.056).
void interleave_transcendentals(const Program& p, const Target& t, Schedule& s) {
  for (const Stage& st : p.stages()) {
    StageSchedule* ss = s.stages.count(st.name) ? &s.stages.at(st.name) : nullptr;
    if (ss && st.reduce && ss->rfactor && !ss->rfactor->parallel && !ss->rfactor->interleave &&
        ss->device == "cpu") {
      const int most = 4 * t.vector_lanes(ss->precision.accumulate.value_or(st.dtype));
      StageSchedule fewer = *ss;
      fewer.rfactor->factor = most;
      if (ss->rfactor->factor > most && evaluates_transcendental(p, st, s) &&
          directives::accepts(directives::rfactor_directive(), p, s, &t, st, fewer))
        *ss = fewer;
      continue;
    }
    if (!ss || st.reduce || st.vars.empty() || ss->compute.kind == Placement::Kind::Inline ||
        ss->device != "cpu" || ss->online_softmax)
      continue;
    LoopSchedule& ls = ss->loops;
    const int lanes = t.vector_lanes(st.dtype);
    if (ls.vectorize != st.vars.back() || ls.vector_width != lanes || ls.tile.count(ls.vectorize) ||
        !ls.unroll.empty() || !evaluates_transcendental(p, st, s))
      continue;
    const int64_t e = static_extent(st.shape.back());
    for (const int u : {4, 2}) {
      if (e < 0 || e >= int64_t{u} * lanes) {
        ls.vector_width = u * lanes;
        break;
      }
    }
  }
}

// bf16 / f16 stages evaluate in f32 and reductions accumulate in f32, as
// vendor libraries do: a bf16 accumulator keeps 8 bits, so a sum of a few
// hundred products would lose the small terms, and CPUs without native
// half-precision arithmetic emulate it (Halide warns) at several times the
// cost. Accumulator tiles computed at a consumer stay f32 too (they live in
// registers), and so do the values of inlined stages (a conv's bias add),
// which then round once, where a stored stage or the output takes its narrow
// type, instead of at every step of the epilogue: each emulated f32 -> bf16
// rounding is 5 integer ops per vector, and three of them in the epilogue made
// ResNet-50's 1x1 layers with 64 channels (32 pair steps per tile) 0.80x
// oneDNN bf16 instead of 0.95x. Stored stages keep their narrow type, which
// halves their traffic, and copies (data movement) move it unconverted.
void wide_arithmetic(const Program& p, Schedule& s) {
  for (const Stage& st : p.stages()) {
    if (st.dtype != DType::BF16 && st.dtype != DType::F16) continue;
    if (!s.find(st.name) || st.kind == OpKind::DataMovement) continue;
    StageSchedule& ss = s[st.name];
    const bool inlined = ss.compute.kind == Placement::Kind::Inline;
    if (!ss.precision.compute) ss.precision.compute = DType::F32;
    if (st.reduce && !ss.precision.accumulate) ss.precision.accumulate = DType::F32;
    if ((inlined || (st.reduce && ss.compute.kind == Placement::Kind::At)) && !ss.precision.storage)
      ss.precision.storage = DType::F32;
  }
}

}  // namespace defaults

using namespace defaults;

Schedule plain_schedule(const Program&) {
  return Schedule{};
}

Schedule default_schedule(const Program& p, const Target& t) {
  if (t.has_device()) return gpu_default_schedule(p, t);
  Schedule s;
  for (const Stage& st : p.stages()) {
    if (s.find(st.name)) continue;  // already placed by a consumer's rule
    const auto cons = p.consumers(st.name);
    const bool out = p.is_output(st.name);
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
  // Contractions and convolutions: find the elementwise chain that consumes
  // them and fuse; without one, accumulate into a register tile of their own.
  for (const Stage& st : p.stages()) {
    if (matrix_vector(p, st, t, s)) continue;  // A @ x: a stream of A's rows, not a register tile
    if (one_row_stream(p, st, t)) continue;    // x @ W: the reduction rule's split of W's rows
    const bool conv =
        st.kind == OpKind::Convolution && st.vars.size() >= 3 && !window_conv(p, st, t);
    if ((st.kind != OpKind::Contraction && !conv) || !st.reduce || st.vars.size() < 2 ||
        !is_float(st.dtype))
      continue;
    // Follow single-consumer inline elementwise stages down to the root stage
    // that materializes them. An output is materialized itself (the caller
    // reads it), so it has no epilogue to be computed in: its own tile.
    std::string cur = st.name;
    const Stage* root = nullptr;
    while (!p.is_output(st.name)) {
      const auto cons = p.consumers(cur);
      if (cons.size() != 1) break;
      const Stage& c = p.stage(cons[0]);
      if (c.reduce || c.shape != st.shape || c.kind != OpKind::Elementwise) break;
      if (transcendental(c)) {
        // exp/erf/tanh... run better as their own vectorized pass than inside
        // the register tile: BERT's FFN fc1 + GELU took 4.7 ms per core fused,
        // 2.4 ms with the GELU as a pass of its own. Materialize the cheap
        // part of the chain (the bias) and fuse the contraction into that.
        StageSchedule& es = s[c.name];
        if (es.compute.kind != Placement::Kind::Root) {
          es = StageSchedule{};
          es.loops = parallel_vectorized(c, t);
        }
        if (cur != st.name) {
          root = &p.stage(cur);
          s[cur] = StageSchedule{};
        }
        break;
      }
      const StageSchedule* cs = s.find(c.name);
      if (cs && cs->compute.kind == Placement::Kind::Root) {
        root = &c;
        break;
      }
      cur = c.name;
    }
    const auto rc = tile_dims(st);
    const int64_t n = static_extent(st.shape[rc.second]);
    if (n >= 0 && n < t.vector_lanes(DType::F32) && !padded_columns(p, st, t))
      continue;  // too narrow for a vector register tile
    // An inline elementwise chain read by another reduction (linear -> bias ->
    // gelu -> linear) would be re-evaluated for every reduction step of its
    // reader, and one read by several stages (a residual block's add + ReLU:
    // the next block's convolution and its residual add) once by each, and
    // again inside whatever inlines those: materialize its last stage and
    // fuse the contraction into it.
    if (!root && cur != st.name) {
      // (Not where a normalization reads it, a softmax: the row-wise rule
      // places its producers.)
      const auto readers = p.consumers(cur);
      bool contractions_read_it = true, plain_readers = true;
      for (const auto& c : readers) {
        const Stage& cs = p.stage(c);
        const bool contraction = reduction_reads(p, cs);
        contractions_read_it &= contraction;
        plain_readers &=
            contraction ||
            (!cs.reduce && (cs.kind == OpKind::Elementwise || cs.kind == OpKind::DataMovement));
      }
      if (contractions_read_it || (readers.size() >= 2 && plain_readers)) root = &p.stage(cur);
    }
    // An epilogue hosts one contraction's tile: a second one feeding it (a
    // residual block's projection shortcut, added to the block's last
    // convolution) accumulates alone, and the epilogue reads its result.
    if (root && hosts_placements(s, root->name)) root = nullptr;
    // x @ W^T, or a wide W: the W panel must be packed (transposed), which
    // needs the contraction's own accumulator tile; the epilogue then runs as
    // its own (vectorized, parallel) pass over the result. So do columns
    // under a vector, padded in that tile (padded_columns).
    const auto reads = st.reads();
    if (root && ((reads.size() == 2 &&
                  (transposed_operand(st, reads[1], rc) || needs_packing(p, st, reads[1], rc))) ||
                 padded_columns(p, st, t))) {
      StageSchedule& es = s[root->name];
      es = StageSchedule{};
      es.loops = parallel_vectorized(*root, t);
      root = nullptr;
    }
    // A channels-last convolution that reads its weights per channel tile
    // accumulates over its whole output per channel tile, inside the epilogue.
    if (root && channels_last_conv(st) && static_tile(st, tile_dims(st)) &&
        weights_outer_pays(p, st, t)) {
      s.stages.erase(root->name);
      weights_outer(p, st, root, t, s);
      continue;
    }
    if (root) {
      s.stages.erase(root->name);
      contraction_with_epilogue(p, st, *root, t, s);
    } else {
      contraction_alone(p, st, t, s);
    }
  }
  // A data-movement stage (a transpose, a reshape) that a convolution's
  // reduction reads is made once: inline, it would be re-evaluated in every
  // reduction step of every tile, and where it moves the axis the tile
  // vectorizes (OIHW weights read as HWIO: their output channels 9 x C apart)
  // every load is a gather.
  for (const Stage& st : p.stages()) {
    if (st.kind != OpKind::Convolution || !st.reduce) continue;
    std::vector<std::string> reads = st.reads();
    for (const std::string& r : st.reads())  // through the zero padding it reads (made once too)
      if (const Stage* pad = p.find_stage(r); pad && pad->op == "pad" && !pad->reduce)
        for (const std::string& q : pad->reads()) reads.push_back(q);
    for (const std::string& r : reads) {
      const Stage* m = p.find_stage(r);
      const StageSchedule* found = s.find(r);
      if (!m || m->kind != OpKind::DataMovement || m->reduce || p.is_output(r) || !found ||
          found->compute.kind != Placement::Kind::Inline || m->op == "pad")
        continue;
      s[r] = StageSchedule{};
      s[r].loops = parallel_vectorized(*m, t);
    }
  }
  // An inline elementwise stage that a contraction's or convolution's
  // reduction reads and that evaluates a transcendental (itself or through
  // what it inlines: the erf-form GELU exporters emit, six stages with the
  // bias add read twice, which the epilogue walk above does not take) is
  // computed once, as its own vectorized pass: inline, the reduction would
  // evaluate it again for every column tile (an imported BERT FFN: erf once
  // per 16 output columns).
  for (const Stage& st : p.stages()) {
    if (!st.reduce || (st.kind != OpKind::Contraction && st.kind != OpKind::Convolution)) continue;
    for (const std::string& r : st.reads()) {
      const Stage* m = p.find_stage(r);
      const StageSchedule* found = s.find(r);
      if (!m || m->kind != OpKind::Elementwise || m->reduce || p.is_output(r) || !found ||
          found->compute.kind != Placement::Kind::Inline || !evaluates_transcendental(p, *m, s))
        continue;
      s[r] = StageSchedule{};
      s[r].loops = parallel_vectorized(*m, t);
      // Made once to save work, not to narrow it: a bf16 / f16 stage keeps
      // the f32 it had inline (wide_arithmetic), or an f16 attention's
      // probabilities would round to 11 bits before the product with V
      // (ONNX's attention_4d_causal_fp16 then missed its 1e-3 tolerance).
      if (m->dtype == DType::F16 || m->dtype == DType::BF16) s[r].precision.storage = DType::F32;
    }
  }
  // The padded input a channels-last convolution reads (instead of an inline
  // guard in its reduction body). Where its reduction skips the padding it
  // reads the padding's source in place (ZeroPadding.h): that source is then
  // made once, as the padding would have been, not evaluated inline in every
  // reduction step (a batch norm + ReLU not fused into the convolution before).
  for (const Stage& st : p.stages()) {
    if (!channels_last_conv(st) || !st.reduce) continue;
    for (const std::string& r : st.reads()) {
      const Stage* pad = p.find_stage(r);
      if (!pad || pad->op != "pad" || pad->reduce || pad->vars.size() != 4 || p.is_output(r))
        continue;
      StageSchedule& ps = s[r];
      ps = StageSchedule{};
      ps.loops = padded_input(*pad, t);
      const StageSchedule* cs = s.find(st.name);
      if (!cs || !read_through_padding(p, st, cs->skip_padding)) continue;
      for (const std::string& src : pad->reads()) {
        const Stage* m = p.find_stage(src);
        const StageSchedule* found = s.find(src);
        if (m && !m->reduce && found && found->compute.kind == Placement::Kind::Inline) {
          s[src] = StageSchedule{};
          s[src].loops = parallel_vectorized(*m, t);
        }
      }
    }
  }
  // The im2col copy a dense channels-first convolution's GEMM reads
  // (Convolution.cpp), and the GEMM's tile order (Im2col.cpp).
  for (const Stage& st : p.stages())
    if (st.op == "im2col" && !st.reduce && !p.is_output(st.name)) im2col(p, st, t, s);
  // Transposes, materialized.
  for (const Stage& st : p.stages()) blocked_transpose(st, t, s);
  // Stencils: depthwise / grouped convolutions and pooling (Window.cpp).
  for (const Stage& st : p.stages())
    if (window_stage(p, st, t)) window(p, st, t, s);
  // Contractions over a softmax whose scores outgrow L2: one fused loop. Before
  // the row-wise rule, which would otherwise place the softmax's producers and
  // statistics at loops of stages the fused loop replaces.
  online_softmax_attention(p, t, s);
  // Row-wise normalizations.
  for (const Stage& st : p.stages())
    if (st.kind == OpKind::Normalization && !st.reduce && s.find(st.name) &&
        s.find(st.name)->compute.kind == Placement::Kind::Root)
      rowwise(p, st, t, s);
  // Reductions that no rule above claimed (Reduction.cpp).
  for (const Stage& st : p.stages())
    if (st.reduce && s.find(st.name) && *s.find(st.name) == StageSchedule{} &&
        !hosts_placements(s, st.name))
      reduction(p, st, t, s);
  interleave_transcendentals(p, t, s);
  specialize_symbolic(p, s);
  // bf16 contractions on AMX tiles where the CPU has them (Amx.cpp), before
  // the type rules would give them bf16 pairs.
  amx_contractions(p, t, s);
  apply_type_rules(p, t, s);
  return s;
}

void apply_type_rules(const Program& p, const Target& t, Schedule& s) {
  // bf16 operands laid out in pairs: one dot-product instruction per pair.
  dot_pairs(p, t, s);
  wide_arithmetic(p, s);
}

}  // namespace pto
