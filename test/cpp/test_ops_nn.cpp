// The operator families added for whole models against float64 references
// written independently of the DSL: losses, sort / top-k, N-d gather and
// scatter, rearrangements, resize, quantization and the layer compositions
// (hardmax, LRN, mean-variance / Lp normalization, Lp pooling, gemm, cosine
// similarity, glu). Sorting, indexing and rearranging move values, so their
// tables compare exactly.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "OpsTestUtil.h"

using namespace pto;
using namespace pto::test;
using json = nlohmann::json;
using Catch::Matchers::Contains;

namespace {
using V = std::vector<HostTensor>;

HostTensor scalar(double v) {
  return HostTensor{{}, {v}};
}

// Sum, mean or the terms themselves, as a loss's reduction asks.
HostTensor reduce_as(const HostTensor& terms, const std::string& red, double denom = -1) {
  if (red == "none") return terms;
  const double s = std::accumulate(terms.data.begin(), terms.data.end(), 0.0);
  if (red == "sum") return scalar(s);
  return scalar(s / (denom > 0 ? denom : static_cast<double>(terms.data.size())));
}

// -w[t] lp[n, t, d] with weights (absent: 1) and an ignored class (-1: none).
HostTensor nll_ref(const HostTensor& lp, const HostTensor& t, const HostTensor* w, int64_t ignore,
                   const std::string& red) {
  HostTensor terms{t.shape, {}};
  double wsum = 0;
  for_each(t.shape, [&](const Idx& i) {
    const int64_t c = static_cast<int64_t>(at(t, i));
    Idx j = i;
    j.insert(j.begin() + 1, c);
    const double wc = c == ignore ? 0.0 : (w ? w->data[static_cast<size_t>(c)] : 1.0);
    wsum += wc;
    terms.data.push_back(-wc * at(lp, j));
  });
  return reduce_as(terms, red, wsum);
}

HostTensor log_softmax1(const HostTensor& x) {  // over dim 1
  HostTensor r = x;
  Idx rest = x.shape;
  rest[1] = 1;
  for_each(rest, [&](const Idx& i) {
    double m = -INFINITY, s = 0;
    Idx j = i;
    for (j[1] = 0; j[1] < x.shape[1]; ++j[1]) m = std::max(m, at(x, j));
    for (j[1] = 0; j[1] < x.shape[1]; ++j[1]) s += std::exp(at(x, j) - m);
    for (j[1] = 0; j[1] < x.shape[1]; ++j[1]) at(r, j) = at(x, j) - m - std::log(s);
  });
  return r;
}

// Rows along the last axis, sorted stably: the permutation (indices).
std::vector<int64_t> order_of(const std::vector<double>& row, bool descending) {
  std::vector<int64_t> p(row.size());
  std::iota(p.begin(), p.end(), 0);
  std::stable_sort(p.begin(), p.end(), [&](int64_t a, int64_t b) {
    return descending ? row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)]
                      : row[static_cast<size_t>(a)] < row[static_cast<size_t>(b)];
  });
  return p;
}
// Along the last axis: the first k of the order, as values or indices.
Ref sorted_ref(int64_t k, bool descending, bool indices) {
  return [=](const V& v) {
    const HostTensor& x = v[0];
    const int64_t n = x.shape.back(), rows = numel(x.shape) / n;
    Idx shape = x.shape;
    shape.back() = k < 0 ? n : k;
    HostTensor r{shape, {}};
    for (int64_t row = 0; row < rows; ++row) {
      const std::vector<double> vals(x.data.begin() + row * n, x.data.begin() + (row + 1) * n);
      const auto p = order_of(vals, descending);
      for (int64_t j = 0; j < shape.back(); ++j)
        r.data.push_back(indices ? static_cast<double>(p[static_cast<size_t>(j)])
                                 : vals[static_cast<size_t>(p[static_cast<size_t>(j)])]);
    }
    return r;
  };
}

int64_t wrap(double i, int64_t n) {
  const int64_t k = static_cast<int64_t>(i);
  return k < 0 ? k + n : k;
}

