#include "debug/CheckNumerics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "autotuner/TrialBuffers.h"
#include "dsl/BFloat16.h"
#include "dsl/Error.h"
#include "dsl/IRVisitor.h"
#include "dsl/Interpreter.h"
#include "schedules/Validate.h"

namespace pto::debug {
namespace {

// Steps of a reduction examined at most (a step evaluates every read).
constexpr int64_t kMaxSteps = int64_t{1} << 24;

std::string show(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(7);
  os << v;
  return os.str();
}

std::string show_index(const std::vector<int64_t>& ix) {
  std::string s = "[";
  for (size_t k = 0; k < ix.size(); ++k) s += (k ? ", " : "") + std::to_string(ix[k]);
  return s + "]";
}

// Row-major index of flat offset `i` in `shape`.
std::vector<int64_t> unflatten(size_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> ix(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    ix[k] = static_cast<int64_t>(i % static_cast<size_t>(shape[k]));
    i /= static_cast<size_t>(shape[k]);
  }
  return ix;
}

// A buffer (f32, bf16, f16; other types are never scanned) widened to f64.
HostTensor widen(const BufferRef& b) {
  HostTensor h;
  h.shape = b.shape;
  const auto n = static_cast<size_t>(h.numel());
  h.data.resize(n);
  // Dense views only: the instrumented build's own buffers, and inputs (the
  // caller passes dense ones; a strided input is read through its strides).
  std::vector<int64_t> strides = b.strides;
  if (strides.empty()) {
    strides.assign(b.shape.size(), 1);
    for (size_t k = b.shape.size(); k-- > 1;) strides[k - 1] = strides[k] * b.shape[k];
  }
  for (size_t i = 0; i < n; ++i) {
    const auto ix = unflatten(i, b.shape);
    int64_t off = 0;
    for (size_t k = 0; k < ix.size(); ++k) off += ix[k] * strides[k];
    const auto o = static_cast<size_t>(off);
    switch (b.dtype) {
      case DType::F32:
        h.data[i] = static_cast<const float*>(b.data)[o];
        break;
      case DType::F64:
        h.data[i] = static_cast<const double*>(b.data)[o];
        break;
      case DType::BF16:
        h.data[i] = from_bf16(static_cast<const uint16_t*>(b.data)[o]);
        break;
      case DType::F16:
        h.data[i] = tuner::from_f16(static_cast<const uint16_t*>(b.data)[o]);
        break;
      default:
        h.data[i] = 0;
        break;  // integer inputs: never NaN
    }
  }
  return h;
}

// The first non-finite element of `h`, or npos.
size_t first_nonfinite(const HostTensor& h) {
  for (size_t i = 0; i < h.data.size(); ++i)
    if (!std::isfinite(h.data[i])) return i;
  return std::string::npos;
}

// The tensor reads of an expression, in order.
std::vector<const AccessNode*> reads_of(const Expr& e) {
  struct Find : IRVisitor {
    std::vector<const AccessNode*> found;
    void visit_access(const AccessNode& a) override {
      found.push_back(&a);
      IRVisitor::visit_access(a);
    }
  } f;
  f.visit(e);
  return f.found;
}

// "T(i, j) = v" for each read of `e` at `env`; `bad` is set if one is not finite.
std::vector<std::string> show_reads(const Expr& e, const std::map<std::string, HostTensor>& tensors,
                                    std::map<std::string, int64_t>& env, bool* bad) {
  std::vector<std::string> r;
  for (const AccessNode* a : reads_of(e)) {
    const HostTensor& t = tensors.at(a->tensor);
    std::string text = a->tensor + "(";
    int64_t off = 0;
    for (size_t k = 0; k < a->args.size(); ++k) {
      const auto i = static_cast<int64_t>(evaluate(a->args[k], tensors, env));
      text += (k ? ", " : "") + std::to_string(i);
      off = off * t.shape[k] + std::clamp<int64_t>(i, 0, t.shape[k] - 1);
    }
    const double v = t.data[static_cast<size_t>(off)];
    if (bad && !std::isfinite(v)) *bad = true;
    text += ") = " + show(v);
    if (std::find(r.begin(), r.end(), text) == r.end()) r.push_back(text);
  }
  return r;
}

}  // namespace

std::string NonFinite::message() const {
  if (!found) return "check_numerics: no NaN or Inf";
  if (is_input)
    return "check_numerics: input '" + tensor + "' holds " + value + " at " + show_index(index) +
           " (before any stage runs)";
  std::string m = "check_numerics: stage '" + tensor + "' (" + op + ", " + kind + ") produced " +
                  value + " at " + show_index(index);
  if (!step.empty()) m += "; " + step;
  if (!reads.empty()) {
    m += "; it read ";
    for (size_t k = 0; k < reads.size(); ++k) m += (k ? ", " : "") + reads[k];
  }
  return m;
}

NonFinite locate_nonfinite(const Program& p, const Schedule& s, const Target& t,
                           const std::vector<BufferRef>& inputs) {
  NonFinite r;
  if (inputs.size() != p.inputs().size())
    throw ShapeError("check_numerics: " + std::to_string(inputs.size()) +
                     " input buffers for program '" + p.name() + "' with " +
                     std::to_string(p.inputs().size()) + " inputs");
  std::map<std::string, HostTensor> tensors;
  std::vector<std::vector<int64_t>> shapes;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string& name = p.inputs()[k].name;
    tensors[name] = widen(inputs[k]);
    shapes.push_back(inputs[k].shape);
    if (const size_t i = first_nonfinite(tensors[name]); i != std::string::npos) {
      r.found = r.is_input = true;
      r.tensor = name;
      r.value = show(tensors[name].data[i]);
      r.index = unflatten(i, inputs[k].shape);
      return r;
    }
  }
  // The instrumented build: every float stage an output, plain loops, the
  // schedule's precision and fast_math.
  Program q = p;
  Schedule m;
  m.options.bounds_checks = s.options.bounds_checks;
  std::vector<std::string> scanned;
  for (const Stage& st : p.stages()) {
    if (!(st.dtype == DType::F32 || st.dtype == DType::BF16 || st.dtype == DType::F16)) continue;
    if (!q.is_output(st.name)) q.output(st.name);
    scanned.push_back(st.name);
    if (const StageSchedule* ss = s.find(st.name)) {
      // Its storage type is its own here (an output's is the interface type).
      m[st.name].precision.compute = ss->precision.compute;
      m[st.name].precision.accumulate = ss->precision.accumulate;
      m[st.name].fast_math = ss->fast_math;
    }
  }
  const Kernel k(q, m, t);
  const auto out_shapes = output_shapes(q, shapes);
  const auto outs = q.outputs();
  std::vector<tuner::HostBuffer> bufs;
  std::vector<BufferRef> refs;
  for (size_t i = 0; i < outs.size(); ++i)
    bufs.push_back(tuner::host_buffer(q.stage(outs[i]).dtype, out_shapes[i],
                                      "check_numerics: stage '" + outs[i] + "'"));
  for (auto& b : bufs) refs.push_back(b.ref());
  k.run(inputs, refs);
  for (size_t i = 0; i < outs.size(); ++i) tensors[outs[i]] = widen(refs[i]);

