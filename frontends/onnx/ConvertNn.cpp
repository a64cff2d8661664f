// ONNX neural-network operators: MatMul, Gemm, Einsum, Conv /
// ConvTranspose (auto_pad, asymmetric pads as an explicit pad), pooling
// (asymmetric pads, dilations and ceil_mode passed to the library), the normalizations,
// Softmax / LogSoftmax / Hardmax (before opset 13: over the dims from `axis`
// on, flattened).
#include <cmath>
#include <numeric>

#include "dsl/Error.h"
#include "dsl/ops/Ops.h"
#include "frontends/onnx/ChannelsLast.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

using nlohmann::json;

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

// The library pooling's window attributes.
json pool_attrs(const Window& w) {
  return {{"kernel", w.kernel},
          {"stride", w.stride},
          {"padding", w.begin},
          {"padding_end", w.end},
          {"dilation", w.dilation}};
}

// x padded explicitly (value v) where the window's padding is asymmetric;
// its spatial dims start at axis `first` (2: NCHW, 1: channels-last).
Tensor pre_pad(const Tensor& x, Window& w, double v, size_t first = 2) {
  const size_t s = w.begin.size(), r = static_cast<size_t>(x.rank());
  std::vector<int64_t> pads(2 * r, 0);
  for (size_t i = 0; i < s; ++i) pads[first + i] = w.begin[i], pads[r + first + i] = w.end[i];
  w.begin.assign(s, 0);
  w.end.assign(s, 0);
  return ops::call("pad", {x}, {{"pads", pads}, {"mode", "constant"}, {"value", v}});
}

// A dense 2-D float convolution whose output channels are whole vectors is
// computed channels-last (ChannelsLast.h) where its input is held so, or where
// the library would compute it so anyway (ops::conv2d_auto_channels_last: it
// then transposes the input once, and the output stays channels-last for
// what follows).
std::vector<Value> conv(NodeContext& c) {
  c.check_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  const Tensor w = c.input(1);
  const auto xs = c.input_shape(0);
  const int s = static_cast<int>(xs.size()) - 2;
  if (s < 1 || s > 3)
    c.fail("input of rank " + std::to_string(xs.size()) + ": 1-3 spatial dims are supported");
  if (w.rank() != static_cast<int>(xs.size()))
    c.fail("the weight has rank " + std::to_string(w.rank()) + "; the input's rank " +
           std::to_string(xs.size()) + " needs [out channels, in channels / group, kernel...]");
  const auto ws = static_shape(w, c.where());
  std::vector<int64_t> k(ws.begin() + 2, ws.end());
  if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != k)
    c.fail("kernel_shape does not match the weight's spatial dims");
  Window win = window(c, {xs.begin() + 2, xs.end()}, k);
  const int64_t groups = c.attr_int("group", 1);
  const Tensor b = c.has_input(2) ? c.input(2) : Tensor();
  if (s == 2 && groups == 1 && ws[0] % 16 == 0 && w.dtype() == DType::F32 && ws[1] == xs[1]) {
    Tensor xl = c.input_channels_last(0);
    if (!xl.defined()) {
      ops::ConvParams cp;
      cp.stride = to_int(win.stride), cp.dilation = to_int(win.dilation),
      cp.padding = to_int(win.begin);
      const Tensor x = c.input(0);
      if (!symmetric(win) || !ops::conv2d_auto_channels_last(x, w, cp))
        xl = Tensor();
      else
        xl = channels_last::from_nchw(x, c.program().unique_name(c.out_name() + "_nhwc_in"));
    }
    if (xl.defined()) {
      if (!symmetric(win)) xl = pre_pad(xl, win, 0.0, 1);
      const auto st = to_int(win.stride), pd = to_int(win.begin), di = to_int(win.dilation);
      return {Value::of_channels_last(ops::conv2d_channels_last(
          xl, w, b, {st[0], st[1]}, {pd[0], pd[1]}, {di[0], di[1]}, c.out_name()))};
    }
  }
  Tensor x = c.input(0);
  if (!symmetric(win)) x = pre_pad(x, win, 0.0);
  std::vector<Tensor> in{x, w};
  if (b.defined()) in.push_back(b);
  return one(ops::call("conv" + std::to_string(s) + "d", in,
                       {{"stride", win.stride},
                        {"padding", win.begin},
                        {"dilation", win.dilation},
                        {"groups", groups}},
                       c.out_name()));
}