// One resized coordinate: the input position an output index maps to.
double source(const std::string& mode, int64_t x, int64_t in, int64_t out) {
  const double scale = static_cast<double>(out) / static_cast<double>(in);
  if (mode == "align_corners")
    return out == 1 ? 0
                    : static_cast<double>(x) * static_cast<double>(in - 1) /
                          static_cast<double>(out - 1);
  if (mode == "asymmetric") return static_cast<double>(x) / scale;
  return (static_cast<double>(x) + 0.5) / scale - 0.5;  // half_pixel
}
// Interpolation weights at the taps around xo: linear (2) or Keys cubic (4), edge-clamped reads.
std::vector<std::pair<int64_t, double>> taps(const std::string& interp, double xo, int64_t in,
                                             double a = -0.75) {
  const double f = std::floor(xo), u = xo - f;
  auto clampi = [&](double p) {
    return std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(p), 0), in - 1);
  };
  if (interp == "linear") return {{clampi(f), 1 - u}, {clampi(f + 1), u}};
  auto keys = [&](double s) {
    s = std::fabs(s);
    return s <= 1  ? ((a + 2) * s - (a + 3)) * s * s + 1
           : s < 2 ? ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
                   : 0.0;
  };
  std::vector<std::pair<int64_t, double>> r;
  for (int d = -1; d <= 2; ++d) r.push_back({clampi(f + d), keys(u - d)});
  return r;
}
// Resizes the last two dims of x (NCHW) to [oh, ow].
Ref resize_ref(const std::string& interp, const std::string& mode, int64_t oh, int64_t ow) {
  return [=](const V& v) {
    const HostTensor& x = v[0];
    const int64_t h = x.shape[2], w = x.shape[3];
    return gen({x.shape[0], x.shape[1], oh, ow}, [&](const Idx& i) {
      const double yo = source(mode, i[2], h, oh), xo = source(mode, i[3], w, ow);
      if (interp == "nearest") {  // round half down (round_prefer_floor), clamped
        auto pick = [](double s, int64_t n) {
          return std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(std::ceil(s - 0.5)), 0),
                                   n - 1);
        };
        return at(x, {i[0], i[1], pick(yo, h), pick(xo, w)});
      }
      double s = 0;
      for (const auto& [r, wr] : taps(interp, yo, h))
        for (const auto& [c, wc] : taps(interp, xo, w)) s += wr * wc * at(x, {i[0], i[1], r, c});
      return s;
    });
  };
}
}  // namespace

TEST_CASE("losses match float64", "[ops][loss]") {
  // f32 terms summed over <= 60 elements: 1e-5 relative and absolute.
  const double rt = 1e-5, at_ = 1e-5;
  const In lp{{3, 4, 5}, DType::F32, -3, 0}, tgt{{3, 5}, DType::I64, 0, 3, true},
      w{{4}, DType::F32, 0.5, 2};
  auto pair_loss = [](std::function<double(double, double)> f, const std::string& red) -> Ref {
    return [=](const V& v) {
      return reduce_as(gen(v[0].shape, [&](const Idx& i) { return f(at(v[0], i), at_b(v[1], i)); }),
                       red);
    };
  };
  std::vector<Case> c = {
      {"nll_loss",
       {},
       {lp, tgt},
       [](const V& v) { return nll_ref(v[0], v[1], nullptr, -1, "mean"); },
       rt,
       at_},
      {"nll_loss",
       {{"reduction", "sum"}, {"ignore_index", 2}},
       {lp, tgt, w},
       [](const V& v) { return nll_ref(v[0], v[1], &v[2], 2, "sum"); },
       rt,
       at_},
      {"nll_loss",
       {{"reduction", "none"}},
       {lp, tgt, w},
       [](const V& v) { return nll_ref(v[0], v[1], &v[2], -1, "none"); },
       rt,
       at_},
      {"nll_loss",
       {{"ignore_index", 0}},
       {lp, tgt, w},
       [](const V& v) { return nll_ref(v[0], v[1], &v[2], 0, "mean"); },
       rt,
       at_},
      {"cross_entropy",
       {},
       {{{3, 4, 5}, DType::F32, -4, 4}, tgt},
       [](const V& v) { return nll_ref(log_softmax1(v[0]), v[1], nullptr, -1, "mean"); },
       rt,
       at_},
      {"cross_entropy",
       {{"ignore_index", 1}, {"reduction", "none"}},
       {{{3, 4}, DType::F32, -4, 4}, {{3}, DType::I32, 0, 3, true}},
       [](const V& v) { return nll_ref(log_softmax1(v[0]), v[1], nullptr, 1, "none"); },
       rt,
       at_},
      {"mse_loss",
       {},
       {{{4, 5}}, {{5}}},
       pair_loss([](double a, double b) { return (a - b) * (a - b); }, "mean"),
       rt,
       at_},
      {"l1_loss",
       {{"reduction", "sum"}},
       {{{4, 5}}, {{4, 5}}},
       pair_loss([](double a, double b) { return std::fabs(a - b); }, "sum"),
       rt,
       at_},
      {"huber_loss",
       {{"delta", 0.5}, {"reduction", "none"}},
       {{{4, 5}, DType::F32, -2, 2}, {{4, 5}}},
       pair_loss(
           [](double a, double b) {
             const double e = std::fabs(a - b);
             return e <= 0.5 ? 0.5 * e * e : 0.5 * (e - 0.25);
           },
           "none"),
       rt,
       at_},
      {"bce_with_logits",
       {},
       {{{4, 5}, DType::F32, -30, 30}, {{4, 5}, DType::F32, 0, 1}},
       pair_loss(
           [](double x, double y) {
             return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::fabs(x)));
           },
           "mean"),
       rt,
       at_},
      {"kl_div",
       {{"reduction", "sum"}},
       {{{4, 5}, DType::F32, -3, 0}, {{4, 5}, DType::F32, 0, 1}},
       pair_loss([](double x, double y) { return y == 0 ? 0 : y * (std::log(y) - x); }, "sum"),
       rt,
       at_},
      {"kl_div",
       {{"log_target", true}},
       {{{4, 5}, DType::F32, -3, 0}, {{4, 5}, DType::F32, -3, 0}},
       pair_loss([](double x, double y) { return std::exp(y) * (y - x); }, "mean"),
       rt,
       at_},
  };
  check_cases("losses", c);
}

