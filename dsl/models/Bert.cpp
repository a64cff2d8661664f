#include "dsl/models/Bert.h"

#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::models {

Tensor add_bert_attention(Program& p, const Tensor& x, const Tensor& mask, const BertConfig& c, const std::string& pre) {
  const Dim B = c.batch, S = c.seq, H = c.hidden;
  if (c.hidden % c.heads) throw ShapeError("bert: hidden " + std::to_string(c.hidden) + " is not divisible by heads " + std::to_string(c.heads));
  const int64_t dh = c.hidden / c.heads;
  auto weight = [&](const std::string& n) { return p.input(pre + n, {H, H}); };
  auto bias = [&](const std::string& n) { return p.input(pre + n, {H}); };
  const Tensor wq = weight("Wq"), bq = bias("bq"), wk = weight("Wk"), bk = bias("bk"), wv = weight("Wv"),
               bv = bias("bv");
  const Tensor q = ops::linear(x, wq, bq, pre + "q");
  const Tensor k = ops::linear(x, wk, bk, pre + "k");
  const Tensor v = ops::linear(x, wv, bv, pre + "v");
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
  return ops::linear(ctx, weight("Wo"), bias("bo"), pre + "attn");
}

Tensor add_bert_ffn(Program& p, const Tensor& x, const BertConfig& c, const std::string& pre) {
  const Tensor w1 = p.input(pre + "W1", {c.ffn, c.hidden}), b1 = p.input(pre + "b1", {c.ffn});
  const Tensor w2 = p.input(pre + "W2", {c.hidden, c.ffn}), b2 = p.input(pre + "b2", {c.hidden});
  const Tensor act = ops::gelu(ops::linear(x, w1, b1, pre + "fc1"), false, pre + "act");
  return ops::linear(act, w2, b2, pre + "fc2");
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