// Global pooling; over H and W of a channels-last value, which it keeps.
std::vector<Value> global_pool(NodeContext& c, const std::string& op, const std::string& reduce) {
  c.check_attrs({});
  if (const Tensor xl = c.input_channels_last(0); xl.defined())
    return {Value::of_channels_last(
        ops::call(reduce, {xl}, {{"axes", {1, 2}}, {"keepdims", true}}, c.out_name()))};
  return one(ops::call(op, {c.input(0)}, json::object(), c.out_name()));
}

// Inference batch norm. With its parameters known at import (the usual
// case), it is x * scale + shift per channel, scale = gamma / sqrt(var +
// eps) and shift = beta - mean * scale folded in float64 at import: an
// epilogue of the convolution before it (two operations in its register
// tile, as ONNX Runtime folds it into the convolution's weights), where the
// library's batch_norm would evaluate the square root per element. On a
// channels-last value, per channel is along its last axis.
std::vector<Value> batch_norm(NodeContext& c) {
  c.check_attrs({"epsilon", "momentum", "training_mode", "spatial"});
  if (c.attr_int("training_mode", 0)) c.fail("training_mode = 1 is not supported (inference only)");
  if (c.has_output(1)) c.fail("the running mean / var outputs are training outputs, not supported");
  const double eps = c.attr_float("epsilon", 1e-5);
  const auto xs = c.input_shape(0);
  const Constant *gamma = c.constant(1), *beta = c.constant(2), *mean = c.constant(3),
                 *var = c.constant(4);
  bool known = xs.size() >= 2 && gamma && beta && mean && var && c.attr_int("spatial", 1) == 1;
  for (const Constant* k : {gamma, beta, mean, var})
    known = known && k->shape == std::vector<int64_t>{xs[1]} && is_float(k->dtype);
  if (!known)
    return one(ops::call("batch_norm", {c.input(0), c.input(1), c.input(2), c.input(3), c.input(4)},
                         {{"eps", eps}}, c.out_name()));
  const Tensor xl = c.input_channels_last(0);
  const Tensor x = xl.defined() ? xl : c.input(0);
  Constant scale{x.dtype(), {xs[1]}, {}}, shift = scale;
  for (size_t i = 0; i < static_cast<size_t>(xs[1]); ++i) {
    const double k = gamma->data[i] / std::sqrt(var->data[i] + eps);
    scale.data.push_back(k);
    shift.data.push_back(beta->data[i] - mean->data[i] * k);
  }
  if (!xl.defined())  // [C, 1, ...]: broadcast along dim 1 of [N, C, spatial...]
    for (Constant* k : {&scale, &shift}) k->shape.resize(xs.size() - 1, 1);
  const std::string out = c.out_name();
  const Tensor y = ops::call("add",
                             {ops::call("mul", {x, c.constant_tensor(out + "_scale", scale)}),
                              c.constant_tensor(out + "_shift", shift)},
                             json::object(), out);
  return {xl.defined() ? Value::of_channels_last(y) : Value::of(y)};
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
  if (w.rank() != 4) c.fail("the weight must be [in channels, out channels / group, kh, kw]");
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
  const auto xs = c.input_shape(0);
  const int s = static_cast<int>(xs.size()) - 2;
  if (s < 1 || s > 3)
    c.fail("input of rank " + std::to_string(xs.size()) + ": 1-3 spatial dims are supported");
  const std::vector<int64_t> in(xs.begin() + 2, xs.end());
  const Window w = window(c, in, c.attr_ints("kernel_shape"));
  json a = pool_attrs(w);
  a["ceil_mode"] = c.attr_int("ceil_mode", 0) != 0;
  if (!max) a["count_include_pad"] = c.attr_int("count_include_pad", 0) != 0;
  const std::string op = (max ? "max_pool" : "avg_pool") + std::to_string(s) + "d";
  if (const Tensor xl = c.input_channels_last(0); xl.defined()) {  // pooled channels-last
    a["channels_last"] = true;
    return {Value::of_channels_last(ops::call(op, {xl}, a, c.out_name()))};
  }
  return one(ops::call(op, {c.input(0)}, a, c.out_name()));
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
      return ops::call(op, {t}, {{"axis", ax}}, name);
    };
    if (c.opset() >= 13) return one(apply(x, axis, c.out_name()));
    return one(coerced(c, x, axis, [&](const Tensor& t, const std::string& n) {
      return apply(t, t.rank() - 1, n);
    }));
  };
}

