// Reductions, contractions, convolutions, pooling, normalizations, attention
// and data movement against plain float64 loops written here (not the DSL).
// One Program (one JIT compile) per family; n = 5 and m = 3 are symbolic.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "OpsTestUtil.h"

using namespace pto;
using namespace pto::test;
using json = nlohmann::json;

namespace {
const Dim n = Dim::symbol("n");
using V = std::vector<HostTensor>;

HostTensor var_ref(const HostTensor& x, std::vector<int> axes, bool keep, int ddof) {
  const HostTensor mean = reduce_ref(x, axes, true, 0, [](double a, double v) { return a + v; },
                                     [](double a, double c) { return a / c; });
  HostTensor d = x;
  for_each(x.shape, [&](const Idx& i) { at(d, i) = std::pow(at(x, i) - at_b(mean, i), 2); });
  return reduce_ref(d, axes, keep, 0, [](double a, double v) { return a + v; },
                    [ddof](double a, double c) { return a / (c - ddof); });
}

// C = A @ B with numpy batch broadcasting (rank >= 2 operands).
HostTensor matmul_ref(const HostTensor& a, const HostTensor& b) {
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const HostTensor ba{Idx(a.shape.begin(), a.shape.end() - 2), {}}, bb{Idx(b.shape.begin(), b.shape.end() - 2), {}};
  Idx shape = bshape({ba, bb});
  const int64_t M = a.shape[ra - 2], K = a.shape[ra - 1], N = b.shape[rb - 1];
  shape.push_back(M);
  shape.push_back(N);
  return gen(shape, [&](const Idx& o) {
    double s = 0;
    for (int64_t k = 0; k < K; ++k) {
      Idx ia(o.end() - static_cast<long>(ra), o.end()), ib(o.end() - static_cast<long>(rb), o.end());
      for (size_t d = 0; d + 2 < ra; ++d) ia[d] = a.shape[d] == 1 ? 0 : ia[d];
      for (size_t d = 0; d + 2 < rb; ++d) ib[d] = b.shape[d] == 1 ? 0 : ib[d];
      ia[ra - 1] = k;
      ib[rb - 2] = k;
      s += at(a, ia) * at(b, ib);
    }
    return s;
  });
}

// N-d convolution reference: x channels-first or -last, w [O, C/g, k...].
HostTensor conv_ref(const HostTensor& x, const HostTensor& w, const HostTensor* b, int sp, std::vector<int> st,
                    std::vector<int> pd, std::vector<int> dl, int g, bool last) {
  const int64_t N = x.shape[0], C = last ? x.shape.back() : x.shape[1], O = w.shape[0], Cg = w.shape[1];
  Idx in(static_cast<size_t>(sp)), ks(static_cast<size_t>(sp)), out(static_cast<size_t>(sp));
  for (int s = 0; s < sp; ++s) {
    in[s] = x.shape[static_cast<size_t>(last ? 1 + s : 2 + s)];
    ks[s] = w.shape[static_cast<size_t>(2 + s)];
    out[s] = (in[s] + 2 * pd[s] - dl[s] * (ks[s] - 1) - 1) / st[s] + 1;
  }
  Idx shape{N};
  if (!last) shape.push_back(O);
  shape.insert(shape.end(), out.begin(), out.end());
  if (last) shape.push_back(O);
  (void)C;
  return gen(shape, [&](const Idx& o) {
    const int64_t nn = o[0], oc = last ? o.back() : o[1];
    Idx pos(o.begin() + (last ? 1 : 2), o.begin() + (last ? 1 : 2) + sp);
    double s = b ? b->data[static_cast<size_t>(oc)] : 0;
    for (int64_t c = 0; c < Cg; ++c)
      for_each(ks, [&](const Idx& k) {
        Idx xi{nn};
        if (!last) xi.push_back(oc / (O / g) * Cg + c);
        for (int d = 0; d < sp; ++d) {
          const int64_t p = pos[d] * st[d] + k[d] * dl[d] - pd[d];
          if (p < 0 || p >= in[d]) return;
          xi.push_back(p);
        }
        if (last) xi.push_back(oc / (O / g) * Cg + c);
        Idx wi{oc, c};
        wi.insert(wi.end(), k.begin(), k.end());
        s += at(x, xi) * at(w, wi);
      });
    return s;
  });
}

// ONNX's pooling: windows start at o * stride - begin, taps `dilation` apart;
// an average divides by the in-image taps, or with include_pad by the taps
// inside [-begin, in + end).
struct PoolRef {
  Idx k, st, begin, end, dil;
  bool ceil = false;
};
HostTensor pool_ref(const HostTensor& x, int sp, const PoolRef& p, bool is_max, bool include_pad) {
  Idx shape{x.shape[0], x.shape[1]};
  for (int s = 0; s < sp; ++s) {
    const int64_t room = x.shape[2 + s] + p.begin[s] + p.end[s] - ((p.k[s] - 1) * p.dil[s] + 1);
    int64_t out = (p.ceil ? (room + p.st[s] - 1) / p.st[s] : room / p.st[s]) + 1;
    if (p.ceil && (out - 1) * p.st[s] >= x.shape[2 + s] + p.begin[s]) --out;
    shape.push_back(out);
  }
  return gen(shape, [&](const Idx& o) {
    double acc = is_max ? -INFINITY : 0, cnt = 0, padded = 0;
    for_each(p.k, [&](const Idx& kk) {
      Idx xi{o[0], o[1]};
      bool in_image = true, in_padded = true;
      for (int s = 0; s < sp; ++s) {
        const int64_t q = o[2 + s] * p.st[s] - p.begin[s] + kk[s] * p.dil[s];
        in_image = in_image && q >= 0 && q < x.shape[2 + s];
        in_padded = in_padded && q < x.shape[2 + s] + p.end[s];
        xi.push_back(q);
      }
      padded += in_padded;
      if (!in_image) return;
      acc = is_max ? std::max(acc, at(x, xi)) : acc + at(x, xi);
      cnt += 1;
    });
    return is_max ? acc : acc / (include_pad ? padded : cnt);
  });
}
HostTensor pool_ref(const HostTensor& x, int sp, Idx k, Idx st, Idx pd, bool is_max,
                    bool include_pad) {
  return pool_ref(x, sp, {k, st, pd, pd, Idx(static_cast<size_t>(sp), 1)}, is_max, include_pad);
}

HostTensor softmax_ref(const HostTensor& x, int axis, bool log) {
  const HostTensor m = reduce_ref(x, {axis}, true, -INFINITY, [](double a, double v) { return std::max(a, v); });
  HostTensor e = x;
  for_each(x.shape, [&](const Idx& i) { at(e, i) = std::exp(at(x, i) - at_b(m, i)); });
  const HostTensor s = reduce_ref(e, {axis}, true, 0, [](double a, double v) { return a + v; });
  return gen(x.shape, [&](const Idx& i) {
    return log ? at(x, i) - at_b(m, i) - std::log(at_b(s, i)) : at(e, i) / at_b(s, i);
  });
}

Ref sum_ref(std::vector<int> axes, bool keep) {
  return [=](const V& v) { return reduce_ref(v[0], axes, keep, 0, [](double a, double x) { return a + x; }); };
}
}  // namespace

