// Resize (ONNX Resize, PyTorch interpolate, TensorFlow's image resize): each
// output coordinate maps back to a fractional input coordinate by a
// coordinate transformation, and the value is read there by nearest-neighbour
// rounding or by linear or cubic interpolation, separably per resized dim.
//
// The mapping is ONNX's (opset 19) so imported models match its reference:
//   half_pixel           (x + 0.5) / scale - 0.5
//   half_pixel_symmetric the same, centred: + in / 2 (1 - out / (in scale))
//   pytorch_half_pixel   as half_pixel, but 0 when the output has one element
//   align_corners        x (in - 1) / (out - 1)
//   asymmetric           x / scale
//   tf_crop_and_resize   from the region of interest `roi` (start, end per dim,
//                        as fractions); outside the input: extrapolation_value
// Taps outside the input read the nearest edge element; `exclude_outside`
// drops them instead and renormalizes the cubic weights.
// One stage: the taps of every resized dim are a sum of weighted reads
// (2 per dim for linear, 4 for cubic), so a 2-D cubic resize is 16 reads.
#include <cmath>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using Ins = std::vector<Tensor>;

struct Options {
  std::vector<int64_t> sizes;
  std::vector<double> scales, roi;
  std::string mode, transform, nearest;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
};

// The taps of one dim: input positions and their weights.
struct Taps {
  std::vector<Expr> at, weight;
  Expr outside;  // tf_crop_and_resize: the coordinate is outside the input
};

Taps taps(const Options& o, size_t d, const Expr& v, int64_t in, int64_t out, DType ft) {
  const double scale = o.scales[d];
  auto k = [&](double c) { return make_const(c, ft); };
  const Expr x = cast(ft, v);
  Expr xo;
  const std::string& t = o.transform;
  if (t == "half_pixel") {
    xo = (x + k(0.5)) / k(scale) - k(0.5);
  } else if (t == "half_pixel_symmetric") {
    const double adj = static_cast<double>(out) / (scale * static_cast<double>(in));
    xo = k(static_cast<double>(in) / 2 * (1 - adj)) + (x + k(0.5)) / k(scale) - k(0.5);
  } else if (t == "pytorch_half_pixel") {
    xo = out > 1 ? (x + k(0.5)) / k(scale) - k(0.5) : k(0);
  } else if (t == "align_corners") {
    xo = out == 1 ? k(0) : x * k(static_cast<double>(in - 1) / static_cast<double>(out - 1));
  } else if (t == "asymmetric") {
    xo = x / k(scale);
  } else {  // tf_crop_and_resize
    const double s = o.roi[d], e = o.roi[d + o.sizes.size()], span = static_cast<double>(in - 1);
    xo = out > 1 ? k(s * span) + x * k((e - s) * span / static_cast<double>(out - 1))
                 : k(0.5 * (s + e) * span);
  }
  Taps r;
  const int last = static_cast<int>(in - 1);
  if (t == "tf_crop_and_resize") r.outside = xo < k(0) || xo > k(static_cast<double>(last));
  if (o.mode == "nearest") {
    Expr i;
    if (o.nearest == "round_prefer_floor")
      i = unary(UnOp::Ceil, xo - k(0.5));
    else if (o.nearest == "round_prefer_ceil")
      i = unary(UnOp::Floor, xo + k(0.5));
    else if (o.nearest == "floor")
      i = unary(UnOp::Floor, xo);
    else
      i = unary(UnOp::Ceil, xo);
    r.at.push_back(clamp(cast(DType::I32, i), 0, last));
    r.weight.push_back(k(1));
    return r;
  }
  const Expr f = unary(UnOp::Floor, xo);
  const Expr fi = cast(DType::I32, f);
  const Expr u = xo - f;  // in [0, 1)
  std::vector<int> offsets;
  if (o.mode == "linear") {
    offsets = {0, 1};
    r.weight = {k(1) - u, u};
  } else {  // cubic, Keys' kernel with parameter a
    const double a = o.cubic_a;
    auto far = [&](const Expr& s) {
      return ((k(a) * s - k(5 * a)) * s + k(8 * a)) * s - k(4 * a);
    };  // 1 < s < 2
    auto near = [&](const Expr& s) {
      return ((k(a + 2) * s - k(a + 3)) * s) * s + k(1);
    };  // s <= 1
    offsets = {-1, 0, 1, 2};
    r.weight = {far(u + k(1)), near(u), near(k(1) - u), far(k(2) - u)};
  }
  std::vector<Expr> inside;
  for (const int off : offsets) {
    const Expr p = fi + off;
    r.at.push_back(clamp(p, 0, last));
    inside.push_back(p >= 0 && p <= last);
  }
  if (o.exclude_outside) {
    Expr sum;
    for (size_t j = 0; j < offsets.size(); ++j) {
      r.weight[j] = select(inside[j], r.weight[j], k(0));
      sum = sum.defined() ? sum + r.weight[j] : r.weight[j];
    }
    for (Expr& w : r.weight) w = w / sum;
  }
  return r;
}

