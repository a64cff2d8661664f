// ONNX Attention (opsets 23-25): 3-D inputs split into heads by
// q_num_heads / kv_num_heads, a KV cache (past_key / past_value concatenated
// in front, returned as present_*), grouped-query heads repeated, an additive
// or boolean mask (padded with -inf to the key length), is_causal and the
// sliding window aligned bottom-right (a query at row i of a cache of length
// P sees keys j <= i + P), softcap, and ONNX's fully-masked-row rule (a row
// whose mask is -inf everywhere gives 0, not NaN). Built from library
// operators; the masks that depend only on positions are one stage of index
// arithmetic. Also the transformer pieces next to it: RotaryEmbedding and
// SwiGLU (library rows of their own).
#include <cmath>

#include "dsl/ops/Ops.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

using nlohmann::json;

// [B, S, heads * H] -> [B, heads, S, H].
Tensor split_heads(NodeContext& c, const Tensor& x, int64_t heads, const std::string& what) {
  const auto s = static_shape(x, c.where());
  if (heads < 1 || s[2] % heads)
    c.fail(what + " hidden size " + std::to_string(s[2]) + " is not a multiple of its head count " +
           std::to_string(heads));
  return ops::transpose(ops::reshape(x, {s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

std::vector<Value> attention(NodeContext& c) {
  c.check_attrs({"is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale",
                 "softcap", "softmax_precision", "left_window_size", "right_window_size"});
  if (c.has_input(6)) c.fail("nonpad_kv_seqlen (an external KV cache) is not supported");
  Tensor q = c.input(0), k = c.input(1), v = c.input(2);
  const int rank = q.rank();
  if (rank != 3 && rank != 4) c.fail("Q must be 3-D or 4-D, got rank " + std::to_string(rank));
  if (k.rank() != rank || v.rank() != rank) c.fail("Q, K and V must have the same rank");
  const DType dt = q.dtype();
  if (rank == 3) {
    if (!c.has_attr("q_num_heads") || !c.has_attr("kv_num_heads"))
      c.fail("3-D inputs need q_num_heads and kv_num_heads");
    q = split_heads(c, q, c.attr_int("q_num_heads"), "Q");
    k = split_heads(c, k, c.attr_int("kv_num_heads"), "K");
    v = split_heads(c, v, c.attr_int("kv_num_heads"), "V");
  }
  if (c.has_input(4) != c.has_input(5)) c.fail("past_key and past_value come together");
  int64_t past = 0;
  if (c.has_input(4)) {
    past = static_shape(c.input(4), c.where())[2];
    k = ops::call("concat", {c.input(4), k}, {{"axis", 2}});
    v = ops::call("concat", {c.input(5), v}, {{"axis", 2}});
  }
  const auto qs = static_shape(q, c.where()), ks = static_shape(k, c.where());
  const int64_t qh = qs[1], kh = ks[1], qlen = qs[2], kvlen = ks[2];
  const Tensor present_k = k, present_v = v;
  Program& p = c.program();
  // The additive bias [.., q, kv]: the mask, then the causal / window terms.
  Tensor bias;
  if (c.has_input(3)) {
    Tensor m = c.input(3);
    if (m.dtype() == DType::Bool)
      m = ops::call("where", {m, scalar(c, 0, dt), scalar(c, -INFINITY, dt)});
    const auto ms = static_shape(m, c.where());
    if (ms.empty()) c.fail("attn_mask must have rank >= 1");
    if (ms.back() < kvlen) {
      std::vector<int64_t> pads(2 * ms.size(), 0);
      pads.back() = kvlen - ms.back();
      m = ops::call("pad", {m}, {{"pads", pads}, {"value", -INFINITY}});
    }
    bias = m;
  }
  const bool causal = c.attr_int("is_causal", 0) != 0;
  const int64_t left = c.attr_int("left_window_size", -1),
                right = c.attr_int("right_window_size", -1);
  if (causal || left >= 0 || right >= 0) {
    const Expr i = var("i"), j = var("j");
    const Expr d = i + static_cast<int>(past) - j;  // query position minus key position
    Expr allowed = make_const(1, DType::Bool);
    if (causal) allowed = allowed && d >= 0;
    if (left >= 0) allowed = allowed && d <= static_cast<int>(left);
    if (right >= 0) allowed = allowed && -d <= static_cast<int>(right);
    const Tensor pos =
        p.define(p.unique_name(c.out_name() + "_positions"), {"i", "j"}, {Dim(qlen), Dim(kvlen)},
                 select(allowed, make_const(0, dt), make_const(-INFINITY, dt)), OpKind::Elementwise,
                 "attention_mask");
    bias = bias.defined() ? ops::call("add", {bias, pos}) : pos;
  }
  if (qh != kh) {
    if (kh < 1 || qh % kh)
      c.fail("q heads " + std::to_string(qh) + " are not a multiple of kv heads " +
             std::to_string(kh));
    k = ops::call("repeat", {k}, {{"repeats", qh / kh}, {"axis", 1}});
    v = ops::call("repeat", {v}, {{"repeats", qh / kh}, {"axis", 1}});
  }
  const double scale =
      c.has_attr("scale") ? c.attr_float("scale") : 1.0 / std::sqrt(static_cast<double>(qs[3]));
  // Q and K^T each scaled by sqrt(scale), as ONNX's definition does.
  const Tensor root = scalar(c, std::sqrt(scale), dt);
  Tensor scores = ops::call("matmul", {ops::call("mul", {q, root}),
                                       ops::call("mul", {ops::transpose(k, {0, 1, 3, 2}), root})});
  const double softcap = c.has_attr("softcap") ? c.attr_float("softcap") : 0.0;
  if (softcap > 0)
    scores =
        ops::call("mul", {ops::call("tanh", {ops::call("div", {scores, scalar(c, softcap, dt)})}),
                          scalar(c, softcap, dt)});
  const Tensor with_bias = bias.defined() ? ops::call("add", {scores, bias}) : scores;
  Tensor probs;
  if (!bias.defined()) {
    probs = ops::call("softmax", {with_bias}, {{"axis", -1}});
  } else {
    // A row masked everywhere: max -inf; shifted by 0 instead, its sum is 0
    // and taken as 1, and the row is set to 0 (ONNX's rule).
    const json last = {{"axes", {-1}}, {"keepdims", true}};
    const Tensor ninf = scalar(c, -INFINITY, dt), zero = scalar(c, 0, dt);
    const Tensor mx = ops::call("reduce_max", {with_bias}, last);
    const Tensor shift = ops::call("where", {ops::call("equal", {mx, ninf}), zero, mx});
    const Tensor e = ops::call("exp", {ops::call("sub", {with_bias, shift})});
    const Tensor sum = ops::call("reduce_sum", {e}, last);
    const Tensor den = ops::call("where", {ops::call("equal", {sum, zero}), scalar(c, 1, dt), sum});
    const Tensor masked = ops::call("equal", {ops::call("reduce_max", {bias}, last), ninf});
    probs = ops::call("where", {masked, zero, ops::call("div", {e, den})});
  }
  Tensor y = ops::call("matmul", {probs, v}, json::object(), rank == 4 ? c.out_name(0) : "");
  if (rank == 3) {
    const auto ys = static_shape(y, c.where());
    y = ops::call("reshape", {ops::transpose(y, {0, 2, 1, 3})},
                  {{"shape", {ys[0], ys[2], ys[1] * ys[3]}}}, c.out_name(0));
  }
  std::vector<Value> out{Value::of(y)};
  if (c.has_output(1))
    out.push_back(Value::of(ops::call("identity", {present_k}, json::object(), c.out_name(1))));
  if (c.has_output(2)) {
    while (out.size() < 2) out.push_back(Value::of(present_k));
    out.push_back(Value::of(ops::call("identity", {present_v}, json::object(), c.out_name(2))));
  }
  if (c.has_output(3)) {
    while (out.size() < 3) out.push_back(Value::of(present_v));
    const int64_t mode = c.attr_int("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3)
      c.fail("qk_matmul_output_mode " + std::to_string(mode) + " is not 0-3");
    const Tensor qk = mode <= 1 ? scores : mode == 2 ? with_bias : probs;
    out.push_back(Value::of(ops::call("identity", {qk}, json::object(), c.out_name(3))));
  }
  return out;
}

}  // namespace

void add_attention_converters(std::map<std::string, Converter>& t) {
  t["Attention"] = attention;
  t["RotaryEmbedding"] = [](NodeContext& c) {
    c.check_attrs({"interleaved", "num_heads", "rotary_embedding_dim"});
    std::vector<Tensor> in{c.input(0), c.input(1), c.input(2)};
    if (c.has_input(3)) in.push_back(c.input(3));
    return one(ops::call("rotary_embedding", in,
                         {{"interleaved", c.attr_int("interleaved", 0) != 0},
                          {"rotary_dim", c.attr_int("rotary_embedding_dim", 0)},
                          {"num_heads", c.attr_int("num_heads", 0)}},
                         c.out_name()));
  };
  t["SwiGLU"] = [](NodeContext& c) {
    c.check_attrs({"alpha"});
    return one(ops::call("swiglu", {c.input(0), c.input(1)},
                         {{"alpha", c.attr_float("alpha", 1.0)}}, c.out_name()));
  };
}

}  // namespace pto::onnx
