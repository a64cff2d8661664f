// ONNX neural-network operators: MatMul, Gemm, Einsum, Conv /
// ConvTranspose (auto_pad, asymmetric pads as an explicit pad), pooling
// (ceil_mode for max pooling as extra end padding), the normalizations,
// Softmax / LogSoftmax / Hardmax (before opset 13: over the dims from `axis`
// on, flattened).
#include <cmath>
#include <numeric>

#include "dsl/Error.h"
#include "dsl/ops/Ops.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

using nlohmann::json;

std::vector<Value> one(Tensor t) {
  return {Value::of(std::move(t))};
}

Tensor scalar(NodeContext& c, double v, DType t) {
  return literal(c.program(), v, t, c.out_name() + "_k");
}

std::vector<int> to_int(const std::vector<int64_t>& v) {
  return {v.begin(), v.end()};
}

// Begin and end padding per spatial dim from pads / auto_pad (ONNX's rule:
// SAME_* pads to ceil(in / stride) outputs, the odd one at the end for
// SAME_UPPER, at the beginning for SAME_LOWER).
struct Window {
  std::vector<int64_t> kernel, stride, dilation, begin, end;
};
Window window(NodeContext& c, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel) {
  const size_t s = in.size();
  Window w;
  w.kernel = kernel;
  w.stride = c.attr_ints("strides", std::vector<int64_t>(s, 1));
  w.dilation = c.attr_ints("dilations", std::vector<int64_t>(s, 1));
  if (w.stride.size() != s || w.dilation.size() != s || w.kernel.size() != s)
    c.fail("strides, dilations and kernel_shape need " + std::to_string(s) +
           " values (one per spatial dim)");
  for (size_t i = 0; i < s; ++i)
    if (w.stride[i] < 1 || w.dilation[i] < 1 || w.kernel[i] < 1)
      c.fail("strides, dilations and kernel sizes must be >= 1");
  const std::string ap = c.attr_string("auto_pad", "NOTSET");
  w.begin.assign(s, 0);
  w.end.assign(s, 0);
  if (ap == "NOTSET") {
    const auto pads = c.attr_ints("pads", std::vector<int64_t>(2 * s, 0));
    if (pads.size() != 2 * s)
      c.fail("pads needs " + std::to_string(2 * s) + " values, got " + std::to_string(pads.size()));
    for (size_t i = 0; i < s; ++i) {
      w.begin[i] = pads[i], w.end[i] = pads[i + s];
      if (w.begin[i] < 0 || w.end[i] < 0) c.fail("negative pads are not supported");
    }
  } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    for (size_t i = 0; i < s; ++i) {
      const int64_t out = (in[i] + w.stride[i] - 1) / w.stride[i];
      const int64_t total = std::max<int64_t>(
          0, (out - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1 - in[i]);
      w.begin[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.end[i] = total - w.begin[i];
    }
  } else if (ap != "VALID") {
    c.fail("auto_pad '" + ap + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  return w;
}

bool symmetric(const Window& w) {
  return w.begin == w.end;
}

// x padded explicitly (value v) where the window's padding is asymmetric.
Tensor pre_pad(const Tensor& x, Window& w, double v) {
  const size_t s = w.begin.size(), r = static_cast<size_t>(x.rank());
  std::vector<int64_t> pads(2 * r, 0);
  for (size_t i = 0; i < s; ++i) pads[r - s + i] = w.begin[i], pads[2 * r - s + i] = w.end[i];
  w.begin.assign(s, 0);
  w.end.assign(s, 0);
  return ops::call("pad", {x}, {{"pads", pads}, {"mode", "constant"}, {"value", v}});
}

std::vector<Value> conv(NodeContext& c) {
  c.check_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  Tensor x = c.input(0);
  const Tensor w = c.input(1);
  const int s = x.rank() - 2;
  if (s < 1 || s > 3)
    c.fail("input of rank " + std::to_string(x.rank()) + ": 1-3 spatial dims are supported");
  const auto xs = static_shape(x, c.where()), ws = static_shape(w, c.where());
  std::vector<int64_t> k(ws.begin() + 2, ws.end());
  if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != k)
    c.fail("kernel_shape does not match the weight's spatial dims");
  Window win = window(c, {xs.begin() + 2, xs.end()}, k);
  if (!symmetric(win)) x = pre_pad(x, win, 0.0);
  std::vector<Tensor> in{x, w};
  if (c.has_input(2)) in.push_back(c.input(2));
  return one(ops::call("conv" + std::to_string(s) + "d", in,
                       {{"stride", win.stride},
                        {"padding", win.begin},
                        {"dilation", win.dilation},
                        {"groups", c.attr_int("group", 1)}},
                       c.out_name()));
}

std::vector<Value> conv_transpose(NodeContext& c) {
  c.check_attrs(
      {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "pads", "strides"});
  const Tensor x = c.input(0), w = c.input(1);
  if (x.rank() != 4)
    c.fail("only 2-D transposed convolutions are supported (input rank 4), got rank " +
           std::to_string(x.rank()));
  if (c.has_attr("output_shape"))
    c.fail("output_shape is not supported; give pads and output_padding");
  const auto ws = static_shape(w, c.where());
  const auto st = c.attr_ints("strides", {{1, 1}}), di = c.attr_ints("dilations", {{1, 1}});
  const auto op = c.attr_ints("output_padding", {{0, 0}});
  const auto pads = c.attr_ints("pads", {{0, 0, 0, 0}});
  if (c.attr_string("auto_pad", "NOTSET") != "NOTSET")
    c.fail("auto_pad is not supported for ConvTranspose; give pads");
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3])
    c.fail("asymmetric pads are not supported for ConvTranspose");
  std::vector<Tensor> in{x, w};
  if (c.has_input(2)) in.push_back(c.input(2));
  return one(ops::call("conv_transpose2d", in,
                       {{"stride", st},
                        {"padding", {pads[0], pads[1]}},
                        {"output_padding", op},
                        {"dilation", di},
                        {"groups", c.attr_int("group", 1)}},
                       c.out_name()));
}