TEST_CASE("reductions over any axes with keepdims match float64", "[ops][reduction]") {
  const Shape X{4, n, 3};
  auto add = [](double a, double v) { return a + v; };
  // f32 sums of <= 60 values of magnitude <= 1: error <= 60 * 2^-24 * 60 ~ 2e-4 worst case; 1e-5 typical bound used
  // with rtol 1e-5 + atol 1e-5 (values O(1..10)).
  const double rt = 1e-5, at_ = 1e-5;
  auto arg = [](int axis, bool is_max, bool keep) -> Ref {
    return [=](const V& v) {
      const HostTensor& x = v[0];
      const HostTensor best = reduce_ref(x, {axis}, true, is_max ? -INFINITY : INFINITY,
                                         [=](double a, double b) { return is_max ? std::max(a, b) : std::min(a, b); });
      HostTensor r = best;
      for (double& d : r.data) d = -1;
      for_each(x.shape, [&](const Idx& i) {
        Idx j = i;
        j[static_cast<size_t>(axis)] = 0;
        if (at(r, j) < 0 && at(x, i) == at(best, j)) at(r, j) = static_cast<double>(i[static_cast<size_t>(axis)]);
      });
      if (!keep) r.shape.erase(r.shape.begin() + axis);
      return r;
    };
  };
  auto cum = [](int axis, bool prod, bool excl, bool rev) -> Ref {
    return [=](const V& v) {
      const HostTensor& x = v[0];
      return gen(x.shape, [&](const Idx& i) {
        double acc = prod ? 1 : 0;
        for (int64_t k = 0; k < x.shape[static_cast<size_t>(axis)]; ++k) {
          const int64_t j = i[static_cast<size_t>(axis)];
          const bool in = rev ? (excl ? k > j : k >= j) : (excl ? k < j : k <= j);
          if (!in) continue;
          Idx xi = i;
          xi[static_cast<size_t>(axis)] = k;
          acc = prod ? acc * at(x, xi) : acc + at(x, xi);
        }
        return acc;
      });
    };
  };
  std::vector<Case> c = {
      {"reduce_sum", {{"axes", {1}}}, {{X}}, sum_ref({1}, false), rt, at_},
      {"reduce_sum", {}, {{X}}, sum_ref({}, false), rt, at_},
      {"reduce_max", {{"axes", {0, 2}}, {"keepdims", true}}, {{X}},
       [](const V& v) { return reduce_ref(v[0], {0, 2}, true, -INFINITY, [](double a, double x) { return std::max(a, x); }); }, 0, 0},
      {"reduce_min", {{"axes", {-1}}}, {{X}},
       [](const V& v) { return reduce_ref(v[0], {2}, false, INFINITY, [](double a, double x) { return std::min(a, x); }); }, 0, 0},
      {"reduce_prod", {{"axes", {1}}}, {{X, DType::F32, 0.5, 1.5}},
       [](const V& v) { return reduce_ref(v[0], {1}, false, 1, [](double a, double x) { return a * x; }); }, rt, at_},
      {"reduce_mean", {{"axes", {1}}, {"keepdims", true}}, {{X}},
       [=](const V& v) { return reduce_ref(v[0], {1}, true, 0, add, [](double a, double k) { return a / k; }); }, rt, at_},
      {"reduce_mean", {}, {{{7, 1}}},
       [=](const V& v) { return reduce_ref(v[0], {}, false, 0, add, [](double a, double k) { return a / k; }); }, rt, at_},
      {"reduce_var", {{"axes", {1}}, {"ddof", 1}}, {{X}}, [](const V& v) { return var_ref(v[0], {1}, false, 1); }, rt, at_},
      {"reduce_std", {{"axes", {0, 2}}, {"keepdims", true}}, {{X}},
       [](const V& v) {
         HostTensor r = var_ref(v[0], {0, 2}, true, 0);
         for (double& d : r.data) d = std::sqrt(d);
         return r;
       }, rt, at_},
      {"reduce_l1", {{"axes", {2}}}, {{X}}, [](const V& v) { return reduce_ref(v[0], {2}, false, 0, [](double a, double x) { return a + std::fabs(x); }); }, rt, at_},
      {"reduce_l2", {{"axes", {1}}}, {{X}},
       [](const V& v) { return reduce_ref(v[0], {1}, false, 0, [](double a, double x) { return a + x * x; }, [](double a, double) { return std::sqrt(a); }); }, rt, at_},
      {"reduce_sum_square", {{"axes", {0}}}, {{X}}, [](const V& v) { return reduce_ref(v[0], {0}, false, 0, [](double a, double x) { return a + x * x; }); }, rt, at_},
      {"reduce_logsumexp", {{"axes", {1}}}, {{X, DType::F32, -30, 30}},
       [](const V& v) {
         const HostTensor m = reduce_ref(v[0], {1}, false, -INFINITY, [](double a, double x) { return std::max(a, x); });
         HostTensor s = reduce_ref(v[0], {1}, false, 0, [](double a, double x) { return a + std::exp(x); });
         for (size_t i = 0; i < s.data.size(); ++i) s.data[i] = std::log(s.data[i]);
         (void)m;
         return s;
       }, 1e-5, 1e-5},
      {"argmax", {{"axis", 1}}, {{X, DType::F32, -2, 2, true}}, arg(1, true, false), 0, 0},
      {"argmin", {{"axis", -1}, {"keepdims", true}}, {{X, DType::F32, -2, 2, true}}, arg(2, false, true), 0, 0},
      {"cumsum", {{"axis", 1}}, {{X}}, cum(1, false, false, false), rt, at_},
      {"cumsum", {{"axis", 2}, {"exclusive", true}, {"reverse", true}}, {{X}}, cum(2, false, true, true), rt, at_},
      {"cumprod", {{"axis", 0}}, {{X}}, cum(0, true, false, false), rt, at_},
  };
  check_cases("reductions", c);
}

