// Recurrent layers: rnn, gru and lstm with ONNX's definitions (gate order,
// bias layout, peepholes, linear_before_reset, sequence lengths, forward /
// reverse / bidirectional), inputs [seq, batch, features].
//
// The time loop is unrolled into stages: the input projection of every step
// is one contraction stage over the whole sequence, then each step adds the
// recurrent projection of the previous state (a reduction stage) and the
// gate arithmetic (elementwise stages for the new state). Unrolling keeps
// every stage an ordinary one the defaults schedule, at the cost of a few
// stages per step: meant for the sequence lengths exported models carry
// (tens of steps), not for thousands.
#include <algorithm>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using Ins = std::vector<Tensor>;

Expr k(double v, const Expr& like) {
  return make_const(v, like.type());
}

Expr activate(const std::string& op, const std::string& f, const Expr& x) {
  if (f == "sigmoid") return k(1, x) / (k(1, x) + unary(UnOp::Exp, -x));
  if (f == "tanh") return unary(UnOp::Tanh, x);
  if (f == "relu") return max(x, k(0, x));
  throw DefinitionError(op + ": activation '" + f + "' is not one of sigmoid, tanh, relu");
}

int gates_of(const std::string& kind) {
  return kind == "rnn" ? 1 : kind == "gru" ? 3 : 4;
}

void check_shape(const std::string& op, const Tensor& t, const std::string& what,
                 const std::vector<int64_t>& want) {
  Shape s;
  for (int64_t e : want) s.push_back(Dim(e));
  if (t.shape() != s)
    throw ShapeError(op + ": " + what + " '" + t.name() + "' must be " + to_string(s) + ", got " +
                     to_string(t.shape()));
}

}  // namespace