std::vector<Value> pool(NodeContext& c, bool max) {
  c.check_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides",
                 "storage_order", "count_include_pad"});
  if (c.has_output(1)) c.fail("the Indices output is not supported");
  Tensor x = c.input(0);
  const int s = x.rank() - 2;
  if (s < 1 || s > 3)
    c.fail("input of rank " + std::to_string(x.rank()) + ": 1-3 spatial dims are supported");
  const auto xs = static_shape(x, c.where());
  const std::vector<int64_t> in(xs.begin() + 2, xs.end());
  Window w = window(c, in, c.attr_ints("kernel_shape"));
  for (const int64_t d : w.dilation)
    if (d != 1) c.fail("dilations other than 1 are not supported for pooling");
  const bool include_pad = c.attr_int("count_include_pad", 0) != 0;
  if (c.attr_int("ceil_mode", 0)) {
    if (!max) c.fail("ceil_mode is supported for MaxPool only");
    // Extra end padding (never selected by max) makes floor give ceil's count;
    // a last window starting in the end padding is dropped (ONNX's rule).
    for (size_t i = 0; i < in.size(); ++i) {
      const int64_t span = in[i] + w.begin[i] + w.end[i] - w.kernel[i];
      int64_t out = (span + w.stride[i] - 1) / w.stride[i] + 1;
      if ((out - 1) * w.stride[i] >= in[i] + w.begin[i]) --out;
      w.end[i] += std::max<int64_t>(
          0, (out - 1) * w.stride[i] + w.kernel[i] - (in[i] + w.begin[i] + w.end[i]));
    }
  }
  // The library's pooling takes symmetric padding of at most half the
  // kernel; other padding is applied first (where that keeps the average's count).
  bool wide = false;
  for (size_t i = 0; i < in.size(); ++i) wide |= 2 * w.begin[i] > w.kernel[i];
  if (!symmetric(w) || wide) {
    if (!max && !include_pad)
      c.fail(
          "asymmetric pads or pads over half the kernel are supported for AveragePool only with "
          "count_include_pad=1");
    x = pre_pad(x, w, max ? -INFINITY : 0.0);
  }
  json a = {{"kernel", w.kernel}, {"stride", w.stride}, {"padding", w.begin}};
  if (!max) a["count_include_pad"] = include_pad;
  return one(
      ops::call((max ? "max_pool" : "avg_pool") + std::to_string(s) + "d", {x}, a, c.out_name()));
}

