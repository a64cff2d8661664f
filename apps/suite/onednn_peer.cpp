// _onednn_peer: oneDNN as a bench_suite peer (impl "onednn").
//
// Each factory builds the oneDNN primitives a user of the library would call
// for one suite workload, on the caller's float32 numpy arrays (kept alive by
// the returned Peer and bound as oneDNN memories without copying). As for PTO
// and ONNX Runtime, every tensor is an input of the call: nothing about the
// inputs (weights included) is prepared ahead, so a reorder into a layout
// oneDNN prefers runs on every call. Where that choice matters (convolutions:
// plain NCHW kernels vs blocked-layout kernels behind reorders), both are
// built and the faster one is kept, so oneDNN runs at its best.
//
// Peer.time() times run() in C++ with the loop PTO's kernels use
// (backends/Timing.h), so the two are timed alike. Peer.impl names the
// implementation oneDNN chose for each primitive ("brg:avx512_core_amx", ...).
#include <omp.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backends/Timing.h"

namespace py = pybind11;
using dnnl::algorithm;
using dnnl::memory;
using dnnl::prop_kind;
using Array = py::array_t<float, py::array::c_style | py::array::forcecast>;
using Dims = memory::dims;

namespace {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Dims dims_of(const Array& a) { return Dims(a.shape(), a.shape() + a.ndim()); }

// Row-major (C order) strides of `d`.
Dims row_major(const Dims& d) {
  Dims s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}

memory::desc plain(const Dims& d) { return memory::desc(d, memory::data_type::f32, row_major(d)); }

memory::desc any(const Dims& d) { return memory::desc(d, memory::data_type::f32, memory::format_tag::any); }

struct Step {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
};

// One workload's primitives, their memories and the output array.
struct Peer {
  dnnl::stream strm{engine()};
  std::vector<Array> keep;  // the caller's arrays, bound without copies
  std::vector<Step> steps;
  Array out;
  std::vector<std::string> impls;

  memory bind(const Array& a, const memory::desc& md) {
    keep.push_back(a);
    return memory(md, engine(), const_cast<float*>(a.data()));
  }
  memory output(const Dims& d) {
    out = Array(std::vector<py::ssize_t>(d.begin(), d.end()));
    return memory(plain(d), engine(), out.mutable_data());
  }
  void add(const dnnl::primitive& p, const dnnl::primitive_desc_base& pd, std::unordered_map<int, memory> args) {
    steps.push_back({p, std::move(args)});
    impls.emplace_back(pd.impl_info_str());
  }
  // `m` in the primitive's layout `want`: m itself, or a buffer a reorder fills on each call.
  memory to(const memory& m, const memory::desc& want) {
    if (m.get_desc() == want) return m;
    memory r(want, engine());
    const dnnl::reorder::primitive_desc pd(m, r);
    add(dnnl::reorder(pd), pd, {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, r}});
    return r;
  }
  void run() {
    for (Step& s : steps) s.prim.execute(strm, s.args);
    strm.wait();
  }
  std::string impl() const {
    std::string s;
    for (const std::string& i : impls) s += (s.empty() ? "" : " + ") + i;
    return s;
  }
};

void expect_rank(const Array& a, std::initializer_list<int> ranks, const char* what) {
  for (int r : ranks)
    if (a.ndim() == r) return;
  throw std::invalid_argument(std::string("onednn peer: ") + what + " has rank " + std::to_string(a.ndim()));
}

// A @ B for A [m, k] or [b, m, k] and B [k, n], [b, k, n] or a vector [k] (matrix-vector).
Peer matmul(const Array& a, const Array& b) {
  expect_rank(a, {2, 3}, "matmul A");
  expect_rank(b, {1, 2, 3}, "matmul B");
  Peer p;
  const Dims ad = dims_of(a);
  Dims bd = dims_of(b);
  if (bd.size() == 1) bd.push_back(1);
  if (bd.size() < ad.size()) bd.insert(bd.begin(), 1);
  Dims cd = ad;
  cd.back() = bd.back();
  const memory am = p.bind(a, plain(ad)), bm = p.bind(b, plain(bd));
  const memory cm = p.output(cd);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(plain(ad), plain(bd), plain(cd)), engine());
  p.add(dnnl::matmul(pd), pd, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  if (b.ndim() == 1) p.out = p.out.attr("reshape")(py::make_tuple(ad[0])).cast<Array>();
  return p;
}

