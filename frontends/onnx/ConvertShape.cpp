// ONNX shape and data-movement operators. Those whose result is known from
// static shapes or constant inputs (Shape, Size, Constant, ConstantOfShape,
// Range, EyeLike) give constants; the rest are rows of the library with
// their shape arguments read as constants (Reshape, Slice, Squeeze, Pad,
// ...) or compositions of rows (DepthToSpace, SpaceToDepth).
#include <array>
#include <cmath>

#include "dsl/Error.h"
#include "dsl/ops/Ops.h"
#include "frontends/onnx/ChannelsLast.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

using nlohmann::json;

Constant ints(const std::vector<int64_t>& v, std::vector<int64_t> shape) {
  Constant c{DType::I64, std::move(shape), {}};
  for (const int64_t x : v) c.data.push_back(static_cast<double>(x));
  return c;
}

// Axes given as an attribute (older opsets) or as input `i` (newer), normalized for rank r.
std::vector<int> axes_of(NodeContext& c, size_t i, int rank, bool required) {
  std::vector<int64_t> a;
  if (c.has_attr("axes"))
    a = c.attr_ints("axes");
  else if (c.has_input(i))
    a = c.ints_input(i, "axes");
  else if (required)
    c.fail("needs axes");
  std::vector<int> out;
  for (const int64_t x : a) out.push_back(normalize_axis(x, rank, c, "axis"));
  return out;
}

std::vector<Value> shape_of(NodeContext& c) {
  c.check_attrs({"start", "end"});
  const auto s = static_shape(c.input(0), c.where());
  const auto r = static_cast<int64_t>(s.size());
  const auto clampi = [&](int64_t v) { return std::clamp(v < 0 ? v + r : v, int64_t{0}, r); };
  const int64_t b = clampi(c.attr_int("start", 0)), e = clampi(c.attr_int("end", r));
  const std::vector<int64_t> part(s.begin() + b, s.begin() + std::max(b, e));
  return {Value::of(ints(part, {static_cast<int64_t>(part.size())}))};
}

std::vector<Value> constant(NodeContext& c) {
  c.check_attrs({"value", "value_float", "value_floats", "value_int", "value_ints"});
  if (c.has_attr("value")) return {Value::of(c.attr_tensor("value"))};
  if (c.has_attr("value_float"))
    return {Value::of(Constant{DType::F32, {}, {c.attr_float("value_float")}})};
  if (c.has_attr("value_int"))
    return {Value::of(Constant{DType::I64, {}, {static_cast<double>(c.attr_int("value_int"))}})};
  if (c.has_attr("value_floats")) {
    const auto f = c.attr_floats("value_floats");
    return {Value::of(Constant{DType::F32, {static_cast<int64_t>(f.size())}, f})};
  }
  if (c.has_attr("value_ints")) {
    const auto v = c.attr_ints("value_ints");
    return {Value::of(ints(v, {static_cast<int64_t>(v.size())}))};
  }
  c.fail(
      "needs one of the attributes value, value_float(s), value_int(s) (sparse and string values "
      "are not supported)");
}

std::vector<Value> constant_of_shape(NodeContext& c) {
  c.check_attrs({"value"});
  const auto shape = c.ints_input(0, "shape");
  Constant out{DType::F32, {}, {}};
  double v = 0;
  if (c.has_attr("value")) {
    const Constant t = c.attr_tensor("value");
    if (t.numel() != 1) c.fail("value must hold one element");
    out.dtype = t.dtype, v = t.data[0];
  }
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (d < 0) c.fail("negative dim " + std::to_string(d) + " in the shape");
    if (d > 0 && n > (int64_t{1} << 31) / d) c.fail("the shape has more than 2^31 elements");
    n *= d;
  }
  out.shape = shape;
  out.data.assign(static_cast<size_t>(n), v);
  return {Value::of(std::move(out))};
}

// Hann / Hamming / Blackman windows: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N)
// with N the size (periodic) or size - 1, a constant of the size known at import.
std::vector<Value> window_function(NodeContext& c, const std::array<double, 3>& a) {
  c.check_attrs({"output_datatype", "periodic"});
  const auto size = c.ints_input(0, "size");
  if (size.size() != 1 || size[0] < 0 || size[0] > (int64_t{1} << 24))
    c.fail("size must be one value in [0, 2^24]");
  const int64_t n = size[0];
  const double d = static_cast<double>(c.attr_int("periodic", 1) ? n : n - 1);
  Constant out{
      dtype_of(static_cast<int32_t>(c.attr_int("output_datatype", 1)), c.where()), {n}, {}};
  for (int64_t i = 0; i < n; ++i) {
    const double t = 2 * M_PI * static_cast<double>(i) / d;
    out.data.push_back(a[0] - a[1] * std::cos(t) + a[2] * std::cos(2 * t));
  }
  return {Value::of(std::move(out))};
}