// x reshaped to 2-D at `axis` ([prod before, prod from]), f applied along the
// last dim, reshaped back: the opset < 13 semantics of Softmax and friends.
Tensor coerced(NodeContext& c, const Tensor& x, int axis,
               const std::function<Tensor(const Tensor&, const std::string&)>& f) {
  const auto xs = static_shape(x, c.where());
  if (axis == x.rank() - 1) return f(x, c.out_name());
  const int64_t outer =
      std::accumulate(xs.begin(), xs.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner =
      std::accumulate(xs.begin() + axis, xs.end(), int64_t{1}, std::multiplies<>());
  const Tensor y = f(ops::reshape(x, {outer, inner}), "");
  return ops::call("reshape", {y}, {{"shape", xs}}, c.out_name());
}

Converter softmax(const std::string& op) {
  return [op](NodeContext& c) {
    c.check_attrs({"axis"});
    const Tensor x = c.input(0);
    const int axis = normalize_axis(c.attr_int("axis", c.opset() >= 13 ? -1 : 1), x.rank(), c);
    const auto apply = [&](const Tensor& t, int ax, const std::string& name) -> Tensor {
      if (op != "hardmax") return ops::call(op, {t}, {{"axis", ax}}, name);
      const int64_t n = static_shape(t, c.where())[static_cast<size_t>(ax)];
      const Tensor i = ops::call("argmax", {t}, {{"axis", ax}, {"keepdims", false}});
      return ops::call("one_hot", {i},
                       {{"depth", n}, {"axis", ax}, {"dtype", std::string(to_string(t.dtype()))}},
                       name);
    };
    if (c.opset() >= 13) return one(apply(x, axis, c.out_name()));
    return one(coerced(c, x, axis, [&](const Tensor& t, const std::string& n) {
      return apply(t, t.rank() - 1, n);
    }));
  };
}

// NegativeLogLikelihoodLoss of log-probabilities `lp` [N, C, d...] at
// `target` [N, d...] (an ignore_index entry counts nothing), weighted by
// class; reduction none / sum / mean (mean: over the weights taken).
Tensor nll_loss(NodeContext& c, const Tensor& lp, const Tensor& target,
                std::optional<Tensor> weight, const std::string& name) {
  const std::string red = c.attr_string("reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    c.fail("reduction '" + red + "' is not one of none, sum, mean");
  if (lp.rank() < 2 || target.rank() != lp.rank() - 1)
    c.fail("input must be [N, C, d...] and target [N, d...]");
  const DType dt = lp.dtype();
  const Tensor picked =
      ops::call("squeeze",
                {ops::call("gather_elements",
                           {lp, ops::call("unsqueeze", {target}, {{"axes", {1}}})}, {{"axis", 1}})},
                {{"axes", {1}}});
  Tensor w = weight ? ops::call("gather", {*weight, target}, {{"axis", 0}}) : Tensor();
  if (c.has_attr("ignore_index")) {
    const Tensor keep = ops::call(
        "cast",
        {ops::call("not_equal",
                   {target, literal(c.program(), static_cast<double>(c.attr_int("ignore_index")),
                                    target.dtype(), c.out_name() + "_ignore")})},
        {{"dtype", std::string(to_string(dt))}});
    w = w.defined() ? ops::call("mul", {w, keep}) : keep;
  }
  Tensor loss = ops::call("neg", {picked});
  if (w.defined()) loss = ops::call("mul", {loss, w});
  if (red == "none") return ops::call("identity", {loss}, json::object(), name);
  std::vector<int> all(static_cast<size_t>(loss.rank()));
  std::iota(all.begin(), all.end(), 0);
  const json a = {{"axes", all}, {"keepdims", false}};
  if (red == "sum") return ops::call("reduce_sum", {loss}, a, name);
  if (!w.defined()) return ops::call("reduce_mean", {loss}, a, name);
  return ops::call("div", {ops::call("reduce_sum", {loss}, a), ops::call("reduce_sum", {w}, a)},
                   json::object(), name);
}

}  // namespace

void add_nn_converters(std::map<std::string, Converter>& t) {
  t["NegativeLogLikelihoodLoss"] = [](NodeContext& c) {
    c.check_attrs({"reduction", "ignore_index"});
    std::optional<Tensor> w;
    if (c.has_input(2)) w = c.input(2);
    return one(nll_loss(c, c.input(0), c.input(1), w, c.out_name()));
  };
  // The loss of log_softmax over the classes (dim 1), and that log_softmax.
  t["SoftmaxCrossEntropyLoss"] = [](NodeContext& c) {
    c.check_attrs({"reduction", "ignore_index"});
    const Tensor lp =
        ops::call("log_softmax", {c.input(0)}, {{"axis", 1}}, c.has_output(1) ? c.out_name(1) : "");
    std::optional<Tensor> w;
    if (c.has_input(2)) w = c.input(2);
    std::vector<Value> out = one(nll_loss(c, lp, c.input(1), w, c.out_name()));
    if (c.has_output(1)) out.push_back(Value::of(lp));
    return out;
  };
  // (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (ONNX's function).
  t["MeanVarianceNormalization"] = [](NodeContext& c) {
    c.check_attrs({"axes"});
    const Tensor x = c.input(0);
    std::vector<int> axes;
    for (const int64_t a : c.attr_ints("axes", std::vector<int64_t>{0, 2, 3}))
      axes.push_back(normalize_axis(a, x.rank(), c));
    const json a = {{"axes", axes}, {"keepdims", true}};
    const Tensor mean = ops::call("reduce_mean", {x}, a);
    const Tensor ex2 = ops::call("reduce_mean", {ops::call("mul", {x, x})}, a);
    const Tensor std = ops::call("sqrt", {ops::call("sub", {ex2, ops::call("mul", {mean, mean})})});
    return one(ops::call(
        "div", {ops::call("sub", {x, mean}), ops::call("add", {std, scalar(c, 1e-9, x.dtype())})},
        json::object(), c.out_name()));
  };
  t["MatMul"] = [](NodeContext& c) {
    c.check_attrs({});
    return one(ops::call("matmul", {c.input(0), c.input(1)}, json::object(), c.out_name()));
  };
  t["Gemm"] = [](NodeContext& c) {
    c.check_attrs({"alpha", "beta", "transA", "transB"});
    Tensor a = c.input(0), b = c.input(1);
    if (a.rank() != 2 || b.rank() != 2) c.fail("A and B must be 2-D");
    if (c.attr_int("transA", 0)) a = ops::transpose(a, {1, 0});
    if (c.attr_int("transB", 0)) b = ops::transpose(b, {1, 0});
    const double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
    const bool bias = c.has_input(2) && beta != 0;
    Tensor y = ops::call("matmul", {a, b}, json::object(), alpha == 1 && !bias ? c.out_name() : "");
    if (alpha != 1)
      y = ops::call("mul", {y, scalar(c, alpha, y.dtype())}, json::object(),
                    bias ? "" : c.out_name());
    if (!bias) return one(y);
    Tensor bc = c.input(2);
    if (beta != 1) bc = ops::call("mul", {bc, scalar(c, beta, bc.dtype())});
    return one(ops::call("add", {y, bc}, json::object(), c.out_name()));
  };
  t["Einsum"] = [](NodeContext& c) {
    c.check_attrs({"equation"});
    std::string eq;
    for (const char ch : c.attr_string("equation"))
      if (ch != ' ') eq += ch;
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.num_inputs(); ++i) in.push_back(c.input(i));
    return one(ops::call("einsum", in, {{"equation", eq}}, c.out_name()));
  };
  t["Conv"] = conv;
  t["ConvTranspose"] = conv_transpose;
  t["MaxPool"] = [](NodeContext& c) { return pool(c, true); };
  t["AveragePool"] = [](NodeContext& c) { return pool(c, false); };
  t["GlobalAveragePool"] = [](NodeContext& c) {
    c.check_attrs({});
    return one(ops::call("global_avg_pool", {c.input(0)}, json::object(), c.out_name()));
  };
  t["GlobalMaxPool"] = [](NodeContext& c) {
    c.check_attrs({});
    return one(ops::call("global_max_pool", {c.input(0)}, json::object(), c.out_name()));
  };
  t["BatchNormalization"] = [](NodeContext& c) {
    c.check_attrs({"epsilon", "momentum", "training_mode", "spatial"});
    if (c.attr_int("training_mode", 0))
      c.fail("training_mode = 1 is not supported (inference only)");
    if (c.has_output(1))
      c.fail("the running mean / var outputs are training outputs, not supported");
    return one(ops::call("batch_norm", {c.input(0), c.input(1), c.input(2), c.input(3), c.input(4)},
                         {{"eps", c.attr_float("epsilon", 1e-5)}}, c.out_name()));
  };
  t["InstanceNormalization"] = [](NodeContext& c) {
    c.check_attrs({"epsilon"});
    return one(ops::call("instance_norm", {c.input(0), c.input(1), c.input(2)},
                         {{"eps", c.attr_float("epsilon", 1e-5)}}, c.out_name()));
  };
  t["LayerNormalization"] = [](NodeContext& c) {
    c.check_attrs({"axis", "epsilon", "stash_type"});
    const Tensor x = c.input(0);
    const int axis = normalize_axis(c.attr_int("axis", -1), x.rank(), c);
    const double eps = c.attr_float("epsilon", 1e-5);
    std::vector<Tensor> in{x, c.input(1)};
    if (c.has_input(2)) in.push_back(c.input(2));
    std::vector<Value> extra;  // Mean and InvStdDev over the normalized dims, kept as 1s
    if (c.has_output(1) || c.has_output(2)) {
      std::vector<int> axes;
      for (int a = axis; a < x.rank(); ++a) axes.push_back(a);
      const json a = {{"axes", axes}, {"keepdims", true}};
      extra.push_back(
          Value::of(ops::call("reduce_mean", {x}, a, c.has_output(1) ? c.out_name(1) : "")));
      const Tensor var = ops::call("reduce_var", {x}, a);
      const Tensor rstd = ops::call("rsqrt", {ops::call("add", {var, scalar(c, eps, var.dtype())})},
                                    json::object(), c.has_output(2) ? c.out_name(2) : "");
      extra.push_back(Value::of(rstd));
    }
    const auto with_extra = [&](std::vector<Value> y) {
      y.insert(y.end(), extra.begin(), extra.end());
      return y;
    };
    if (axis == x.rank() - 1)
      return with_extra(one(ops::call("layer_norm", in, {{"eps", eps}}, c.out_name())));
    // Over the dims from `axis` on: flattened into one, gamma / beta too.
    const auto xs = static_shape(x, c.where());
    const int64_t inner =
        std::accumulate(xs.begin() + axis, xs.end(), int64_t{1}, std::multiplies<>());
    std::vector<int64_t> flat(xs.begin(), xs.begin() + axis);
    flat.push_back(inner);
    std::vector<Tensor> fin{ops::reshape(x, flat)};
    for (size_t i = 1; i < in.size(); ++i)
      fin.push_back(ops::call("broadcast_to", {in[i]},
                              {{"shape", std::vector<int64_t>(xs.begin() + axis, xs.end())}}));
    for (size_t i = 1; i < fin.size(); ++i) fin[i] = ops::reshape(fin[i], {inner});
    return with_extra(one(ops::call("reshape", {ops::call("layer_norm", fin, {{"eps", eps}})},
                                    {{"shape", xs}}, c.out_name())));
  };
  t["RMSNormalization"] = [](NodeContext& c) {
    c.check_attrs({"axis", "epsilon", "stash_type"});
    const Tensor x = c.input(0);
    const int axis = normalize_axis(c.attr_int("axis", -1), x.rank(), c);
    const double eps = c.attr_float("epsilon", 1e-5);
    const auto xs = static_shape(x, c.where());
    const std::vector<int64_t> tail(xs.begin() + axis, xs.end());
    const int64_t inner =
        std::accumulate(tail.begin(), tail.end(), int64_t{1}, std::multiplies<>());
    std::vector<int64_t> flat(xs.begin(), xs.begin() + axis);
    flat.push_back(inner);
    const Tensor g =
        ops::reshape(ops::call("broadcast_to", {c.input(1)}, {{"shape", tail}}), {inner});
    const Tensor y = ops::call("rms_norm", {ops::reshape(x, flat), g}, {{"eps", eps}});
    return one(ops::call("reshape", {y}, {{"shape", xs}}, c.out_name()));
  };
  t["LpNormalization"] = [](NodeContext& c) {
    c.check_attrs({"axis", "p"});
    const Tensor x = c.input(0);
    const int axis = normalize_axis(c.attr_int("axis", -1), x.rank(), c);
    const int64_t p = c.attr_int("p", 2);
    if (p != 1 && p != 2) c.fail("p " + std::to_string(p) + " is not 1 or 2");
    const Tensor norm =
        ops::call(p == 1 ? "reduce_l1" : "reduce_l2", {x}, {{"axes", {axis}}, {"keepdims", true}});
    // A zero norm gives 0 (ONNX's reference), not 0 / 0.
    const Tensor zero = scalar(c, 0, x.dtype());
    return one(ops::call("where",
                         {ops::call("equal", {norm, zero}), zero, ops::call("div", {x, norm})},
                         json::object(), c.out_name()));
  };
  t["LpPool"] = [](NodeContext& c) {
    c.check_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides", "p"});
    Tensor x = c.input(0);
    const int s = x.rank() - 2;
    if (s < 1 || s > 3) c.fail("1-3 spatial dims are supported");
    if (c.attr_int("ceil_mode", 0)) c.fail("ceil_mode is not supported for LpPool");
    const auto xs = static_shape(x, c.where());
    Window w = window(c, {xs.begin() + 2, xs.end()}, c.attr_ints("kernel_shape"));
    for (const int64_t d : w.dilation)
      if (d != 1) c.fail("dilations other than 1 are not supported for pooling");
    const double p = static_cast<double>(c.attr_int("p", 2));
    const DType dt = x.dtype();
    // (sum over the window of |x|^p)^(1/p): the padded average times the window size.
    x = ops::call("pow", {ops::call("abs", {x}), scalar(c, p, dt)});
    bool wide = false;
    for (size_t i = 0; i < w.kernel.size(); ++i) wide |= 2 * w.begin[i] > w.kernel[i];
    if (!symmetric(w) || wide) x = pre_pad(x, w, 0.0);
    int64_t size = 1;
    for (const int64_t k : w.kernel) size *= k;
    const Tensor avg = ops::call("avg_pool" + std::to_string(s) + "d", {x},
                                 {{"kernel", w.kernel},
                                  {"stride", w.stride},
                                  {"padding", w.begin},
                                  {"count_include_pad", true}});
    const Tensor sum = ops::call("mul", {avg, scalar(c, static_cast<double>(size), dt)});
    return one(ops::call("pow", {sum, scalar(c, 1.0 / p, dt)}, json::object(), c.out_name()));
  };
  t["GroupNormalization"] = [](NodeContext& c) {
    c.check_attrs({"epsilon", "num_groups", "stash_type"});
    const Tensor x = c.input(0);
    const int64_t g = c.attr_int("num_groups");
    const int64_t ch = static_shape(x, c.where())[1];
    Tensor scale = c.input(1), bias = c.input(2);
    // Opset 18 gave scale / bias per group, 21 per channel: per group, repeat.
    if (static_shape(scale, c.where())[0] == g && g != ch) {
      scale = ops::call("repeat", {scale}, {{"repeats", ch / g}, {"axis", 0}});
      bias = ops::call("repeat", {bias}, {{"repeats", ch / g}, {"axis", 0}});
    }
    return one(ops::call("group_norm", {x, scale, bias},
                         {{"groups", g}, {"eps", c.attr_float("epsilon", 1e-5)}}, c.out_name()));
  };
  // x / (bias + alpha / size * (sum of x^2 over `size` channels around))^beta:
  // the channel window sum as an average pool over [N, 1, C, rest] times size.
  t["LRN"] = [](NodeContext& c) {
    c.check_attrs({"alpha", "beta", "bias", "size"});
    const Tensor x = c.input(0);
    const auto xs = static_shape(x, c.where());
    if (xs.size() < 3) c.fail("input must have a channel dim and at least one spatial dim");
    const int64_t size = c.attr_int("size");
    if (size < 1) c.fail("size must be >= 1");
    const double alpha = c.attr_float("alpha", 1e-4), beta = c.attr_float("beta", 0.75),
                 bias = c.attr_float("bias", 1.0);
    const DType dt = x.dtype();
    const int64_t rest = std::accumulate(xs.begin() + 2, xs.end(), int64_t{1}, std::multiplies<>());
    const Tensor sq = ops::reshape(ops::call("mul", {x, x}), {xs[0], 1, xs[1], rest});
    const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
    const Tensor padded = ops::call("pad", {sq}, {{"pads", {0, 0, lo, 0, 0, 0, hi, 0}}});
    const Tensor avg =
        ops::call("avg_pool2d", {padded},
                  {{"kernel", {size, 1}}, {"stride", {1, 1}}, {"count_include_pad", true}});
    const Tensor sum = ops::call("reshape", {avg}, {{"shape", xs}});
    const Tensor base =
        ops::call("add", {scalar(c, bias, dt), ops::call("mul", {sum, scalar(c, alpha, dt)})});
    return one(ops::call("div", {x, ops::call("pow", {base, scalar(c, beta, dt)})}, json::object(),
                         c.out_name()));
  };
  t["Softmax"] = softmax("softmax");
  t["LogSoftmax"] = softmax("log_softmax");
  t["Hardmax"] = softmax("hardmax");
}

}  // namespace pto::onnx