TEST_CASE("sort, argsort and top-k are stable and exact", "[ops][sort]") {
  // Integer-valued rows so that ties occur: a stable order keeps index order.
  const In ties{{4, 9}, DType::F32, -3, 3, true}, real{{3, 11}};
  std::vector<Case> c = {
      {"sort", {}, {ties}, sorted_ref(-1, false, false), 0, 0},
      {"sort", {{"descending", true}}, {real}, sorted_ref(-1, true, false), 0, 0},
      {"argsort", {}, {ties}, sorted_ref(-1, false, true), 0, 0},
      {"argsort", {{"descending", true}}, {ties}, sorted_ref(-1, true, true), 0, 0},
      {"topk", {{"k", 3}}, {ties}, sorted_ref(3, true, false), 0, 0},
      {"topk", {{"k", 4}, {"largest", false}}, {real}, sorted_ref(4, false, false), 0, 0},
      {"topk_indices", {{"k", 3}}, {ties}, sorted_ref(3, true, true), 0, 0},
      {"topk_indices",
       {{"k", 2}, {"largest", false}, {"axis", 1}},
       {{{2, 5}, DType::I32, -9, 9, true}},
       sorted_ref(2, false, true),
       0,
       0},
      // Along axis 0: the same rows, transposed.
      {"topk",
       {{"k", 2}, {"axis", 0}},
       {{{5, 3}}},
       [](const V& v) {
         HostTensor t = gen({3, 5}, [&](const Idx& i) { return at(v[0], {i[1], i[0]}); });
         const HostTensor s = sorted_ref(2, true, false)({t});
         return gen({2, 3}, [&](const Idx& i) { return at(s, {i[1], i[0]}); });
       },
       0,
       0},
  };
  check_cases("sort", c);
}

TEST_CASE("gather_nd and scatter_nd follow ONNX's reference", "[ops][indexing]") {
  std::vector<Case> c = {
      // Positions in dims 0-1 of [2, 3, 4]: negatives count from the end.
      {"gather_nd",
       {},
       {{{2, 3, 4}}, {{5, 2}, DType::I64, -2, 1, true}},
       [](const V& v) {
         return gen({5, 4}, [&](const Idx& i) {
           return at(v[0], {wrap(at(v[1], {i[0], 0}), 2), wrap(at(v[1], {i[0], 1}), 3), i[1]});
         });
       },
       0,
       0},
      // A full position per row: scalars.
      {"gather_nd",
       {},
       {{{2, 3}}, {{4, 2}, DType::I32, 0, 1, true}},
       [](const V& v) {
         return gen({4}, [&](const Idx& i) {
           return at(v[0], {wrap(at(v[1], {i[0], 0}), 2), wrap(at(v[1], {i[0], 1}), 3)});
         });
       },
       0,
       0},
      {"gather_nd",
       {{"batch_dims", 1}},
       {{{2, 3, 4}}, {{2, 1}, DType::I64, 0, 2, true}},
       [](const V& v) {
         return gen({2, 4}, [&](const Idx& i) {
           return at(v[0], {i[0], wrap(at(v[1], {i[0], 0}), 3), i[1]});
         });
       },
       0,
       0},
  };
  // scatter_nd: rows of [5, 3] replaced (in order: the last write wins) or combined.
  auto scatter_ref = [](const std::string& red) -> Ref {
    return [red](const V& v) {
      HostTensor r = v[0];
      for (int64_t u = 0; u < v[1].shape[0]; ++u) {
        const int64_t row = wrap(v[1].data[static_cast<size_t>(u)], 5);
        for (int64_t j = 0; j < 3; ++j) {
          double& d = at(r, {row, j});
          const double x = at(v[2], {u, j});
          d = red == "none"  ? x
              : red == "add" ? d + x
              : red == "mul" ? d * x
              : red == "max" ? std::max(d, x)
                             : std::min(d, x);
        }
      }
      return r;
    };
  };
  const In data{{5, 3}}, idx{{4, 1}, DType::I64, -5, 4, true}, upd{{4, 3}};
  for (const char* red : {"none", "add", "mul", "max", "min"})
    c.push_back(
        {"scatter_nd", {{"reduction", red}}, {data, idx, upd}, scatter_ref(red), 1e-6, 1e-6, red});
  // Single elements of [4, 3] (the position has both dims).
  c.push_back({"scatter_nd",
               {{"reduction", "add"}},
               {{{4, 3}}, {{6, 2}, DType::I32, 0, 2, true}, {{6}}},
               [](const V& v) {
                 HostTensor r = v[0];
                 for (int64_t u = 0; u < 6; ++u)
                   at(r, {static_cast<int64_t>(at(v[1], {u, 0})),
                          static_cast<int64_t>(at(v[1], {u, 1}))}) +=
                       v[2].data[static_cast<size_t>(u)];
                 return r;
               },
               1e-6,
               1e-6});
  check_cases("indexing", c);
}