TEST_CASE("contractions and convolutions match float64 loops", "[ops][contraction][conv]") {
  // f32 dot products of <= 40 terms in [-1, 1]: |error| <= 40 * 2^-24 * 40 < 1e-4; use 2e-5 absolute
  // (observed errors are ~1e-6; an indexing bug gives O(1)).
  const double rt = 1e-5, at_ = 2e-5;
  auto mm = [](const V& v) { return matmul_ref(v[0], v[1]); };
  std::vector<Case> c = {
      {"matmul", {}, {{{2, 1, 3, 4}}, {{5, 4, 6}}}, mm, rt, at_},
      {"matmul", {}, {{{n, 4}}, {{4, 3}}}, mm, rt, at_},
      {"matmul", {}, {{{4}}, {{4, 6}}},
       [](const V& v) {
         HostTensor a = v[0];
         a.shape = {1, 4};
         HostTensor r = matmul_ref(a, v[1]);
         r.shape = {6};
         return r;
       }, rt, at_},
      {"linear", {}, {{{n, 4}}, {{3, 4}}, {{3}}},
       [](const V& v) {
         return gen({v[0].shape[0], 3}, [&](const Idx& i) {
           double s = v[2].data[static_cast<size_t>(i[1])];
           for (int64_t k = 0; k < 4; ++k) s += at(v[0], {i[0], k}) * at(v[1], {i[1], k});
           return s;
         });
       }, rt, at_},
      {"einsum", {{"equation", "bij,bjk->bik"}}, {{{2, 3, 4}}, {{2, 4, 5}}}, mm, rt, at_},
      {"einsum", {{"equation", "ii->i"}}, {{{4, 4}}}, [](const V& v) { return gen({4}, [&](const Idx& i) { return at(v[0], {i[0], i[0]}); }); }, 0, 0},
      {"einsum", {{"equation", "ij->"}}, {{{3, n}}}, sum_ref({}, false), rt, at_},
      {"einsum", {{"equation", "i,j"}}, {{{3}}, {{4}}},
       [](const V& v) { return gen({3, 4}, [&](const Idx& i) { return v[0].data[i[0]] * v[1].data[i[1]]; }); }, rt, 1e-7},
  };
  struct Cv {
    const char* op;
    int sp;
    Idx x, w;
    std::vector<int> st, pd, dl;
    int g;
    bool last, bias;
  };
  for (const Cv& k : std::vector<Cv>{
           {"conv2d", 2, {2, 3, 7, 6}, {4, 3, 3, 2}, {2, 1}, {1, 1}, {1, 1}, 1, false, true},
           {"conv2d", 2, {1, 4, 5, 5}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, false, false},  // depthwise
           {"conv2d", 2, {1, 5, 6, 4}, {6, 2, 2, 3}, {1, 2}, {0, 1}, {2, 1}, 2, true, true},   // NHWC, groups
           {"conv1d", 1, {2, 3, 11}, {2, 3, 3}, {2}, {2}, {2}, 1, false, true},
           {"conv3d", 3, {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1}, 1, false, false}}) {
    const int64_t O = k.w[0];
    json a = {{"stride", k.st}, {"padding", k.pd}, {"dilation", k.dl}, {"groups", k.g},
              {"layout", k.last ? (k.sp == 2 ? "NHWC" : "NWC") : "NCHW"}};
    std::vector<In> ins = {{Shape(k.x.begin(), k.x.end())}, {Shape(k.w.begin(), k.w.end())}};
    if (k.bias) ins.push_back({{O}});
    c.push_back({k.op, a, ins,
                 [k](const V& v) { return conv_ref(v[0], v[1], k.bias ? &v[2] : nullptr, k.sp, k.st, k.pd, k.dl, k.g, k.last); },
                 rt, at_});
  }
  // conv_transpose2d: scatter form of the definition, out[y] += x[iy] * w[ky] at y = iy*s - p + ky*d.
  c.push_back({"conv_transpose2d", {{"stride", {2, 2}}, {"padding", {1, 0}}, {"output_padding", {1, 0}}, {"groups", 2}},
               {{{1, 4, 3, 4}}, {{4, 3, 3, 2}}, {{6}}},
               [](const V& v) {
                 const HostTensor &x = v[0], &w = v[1];
                 const int64_t OH = (3 - 1) * 2 - 2 + 2 + 1 + 1, OW = (4 - 1) * 2 + 1 + 1;
                 HostTensor out = gen({1, 6, OH, OW}, [&](const Idx& i) { return v[2].data[i[1]]; });
                 for_each(x.shape, [&](const Idx& i) {
                   const int64_t g = i[1] / 2;
                   for (int64_t oc = 0; oc < 3; ++oc)
                     for (int64_t ky = 0; ky < 3; ++ky)
                       for (int64_t kx = 0; kx < 2; ++kx) {
                         const int64_t y = i[2] * 2 - 1 + ky, xx = i[3] * 2 + kx;
                         if (y < 0 || y >= OH || xx < 0 || xx >= OW) continue;
                         at(out, {0, g * 3 + oc, y, xx}) += at(x, i) * at(w, {i[1], oc, ky, kx});
                       }
                 });
                 return out;
               }, rt, at_});
  check_cases("contractions", c);
}