// One convolution, NC(H)W with OI(H)W weights (an ONNX Conv): either on the
// plain layouts or in the layouts oneDNN picks behind reorders.
Peer conv_variant(const Array& x, const Array& w, const std::optional<Array>& bias, const Dims& strides,
                  const Dims& pads, const Dims& dilations, int groups, bool blocked) {
  Peer p;
  const Dims xd = dims_of(x), wd = dims_of(w);
  const size_t sp = xd.size() - 2;
  Dims yd = {xd[0], wd[0]};
  Dims dil(sp);
  for (size_t i = 0; i < sp; ++i) {
    yd.push_back((xd[2 + i] + 2 * pads[i] - dilations[i] * (wd[2 + i] - 1) - 1) / strides[i] + 1);
    dil[i] = dilations[i] - 1;  // oneDNN counts the gaps between taps
  }
  Dims gwd = wd;  // grouped weights: [G, O/G, C/G, k...]
  if (groups > 1) {
    gwd[0] = wd[0] / groups;
    gwd.insert(gwd.begin(), groups);
  }
  const memory xm = p.bind(x, plain(xd)), wm = p.bind(w, plain(gwd));
  const memory ym = p.output(yd);
  std::optional<memory> bm;
  if (bias) bm = p.bind(*bias, plain({wd[0]}));
  const auto md = [&](const Dims& d) { return blocked ? any(d) : plain(d); };
  const dnnl::convolution_forward::desc d =
      bias ? dnnl::convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, md(xd),
                                             md(gwd), plain({wd[0]}), md(yd), strides, dil, pads, pads)
           : dnnl::convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct, md(xd),
                                             md(gwd), md(yd), strides, dil, pads, pads);
  const dnnl::convolution_forward::primitive_desc pd(d, engine());
  const memory xi = p.to(xm, pd.src_desc()), wi = p.to(wm, pd.weights_desc());
  const memory yo = pd.dst_desc() == ym.get_desc() ? ym : memory(pd.dst_desc(), engine());
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, xi}, {DNNL_ARG_WEIGHTS, wi}, {DNNL_ARG_DST, yo}};
  if (bm) args[DNNL_ARG_BIAS] = *bm;
  p.add(dnnl::convolution_forward(pd), pd, args);
  if (yo != ym) {
    const dnnl::reorder::primitive_desc rpd(yo, ym);
    p.add(dnnl::reorder(rpd), rpd, {{DNNL_ARG_FROM, yo}, {DNNL_ARG_TO, ym}});
  }
  return p;
}

Peer conv(const Array& x, const Array& w, const std::optional<Array>& bias, const Dims& strides, const Dims& pads,
          const Dims& dilations, int groups) {
  expect_rank(x, {3, 4}, "conv input");
  if (w.ndim() != x.ndim()) throw std::invalid_argument("onednn peer: conv weights and input ranks differ");
  std::vector<Peer> variants;
  for (bool blocked : {false, true}) {
    try {
      variants.push_back(conv_variant(x, w, bias, strides, pads, dilations, groups, blocked));
    } catch (const dnnl::error&) {  // no implementation for this layout: the other one runs
    }
  }
  if (variants.empty()) throw std::runtime_error("onednn peer: no convolution implementation");
  size_t best = 0;
  double best_ms = 1e300;
  for (size_t i = 0; i < variants.size(); ++i) {
    const double ms = pto::time_it([&] { variants[i].run(); }, 1, 3, 0.05).median_ms;
    if (ms < best_ms) best_ms = ms, best = i;
  }
  return std::move(variants[best]);
}

