#include "dsl/models/Bert.h"

#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::models {
namespace {
// A projection weight [in, out], stored blocked when c.weight_block divides `out` (Bert.h).
Tensor weight(Program& p, const std::string& name, int64_t in, int64_t out, const BertConfig& c) {
  const int64_t blk = c.weight_block;
  if (c.bf16_activations && c.weight_dtype != DType::BF16)
    throw ShapeError("bert: mixed bf16 (bf16_activations) needs bf16 weights, got " + std::string(to_string(c.weight_dtype)));
  if (c.bf16_activations && blk > 0 && out % blk == 0 && in % 2 == 0)
    return p.input(name, {out / blk, in / 2, blk, 2}, c.weight_dtype);
  if (blk > 0 && out % blk == 0) return p.input(name, {out / blk, in, blk}, c.weight_dtype);
  return p.input(name, {in, out}, c.weight_dtype);
}

// y = x @ W + b: a contraction (stage `name`_mm) and its bias epilogue.
Tensor dense(const Tensor& x, const Tensor& w, const Tensor& b, const std::string& name) {
  if (w.rank() == 2) {
    const Tensor w32 = w.dtype() == x.dtype() ? w : ops::cast(w, x.dtype(), name + "_w");
    return ops::add(ops::matmul(x, w32, name + "_mm"), b, name);
  }
  // Blocked W[j / blk, k, j % blk]: for a column tile of blk outputs the
  // weights are one contiguous [in, blk] panel, streamed in order.
  Program p = x.program();
  const int blk = static_cast<int>(w.shape()[2].value);  // [out / blk, in, blk] or [out / blk, in / 2, blk, 2]
  const Shape& sx = x.shape();
  std::vector<std::string> vars;
  std::vector<Expr> ix;
  Shape out;
  for (size_t d = 0; d + 1 < sx.size(); ++d) {
    vars.push_back("i" + std::to_string(d));
    ix.push_back(var(vars.back()));
    out.push_back(sx[d]);
  }
  vars.push_back("j");
  out.push_back(Dim(w.shape()[0].value * blk));
  ix.push_back(var("k"));
  const Expr j = var("j"), k = var("k");
  if (w.rank() == 4) {
    // Mixed bf16, weights in pairs Wp[j / blk, k / 2, j % blk, k % 2]: the
    // input rounded to bf16 once (a stage of its own), f32 products and sums.
    const Tensor x16 = ops::cast(x, DType::BF16, name + "_x16");
    const Tensor mm = p.define_reduce(name + "_mm", vars, out, ReduceOp::Sum, {{"k", sx.back()}},
                                      cast(DType::F32, x16(ix)) * cast(DType::F32, w(j / blk, k / 2, j % blk, k % 2)),
                                      OpKind::Contraction, "matmul");
    return ops::add(mm, b, name);
  }
  const Expr wjk = w(j / blk, k, j % blk);
  const Tensor mm = p.define_reduce(name + "_mm", vars, out, ReduceOp::Sum, {{"k", sx.back()}},
                                    x(ix) * (w.dtype() == x.dtype() ? wjk : cast(x.dtype(), wjk)), OpKind::Contraction, "matmul");
  return ops::add(mm, b, name);
}
}  // namespace