  for (const std::string& name : scanned) {
    const HostTensor& h = tensors.at(name);
    const size_t i = first_nonfinite(h);
    if (i == std::string::npos) continue;
    const Stage& st = p.stage(name);
    r.found = true;
    r.tensor = name;
    r.op = st.op;
    r.kind = std::string(to_string(st.kind));
    r.value = show(h.data[i]);
    r.index = unflatten(i, h.shape);
    std::map<std::string, int64_t> env;
    for (size_t d = 0; d < st.vars.size(); ++d) env[st.vars[d]] = r.index[d];
    if (!st.reduce) {
      r.reads = show_reads(st.value, tensors, env, nullptr);
      return r;
    }
    // A reduction: the first step whose reads are not finite, else where the
    // running value leaves the range of the stage's type.
    int64_t steps = 1;
    std::vector<int64_t> extents;
    for (const RVar& rv : st.rvars) {
      extents.push_back(rv.extent.is_symbolic() ? 0 : rv.extent.value);
      steps *= extents.back();
    }
    // The running value's type: the schedule's accumulation type (an f16
    // accumulator overflows at 65504).
    const DType acc_type = stage_precision(p, s, name).accumulate;
    const double limit = acc_type == DType::F16   ? 65504.0
                         : acc_type == DType::F64 ? std::numeric_limits<double>::max()
                                                  : std::numeric_limits<float>::max();
    double acc = *st.reduce == ReduceOp::Prod ? 1 : 0;
    for (int64_t n = 0; n < std::min(steps, kMaxSteps); ++n) {
      const auto rix = unflatten(static_cast<size_t>(n), extents);
      std::string at;
      for (size_t d = 0; d < st.rvars.size(); ++d) {
        env[st.rvars[d].name] = rix[d];
        at += (d ? ", " : "") + st.rvars[d].name + " = " + std::to_string(rix[d]);
      }
      bool bad = false;
      auto rd = show_reads(st.value, tensors, env, &bad);
      const double v = evaluate(st.value, tensors, env);
      if (*st.reduce == ReduceOp::Sum) acc += v;
      if (*st.reduce == ReduceOp::Prod) acc *= v;
      const bool out_of_range =
          (*st.reduce == ReduceOp::Sum || *st.reduce == ReduceOp::Prod) && std::fabs(acc) > limit;
      if (bad || !std::isfinite(v) || out_of_range) {
        r.step = "at step " + at +
                 (bad || !std::isfinite(v)
                      ? " its value is " + show(v)
                      : " the running " + std::string(to_string(*st.reduce)) + " reaches " +
                            show(acc) + ", past the largest " + std::string(to_string(acc_type)));
        r.reads = std::move(rd);
        return r;
      }
    }
    r.step = "its steps and running value stay within " + std::string(to_string(acc_type)) +
             " in float64: its storage type (" +
             std::string(to_string(stage_precision(p, s, name).storage)) + ") overflowed";
    return r;
  }
  return r;
}

}  // namespace pto::debug