Peer pool(const Array& x, const std::string& kind, const Dims& kernel, const Dims& strides, const Dims& pads) {
  expect_rank(x, {4}, "pool input");
  Peer p;
  const Dims xd = dims_of(x);
  Dims yd = {xd[0], xd[1]};
  for (size_t i = 0; i < 2; ++i) yd.push_back((xd[2 + i] + 2 * pads[i] - kernel[i]) / strides[i] + 1);
  const memory xm = p.bind(x, plain(xd)), ym = p.output(yd);
  const algorithm alg = kind == "max" ? algorithm::pooling_max : algorithm::pooling_avg_include_padding;
  const dnnl::pooling_forward::primitive_desc pd(
      dnnl::pooling_forward::desc(prop_kind::forward_inference, alg, plain(xd), plain(yd), strides, kernel, pads, pads),
      engine());
  p.add(dnnl::pooling_forward(pd), pd, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}});
  return p;
}

Peer softmax(const Array& x, int axis, bool log) {
  Peer p;
  const Dims xd = dims_of(x);
  if (axis < 0) axis += static_cast<int>(xd.size());
  const memory xm = p.bind(x, plain(xd)), ym = p.output(xd);
  const dnnl::softmax_v2_forward::primitive_desc pd(
      dnnl::softmax_v2_forward::desc(prop_kind::forward_inference,
                                     log ? algorithm::softmax_log : algorithm::softmax_accurate, plain(xd), plain(xd),
                                     axis),
      engine());
  p.add(dnnl::softmax_v2_forward(pd), pd, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}});
  return p;
}

// Layer normalization over the last axis with scale g and shift b.
Peer layer_norm(const Array& x, const Array& g, const Array& b, float eps) {
  Peer p;
  const Dims xd = dims_of(x);
  const memory xm = p.bind(x, plain(xd)), ym = p.output(xd);
  const memory gm = p.bind(g, plain({xd.back()})), bm = p.bind(b, plain({xd.back()}));
  const dnnl::layer_normalization_forward::primitive_desc pd(
      dnnl::layer_normalization_forward::desc(prop_kind::forward_inference, plain(xd), eps,
                                              dnnl::normalization_flags::use_scale |
                                                  dnnl::normalization_flags::use_shift),
      engine());
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}, {DNNL_ARG_SCALE, gm}, {DNNL_ARG_SHIFT, bm}};
  for (int arg : {DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_WORKSPACE, DNNL_ARG_SCRATCHPAD}) {
    const memory::desc md = pd.query_md(dnnl::query::exec_arg_md, arg);
    if (md.get_size()) args[arg] = memory(md, engine());
  }
  p.add(dnnl::layer_normalization_forward(pd), pd, args);
  return p;
}

Peer reduce(const Array& x, const std::string& op, const std::vector<int>& axes) {
  Peer p;
  const Dims xd = dims_of(x);
  Dims yd = xd;
  for (int a : axes) yd.at(a < 0 ? a + xd.size() : a) = 1;
  const algorithm alg = op == "sum"    ? algorithm::reduction_sum
                        : op == "max"  ? algorithm::reduction_max
                        : op == "mean" ? algorithm::reduction_mean
                                       : throw std::invalid_argument("onednn peer: reduce op '" + op +
                                                                     "' (valid: sum, max, mean)");
  const memory xm = p.bind(x, plain(xd)), ym = p.output(yd);
  const dnnl::reduction::primitive_desc pd(dnnl::reduction::desc(alg, plain(xd), plain(yd), 0.f, 0.f), engine());
  p.add(dnnl::reduction(pd), pd, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}});
  return p;
}

algorithm eltwise_alg(const std::string& op) {
  if (op == "gelu") return algorithm::eltwise_gelu_erf;
  if (op == "relu") return algorithm::eltwise_relu;
  if (op == "swish") return algorithm::eltwise_swish;
  throw std::invalid_argument("onednn peer: eltwise op '" + op + "' (valid: gelu, relu, swish)");
}