std::vector<Value> range(NodeContext& c) {
  c.check_attrs({});
  const Constant *s = &c.known_input(0, "start"), *l = &c.known_input(1, "limit"),
                 *d = &c.known_input(2, "delta");
  if (s->numel() != 1 || l->numel() != 1 || d->numel() != 1)
    c.fail("start, limit and delta must be scalars");
  const double start = s->data[0], limit = l->data[0], delta = d->data[0];
  if (delta == 0) c.fail("delta is 0");
  const double count = std::max(0.0, std::ceil((limit - start) / delta));
  if (count > double(int64_t{1} << 31)) c.fail("more than 2^31 elements");
  Constant out{s->dtype, {static_cast<int64_t>(count)}, {}};
  for (int64_t i = 0; i < out.shape[0]; ++i)
    out.data.push_back(start + static_cast<double>(i) * delta);
  return {Value::of(std::move(out))};
}

std::vector<Value> eye_like(NodeContext& c) {
  c.check_attrs({"dtype", "k"});
  const auto s = static_shape(c.input(0), c.where());
  if (s.size() != 2) c.fail("input must be 2-D");
  const DType t = c.has_attr("dtype")
                      ? dtype_of(static_cast<int32_t>(c.attr_int("dtype")), c.where())
                      : c.input(0).dtype();
  const int64_t k = c.attr_int("k", 0);
  Constant out{t, s, std::vector<double>(static_cast<size_t>(s[0] * s[1]), 0.0)};
  for (int64_t i = 0; i < s[0]; ++i)
    if (i + k >= 0 && i + k < s[1]) out.data[static_cast<size_t>(i * s[1] + i + k)] = 1;
  return {Value::of(std::move(out))};
}

}  // namespace