TEST_CASE("pooling, normalization and attention match float64", "[ops][pooling][normalization][attention]") {
  // f32 with short sums and one sqrt/exp per element: 2e-5 relative and absolute.
  const double rt = 2e-5, at_ = 2e-5;
  std::vector<Case> c = {
      {"max_pool2d",
       {{"kernel", {3, 3}}, {"stride", {2, 2}}, {"padding", {1, 1}}},
       {{{2, 3, 7, 6}}},
       [](const V& v) {
         return pool_ref(v[0], 2, {3, 3}, {2, 2}, {1, 1}, true, false);
       },
       0,
       0},
      {"avg_pool2d",
       {{"kernel", {2, 3}}, {"stride", {1, 2}}, {"padding", {1, 1}}},
       {{{n, 2, 5, 7}}},
       [](const V& v) {
         return pool_ref(v[0], 2, {2, 3}, {1, 2}, {1, 1}, false, false);
       },
       rt,
       at_},
      {"avg_pool2d",
       {{"kernel", {3}}, {"padding", {1}}, {"count_include_pad", true}},
       {{{1, 2, 6, 6}}},
       [](const V& v) {
         return pool_ref(v[0], 2, {3, 3}, {3, 3}, {1, 1}, false, true);
       },
       rt,
       at_},
      // ONNX's forms: asymmetric pads, dilations, ceil_mode (a last window past the end padding
      // counts only the taps it covers with count_include_pad, and one starting in the end padding
      // is dropped).
      {"max_pool2d",
       {{"kernel", {3, 2}},
        {"stride", {2, 1}},
        {"padding", {1, 0}},
        {"padding_end", {2, 1}},
        {"dilation", {1, 2}}},
       {{{1, 2, 7, 6}}},
       [](const V& v) {
         return pool_ref(v[0], 2, {{3, 2}, {2, 1}, {1, 0}, {2, 1}, {1, 2}}, true, false);
       },
       0,
       0},
      {"avg_pool2d",
       {{"kernel", {3, 3}},
        {"stride", {2, 2}},
        {"padding", {0, 1}},
        {"padding_end", {1, 0}},
        {"ceil_mode", true}},
       {{{2, 2, 8, 7}}},
       [](const V& v) {
         return pool_ref(v[0], 2, {{3, 3}, {2, 2}, {0, 1}, {1, 0}, {1, 1}, true}, false, false);
       },
       rt,
       at_},
      {"avg_pool2d",
       {{"kernel", {3, 3}},
        {"stride", {2, 2}},
        {"padding", {1, 1}},
        {"ceil_mode", true},
        {"count_include_pad", true}},
       {{{1, 2, 6, 8}}},
       [](const V& v) {
         return pool_ref(v[0], 2, {{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, true}, false, true);
       },
       rt,
       at_},
      {"avg_pool1d",
       {{"kernel", {3}},
        {"stride", {2}},
        {"padding", {2}},
        {"padding_end", {1}},
        {"dilation", {2}},
        {"ceil_mode", true}},
       {{{2, 3, 10}}},
       [](const V& v) {
         return pool_ref(v[0], 1, {{3}, {2}, {2}, {1}, {2}, true}, false, false);
       },
       rt,
       at_},
      {"avg_pool3d",
       {{"kernel", {2, 2, 3}},
        {"stride", {1, 2, 1}},
        {"padding", {1, 0, 2}},
        {"dilation", {2, 1, 2}},
        {"count_include_pad", true}},
       {{{1, 1, 5, 5, 6}}},
       [](const V& v) {
         return pool_ref(v[0], 3, {{2, 2, 3}, {1, 2, 1}, {1, 0, 2}, {1, 0, 2}, {2, 1, 2}}, false,
                         true);
       },
       rt,
       at_},
      {"max_pool1d",
       {{"kernel", {2}}},
       {{{2, 3, 9}}},
       [](const V& v) { return pool_ref(v[0], 1, {2}, {2}, {0}, true, false); },
       0,
       0},
      {"avg_pool1d",
       {{"kernel", {3}}, {"stride", {1}}},
       {{{2, 3, 7}}},
       [](const V& v) { return pool_ref(v[0], 1, {3}, {1}, {0}, false, false); },
       rt,
       at_},
      {"max_pool3d",
       {{"kernel", {2, 2, 2}}},
       {{{1, 2, 4, 4, 5}}},
       [](const V& v) {
         return pool_ref(v[0], 3, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}, true, false);
       },
       0,
       0},
      {"avg_pool3d",
       {{"kernel", {2, 1, 3}}, {"stride", {1, 1, 1}}},
       {{{1, 2, 3, 3, 5}}},
       [](const V& v) {
         return pool_ref(v[0], 3, {2, 1, 3}, {1, 1, 1}, {0, 0, 0}, false, false);
       },
       rt,
       at_},
      {"global_avg_pool",
       {},
       {{{2, 3, 4, n}}},
       [](const V& v) {
         return reduce_ref(
             v[0], {2, 3}, true, 0, [](double a, double x) { return a + x; },
             [](double a, double k) { return a / k; });
       },
       rt,
       at_},
      {"global_max_pool",
       {},
       {{{2, 3, 5}}},
       [](const V& v) {
         return reduce_ref(v[0], {2}, true, -INFINITY,
                           [](double a, double x) { return std::max(a, x); });
       },
       0,
       0},
      {"softmax",
       {{"axis", 1}},
       {{{n, 6}, DType::F32, -5, 5}},
       [](const V& v) { return softmax_ref(v[0], 1, false); },
       rt,
       1e-6},
      {"softmax",
       {{"axis", 0}},
       {{{3, 1, 4}}},
       [](const V& v) { return softmax_ref(v[0], 0, false); },
       rt,
       1e-6},
      {"log_softmax",
       {{"axis", -1}},
       {{{4, 7}, DType::F32, -5, 5}},
       [](const V& v) { return softmax_ref(v[0], 1, true); },
       rt,
       at_},
  };
  auto norm_last = [](bool rms) -> Ref {
    return [rms](const V& v) {
      const HostTensor& x = v[0];
      const int last = static_cast<int>(x.shape.size()) - 1;
      const HostTensor mean = reduce_ref(x, {last}, true, 0, [](double a, double y) { return a + y; }, [](double a, double k) { return a / k; });
      const HostTensor ms = reduce_ref(x, {last}, true, 0, [](double a, double y) { return a + y * y; }, [](double a, double k) { return a / k; });
      const HostTensor var = var_ref(x, {last}, true, 0);
      return gen(x.shape, [&](const Idx& i) {
        double y = rms ? at(x, i) / std::sqrt(at_b(ms, i) + 1e-6) : (at(x, i) - at_b(mean, i)) / std::sqrt(at_b(var, i) + 1e-5);
        if (v.size() > 1) y *= v[1].data[static_cast<size_t>(i.back())];
        if (v.size() > 2) y += v[2].data[static_cast<size_t>(i.back())];
        return y;
      });
    };
  };
  c.push_back({"layer_norm", {}, {{{n, 7}}, {{7}}, {{7}}}, norm_last(false), 1e-4, 1e-4});
  c.push_back({"layer_norm", {}, {{{3, n}}}, norm_last(false), 1e-4, 1e-4});  // symbolic normalized dim
  c.push_back({"rms_norm", {}, {{{n, 6}}, {{6}}}, norm_last(true), 1e-5, 1e-5});
  c.push_back({"batch_norm", {{"eps", 1e-3}}, {{{2, 3, 4, 5}}, {{3}}, {{3}}, {{3}}, {{3}, DType::F32, 0.5, 2}},
               [](const V& v) {
                 return gen(v[0].shape, [&](const Idx& i) {
                   const size_t ch = static_cast<size_t>(i[1]);
                   return (at(v[0], i) - v[3].data[ch]) / std::sqrt(v[4].data[ch] + 1e-3) * v[1].data[ch] + v[2].data[ch];
                 });
               }, rt, at_});
  auto grouped = [](int groups) -> Ref {
    return [groups](const V& v) {
      const HostTensor& x = v[0];
      const int64_t C = x.shape[1], cg = C / groups;
      // Reshape [N, C, S...] to [N, G, cg * S] and normalize over the last dim.
      HostTensor g = x;
      g.shape = {x.shape[0], groups, numel(x.shape) / x.shape[0] / groups};
      const HostTensor mean = reduce_ref(g, {2}, true, 0, [](double a, double y) { return a + y; }, [](double a, double k) { return a / k; });
      const HostTensor var = var_ref(g, {2}, true, 0);
      return gen(x.shape, [&](const Idx& i) {
        const Idx s{i[0], i[1] / cg, 0};
        double y = (at(x, i) - at(mean, s)) / std::sqrt(at(var, s) + 1e-5);
        if (v.size() > 1) y = y * v[1].data[static_cast<size_t>(i[1])] + v[2].data[static_cast<size_t>(i[1])];
        return y;
      });
    };
  };
  c.push_back({"group_norm", {{"groups", 3}}, {{{2, 6, n}}, {{6}}, {{6}}}, grouped(3), 1e-4, 1e-4});
  c.push_back({"instance_norm", {}, {{{2, 3, 5, 2}}}, grouped(3), 1e-4, 1e-4});
  c.push_back({"l2_normalize", {{"axis", 0}}, {{{4, 3}}},
               [](const V& v) {
                 const HostTensor s = reduce_ref(v[0], {0}, true, 0, [](double a, double y) { return a + y * y; });
                 return gen(v[0].shape, [&](const Idx& i) { return at(v[0], i) / std::max(std::sqrt(at_b(s, i)), 1e-12); });
               }, rt, 1e-6});
  auto attn = [](bool causal, int mask_kind) -> Ref {  // mask_kind 0 none, 1 additive, 2 bool
    return [=](const V& v) {
      const HostTensor &q = v[0], &k = v[1], &val = v[2];
      const int64_t B = q.shape[0], L = q.shape[1], D = q.shape[2], S = k.shape[1], Dv = val.shape[2];
      HostTensor s = gen({B, L, S}, [&](const Idx& i) {
        double d = 0;
        for (int64_t e = 0; e < D; ++e) d += at(q, {i[0], i[1], e}) * at(k, {i[0], i[2], e});
        d /= std::sqrt(static_cast<double>(D));
        if (mask_kind == 1) d += at_b(v[3], i);
        if (mask_kind == 2 && at_b(v[3], i) == 0) d = -INFINITY;
        if (causal && i[2] > i[1]) d = -INFINITY;
        return d;
      });
      const HostTensor p = softmax_ref(s, 2, false);
      return gen({B, L, Dv}, [&](const Idx& i) {
        double o = 0;
        for (int64_t j = 0; j < S; ++j) o += at(p, {i[0], i[1], j}) * at(val, {i[0], j, i[2]});
        return o;
      });
    };
  };
  c.push_back({"scaled_dot_product_attention", {{"causal", true}}, {{{n, 4, 3}}, {{n, 5, 3}}, {{n, 5, 2}}}, attn(true, 0), 1e-5, 1e-5});
  c.push_back({"scaled_dot_product_attention", {}, {{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 6}}, {{3, 5}}}, attn(false, 1), 1e-5, 1e-5});
  // Bool mask whose first column is always kept, so no row is fully masked.
  Case bm{"scaled_dot_product_attention", {}, {{{2, 3, 4}}, {{2, 5, 4}}, {{2, 5, 6}}, {{1, 5}, DType::Bool, 0, 1, true}}, attn(false, 2), 1e-5, 1e-5};
  c.push_back(bm);
  check_cases("norm_pool_attention", c, {{"n", 5}, {"m", 3}}, 11);
}