// op(X), or op(X) * Y (silu(g) * u) as an eltwise and a binary primitive: the
// product as a binary post-op of the eltwise falls to oneDNN's reference kernel
// (~100x slower).
Peer eltwise(const Array& x, const std::string& op, const std::optional<Array>& times) {
  Peer p;
  const Dims xd = dims_of(x);
  const memory xm = p.bind(x, plain(xd)), ym = p.output(xd);
  const memory em = times ? memory(plain(xd), engine()) : ym;
  const dnnl::eltwise_forward::primitive_desc pd(
      dnnl::eltwise_forward::desc(prop_kind::forward_inference, eltwise_alg(op), plain(xd), 1.f, 0.f), engine());
  p.add(dnnl::eltwise_forward(pd), pd, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, em}});
  if (times) {
    const memory tm = p.bind(*times, plain(dims_of(*times)));
    const dnnl::binary::primitive_desc bd(
        dnnl::binary::desc(algorithm::binary_mul, plain(xd), plain(dims_of(*times)), plain(xd)), engine());
    p.add(dnnl::binary(bd), bd, {{DNNL_ARG_SRC_0, em}, {DNNL_ARG_SRC_1, tm}, {DNNL_ARG_DST, ym}});
  }
  return p;
}

// X + Y (Y broadcast from the right, as in numpy), then an optional activation as a post-op.
Peer add(const Array& x, const Array& y, const std::string& then) {
  Peer p;
  const Dims xd = dims_of(x);
  Dims yd = dims_of(y);
  while (yd.size() < xd.size()) yd.insert(yd.begin(), 1);
  const memory xm = p.bind(x, plain(xd)), ymm = p.bind(y, plain(yd)), om = p.output(xd);
  dnnl::primitive_attr attr;
  if (!then.empty()) {
    dnnl::post_ops po;
    po.append_eltwise(1.f, eltwise_alg(then), 0.f, 0.f);
    attr.set_post_ops(po);
  }
  const dnnl::binary::primitive_desc pd(dnnl::binary::desc(algorithm::binary_add, plain(xd), plain(yd), plain(xd)),
                                        attr, engine());
  p.add(dnnl::binary(pd), pd, {{DNNL_ARG_SRC_0, xm}, {DNNL_ARG_SRC_1, ymm}, {DNNL_ARG_DST, om}});
  return p;
}

// np.transpose(X, perm) into a contiguous array: a reorder from X read through permuted strides.
Peer transpose(const Array& x, const std::vector<int>& perm) {
  Peer p;
  const Dims xd = dims_of(x), xs = row_major(xd);
  Dims yd(xd.size()), ys(xd.size());
  for (size_t i = 0; i < perm.size(); ++i) yd[i] = xd.at(perm[i]), ys[i] = xs.at(perm[i]);
  const memory xm = p.bind(x, memory::desc(yd, memory::data_type::f32, ys)), ym = p.output(yd);
  const dnnl::reorder::primitive_desc pd(xm, ym);
  p.add(dnnl::reorder(pd), pd, {{DNNL_ARG_FROM, xm}, {DNNL_ARG_TO, ym}});
  return p;
}