void add_shape_converters(std::map<std::string, Converter>& t) {
  t["Shape"] = shape_of;
  t["Size"] = [](NodeContext& c) {
    c.check_attrs({});
    int64_t n = 1;
    for (const int64_t d : static_shape(c.input(0), c.where())) n *= d;
    return std::vector<Value>{Value::of(Constant{DType::I64, {}, {static_cast<double>(n)}})};
  };
  t["Constant"] = constant;
  t["ConstantOfShape"] = constant_of_shape;
  t["Range"] = range;
  t["EyeLike"] = eye_like;
  t["HannWindow"] = [](NodeContext& c) { return window_function(c, {0.5, 0.5, 0.0}); };
  t["HammingWindow"] = [](NodeContext& c) {
    return window_function(c, {25.0 / 46.0, 21.0 / 46.0, 0.0});
  };
  t["BlackmanWindow"] = [](NodeContext& c) { return window_function(c, {0.42, 0.5, 0.08}); };
  t["Reshape"] = [](NodeContext& c) {
    c.check_attrs({"allowzero"});
    auto shape = c.has_attr("shape") ? c.attr_ints("shape") : c.ints_input(1, "shape");
    const auto in = static_shape(c.input(0), c.where());
    if (c.attr_int("allowzero", 0)) {
      for (const int64_t d : shape)
        if (d == 0)
          c.fail("allowzero = 1 with a 0 in the shape (an empty tensor) is not supported");
    }
    for (size_t i = 0; i < shape.size(); ++i)  // 0 copies the input's dim
      if (shape[i] == 0) {
        if (i >= in.size())
          c.fail("shape has a 0 at " + std::to_string(i) + " beyond the input's rank");
        shape[i] = in[i];
      }
    return one(ops::call("reshape", {c.input(0)}, {{"shape", shape}}, c.out_name()));
  };
  t["Flatten"] = [](NodeContext& c) {
    c.check_attrs({"axis"});
    const Tensor x = c.input(0);
    const int64_t axis = c.attr_int("axis", 1);
    if (axis < -x.rank() || axis > x.rank())
      c.fail("axis " + std::to_string(axis) + " out of range");
    const auto s = static_shape(x, c.where());
    const size_t a = static_cast<size_t>(axis < 0 ? axis + x.rank() : axis);
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < s.size(); ++i) (i < a ? outer : inner) *= s[i];
    return one(ops::call("reshape", {x}, {{"shape", {outer, inner}}}, c.out_name()));
  };
  t["Squeeze"] = [](NodeContext& c) {
    c.check_attrs({"axes"});
    const Tensor x = c.input(0);
    const auto axes = axes_of(c, 1, x.rank(), false);
    return one(ops::call("squeeze", {x}, {{"axes", axes}}, c.out_name()));
  };
  t["Unsqueeze"] = [](NodeContext& c) {
    c.check_attrs({"axes"});
    const Tensor x = c.input(0);
    std::vector<int64_t> a = c.has_attr("axes") ? c.attr_ints("axes") : c.ints_input(1, "axes");
    const int r = x.rank() + static_cast<int>(a.size());
    std::vector<int> axes;
    for (const int64_t v : a) axes.push_back(normalize_axis(v, r, c, "axis"));
    return one(ops::call("unsqueeze", {x}, {{"axes", axes}}, c.out_name()));
  };
  t["Transpose"] = [](NodeContext& c) {
    c.check_attrs({"perm"});
    const Tensor x = c.input(0);
    std::vector<int64_t> perm = c.attr_ints("perm", std::vector<int64_t>{});
    return one(ops::call("transpose", {x}, {{"perm", perm}}, c.out_name()));
  };
  t["Concat"] = [](NodeContext& c) {
    c.check_attrs({"axis"});
    // Channels-last values (ChannelsLast.h) concatenate so, along the axis
    // that holds the NCHW axis.
    std::vector<Tensor> last;
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i) && c.input_channels_last(i).defined())
        last.push_back(c.input_channels_last(i));
    if (!last.empty() && last.size() == c.num_inputs()) {
      const int axis = channels_last::axis(normalize_axis(c.attr_int("axis"), 4, c));
      return std::vector<Value>{
          Value::of_channels_last(ops::call("concat", last, {{"axis", axis}}, c.out_name()))};
    }
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i)) in.push_back(c.input(i));
    if (in.empty()) c.fail("needs at least one input");
    const int axis = normalize_axis(c.attr_int("axis"), in[0].rank(), c);
    return one(ops::call("concat", in, {{"axis", axis}}, c.out_name()));
  };
  t["Split"] = [](NodeContext& c) {
    c.check_attrs({"axis", "split", "num_outputs"});
    const Tensor x = c.input(0);
    const int axis = normalize_axis(c.attr_int("axis", 0), x.rank(), c);
    std::vector<int64_t> sizes;
    if (c.has_attr("split"))
      sizes = c.attr_ints("split");
    else if (c.has_input(1))
      sizes = c.ints_input(1, "split");
    const int64_t n = static_shape(x, c.where())[static_cast<size_t>(axis)];
    const int64_t k = static_cast<int64_t>(c.num_outputs());
    if (sizes.empty()) {  // equal pieces, the last one smaller (opset 18)
      const int64_t piece = (n + k - 1) / k;
      for (int64_t i = 0; i < k; ++i) sizes.push_back(std::min(piece, n - i * piece));
    }
    if (static_cast<int64_t>(sizes.size()) != k)
      c.fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(k) +
             " outputs");
    std::vector<Value> out;
    int64_t start = 0;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t len = sizes[static_cast<size_t>(i)];
      if (len < 0) c.fail("negative split size");
      out.push_back(Value::of(ops::call(
          "slice", {x}, {{"starts", {start}}, {"ends", {start + len}}, {"axes", {axis}}},
          c.has_output(static_cast<size_t>(i)) ? c.out_name(static_cast<size_t>(i)) : "")));
      start += len;
    }
    if (start != n)
      c.fail("split sizes add up to " + std::to_string(start) + ", the axis has " +
             std::to_string(n));
    return out;
  };
  t["Slice"] = [](NodeContext& c) {
    c.check_attrs({"starts", "ends", "axes"});
    const Tensor x = c.input(0);
    std::vector<int64_t> starts, ends, steps, axes;
    if (c.has_attr("starts")) {  // opset < 10
      starts = c.attr_ints("starts"), ends = c.attr_ints("ends"),
      axes = c.attr_ints("axes", std::vector<int64_t>{});
    } else {
      starts = c.ints_input(1, "starts"), ends = c.ints_input(2, "ends");
      if (c.has_input(3)) axes = c.ints_input(3, "axes");
      if (c.has_input(4)) steps = c.ints_input(4, "steps");
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    std::vector<int> ax;
    for (const int64_t a : axes) ax.push_back(normalize_axis(a, x.rank(), c, "axis"));
    json a = {{"starts", starts}, {"ends", ends}, {"axes", ax}};
    if (!steps.empty()) a["steps"] = steps;
    return one(ops::call("slice", {x}, a, c.out_name()));
  };
  t["Gather"] = [](NodeContext& c) {
    c.check_attrs({"axis"});
    const Tensor x = c.input(0);
    return one(ops::call("gather", {x, c.input(1)},
                         {{"axis", normalize_axis(c.attr_int("axis", 0), x.rank(), c)}},
                         c.out_name()));
  };
  t["GatherElements"] = [](NodeContext& c) {
    c.check_attrs({"axis"});
    const Tensor x = c.input(0);
    return one(ops::call("gather_elements", {x, c.input(1)},
                         {{"axis", normalize_axis(c.attr_int("axis", 0), x.rank(), c)}},
                         c.out_name()));
  };
  t["ScatterElements"] = [](NodeContext& c) {
    c.check_attrs({"axis", "reduction"});
    const Tensor x = c.input(0);
    return one(ops::call("scatter", {x, c.input(1), c.input(2)},
                         {{"axis", normalize_axis(c.attr_int("axis", 0), x.rank(), c)},
                          {"reduction", c.attr_string("reduction", "none")}},
                         c.out_name()));
  };
  t["Expand"] = [](NodeContext& c) {
    c.check_attrs({});
    const Tensor x = c.input(0);
    const auto want = c.ints_input(1, "shape");
    auto in = static_shape(x, c.where());
    // Both ways, as numpy broadcasts x against ones(shape).
    const size_t r = std::max(in.size(), want.size());
    std::vector<int64_t> out(r, 1);
    for (size_t i = 0; i < r; ++i) {
      const int64_t a = i + in.size() >= r ? in[i + in.size() - r] : 1;
      const int64_t b = i + want.size() >= r ? want[i + want.size() - r] : 1;
      if (a != b && a != 1 && b != 1)
        c.fail("shape does not broadcast with the input at dim " + std::to_string(i) + " (" +
               std::to_string(a) + " vs " + std::to_string(b) + ")");
      out[i] = a == 1 ? b : a;
    }
    return one(ops::call("broadcast_to", {x}, {{"shape", out}}, c.out_name()));
  };
  t["Tile"] = [](NodeContext& c) {
    c.check_attrs({});
    return one(
        ops::call("tile", {c.input(0)}, {{"repeats", c.ints_input(1, "repeats")}}, c.out_name()));
  };
  t["Pad"] = [](NodeContext& c) {
    c.check_attrs({"mode", "pads", "value"});
    const Tensor x = c.input(0);
    const int r = x.rank();
    std::vector<int64_t> pads = c.has_attr("pads") ? c.attr_ints("pads") : c.ints_input(1, "pads");
    double value = c.has_attr("value") ? c.attr_float("value") : 0.0;
    std::optional<Tensor> runtime_value;  // a constant_value known only when the model runs
    if (c.has_input(2)) {
      const Constant* v = c.constant(2);
      if (v && v->numel() != 1) c.fail("constant_value must hold one element");
      if (v)
        value = v->data[0];
      else
        runtime_value = c.input(2);
    }
    if (c.has_input(3)) {  // axes: pads for those only
      const auto axes = c.ints_input(3, "axes");
      if (pads.size() != 2 * axes.size()) c.fail("pads needs 2 values per axis");
      std::vector<int64_t> full(2 * static_cast<size_t>(r), 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        const size_t a = static_cast<size_t>(normalize_axis(axes[i], r, c, "axis"));
        full[a] = pads[i], full[a + static_cast<size_t>(r)] = pads[i + axes.size()];
      }
      pads = full;
    }
    if (pads.size() != 2 * static_cast<size_t>(r))
      c.fail("pads needs " + std::to_string(2 * r) + " values");
    for (const int64_t p : pads)
      if (p < 0) c.fail("negative pads (cropping) are not supported");
    const std::string mode = c.attr_string("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge")
      c.fail("mode '" + mode + "' is not supported (constant, reflect, edge)");
    if (!runtime_value || mode != "constant")
      return one(
          ops::call("pad", {x}, {{"pads", pads}, {"mode", mode}, {"value", value}}, c.out_name()));
    // The border from a run-time value: where a padded mask of ones is 0.
    const Tensor ones =
        ops::call("broadcast_to", {literal(c.program(), 1, DType::Bool, c.out_name() + "_in")},
                  {{"shape", static_shape(x, c.where())}});
    const Tensor inside = ops::call("pad", {ones}, {{"pads", pads}, {"value", 0}});
    const Tensor padded = ops::call("pad", {x}, {{"pads", pads}, {"value", 0}});
    const Tensor v = ops::reshape(*runtime_value, {});
    return one(ops::call("where", {inside, padded, v}, json::object(), c.out_name()));
  };
  t["Trilu"] = [](NodeContext& c) {
    c.check_attrs({"upper"});
    const int64_t k = c.has_input(1) ? c.ints_input(1, "k").at(0) : 0;
    return one(ops::call(c.attr_int("upper", 1) ? "triu" : "tril", {c.input(0)}, {{"k", k}},
                         c.out_name()));
  };
  t["DepthToSpace"] = [](NodeContext& c) {
    c.check_attrs({"blocksize", "mode"});
    return one(
        ops::call("depth_to_space", {c.input(0)},
                  {{"block", c.attr_int("blocksize")}, {"mode", c.attr_string("mode", "DCR")}},
                  c.out_name()));
  };
  t["SpaceToDepth"] = [](NodeContext& c) {
    c.check_attrs({"blocksize", "mode"});
    return one(
        ops::call("space_to_depth", {c.input(0)},
                  {{"block", c.attr_int("blocksize")}, {"mode", c.attr_string("mode", "DCR")}},
                  c.out_name()));
  };
  // TopK: the indices in order, then the values gathered at them.
  t["TopK"] = [](NodeContext& c) {
    c.check_attrs({"axis", "largest", "sorted", "k"});
    const Tensor x = c.input(0);
    const int64_t k = c.has_attr("k") ? c.attr_int("k") : c.ints_input(1, "k").at(0);
    const int axis = normalize_axis(c.attr_int("axis", -1), x.rank(), c);
    const Tensor idx = ops::call(
        "topk_indices", {x}, {{"k", k}, {"axis", axis}, {"largest", c.attr_int("largest", 1) != 0}},
        c.has_output(1) ? c.out_name(1) : "");
    return std::vector<Value>{
        Value::of(ops::call("gather_elements", {x, idx}, {{"axis", axis}}, c.out_name(0))),
        Value::of(idx)};
  };
  t["GatherND"] = [](NodeContext& c) {
    c.check_attrs({"batch_dims"});
    return one(ops::call("gather_nd", {c.input(0), c.input(1)},
                         {{"batch_dims", c.attr_int("batch_dims", 0)}}, c.out_name()));
  };
  t["ScatterND"] = [](NodeContext& c) {
    c.check_attrs({"reduction"});
    return one(ops::call("scatter_nd", {c.input(0), c.input(1), c.input(2)},
                         {{"reduction", c.attr_string("reduction", "none")}}, c.out_name()));
  };
  t["ReverseSequence"] = [](NodeContext& c) {
    c.check_attrs({"batch_axis", "time_axis"});
    return one(ops::call(
        "reverse_sequence", {c.input(0), c.input(1)},
        {{"batch_axis", c.attr_int("batch_axis", 1)}, {"time_axis", c.attr_int("time_axis", 0)}},
        c.out_name()));
  };
  t["OneHot"] = [](NodeContext& c) {
    c.check_attrs({"axis"});
    const auto depth = c.ints_input(1, "depth");
    const Constant* v = &c.known_input(2, "values");
    if (v->numel() != 2) c.fail("values must be [off_value, on_value]");
    const Tensor idx = c.input(0);
    return one(ops::call("one_hot", {idx},
                         {{"depth", depth.at(0)},
                          {"axis", normalize_axis(c.attr_int("axis", -1), idx.rank() + 1, c)},
                          {"off_value", v->data[0]},
                          {"on_value", v->data[1]},
                          {"dtype", std::string(to_string(v->dtype))}},
                         c.out_name()));
  };
}

}  // namespace pto::onnx