TEST_CASE("rearrangements move elements like ONNX's reshape-transpose definitions",
          "[ops][movement]") {
  std::vector<Case> c = {
      // DCR: [N, C, H, W] -> reshape [N, b, b, C/b^2, H, W] -> transpose (0, 3, 4, 1, 5, 2) ->
      // reshape.
      {"depth_to_space",
       {{"block", 2}},
       {{{2, 8, 2, 3}}},
       [](const V& v) {
         return gen({2, 2, 4, 6}, [&](const Idx& i) {
           const int64_t b1 = i[2] % 2, b2 = i[3] % 2;
           return at(v[0], {i[0], (b1 * 2 + b2) * 2 + i[1], i[2] / 2, i[3] / 2});
         });
       },
       0,
       0},
      // CRD: reshape [N, C/b^2, b, b, H, W] -> transpose (0, 1, 4, 2, 5, 3).
      {"depth_to_space",
       {{"block", 2}, {"mode", "CRD"}},
       {{{1, 8, 2, 3}}},
       [](const V& v) {
         return gen({1, 2, 4, 6}, [&](const Idx& i) {
           return at(v[0], {i[0], i[1] * 4 + (i[2] % 2) * 2 + i[3] % 2, i[2] / 2, i[3] / 2});
         });
       },
       0,
       0},
      // reshape [N, C, H/b, b, W/b, b] -> transpose (0, 3, 5, 1, 2, 4) -> [N, C b^2, H/b, W/b].
      {"space_to_depth",
       {{"block", 3}},
       {{{2, 2, 3, 6}}},
       [](const V& v) {
         return gen({2, 18, 1, 2}, [&](const Idx& i) {
           const int64_t b1 = i[1] / 6, b2 = i[1] / 2 % 3, ch = i[1] % 2;
           return at(v[0], {i[0], ch, i[2] * 3 + b1, i[3] * 3 + b2});
         });
       },
       0,
       0},
      // CRD: reshape [N, C, H/b, b, W/b, b] -> transpose (0, 1, 3, 5, 2, 4).
      {"space_to_depth",
       {{"block", 2}, {"mode", "CRD"}},
       {{{1, 3, 4, 2}}},
       [](const V& v) {
         return gen({1, 12, 2, 1}, [&](const Idx& i) {
           const int64_t ch = i[1] / 4, b1 = i[1] / 2 % 2, b2 = i[1] % 2;
           return at(v[0], {i[0], ch, i[2] * 2 + b1, i[3] * 2 + b2});
         });
       },
       0,
       0},
      {"reverse_sequence",
       {},
       {{{4, 3, 2}}, {{3}, DType::I64, 0, 4, true}},
       [](const V& v) {
         return gen({4, 3, 2}, [&](const Idx& i) {
           const int64_t len = static_cast<int64_t>(v[1].data[static_cast<size_t>(i[1])]);
           return at(v[0], {i[0] < len ? len - 1 - i[0] : i[0], i[1], i[2]});
         });
       },
       0,
       0},
      {"reverse_sequence",
       {{"batch_axis", 0}, {"time_axis", 1}},
       {{{3, 5}}, {{3}, DType::I32, 1, 5, true}},
       [](const V& v) {
         return gen({3, 5}, [&](const Idx& i) {
           const int64_t len = static_cast<int64_t>(v[1].data[static_cast<size_t>(i[0])]);
           return at(v[0], {i[0], i[1] < len ? len - 1 - i[1] : i[1]});
         });
       },
       0,
       0},
      {"eye_like",
       {{"k", 1}},
       {{{3, 4}}},
       [](const V&) {
         return gen({3, 4}, [](const Idx& i) { return i[1] - i[0] == 1 ? 1.0 : 0.0; });
       },
       0,
       0},
      {"eye_like",
       {{"k", -2}, {"dtype", "i32"}},
       {{{4, 3}}},
       [](const V&) {
         return gen({4, 3}, [](const Idx& i) { return i[1] - i[0] == -2 ? 1.0 : 0.0; });
       },
       0,
       0},
  };
  check_cases("rearrange", c);
}

TEST_CASE("resize: nearest, linear and cubic under the coordinate transformations",
          "[ops][resize]") {
  // Interpolation sums <= 16 f32 products of O(1) values: 1e-5.
  const In x{{1, 2, 4, 5}};
  std::vector<Case> c;
  for (const char* interp : {"nearest", "linear", "cubic"})
    for (const char* mode : {"half_pixel", "align_corners", "asymmetric"})
      for (const auto& [oh, ow] : {std::pair<int64_t, int64_t>{7, 3}, {8, 10}})
        c.push_back({"resize",
                     {{"sizes", {1, 2, oh, ow}},
                      {"mode", interp},
                      {"coordinate_transformation_mode", mode}},
                     {x},
                     resize_ref(interp, mode, oh, ow),
                     1e-5,
                     1e-5,
                     std::string(interp) + " " + mode});
  check_cases("resize", c);
}