Tensor resize(const Tensor& x, Options o, const std::string& name) {
  const std::string op = "resize";
  const size_t rank = static_cast<size_t>(x.rank());
  if (o.sizes.size() != rank)
    throw ShapeError(op + ": sizes has " + std::to_string(o.sizes.size()) + " values; '" +
                     x.name() + "' " + to_string(x.shape()) + " needs one per dim");
  if (!o.scales.empty() && o.scales.size() != rank)
    throw ShapeError(op + ": scales has " + std::to_string(o.scales.size()) + " values, needs " +
                     std::to_string(rank));
  static const std::vector<std::string> kModes = {"nearest", "linear", "cubic"},
                                        kTransforms = {"half_pixel",         "half_pixel_symmetric",
                                                       "pytorch_half_pixel", "align_corners",
                                                       "asymmetric",         "tf_crop_and_resize"},
                                        kNearest = {"round_prefer_floor", "round_prefer_ceil",
                                                    "floor", "ceil"};
  auto one_of = [&](const std::string& what, const std::string& v,
                    const std::vector<std::string>& ok) {
    if (std::find(ok.begin(), ok.end(), v) != ok.end()) return;
    std::string list;
    for (const auto& s : ok) list += (list.empty() ? "" : ", ") + s;
    throw DefinitionError(op + ": " + what + " '" + v + "' is not one of " + list);
  };
  one_of("mode", o.mode, kModes);
  one_of("coordinate_transformation_mode", o.transform, kTransforms);
  one_of("nearest_mode", o.nearest, kNearest);
  if (o.transform == "tf_crop_and_resize" && o.roi.size() != 2 * rank)
    throw ShapeError(op + ": tf_crop_and_resize needs roi with 2 values per dim (" +
                     std::to_string(2 * rank) + "), got " + std::to_string(o.roi.size()));
  if (o.mode != "nearest") require_float(op, x);
  std::vector<int64_t> in(rank);
  for (size_t d = 0; d < rank; ++d) {
    in[d] = static_dim(op, x, static_cast<int>(d));
    if (o.sizes[d] < 1)
      throw ShapeError(op + ": output size " + std::to_string(o.sizes[d]) + " of dim " +
                       std::to_string(d) + " must be >= 1");
  }
  if (o.scales.empty())
    for (size_t d = 0; d < rank; ++d)
      o.scales.push_back(static_cast<double>(o.sizes[d]) / static_cast<double>(in[d]));
  for (double s : o.scales)
    if (!(s > 0)) throw DefinitionError(op + ": scale " + std::to_string(s) + " must be > 0");
  const DType ft = x.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const auto v = index_vars(rank);
  // Per dim: the taps (an identity dim reads its own index).
  std::vector<Taps> dims;
  Expr outside;
  for (size_t d = 0; d < rank; ++d) {
    const bool identity =
        o.sizes[d] == in[d] && o.scales[d] == 1 && o.transform != "tf_crop_and_resize";
    Taps t;
    if (identity) {
      t.at = {var(v[d])};
      t.weight = {make_const(1, ft)};
    } else {
      t = taps(o, d, var(v[d]), in[d], o.sizes[d], ft);
      if (t.outside.defined()) outside = outside.defined() ? (outside || t.outside) : t.outside;
    }
    dims.push_back(std::move(t));
  }
  // The sum over every combination of taps: 2^k or 4^k reads for k resized dims.
  int interpolated = 0;
  for (const Taps& t : dims) interpolated += t.at.size() > 1;
  if (interpolated > 4)
    throw ShapeError(op + ": " + o.mode + " interpolation over " + std::to_string(interpolated) +
                     " dims; at most 4 (each multiplies the reads per element)");
  Expr value;
  std::vector<size_t> pick(rank, 0);
  while (true) {
    std::vector<Expr> at;
    Expr w;
    for (size_t d = 0; d < rank; ++d) {
      at.push_back(dims[d].at[pick[d]]);
      if (dims[d].at.size() > 1)
        w = w.defined() ? w * dims[d].weight[pick[d]] : dims[d].weight[pick[d]];
    }
    Expr term = x(at);
    if (w.defined()) term = cast(ft, term) * w;
    value = value.defined() ? value + term : term;
    size_t d = rank;
    while (d-- > 0) {
      if (++pick[d] < dims[d].at.size()) break;
      pick[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) break;
  }
  value = cast(x.dtype(), value);
  if (outside.defined()) value = select(outside, make_const(o.extrapolation, x.dtype()), value);
  Shape shape;
  for (int64_t s : o.sizes) shape.push_back(Dim(s));
  Program p = x.program();
  return p.define(name.empty() ? p.unique_name(op) : name, v, shape, value, OpKind::DataMovement,
                  op);
}

}  // namespace

std::vector<OpInfo> resize_ops() {
  using S = AttrType;
  return {{"resize",
           OpKind::DataMovement,
           "resample to sizes by nearest / linear / cubic interpolation (sizes, scales, mode, "
           "coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside, roi, "
           "extrapolation_value)",
           1,
           1,
           {{"sizes", S::Ints, nullptr, true},
            {"scales", S::Floats, nlohmann::json::array()},
            {"mode", S::String, "nearest"},
            {"coordinate_transformation_mode", S::String, "half_pixel"},
            {"nearest_mode", S::String, "round_prefer_floor"},
            {"cubic_coeff_a", S::Float, -0.75},
            {"exclude_outside", S::Bool, false},
            {"roi", S::Floats, nlohmann::json::array()},
            {"extrapolation_value", S::Float, 0.0}},
           [](const Ins& in, const Attrs& a, const std::string& n) {
             Options o;
             o.sizes = a.get<std::vector<int64_t>>("sizes");
             o.scales = a.get<std::vector<double>>("scales");
             o.roi = a.get<std::vector<double>>("roi");
             o.mode = a.get<std::string>("mode");
             o.transform = a.get<std::string>("coordinate_transformation_mode");
             o.nearest = a.get<std::string>("nearest_mode");
             o.cubic_a = a.get<double>("cubic_coeff_a");
             o.exclude_outside = a.get<bool>("exclude_outside");
             o.extrapolation = a.get<double>("extrapolation_value");
             return resize(in[0], std::move(o), n);
           }}};
}

}  // namespace pto::ops