RecurrentResult recurrent(const RecurrentInputs& in, const RecurrentParams& prm,
                          const std::string& name) {
  const std::string& op = prm.kind;
  if (op != "rnn" && op != "gru" && op != "lstm")
    throw DefinitionError("recurrent: kind '" + op + "' is not rnn, gru or lstm");
  const Tensor& x = in.x;
  require_float(op, x);
  if (x.rank() != 3)
    throw ShapeError(op + ": x '" + x.name() + "' must be [seq, batch, features], got " +
                     to_string(x.shape()));
  const int64_t steps = static_dim(op, x, 0), batch = static_dim(op, x, 1),
                feat = static_dim(op, x, 2);
  // The unrolled loop is a few stages per step: bounded so that a sequence
  // length from a bad model cannot make millions of stages.
  constexpr int64_t kMaxSteps = 4096;
  if (steps > kMaxSteps)
    throw ShapeError(op + ": sequence length " + std::to_string(steps) + " exceeds " +
                     std::to_string(kMaxSteps) + " steps (the time loop is unrolled into stages)");
  const int G = gates_of(op);
  if (in.w.rank() != 3)
    throw ShapeError(op + ": w '" + in.w.name() +
                     "' must be [directions, gates * hidden, features]");
  const int64_t dirs = static_dim(op, in.w, 0), H = static_dim(op, in.w, 1) / G;
  if (prm.direction != "forward" && prm.direction != "reverse" && prm.direction != "bidirectional")
    throw DefinitionError(op + ": direction '" + prm.direction +
                          "' is not forward, reverse or bidirectional");
  const int64_t want_dirs = prm.direction == "bidirectional" ? 2 : 1;
  check_shape(op, in.w, "w", {want_dirs, G * H, feat});
  check_shape(op, in.r, "r", {dirs, G * H, H});
  if (in.b.defined()) check_shape(op, in.b, "b", {dirs, 2 * G * H});
  if (in.h0.defined()) check_shape(op, in.h0, "initial_h", {dirs, batch, H});
  if (in.c0.defined()) {
    if (op != "lstm") throw DefinitionError(op + ": initial_c is an lstm input");
    check_shape(op, in.c0, "initial_c", {dirs, batch, H});
  }
  if (in.p.defined()) check_shape(op, in.p, "p (peepholes)", {dirs, 3 * H});
  if (in.seq_lens.defined()) {
    if (!is_int(in.seq_lens.dtype())) throw DTypeError(op + ": sequence_lens must be integers");
    check_shape(op, in.seq_lens, "sequence_lens", {batch});
  }
  std::vector<std::string> acts = prm.activations;
  const std::vector<std::string> defaults =
      op == "rnn"   ? std::vector<std::string>{"tanh"}
      : op == "gru" ? std::vector<std::string>{"sigmoid", "tanh"}
                    : std::vector<std::string>{"sigmoid", "tanh", "tanh"};
  if (acts.empty()) acts = defaults;
  if (acts.size() == defaults.size() && dirs == 2)
    acts.insert(acts.end(), defaults.begin(), defaults.end());
  if (acts.size() != defaults.size() * static_cast<size_t>(dirs))
    throw DefinitionError(op + ": " + std::to_string(acts.size()) + " activations given; needs " +
                          std::to_string(defaults.size()) + " per direction");
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const DType dt = x.dtype();
  auto clipped = [&](const Expr& e) {
    return prm.clip > 0 ? clamp(e, k(-prm.clip, e), k(prm.clip, e)) : e;
  };
  const Expr bv = var("b"), jv = var("j");

  std::vector<Tensor> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    const int di = static_cast<int>(d);
    const std::string pre = out + "_d" + std::to_string(d);
    const auto act = [&](size_t i, const Expr& e) {
      return activate(op, acts[defaults.size() * static_cast<size_t>(d) + i], clipped(e));
    };
    // Input projection of every step: xw[t, b, g] = sum_f x[t, b, f] w[d, g, f].
    const Tensor xw =
        p.define_reduce(p.unique_name(pre + "_xw"), {"t", "b", "g"},
                        {Dim(steps), Dim(batch), Dim(G * H)}, ReduceOp::Sum, {{"f", Dim(feat)}},
                        x({var("t"), bv, var("f")}) * in.w({Expr(di), var("g"), var("f")}),
                        OpKind::Contraction, op);
    // Gate g's input part at step t and row j: x projection + both biases (GRU's
    // hidden gate keeps its recurrent bias apart).
    auto wbias = [&](int gate, const Expr& j) {
      return in.b.defined() ? in.b({Expr(di), j + gate * static_cast<int>(H)}) : make_const(0, dt);
    };
    auto rbias = [&](int gate, const Expr& j) {
      return in.b.defined() ? in.b({Expr(di), j + (G + gate) * static_cast<int>(H)})
                            : make_const(0, dt);
    };
    auto xin = [&](int t, int gate) {
      return xw({Expr(t), bv, jv + gate * static_cast<int>(H)}) + wbias(gate, jv);
    };
    // State tensors of the previous step (undefined: zeros).
    Tensor h_prev, c_prev;
    auto prev = [&](const Tensor& s, const Tensor& init, const Expr& b, const Expr& j) {
      if (s.defined()) return s({b, j});
      if (init.defined()) return init({Expr(di), b, j});
      return make_const(0, dt);
    };
    auto hp = [&](const Expr& b, const Expr& j) { return prev(h_prev, in.h0, b, j); };
    auto cp = [&](const Expr& b, const Expr& j) { return prev(c_prev, in.c0, b, j); };
    const bool has_state = in.h0.defined();
    std::vector<Tensor> y_steps(static_cast<size_t>(steps));
    for (int64_t s = 0; s < steps; ++s) {
      const int t = static_cast<int>(prm.direction == "reverse" || d == 1 ? steps - 1 - s : s);
      const std::string st = pre + "_t" + std::to_string(t);
      // Recurrent projection of the previous state: hr[b, g] = sum_k h[b, k] r[d, g, k].
      Tensor hr;
      if (s > 0 || has_state)
        hr = p.define_reduce(p.unique_name(st + "_hr"), {"b", "g"}, {Dim(batch), Dim(G * H)},
                             ReduceOp::Sum, {{"k", Dim(H)}},
                             hp(bv, var("k")) * in.r({Expr(di), var("g"), var("k")}),
                             OpKind::Contraction, op);
      auto rec = [&](int gate) {  // the recurrent part of gate `gate` at row j, with its bias
        const Expr r = hr.defined() ? hr({bv, jv + gate * static_cast<int>(H)}) : make_const(0, dt);
        return r + rbias(gate, jv);
      };
      Expr h_new, c_new;
      if (op == "rnn") {
        h_new = act(0, xin(t, 0) + rec(0));
      } else if (op == "gru") {  // gates z, r, h
        const Expr z = act(0, xin(t, 0) + rec(0));
        Expr cand;
        if (prm.linear_before_reset) {
          cand = act(1, xin(t, 2) + act(0, xin(t, 1) + rec(1)) * rec(2));
        } else {
          // (r * h_prev) projected by the hidden gate's rows of r.
          const Tensor rg = p.define(p.unique_name(st + "_r"), {"b", "j"}, {Dim(batch), Dim(H)},
                                     act(0, xin(t, 1) + rec(1)), OpKind::Elementwise, op);
          Expr rh = make_const(0, dt);
          if (s > 0 || has_state) {
            const Tensor rhp =
                p.define_reduce(p.unique_name(st + "_rh"), {"b", "j"}, {Dim(batch), Dim(H)},
                                ReduceOp::Sum, {{"k", Dim(H)}},
                                rg({bv, var("k")}) * hp(bv, var("k")) *
                                    in.r({Expr(di), jv + 2 * static_cast<int>(H), var("k")}),
                                OpKind::Contraction, op);
            rh = rhp({bv, jv});
          }
          cand = act(1, xin(t, 2) + rh + rbias(2, jv));
        }
        h_new = (k(1, z) - z) * cand + z * hp(bv, jv);
      } else {  // lstm: gates i, o, f, c; peepholes i, o, f
        auto peep = [&](int which) {
          return in.p.defined() ? in.p({Expr(di), jv + which * static_cast<int>(H)})
                                : make_const(0, dt);
        };
        const Expr ig = act(0, xin(t, 0) + rec(0) + peep(0) * cp(bv, jv));
        const Expr fg = act(0, xin(t, 2) + rec(2) + peep(2) * cp(bv, jv));
        const Expr cand = act(1, xin(t, 3) + rec(3));
        c_new = fg * cp(bv, jv) + ig * cand;
      }
      // Rows past their sequence length keep their state; their output is 0.
      Expr valid;
      if (in.seq_lens.defined()) valid = cast(DType::I32, in.seq_lens({bv})) > t;
      auto keep = [&](const Expr& v, const Expr& old) {
        return valid.defined() ? select(valid, v, old) : v;
      };
      if (op == "lstm") {
        const Tensor c = p.define(p.unique_name(st + "_c"), {"b", "j"}, {Dim(batch), Dim(H)},
                                  keep(c_new, cp(bv, jv)), OpKind::Elementwise, op);
        const Expr cn = c({bv, jv});
        auto peep_o =
            in.p.defined() ? in.p({Expr(di), jv + static_cast<int>(H)}) : make_const(0, dt);
        const Expr og = act(0, xin(t, 1) + rec(1) + peep_o * cn);
        h_new = og * act(2, cn);
        c_prev = c;
      }
      const Tensor h = p.define(p.unique_name(st + "_h"), {"b", "j"}, {Dim(batch), Dim(H)},
                                keep(h_new, hp(bv, jv)), OpKind::Elementwise, op);
      y_steps[static_cast<size_t>(t)] =
          valid.defined()
              ? p.define(p.unique_name(st + "_y"), {"b", "j"}, {Dim(batch), Dim(H)},
                         select(valid, h({bv, jv}), make_const(0, dt)), OpKind::Elementwise, op)
              : h;
      h_prev = h;
    }
    ys.push_back(stack(y_steps, 0));  // [T, B, H]
    hs.push_back(h_prev.defined() ? h_prev : Tensor());
    if (op == "lstm") cs.push_back(c_prev);
  }
  RecurrentResult r;
  r.y = stack(ys, 1, out);  // [T, D, B, H]
  if (steps > 0) {
    r.h = stack(hs, 0, p.unique_name(out + "_h"));
    if (op == "lstm") r.c = stack(cs, 0, p.unique_name(out + "_c"));
  }
  return r;
}