TEST_CASE("quantize_linear and dequantize_linear round half to even and saturate",
          "[ops][quantize]") {
  auto rne = [](double v) { return std::nearbyint(v); };  // the default rounding mode: half to even
  std::vector<Case> c = {
      // Per tensor, u8 with a zero point: values past the range saturate at 0 and 255.
      {"quantize_linear",
       {},
       {{{3, 7}, DType::F32, -4, 4},
        {{}, DType::F32, 0.01, 0.02},
        {{1}, DType::U8, 100, 150, true}},
       [&](const V& v) {
         return gen(v[0].shape, [&](const Idx& i) {
           const float q = static_cast<float>(at(v[0], i)) / static_cast<float>(v[1].data[0]);
           return std::min(255.0, std::max(0.0, rne(q) + v[2].data[0]));
         });
       },
       0,
       0},
      // Per axis (channels, dim 1), i8 without a zero point (the dtype attribute).
      {"quantize_linear",
       {{"dtype", "i8"}},
       {{{2, 3, 4}, DType::F32, -2, 2}, {{3}, DType::F32, 0.01, 0.05}},
       [&](const V& v) {
         return gen(v[0].shape, [&](const Idx& i) {
           const float q = static_cast<float>(at(v[0], i)) /
                           static_cast<float>(v[1].data[static_cast<size_t>(i[1])]);
           return std::min(127.0, std::max(-128.0, rne(q)));
         });
       },
       0,
       0},
      // Exact halves round to even: x / 0.5 = k + 0.5.
      {"quantize_linear",
       {{"dtype", "i32"}},
       {{{9}, DType::F32, -9, 9, true}, {{}, DType::F32, 2, 2, true}},
       [&](const V& v) {
         return gen(v[0].shape, [&](const Idx& i) { return rne(at(v[0], i) / 2); });
       },
       0,
       0},
      {"dequantize_linear",
       {},
       {{{3, 5}, DType::U8, 0, 255, true},
        {{}, DType::F32, 0.01, 0.02},
        {{}, DType::U8, 100, 150, true}},
       [](const V& v) {
         return gen(v[0].shape,
                    [&](const Idx& i) { return (at(v[0], i) - v[2].data[0]) * v[1].data[0]; });
       },
       1e-6,
       1e-7},
      // Blocked along dim 1 (blocks of 2): scale [3, 2].
      {"dequantize_linear",
       {{"axis", 1}, {"block_size", 2}},
       {{{3, 4}, DType::I8, -128, 127, true}, {{3, 2}, DType::F32, 0.5, 1}},
       [](const V& v) {
         return gen(v[0].shape, [&](const Idx& i) {
           return at(v[0], i) * at(v[1], {i[0], i[1] / 2});
         });
       },
       1e-6,
       1e-7},
  };
  check_cases("quantize", c);
}