// Resize / Upsample: output sizes and per-dim scales from the scales or
// sizes input (on `axes` when given), the aspect-ratio policy applied, then
// the library's resize.
std::vector<Value> resize(NodeContext& c, bool upsample) {
  const Tensor x = c.input(0);
  const auto in = static_shape(x, c.where());
  const size_t r = in.size();
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  std::vector<double> roi;
  std::string mode, transform = "asymmetric", nearest = "floor";
  json extra = json::object();
  auto floats_of = [&](size_t i) -> std::vector<double> {
    return c.has_input(i) ? c.known_input(i, "resize parameters").data : std::vector<double>{};
  };
  if (upsample) {  // Upsample (opset 7: scales attribute; 9: input)
    c.check_attrs({"mode", "scales"});
    scales = c.has_attr("scales") ? c.attr_floats("scales") : floats_of(1);
    mode = c.attr_string("mode", "nearest");
  } else if (c.opset() < 11) {  // Resize-10: Upsample's semantics
    c.check_attrs({"mode"});
    scales = floats_of(1);
    mode = c.attr_string("mode", "nearest");
  } else {
    c.check_attrs({"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                   "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy", "mode",
                   "nearest_mode"});
    if (c.attr_int("antialias", 0)) c.fail("antialias = 1 is not supported");
    mode = c.attr_string("mode", "nearest");
    transform = c.attr_string("coordinate_transformation_mode", "half_pixel");
    nearest = c.attr_string("nearest_mode", "round_prefer_floor");
    roi = floats_of(1);
    scales = floats_of(2);
    if (c.has_input(3)) sizes = c.ints_input(3, "sizes");
    extra = {{"cubic_coeff_a", c.attr_float("cubic_coeff_a", -0.75)},
             {"exclude_outside", c.attr_int("exclude_outside", 0) != 0},
             {"extrapolation_value", c.attr_float("extrapolation_value", 0.0)}};
  }
  if (mode == "bilinear") mode = "linear";  // Upsample-7's name
  // The dims the scales / sizes / roi are given for.
  std::vector<size_t> axes;
  for (const int64_t a : c.attr_ints("axes", std::vector<int64_t>{}))
    axes.push_back(static_cast<size_t>(normalize_axis(a, static_cast<int>(r), c, "axes")));
  if (axes.empty())
    for (size_t d = 0; d < r; ++d) axes.push_back(d);
  const size_t na = axes.size();
  std::vector<double> full_scales(r, 1.0), full_roi;
  std::vector<int64_t> full_sizes = in;
  if (!roi.empty()) {
    if (roi.size() != 2 * na) c.fail("roi needs 2 values per resized dim");
    full_roi.assign(2 * r, 0.0);
    for (size_t d = 0; d < r; ++d) full_roi[r + d] = 1.0;
    for (size_t i = 0; i < na; ++i) full_roi[axes[i]] = roi[i], full_roi[r + axes[i]] = roi[na + i];
  }
  if (!sizes.empty()) {
    if (sizes.size() != na) c.fail("sizes needs " + std::to_string(na) + " values");
    const std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        full_sizes[axes[i]] = sizes[i];
        full_scales[axes[i]] = static_cast<double>(sizes[i]) / static_cast<double>(in[axes[i]]);
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double s = policy == "not_larger" ? INFINITY : 0.0;
      for (size_t i = 0; i < na; ++i) {
        const double q = static_cast<double>(sizes[i]) / static_cast<double>(in[axes[i]]);
        s = policy == "not_larger" ? std::min(s, q) : std::max(s, q);
      }
      for (size_t i = 0; i < na; ++i) {
        full_scales[axes[i]] = s;
        full_sizes[axes[i]] = static_cast<int64_t>(s * static_cast<double>(in[axes[i]]) + 0.5);
      }
    } else {
      c.fail("keep_aspect_ratio_policy '" + policy + "' is not stretch, not_larger or not_smaller");
    }
  } else {
    if (scales.size() != na)
      c.fail("scales needs " + std::to_string(na) + " values, got " +
             std::to_string(scales.size()));
    for (size_t i = 0; i < na; ++i) {
      const size_t d = axes[i];
      if (!(scales[i] > 0)) c.fail("scales must be > 0");
      full_scales[d] = scales[i];
      double span = 1;
      if (transform == "tf_crop_and_resize" && !full_roi.empty())
        span = full_roi[r + d] - full_roi[d];
      full_sizes[d] =
          static_cast<int64_t>(std::floor(static_cast<double>(in[d]) * span * scales[i]));
    }
  }
  json a = extra;
  a["sizes"] = full_sizes;
  a["scales"] = full_scales;
  a["mode"] = mode;
  a["coordinate_transformation_mode"] = transform;
  a["nearest_mode"] = nearest;
  if (!full_roi.empty()) a["roi"] = full_roi;
  return one(ops::call("resize", {x}, a, c.out_name()));
}