std::vector<OpInfo> recurrent_ops() {
  std::vector<OpInfo> r;
  for (const std::string kind : {"rnn", "gru", "lstm"}) {
    std::vector<AttrSpec> attrs = {{"direction", AttrType::String, "forward"},
                                   {"activations", AttrType::String, ""},
                                   {"clip", AttrType::Float, 0.0},
                                   {"output", AttrType::String, "y"}};
    if (kind == "gru") attrs.push_back({"linear_before_reset", AttrType::Bool, false});
    const std::string gates = kind == "rnn"   ? ""
                              : kind == "gru" ? " (gates z, r, h)"
                                              : " (gates i, o, f, c)";
    r.push_back({kind, OpKind::Contraction,
                 "ONNX " +
                     std::string(kind == "rnn"   ? "RNN"
                                 : kind == "gru" ? "GRU"
                                                 : "LSTM") +
                     gates + " over [seq, batch, features]: x, w, r, b, initial_h" +
                     (kind == "lstm" ? ", initial_c" : "") +
                     " (direction, activations, clip, output: y, h or c)",
                 3, kind == "lstm" ? 6u : 5u, attrs,
                 [kind](const Ins& in, const Attrs& a, const std::string& n) {
                   RecurrentInputs ri{in[0], in[1], in[2]};
                   if (in.size() > 3) ri.b = in[3];
                   if (in.size() > 4) ri.h0 = in[4];
                   if (in.size() > 5) ri.c0 = in[5];
                   RecurrentParams prm;
                   prm.kind = kind;
                   prm.direction = a.get<std::string>("direction");
                   std::string acts = a.get<std::string>("activations");
                   for (size_t at = 0; !acts.empty();) {
                     const size_t comma = acts.find(',', at);
                     prm.activations.push_back(acts.substr(at, comma - at));
                     if (comma == std::string::npos) break;
                     at = comma + 1;
                   }
                   prm.clip = a.get<double>("clip");
                   if (kind == "gru") prm.linear_before_reset = a.get<bool>("linear_before_reset");
                   const std::string want = a.get<std::string>("output");
                   if (want != "y" && want != "h" && !(want == "c" && kind == "lstm"))
                     throw DefinitionError(kind + ": output '" + want + "' is not y, h" +
                                           (kind == "lstm" ? " or c" : ""));
                   const RecurrentResult res = recurrent(ri, prm, want == "y" ? n : "");
                   if (want == "y") return res.y;
                   return identity(want == "h" ? res.h : res.c, n);
                 }});
  }
  return r;
}

}  // namespace pto::ops