TEST_CASE("layer compositions match float64", "[ops][normalization][pooling][contraction]") {
  const double rt = 2e-5, at_ = 2e-5;
  std::vector<Case> c = {
      {"hardmax",
       {{"axis", 1}},
       {{{3, 5}, DType::F32, -2, 2, true}},
       [](const V& v) {
         return gen({3, 5}, [&](const Idx& i) {
           int64_t best = 0;
           for (int64_t j = 1; j < 5; ++j)
             if (at(v[0], {i[0], j}) > at(v[0], {i[0], best})) best = j;
           return i[1] == best ? 1.0 : 0.0;
         });
       },
       0,
       0},
      // size 4: one channel below, two above (ONNX: floor and ceil of (size - 1) / 2).
      {"lrn",
       {{"size", 4}, {"alpha", 0.3}, {"beta", 0.6}, {"bias", 1.5}},
       {{{2, 5, 2, 3}}},
       [](const V& v) {
         return gen(v[0].shape, [&](const Idx& i) {
           double s = 0;
           for (int64_t ch = std::max<int64_t>(0, i[1] - 1); ch <= std::min<int64_t>(4, i[1] + 2);
                ++ch) {
             const double x = at(v[0], {i[0], ch, i[2], i[3]});
             s += x * x;
           }
           return at(v[0], i) / std::pow(1.5 + 0.3 / 4 * s, 0.6);
         });
       },
       rt,
       at_},
      {"mean_variance_norm",
       {},
       {{{2, 3, 4, 2}}},
       [](const V& v) {
         const HostTensor m = reduce_ref(
             v[0], {0, 2, 3}, true, 0, [](double a, double x) { return a + x; },
             [](double a, double k) { return a / k; });
         const HostTensor m2 = reduce_ref(
             v[0], {0, 2, 3}, true, 0, [](double a, double x) { return a + x * x; },
             [](double a, double k) { return a / k; });
         return gen(v[0].shape, [&](const Idx& i) {
           const double mu = at_b(m, i);
           return (at(v[0], i) - mu) / (std::sqrt(at_b(m2, i) - mu * mu) + 1e-9);
         });
       },
       1e-4,
       1e-4},
      {"lp_normalize",
       {{"p", 1}, {"axis", 0}},
       {{{4, 3}}},
       [](const V& v) {
         const HostTensor s =
             reduce_ref(v[0], {0}, true, 0, [](double a, double x) { return a + std::fabs(x); });
         return gen(v[0].shape, [&](const Idx& i) { return at(v[0], i) / at_b(s, i); });
       },
       rt,
       at_},
      {"lp_pool2d",
       {{"kernel", {2, 3}}, {"stride", {1, 2}}, {"padding", {1, 1}}, {"p", 3.0}},
       {{{1, 2, 4, 5}}},
       [](const V& v) {
         const HostTensor& x = v[0];
         return gen({1, 2, 5, 3}, [&](const Idx& i) {
           double s = 0;
           for (int64_t a = 0; a < 2; ++a)
             for (int64_t b = 0; b < 3; ++b) {
               const int64_t r = i[2] - 1 + a, q = i[3] * 2 - 1 + b;
               if (r >= 0 && r < 4 && q >= 0 && q < 5)
                 s += std::pow(std::fabs(at(x, {i[0], i[1], r, q})), 3);
             }
           return std::cbrt(s);
         });
       },
       1e-4,
       1e-5},
      {"lp_pool1d",
       {{"kernel", {3}}, {"stride", {1}}},
       {{{2, 2, 6}}},
       [](const V& v) {
         return gen({2, 2, 4}, [&](const Idx& i) {
           double s = 0;
           for (int64_t a = 0; a < 3; ++a) s += std::pow(at(v[0], {i[0], i[1], i[2] + a}), 2);
           return std::sqrt(s);
         });
       },
       1e-4,
       1e-5},
      {"lp_pool3d",
       {{"kernel", {2, 2, 2}}, {"p", 1.0}},
       {{{1, 1, 4, 4, 2}}},
       [](const V& v) {
         return gen({1, 1, 2, 2, 1}, [&](const Idx& i) {
           double s = 0;
           for (int64_t a = 0; a < 2; ++a)
             for (int64_t b = 0; b < 2; ++b)
               for (int64_t d = 0; d < 2; ++d)
                 s += std::fabs(at(v[0], {0, 0, i[2] * 2 + a, i[3] * 2 + b, d}));
           return s;
         });
       },
       1e-5,
       1e-5},
      {"gemm",
       {{"alpha", 0.5}, {"beta", 2.0}, {"trans_a", true}, {"trans_b", true}},
       {{{4, 3}}, {{5, 4}}, {{5}}},
       [](const V& v) {
         return gen({3, 5}, [&](const Idx& i) {
           double s = 0;
           for (int64_t k = 0; k < 4; ++k) s += at(v[0], {k, i[0]}) * at(v[1], {i[1], k});
           return 0.5 * s + 2 * v[2].data[static_cast<size_t>(i[1])];
         });
       },
       rt,
       at_},
      {"gemm",
       {},
       {{{2, 3}}, {{3, 4}}},
       [](const V& v) {
         return gen({2, 4}, [&](const Idx& i) {
           double s = 0;
           for (int64_t k = 0; k < 3; ++k) s += at(v[0], {i[0], k}) * at(v[1], {k, i[1]});
           return s;
         });
       },
       rt,
       at_},
      {"cosine_similarity",
       {},
       {{{3, 4}}, {{1, 4}}},
       [](const V& v) {
         return gen({3}, [&](const Idx& i) {
           double d = 0, a = 0, b = 0;
           for (int64_t k = 0; k < 4; ++k) {
             const double x = at(v[0], {i[0], k}), y = at(v[1], {0, k});
             d += x * y, a += x * x, b += y * y;
           }
           return d / std::max(std::sqrt(a * b), 1e-8);
         });
       },
       rt,
       at_},
      {"glu",
       {{"axis", 0}},
       {{{4, 3}}},
       [](const V& v) {
         return gen({2, 3}, [&](const Idx& i) {
           return at(v[0], i) / (1 + std::exp(-at(v[0], {i[0] + 2, i[1]})));
         });
       },
       rt,
       at_},
  };
  check_cases("layers", c);
}

TEST_CASE("the new families reject bad input with the operator, value and what is valid",
          "[ops][errors]") {
  Program p("bad");
  const Tensor x = p.input("x", {4, 3});
  const Tensor i = p.input("i", {2, 1}, DType::I64);
  CHECK_THROWS_WITH(ops::call("topk", {x}, {{"k", 4}}), Contains("topk: k 4 must be in [0, 3]"));
  CHECK_THROWS_WITH(ops::call("gather_nd", {x, x}),
                    Contains("gather_nd: indices 'x' must be an integer type"));
  CHECK_THROWS_WITH(ops::call("scatter_nd", {x, i, p.input("u", {2, 2})}),
                    Contains("scatter_nd: updates 'u' must be [2, 3]"));
  CHECK_THROWS_WITH(ops::call("scatter_nd", {x, i, p.input("u3", {2, 3})}, {{"reduction", "avg"}}),
                    Contains("reduction 'avg' is not one of none, add, mul, max, min"));
  CHECK_THROWS_WITH(ops::call("resize", {x}, {{"sizes", {8}}}),
                    Contains("resize: sizes has 1 values"));
  CHECK_THROWS_WITH(ops::call("resize", {x}, {{"sizes", {8, 6}}, {"mode", "bilinear"}}),
                    Contains("mode 'bilinear' is not one of nearest, linear, cubic"));
  CHECK_THROWS_WITH(ops::call("depth_to_space", {p.input("d", {1, 6, 2, 2})}, {{"block", 2}}),
                    Contains("channels 6 of 'd' must be a multiple of block^2"));
  CHECK_THROWS_WITH(ops::call("nll_loss", {x, x}),
                    Contains("nll_loss: target 'x' must be an integer type"));
  CHECK_THROWS_WITH(ops::call("mse_loss", {x, x}, {{"reduction", "avg"}}),
                    Contains("reduction 'avg' is not one of none, sum, mean"));
  CHECK_THROWS_WITH(ops::call("quantize_linear", {x, p.input("s", {4})}),
                    Contains("per-axis 's' [4] must have one value per element of axis 1"));
  CHECK_THROWS_WITH(ops::call("glu", {p.input("g", {3, 5})}),
                    Contains("glu: dim 1 of 'g' (5) must be even"));
  CHECK_THROWS_WITH(ops::call("huber_loss", {x, x}, {{"delta", 0.0}}),
                    Contains("huber_loss: delta 0.000000 must be > 0"));
}

