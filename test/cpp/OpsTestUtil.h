// Operator-test support: a dtype-generic kernel runner (HostTensor doubles in
// and out, converted to and from each tensor's DType), numpy-style float64
// reference helpers written independently of the DSL (broadcasting, n-d
// iteration, reductions), and a table-driven checker that builds one Program
// per table (one JIT compile), runs it, and compares every operator with its
// float64 reference and with the interpreter.
#pragma once

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "Helpers.h"
#include "dsl/ProgramJson.h"
#include "dsl/ops/Ops.h"
#include "schedules/defaults/Defaults.h"

namespace pto::test {

// ---- dtype conversion (independent of Halide; round_bf16 in Helpers.h) ------
inline double round_to(DType t, double v) {
  switch (t) {
    case DType::F64: return v;
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return static_cast<double>(static_cast<_Float16>(static_cast<float>(v)));
    case DType::BF16: return round_bf16(v);
    case DType::Bool: return v != 0 ? 1 : 0;
    default: return std::trunc(v);
  }
}

inline void store(DType t, void* base, size_t i, double v) {
  switch (t) {
    case DType::F64: static_cast<double*>(base)[i] = v; break;
    case DType::F32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::F16: static_cast<_Float16*>(base)[i] = static_cast<_Float16>(static_cast<float>(v)); break;
    case DType::BF16: {
      const float f = static_cast<float>(round_bf16(v));
      uint32_t u;
      std::memcpy(&u, &f, 4);
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(u >> 16);
      break;
    }
    case DType::Bool: static_cast<uint8_t*>(base)[i] = v != 0; break;
    case DType::I8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DType::I16: static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v); break;
    case DType::I32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::I64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DType::U8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DType::U16: static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v); break;
    case DType::U32: static_cast<uint32_t*>(base)[i] = static_cast<uint32_t>(v); break;
    case DType::U64: static_cast<uint64_t*>(base)[i] = static_cast<uint64_t>(v); break;
  }
}
inline double load(DType t, const void* base, size_t i) {
  switch (t) {
    case DType::F64: return static_cast<const double*>(base)[i];
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F16: return static_cast<double>(static_cast<const _Float16*>(base)[i]);
    case DType::BF16: {
      const uint32_t u = static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::Bool: return static_cast<const uint8_t*>(base)[i] != 0;
    case DType::I8: return static_cast<const int8_t*>(base)[i];
    case DType::I16: return static_cast<const int16_t*>(base)[i];
    case DType::I32: return static_cast<const int32_t*>(base)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::U8: return static_cast<const uint8_t*>(base)[i];
    case DType::U16: return static_cast<const uint16_t*>(base)[i];
    case DType::U32: return static_cast<const uint32_t*>(base)[i];
    case DType::U64: return static_cast<double>(static_cast<const uint64_t*>(base)[i]);
  }
  return 0;
}

// Runs `k` on inputs of any dtypes; returns outputs (by name) as doubles.
inline std::map<std::string, HostTensor> run_any(const Kernel& k, const std::map<std::string, HostTensor>& inputs) {
  const Program& p = k.program();
  std::vector<std::vector<uint8_t>> store_in;
  std::vector<BufferRef> ins;
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& in : p.inputs()) {
    const HostTensor& h = inputs.at(in.name);
    store_in.emplace_back(h.data.size() * static_cast<size_t>(bytes(in.dtype)) + 8);
    for (size_t i = 0; i < h.data.size(); ++i) store(in.dtype, store_in.back().data(), i, h.data[i]);
    ins.push_back({store_in.back().data(), in.dtype, h.shape, {}});
    shapes.push_back(h.shape);
  }
  const auto out_shapes = k.output_shapes(shapes);
  const auto names = p.outputs();
  std::vector<std::vector<uint8_t>> store_out;
  std::vector<BufferRef> outs;
  for (size_t o = 0; o < names.size(); ++o) {
    int64_t n = 1;
    for (int64_t e : out_shapes[o]) n *= e;
    const DType t = p.tensor(names[o]).dtype;
    store_out.emplace_back(static_cast<size_t>(n) * static_cast<size_t>(bytes(t)) + 8, 0xff);
  }
  for (size_t o = 0; o < names.size(); ++o)
    outs.push_back({store_out[o].data(), p.tensor(names[o]).dtype, out_shapes[o], {}});
  k.run(ins, outs);
  std::map<std::string, HostTensor> r;
  for (size_t o = 0; o < names.size(); ++o) {
    HostTensor h{out_shapes[o], {}};
    const DType t = p.tensor(names[o]).dtype;
    for (int64_t i = 0; i < h.numel(); ++i) h.data.push_back(load(t, store_out[o].data(), static_cast<size_t>(i)));
    r[names[o]] = std::move(h);
  }
  return r;
}