// QuantizeLinear / DequantizeLinear: the quantized type from the zero point,
// else output_dtype, else u8.
std::vector<Value> quantize(NodeContext& c, bool dequantize) {
  c.check_attrs({"axis", "block_size", "output_dtype", "saturate", "precision"});
  if (c.has_attr("precision") && c.attr_int("precision") != 0) c.fail("precision is not supported");
  std::vector<Tensor> in{c.input(0), c.input(1)};
  if (c.has_input(2)) in.push_back(c.input(2));
  json a = {{"axis", c.attr_int("axis", 1)}, {"block_size", c.attr_int("block_size", 0)}};
  if (!dequantize && !c.has_input(2)) {
    const int64_t t = c.attr_int("output_dtype", 0);
    a["dtype"] =
        std::string(to_string(t ? dtype_of(static_cast<int32_t>(t), c.where()) : DType::U8));
  }
  if (dequantize && c.attr_int("output_dtype", 0) &&
      dtype_of(static_cast<int32_t>(c.attr_int("output_dtype")), c.where()) != in[1].dtype())
    c.fail("output_dtype other than the scale's type is not supported");
  return one(ops::call(dequantize ? "dequantize_linear" : "quantize_linear", in, a, c.out_name()));
}

// The reduction and ignore_index of a loss node as the library's attributes.
json loss_attrs(NodeContext& c) {
  json a = {{"reduction", c.attr_string("reduction", "mean")}};
  if (c.has_attr("ignore_index")) a["ignore_index"] = c.attr_int("ignore_index");
  return a;
}

}  // namespace