namespace {
double sigmoid_ref(double x) {
  return 1 / (1 + std::exp(-x));
}

// ONNX's RNN / GRU / LSTM equations in float64, step by step: x [T, B, I],
// w [D, G H, I], r [D, G H, H], b [D, 2 G H]; returns y [T, D, B, H].
HostTensor recurrent_ref(const std::string& kind, const V& v, int64_t dirs, bool lbr = false) {
  const HostTensor &x = v[0], &w = v[1], &r = v[2];
  const bool has_b = v.size() > 3;
  const int64_t T = x.shape[0], B = x.shape[1], I = x.shape[2];
  const int64_t G = kind == "rnn" ? 1 : kind == "gru" ? 3 : 4, H = w.shape[1] / G;
  HostTensor y{{T, dirs, B, H}, std::vector<double>(static_cast<size_t>(T * dirs * B * H), 0.0)};
  for (int64_t d = 0; d < dirs; ++d) {
    std::vector<double> h(static_cast<size_t>(B * H), 0.0), c = h;
    auto xw = [&](int64_t t, int64_t b, int64_t g) {
      double s = has_b ? at(v[3], {d, g}) : 0;
      for (int64_t i = 0; i < I; ++i) s += at(x, {t, b, i}) * at(w, {d, g, i});
      return s;
    };
    auto hr = [&](const std::vector<double>& hh, int64_t b, int64_t g) {
      double s = has_b ? at(v[3], {d, G * H + g}) : 0;
      for (int64_t k = 0; k < H; ++k) s += hh[static_cast<size_t>(b * H + k)] * at(r, {d, g, k});
      return s;
    };
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = d == 1 || dirs == 0 ? T - 1 - s : s;
      std::vector<double> hn = h, cn = c;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) {
          const size_t e = static_cast<size_t>(b * H + j);
          if (kind == "rnn") {
            hn[e] = std::tanh(xw(t, b, j) + hr(h, b, j));
          } else if (kind == "gru") {
            const double z = sigmoid_ref(xw(t, b, j) + hr(h, b, j));
            const double rg = sigmoid_ref(xw(t, b, H + j) + hr(h, b, H + j));
            double cand;
            if (lbr) {
              cand = std::tanh(xw(t, b, 2 * H + j) + rg * hr(h, b, 2 * H + j));
            } else {
              std::vector<double> rh(static_cast<size_t>(B * H));
              for (int64_t k = 0; k < H; ++k)
                rh[static_cast<size_t>(b * H + k)] =
                    sigmoid_ref(xw(t, b, H + k) + hr(h, b, H + k)) *
                    h[static_cast<size_t>(b * H + k)];
              cand = std::tanh(xw(t, b, 2 * H + j) + hr(rh, b, 2 * H + j));
            }
            hn[e] = (1 - z) * cand + z * h[e];
          } else {
            const double i = sigmoid_ref(xw(t, b, j) + hr(h, b, j));
            const double o = sigmoid_ref(xw(t, b, H + j) + hr(h, b, H + j));
            const double f = sigmoid_ref(xw(t, b, 2 * H + j) + hr(h, b, 2 * H + j));
            const double g = std::tanh(xw(t, b, 3 * H + j) + hr(h, b, 3 * H + j));
            cn[e] = f * c[e] + i * g;
            hn[e] = o * std::tanh(cn[e]);
          }
          at(y, {t, d, b, j}) = hn[e];
        }
      h = hn, c = cn;
    }
  }
  return y;
}
}  // namespace