Tensor add_bert_attention(Program& p, const Tensor& x, const Tensor& mask, const BertConfig& c, const std::string& pre) {
  const Dim B = c.batch, S = c.seq, H = c.hidden;
  if (c.hidden % c.heads) throw ShapeError("bert: hidden " + std::to_string(c.hidden) + " is not divisible by heads " + std::to_string(c.heads));
  const int64_t dh = c.hidden / c.heads;
  auto proj = [&](const std::string& n) { return weight(p, pre + n, c.hidden, c.hidden, c); };
  auto bias = [&](const std::string& n) { return p.input(pre + n, {H}); };
  const Tensor wq = proj("Wq"), bq = bias("bq"), wk = proj("Wk"), bk = bias("bk"), wv = proj("Wv"), bv = bias("bv");
  const Tensor q = dense(x, wq, bq, pre + "q");
  const Tensor k = dense(x, wk, bk, pre + "k");
  const Tensor v = dense(x, wv, bv, pre + "v");
  // scores(b, h, i, j) = sum_d q(b, i, h*dh + d) k(b, j, h*dh + d) / sqrt(dh) + mask(b, j)
  const Expr b = var("b"), h = var("h"), i = var("i"), j = var("j"), d = var("d");
  const int dhi = static_cast<int>(dh);
  const Tensor qk = p.define_reduce(pre + "qk", {"b", "h", "i", "j"}, {B, c.heads, S, S}, ReduceOp::Sum, {{"d", dh}},
                                    q(b, i, h * dhi + d) * k(b, j, h * dhi + d), OpKind::Contraction, "batched_matmul");
  const Tensor scores = p.define(pre + "scores", {"b", "h", "i", "j"}, {B, c.heads, S, S},
                                 qk(b, h, i, j) * (1.0 / std::sqrt(static_cast<double>(dh))) + mask(b, j),
                                 OpKind::Elementwise, "scale_mask");
  const Tensor probs = ops::softmax(scores, -1, pre + "probs");
  // ctx(b, i, h*dh + d) = sum_j probs(b, h, i, j) v(b, j, h*dh + d), written over the merged channel e.
  const Expr e = var("e");
  const Tensor ctx = p.define_reduce(pre + "ctx", {"b", "i", "e"}, {B, S, H}, ReduceOp::Sum, {{"j", S}},
                                     probs(b, e / dhi, i, j) * v(b, j, e), OpKind::Contraction, "batched_matmul");
  const Tensor wo = proj("Wo");
  return dense(ctx, wo, bias("bo"), pre + "attn");
}

Tensor add_bert_ffn(Program& p, const Tensor& x, const BertConfig& c, const std::string& pre) {
  const Tensor w1 = weight(p, pre + "W1", c.hidden, c.ffn, c), b1 = p.input(pre + "b1", {c.ffn});
  const Tensor w2 = weight(p, pre + "W2", c.ffn, c.hidden, c), b2 = p.input(pre + "b2", {c.hidden});
  const Tensor act = ops::gelu(dense(x, w1, b1, pre + "fc1"), false, pre + "act");
  return dense(act, w2, b2, pre + "fc2");
}

Tensor add_bert_layernorm(Program& p, const Tensor& x, const Tensor& r, const BertConfig& c, const std::string& pre) {
  const Tensor g = p.input(pre + "gamma", {c.hidden}), be = p.input(pre + "beta", {c.hidden});
  return ops::layer_norm(ops::add(x, r, pre + "residual"), g, be, c.eps, pre + "ln");
}

namespace {
Shape act_shape(const BertConfig& c) { return {c.batch, c.seq, c.hidden}; }
}  // namespace

Program bert_attention(const BertConfig& c) {
  Program p("bert_attention");
  const Tensor x = p.input("X", act_shape(c));
  const Tensor mask = p.input("mask", {c.batch, c.seq});
  p.output(add_bert_attention(p, x, mask, c, ""));
  return p;
}

Program bert_ffn(const BertConfig& c) {
  Program p("bert_ffn");
  p.output(add_bert_ffn(p, p.input("X", act_shape(c)), c, ""));
  return p;
}

Program bert_layernorm(const BertConfig& c) {
  Program p("bert_layernorm");
  const Tensor x = p.input("X", act_shape(c));
  const Tensor r = p.input("R", act_shape(c));
  p.output(add_bert_layernorm(p, x, r, c, ""));
  return p;
}

Program bert_layer(const BertConfig& c) {
  Program p("bert_layer");
  const Tensor x = p.input("X", act_shape(c));
  const Tensor mask = p.input("mask", {c.batch, c.seq});
  const Tensor attn = add_bert_attention(p, x, mask, c, "a_");
  const Tensor h = add_bert_layernorm(p, attn, x, c, "ln1_");
  const Tensor f = add_bert_ffn(p, h, c, "f_");
  p.output(add_bert_layernorm(p, f, h, c, "ln2_"));
  return p;
}

}  // namespace pto::models