void add_nn_converters(std::map<std::string, Converter>& t) {
  t["NegativeLogLikelihoodLoss"] = [](NodeContext& c) {
    c.check_attrs({"reduction", "ignore_index"});
    std::vector<Tensor> in{c.input(0), c.input(1)};
    if (c.has_input(2)) in.push_back(c.input(2));
    return one(ops::call("nll_loss", in, loss_attrs(c), c.out_name()));
  };
  // The loss of log_softmax over the classes (dim 1), and that log_softmax.
  t["SoftmaxCrossEntropyLoss"] = [](NodeContext& c) {
    c.check_attrs({"reduction", "ignore_index"});
    const Tensor lp =
        ops::call("log_softmax", {c.input(0)}, {{"axis", 1}}, c.has_output(1) ? c.out_name(1) : "");
    std::vector<Tensor> in{lp, c.input(1)};
    if (c.has_input(2)) in.push_back(c.input(2));
    std::vector<Value> out = one(ops::call("nll_loss", in, loss_attrs(c), c.out_name()));
    if (c.has_output(1)) out.push_back(Value::of(lp));
    return out;
  };
  t["MeanVarianceNormalization"] = [](NodeContext& c) {
    c.check_attrs({"axes"});
    const Tensor x = c.input(0);
    std::vector<int> axes;
    for (const int64_t a : c.attr_ints("axes", std::vector<int64_t>{0, 2, 3}))
      axes.push_back(normalize_axis(a, x.rank(), c));
    return one(ops::call("mean_variance_norm", {x}, {{"axes", axes}}, c.out_name()));
  };
  t["MatMul"] = [](NodeContext& c) {
    c.check_attrs({});
    return one(ops::call("matmul", {c.input(0), c.input(1)}, json::object(), c.out_name()));
  };
  t["Gemm"] = [](NodeContext& c) {
    c.check_attrs({"alpha", "beta", "transA", "transB"});
    std::vector<Tensor> in{c.input(0), c.input(1)};
    if (c.has_input(2)) in.push_back(c.input(2));
    return one(ops::call("gemm", in,
                         {{"alpha", c.attr_float("alpha", 1.0)},
                          {"beta", c.attr_float("beta", 1.0)},
                          {"trans_a", c.attr_int("transA", 0) != 0},
                          {"trans_b", c.attr_int("transB", 0) != 0}},
                         c.out_name()));
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
    return global_pool(c, "global_avg_pool", "reduce_mean");
  };
  t["GlobalMaxPool"] = [](NodeContext& c) {
    return global_pool(c, "global_max_pool", "reduce_max");
  };
  t["BatchNormalization"] = batch_norm;
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
    return one(ops::call(
        "lp_normalize", {x},
        {{"axis", normalize_axis(c.attr_int("axis", -1), x.rank(), c)}, {"p", c.attr_int("p", 2)}},
        c.out_name()));
  };
  t["LpPool"] = [](NodeContext& c) {
    c.check_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides", "p"});
    Tensor x = c.input(0);
    const int s = x.rank() - 2;
    if (s < 1 || s > 3) c.fail("1-3 spatial dims are supported");
    const auto xs = static_shape(x, c.where());
    json a = pool_attrs(window(c, {xs.begin() + 2, xs.end()}, c.attr_ints("kernel_shape")));
    a["ceil_mode"] = c.attr_int("ceil_mode", 0) != 0;
    a["p"] = static_cast<double>(c.attr_int("p", 2));
    return one(ops::call("lp_pool" + std::to_string(s) + "d", {x}, a, c.out_name()));
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
  t["LRN"] = [](NodeContext& c) {
    c.check_attrs({"alpha", "beta", "bias", "size"});
    return one(ops::call("lrn", {c.input(0)},
                         {{"size", c.attr_int("size")},
                          {"alpha", c.attr_float("alpha", 1e-4)},
                          {"beta", c.attr_float("beta", 0.75)},
                          {"bias", c.attr_float("bias", 1.0)}},
                         c.out_name()));
  };
  t["Resize"] = [](NodeContext& c) { return resize(c, false); };
  t["Upsample"] = [](NodeContext& c) { return resize(c, true); };
  t["QuantizeLinear"] = [](NodeContext& c) { return quantize(c, false); };
  t["DequantizeLinear"] = [](NodeContext& c) { return quantize(c, true); };
  t["Softmax"] = softmax("softmax");
  t["LogSoftmax"] = softmax("log_softmax");
  t["Hardmax"] = softmax("hardmax");
}

}  // namespace pto::onnx