// ---- float64 references -------------------------------------------------------
using Idx = std::vector<int64_t>;
inline int64_t numel(const Idx& s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}
// Calls f(idx) for every index of `shape`, row-major.
template <typename F>
void for_each(const Idx& shape, F&& f) {
  Idx idx(shape.size(), 0);
  const int64_t n = numel(shape);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(static_cast<const Idx&>(idx));
    for (size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}
inline double& at(HostTensor& t, const Idx& i) {
  int64_t off = 0;
  for (size_t k = 0; k < i.size(); ++k) off = off * t.shape[k] + i[k];
  return t.data[static_cast<size_t>(off)];
}
inline double at(const HostTensor& t, const Idx& i) { return at(const_cast<HostTensor&>(t), i); }
// Value of `t` at output index `i` under numpy broadcasting (t aligned right).
inline double at_b(const HostTensor& t, const Idx& i) {
  Idx j;
  const size_t off = i.size() - t.shape.size();
  for (size_t k = 0; k < t.shape.size(); ++k) j.push_back(t.shape[k] == 1 ? 0 : i[off + k]);
  return at(t, j);
}
inline HostTensor gen(const Idx& shape, const std::function<double(const Idx&)>& f) {
  HostTensor t{shape, {}};
  for_each(shape, [&](const Idx& i) { t.data.push_back(f(i)); });
  return t;
}
inline Idx bshape(const std::vector<HostTensor>& xs) {
  size_t r = 0;
  for (const auto& x : xs) r = std::max(r, x.shape.size());
  Idx s(r, 1);
  for (const auto& x : xs)
    for (size_t k = 0; k < x.shape.size(); ++k) s[r - x.shape.size() + k] = std::max(s[r - x.shape.size() + k], x.shape[k]);
  return s;
}

using Ref = std::function<HostTensor(const std::vector<HostTensor>&)>;
// Elementwise reference with numpy broadcasting.
inline Ref ew(std::function<double(const std::vector<double>&)> f) {
  return [f](const std::vector<HostTensor>& xs) {
    return gen(bshape(xs), [&](const Idx& i) {
      std::vector<double> v;
      for (const auto& x : xs) v.push_back(at_b(x, i));
      return f(v);
    });
  };
}
inline Ref ew1(double (*f)(double)) {
  return ew([f](const std::vector<double>& v) { return f(v[0]); });
}
// Reduction over `axes` (empty = all): fold(acc, v), start value, finish(acc, count).
inline HostTensor reduce_ref(const HostTensor& x, std::vector<int> axes, bool keepdims, double init,
                             const std::function<double(double, double)>& fold,
                             const std::function<double(double, double)>& finish = [](double a, double) { return a; }) {
  const int r = static_cast<int>(x.shape.size());
  if (axes.empty())
    for (int a = 0; a < r; ++a) axes.push_back(a);
  for (int& a : axes) a = a < 0 ? a + r : a;
  auto red = [&](int a) { return std::count(axes.begin(), axes.end(), a) > 0; };
  Idx kshape;
  for (int a = 0; a < r; ++a) kshape.push_back(red(a) ? 1 : x.shape[static_cast<size_t>(a)]);
  HostTensor acc{kshape, std::vector<double>(static_cast<size_t>(numel(kshape)), init)};
  double count = 1;
  for (int a : axes) count *= static_cast<double>(x.shape[static_cast<size_t>(a)]);
  for_each(x.shape, [&](const Idx& i) {
    Idx j = i;
    for (int a : axes) j[static_cast<size_t>(a)] = 0;
    at(acc, j) = fold(at(acc, j), at(x, i));
  });
  for (double& v : acc.data) v = finish(v, count);
  if (!keepdims) {
    Idx s;
    for (int a = 0; a < r; ++a)
      if (!red(a)) s.push_back(x.shape[static_cast<size_t>(a)]);
    acc.shape = s;
  }
  return acc;
}

// ---- table-driven checks -----------------------------------------------------------
struct In {
  Shape shape;
  DType dtype = DType::F32;
  double lo = -1, hi = 1;
  bool integer = false;  // draw integers in [lo, hi]
};
struct Case {
  std::string op;
  nlohmann::json attrs;
  std::vector<In> ins;
  Ref ref;
  double rtol = 1e-5, atol = 1e-6;  // per case; the tables justify them
  std::string label = "";
};

inline Idx concrete(const Shape& s, const std::map<std::string, int64_t>& sizes) {
  Idx r;
  for (const Dim& d : s) r.push_back(d.is_symbolic() ? sizes.at(d.sym) : d.value);
  return r;
}

// Builds every case into one Program (one JIT compile), runs it under the plain
// schedule and checks each output against its reference and the interpreter.
inline void check_cases(const std::string& group, const std::vector<Case>& cases,
                        const std::map<std::string, int64_t>& sizes = {{"n", 5}, {"m", 3}}, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  Program p(group);
  std::map<std::string, HostTensor> data;
  std::vector<std::vector<HostTensor>> case_inputs;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    std::vector<Tensor> ts;
    std::vector<HostTensor> hs;
    for (size_t m = 0; m < k.ins.size(); ++m) {
      const In& in = k.ins[m];
      const std::string n = "c" + std::to_string(c) + "_" + std::to_string(m);
      ts.push_back(p.input(n, in.shape, in.dtype));
      HostTensor h = random_tensor(concrete(in.shape, sizes), rng, in.lo, in.hi);
      for (double& v : h.data) v = round_to(in.dtype, in.integer ? std::round(v) : v);
      data[n] = h;
      hs.push_back(h);
    }
    INFO(group << ": building '" << k.op << "' " << k.attrs.dump());
    p.output(ops::call(k.op, ts, k.attrs, "out" + std::to_string(c)));
    case_inputs.push_back(std::move(hs));
  }
  // The Program round-trips through JSON unchanged.
  const auto j = program_to_json(p);
  CHECK(program_to_json(program_from_json(j)) == j);
  const Target t = parse_target("host");
  const Kernel kern(p, plain_schedule(p), t);
  const auto got = run_any(kern, data);
  const auto interp = interpret(p, data);
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& k = cases[c];
    const std::string o = "out" + std::to_string(c);
    INFO(group << ": '" << k.op << "' " << k.attrs.dump() << " " << k.label);
    const HostTensor want = k.ref(case_inputs[c]);
    REQUIRE(got.at(o).shape == want.shape);
    CHECK(tolerance_ratio(got.at(o), want, k.rtol, k.atol) <= 1.0);
    // The interpreter evaluates the same definition in float64 and never rounds to
    // the output's float type: allow that type's half-ulp on top of the case's tolerance.
    const DType ot = p.tensor(o).dtype;
    const double ulp = ot == DType::F32 ? 6e-8 : ot == DType::F16 ? 5e-4 : ot == DType::BF16 ? 4e-3 : 0;
    CHECK(tolerance_ratio(interp.at(o), want, std::max(k.rtol, ulp), k.atol) <= 1.0);
  }
}

}  // namespace pto::test