// softmax(Q K^T * scale [+ causal mask]) V over [heads, s, d] as a oneDNN user
// writes it with primitives: a matmul reading K transposed through its strides
// with the scale as an attribute, the mask added in place by a binary primitive
// (as a post-op of the matmul, broadcast over heads, it falls to the reference
// kernel, ~700x slower), softmax in place, a matmul.
Peer attention(const Array& q, const Array& k, const Array& v, float scale, bool causal) {
  expect_rank(q, {3}, "attention Q");
  Peer p;
  const Dims qd = dims_of(q);
  const int64_t h = qd[0], s = qd[1], d = qd[2];
  const Dims sd = {h, s, s}, ktd = {h, d, s};
  const memory qm = p.bind(q, plain(qd)), vm = p.bind(v, plain(qd));
  const memory::desc kt(ktd, memory::data_type::f32, Dims{s * d, 1, d});
  const memory km = p.bind(k, kt);
  const memory sm(plain(sd), engine());
  dnnl::primitive_attr attr;
  attr.set_output_scales(0, {scale});
  const dnnl::matmul::primitive_desc qk(dnnl::matmul::desc(plain(qd), kt, plain(sd)), attr, engine());
  p.add(dnnl::matmul(qk), qk, {{DNNL_ARG_SRC, qm}, {DNNL_ARG_WEIGHTS, km}, {DNNL_ARG_DST, sm}});
  if (causal) {
    Array mask(std::vector<py::ssize_t>{1, s, s});
    float* m = mask.mutable_data();
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) m[i * s + j] = j <= i ? 0.f : -std::numeric_limits<float>::infinity();
    const memory mm = p.bind(mask, plain({1, s, s}));
    const dnnl::binary::primitive_desc bd(dnnl::binary::desc(algorithm::binary_add, plain(sd), plain({1, s, s}),
                                                             plain(sd)), engine());
    p.add(dnnl::binary(bd), bd, {{DNNL_ARG_SRC_0, sm}, {DNNL_ARG_SRC_1, mm}, {DNNL_ARG_DST, sm}});
  }
  const dnnl::softmax_v2_forward::primitive_desc sf(
      dnnl::softmax_v2_forward::desc(prop_kind::forward_inference, algorithm::softmax_accurate, plain(sd), plain(sd), 2),
      engine());
  p.add(dnnl::softmax_v2_forward(sf), sf, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_DST, sm}});
  const memory om = p.output(qd);
  const dnnl::matmul::primitive_desc pv(dnnl::matmul::desc(plain(sd), plain(qd), plain(qd)), engine());
  p.add(dnnl::matmul(pv), pv, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, vm}, {DNNL_ARG_DST, om}});
  return p;
}

}  // namespace

PYBIND11_MODULE(_onednn_peer, m) {
  m.doc() = "oneDNN primitives for the bench_suite workloads (apps/suite/onednn_peer.cpp)";
  m.def("version", [] {
    const dnnl_version_t* v = dnnl_version();
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  });
  m.def("set_threads", [](int n) { omp_set_num_threads(n); }, "oneDNN's OpenMP thread count");
  py::class_<Peer>(m, "Peer")
      .def("run", [](Peer& p) {
        {
          py::gil_scoped_release nogil;
          p.run();
        }
        return p.out.attr("copy")();
      }, "Runs the primitives once; returns a copy of the output.")
      .def("time", [](Peer& p, double min_seconds) {
        pto::TimingStats t;
        {
          py::gil_scoped_release nogil;
          t = pto::time_it([&] { p.run(); }, 1, 5, min_seconds);
        }
        return py::make_tuple(t.median_ms, t.min_ms, t.max_ms);
      }, py::arg("min_seconds") = 0.2, "(median, min, max) ms of run(), timed in C++")
      .def_property_readonly("impl", &Peer::impl);
  m.def("matmul", &matmul, py::arg("a"), py::arg("b"));
  m.def("conv", &conv, py::arg("x"), py::arg("w"), py::arg("bias"), py::arg("strides"), py::arg("pads"),
        py::arg("dilations"), py::arg("groups") = 1);
  m.def("pool", &pool, py::arg("x"), py::arg("kind"), py::arg("kernel"), py::arg("strides"), py::arg("pads"));
  m.def("softmax", &softmax, py::arg("x"), py::arg("axis") = -1, py::arg("log") = false);
  m.def("layer_norm", &layer_norm, py::arg("x"), py::arg("g"), py::arg("b"), py::arg("eps"));
  m.def("reduce", &reduce, py::arg("x"), py::arg("op"), py::arg("axes"));
  m.def("eltwise", &eltwise, py::arg("x"), py::arg("op"), py::arg("times") = py::none());
  m.def("add", &add, py::arg("x"), py::arg("y"), py::arg("then") = "");
  m.def("transpose", &transpose, py::arg("x"), py::arg("perm"));
  m.def("attention", &attention, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("scale"), py::arg("causal"));
  py::register_exception<dnnl::error>(m, "OneDnnError");
}