TEST_CASE("rnn, gru and lstm follow ONNX's equations step by step", "[ops][recurrent]") {
  // f32 through <= 4 steps of sums of ~10 products and a tanh / sigmoid: 2e-5.
  const double rt = 2e-5, at_ = 2e-5;
  const int64_t T = 4, B = 2, I = 3, H = 5;
  auto ins = [&](int64_t G, int64_t D, bool bias) {
    std::vector<In> v = {{{T, B, I}}, {{D, G * H, I}}, {{D, G * H, H}}};
    if (bias) v.push_back({{D, 2 * G * H}});
    return v;
  };
  std::vector<Case> c = {
      {"rnn", {}, ins(1, 1, true), [](const V& v) { return recurrent_ref("rnn", v, 1); }, rt, at_},
      {"rnn",
       {{"direction", "bidirectional"}},
       ins(1, 2, false),
       [](const V& v) { return recurrent_ref("rnn", v, 2); },
       rt,
       at_},
      {"gru", {}, ins(3, 1, true), [](const V& v) { return recurrent_ref("gru", v, 1); }, rt, at_},
      {"gru",
       {{"linear_before_reset", true}},
       ins(3, 1, true),
       [](const V& v) { return recurrent_ref("gru", v, 1, true); },
       rt,
       at_},
      {"gru",
       {{"direction", "bidirectional"}},
       ins(3, 2, true),
       [](const V& v) { return recurrent_ref("gru", v, 2); },
       rt,
       at_},
      {"lstm",
       {},
       ins(4, 1, true),
       [](const V& v) { return recurrent_ref("lstm", v, 1); },
       rt,
       at_},
      {"lstm",
       {{"direction", "bidirectional"}},
       ins(4, 2, false),
       [](const V& v) { return recurrent_ref("lstm", v, 2); },
       rt,
       at_},
      // The last hidden state: y's last step (forward).
      {"lstm",
       {{"output", "h"}},
       ins(4, 1, true),
       [&](const V& v) {
         const HostTensor y = recurrent_ref("lstm", v, 1);
         return gen({1, B, H}, [&](const Idx& i) { return at(y, {T - 1, 0, i[1], i[2]}); });
       },
       rt,
       at_},
  };
  check_cases("recurrent", c);
}

namespace {
// RoPE over x [b, heads, s, head] (4-D) as ONNX's reference computes it: the
// pairs rotated by cos / sin of [b, s, rd / 2] (or [positions, rd / 2] at ids).
HostTensor rope_ref(const V& v, bool interleaved, int64_t rd, const HostTensor* ids) {
  const HostTensor& x = v[0];
  const int64_t half = rd / 2;
  return gen(x.shape, [&](const Idx& i) {
    const int64_t f = i[3];
    if (f >= rd) return at(x, i);
    const int64_t pair = interleaved ? f / 2 : f % half;
    const bool first = interleaved ? f % 2 == 0 : f < half;
    const int64_t lo = interleaved ? 2 * pair : pair, hi = interleaved ? lo + 1 : pair + half;
    const int64_t row = ids ? static_cast<int64_t>(at(*ids, {i[0], i[2]})) : -1;
    const double c = ids ? at(v[1], {row, pair}) : at(v[1], {i[0], i[2], pair});
    const double s = ids ? at(v[2], {row, pair}) : at(v[2], {i[0], i[2], pair});
    const double x1 = at(x, {i[0], i[1], i[2], lo}), x2 = at(x, {i[0], i[1], i[2], hi});
    return first ? c * x1 - s * x2 : s * x1 + c * x2;
  });
}
}  // namespace

TEST_CASE("rotary_embedding and swiglu match float64", "[ops][rotary]") {
  const double rt = 1e-5, at_ = 1e-6;
  std::vector<Case> c = {
      {"rotary_embedding",
       {},
       {{{2, 3, 4, 8}}, {{2, 4, 4}}, {{2, 4, 4}}},
       [](const V& v) { return rope_ref(v, false, 8, nullptr); },
       rt,
       at_},
      {"rotary_embedding",
       {{"interleaved", true}, {"rotary_dim", 4}},
       {{{1, 2, 3, 6}}, {{1, 3, 2}}, {{1, 3, 2}}},
       [](const V& v) { return rope_ref(v, true, 4, nullptr); },
       rt,
       at_},
      {"rotary_embedding",
       {},
       {{{2, 1, 3, 4}}, {{9, 2}}, {{9, 2}}, {{2, 3}, DType::I64, 0, 8, true}},
       [](const V& v) { return rope_ref(v, false, 4, &v[3]); },
       rt,
       at_},
      // 3-D [b, s, heads * head]: the same rotation per head.
      {"rotary_embedding",
       {{"num_heads", 2}},
       {{{1, 3, 8}}, {{1, 3, 2}}, {{1, 3, 2}}},
       [](const V& v) {
         HostTensor x4 = gen({1, 2, 3, 4}, [&](const Idx& i) {
           return at(v[0], {0, i[2], i[1] * 4 + i[3]});
         });
         const HostTensor r = rope_ref({x4, v[1], v[2]}, false, 4, nullptr);
         return gen({1, 3, 8}, [&](const Idx& i) { return at(r, {0, i[2] / 4, i[1], i[2] % 4}); });
       },
       rt,
       at_},
      {"swiglu",
       {{"alpha", 1.5}},
       {{{3, 4}, DType::F32, -4, 4}, {{3, 4}}},
       ew([](const std::vector<double>& e) { return e[0] / (1 + std::exp(-1.5 * e[0])) * e[1]; }),
       rt,
       at_},
  };
  check_cases("rotary", c);
}
