#include "dsl/Interpreter.h"

#include <cmath>
#include <limits>

#include "dsl/IRVisitor.h"

namespace pto {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

namespace {

double wrap_int(double v, DType t) {
  if (t == DType::Bool) return v != 0 ? 1 : 0;
  if (!is_int(t)) return v;
  if (std::isnan(v)) return 0;
  const double tv = std::trunc(v);
  const int b = bits(t);
  if (b >= 64) return tv;
  const double range = std::ldexp(1.0, b);
  double m = std::fmod(tv, range);
  if (m < 0) m += range;
  if (!is_unsigned(t) && m >= range / 2) m -= range;
  return m;
}

class Evaluator : public IRVisitor {
 public:
  Evaluator(const std::map<std::string, HostTensor>& tensors, std::map<std::string, int64_t>& env)
      : tensors_(tensors), env_(env) {}
  double eval(const Expr& e) {
    visit(e);
    return r_;
  }

 protected:
  void visit_const(const ConstNode& n) override { r_ = n.value; }
  void visit_var(const VarNode& n) override { r_ = static_cast<double>(env_.at(n.name)); }
  void visit_access(const AccessNode& n) override {
    const HostTensor& t = tensors_.at(n.tensor);
    int64_t off = 0;
    for (size_t k = 0; k < n.args.size(); ++k) {
      const auto i = static_cast<int64_t>(eval(n.args[k]));
      if (i < 0 || i >= t.shape[k])
        throw ShapeError("reference: access " + n.tensor + " dim " + std::to_string(k) + " at " + std::to_string(i) +
                         " is outside [0, " + std::to_string(t.shape[k]) + ")");
      off = off * t.shape[k] + i;
    }
    r_ = t.data[static_cast<size_t>(off)];
  }
  void visit_unary(const UnaryNode& n) override {
    const double a = eval(n.a);
    switch (n.op) {
      case UnOp::Neg: r_ = wrap_int(-a, n.type); break;
      case UnOp::Not: r_ = a == 0; break;
      case UnOp::Abs: r_ = std::fabs(a); break;
      case UnOp::Exp: r_ = std::exp(a); break;
      case UnOp::Log: r_ = std::log(a); break;
      case UnOp::Sqrt: r_ = std::sqrt(a); break;
      case UnOp::Sin: r_ = std::sin(a); break;
      case UnOp::Cos: r_ = std::cos(a); break;
      case UnOp::Tan: r_ = std::tan(a); break;
      case UnOp::Asin: r_ = std::asin(a); break;
      case UnOp::Acos: r_ = std::acos(a); break;
      case UnOp::Atan: r_ = std::atan(a); break;
      case UnOp::Sinh: r_ = std::sinh(a); break;
      case UnOp::Cosh: r_ = std::cosh(a); break;
      case UnOp::Tanh: r_ = std::tanh(a); break;
      case UnOp::Asinh: r_ = std::asinh(a); break;
      case UnOp::Acosh: r_ = std::acosh(a); break;
      case UnOp::Atanh: r_ = std::atanh(a); break;
      case UnOp::Erf: r_ = std::erf(a); break;
      case UnOp::Floor: r_ = std::floor(a); break;
      case UnOp::Ceil: r_ = std::ceil(a); break;
      case UnOp::Round: r_ = std::nearbyint(a); break;  // half to even, like Halide and numpy
      case UnOp::Trunc: r_ = std::trunc(a); break;
      case UnOp::IsNan: r_ = std::isnan(a); break;
      case UnOp::IsInf: r_ = std::isinf(a); break;
      case UnOp::BitNot:
        r_ = wrap_int(static_cast<double>(~static_cast<int64_t>(a)), n.type);
        break;
    }
  }
  void visit_binary(const BinaryNode& n) override {
    const double a = eval(n.a), b = eval(n.b);
    const DType t = n.a.type();
    const bool integer = is_int(t);
    switch (n.op) {
      case BinOp::Add: r_ = wrap_int(a + b, t); break;
      case BinOp::Sub: r_ = wrap_int(a - b, t); break;
      case BinOp::Mul: r_ = wrap_int(a * b, t); break;
      case BinOp::Div:
        // Halide: integer division rounds towards -inf for positive divisors; x/0 = 0.
        r_ = integer ? (b == 0 ? 0 : (b > 0 ? std::floor(a / b) : -std::floor(a / -b))) : a / b;
        break;
      case BinOp::Mod:
        if (integer) r_ = b == 0 ? 0 : a - std::fabs(b) * std::floor(a / std::fabs(b));
        else r_ = a - b * std::floor(a / b);
        break;
      // numpy's minimum / maximum: NaN when either operand is (fmin/fmax drop it).
      case BinOp::Min:
        r_ = std::isnan(a) || std::isnan(b) ? a + b : std::fmin(a, b);
        break;
      case BinOp::Max:
        r_ = std::isnan(a) || std::isnan(b) ? a + b : std::fmax(a, b);
        break;
      case BinOp::Pow: r_ = std::pow(a, b); break;
      case BinOp::Atan2: r_ = std::atan2(a, b); break;
      case BinOp::Lt: r_ = a < b; break;
      case BinOp::Le: r_ = a <= b; break;
      case BinOp::Gt: r_ = a > b; break;
      case BinOp::Ge: r_ = a >= b; break;
      case BinOp::Eq: r_ = a == b; break;
      case BinOp::Ne: r_ = a != b; break;
      case BinOp::And: r_ = (a != 0) && (b != 0); break;
      case BinOp::Or: r_ = (a != 0) || (b != 0); break;
      case BinOp::CopySign:
        r_ = std::copysign(a, b);
        break;
      // In int64 (the values of every integer type but large u64s), wrapped to the type.
      case BinOp::BitAnd:
        r_ = static_cast<double>(static_cast<int64_t>(a) & static_cast<int64_t>(b));
        break;
      case BinOp::BitOr:
        r_ = static_cast<double>(static_cast<int64_t>(a) | static_cast<int64_t>(b));
        break;
      case BinOp::BitXor:
        r_ = static_cast<double>(static_cast<int64_t>(a) ^ static_cast<int64_t>(b));
        break;
      case BinOp::Shl:
        r_ = b < 0 || b >= bits(t) ? 0 : wrap_int(a * std::ldexp(1.0, static_cast<int>(b)), t);
        break;
      case BinOp::Shr:
        r_ = b < 0 || b >= bits(t) ? (a < 0 ? -1 : 0)
                                   : std::floor(a / std::ldexp(1.0, static_cast<int>(b)));
        break;
    }
  }
  void visit_select(const SelectNode& n) override {
    r_ = eval(n.cond) != 0 ? eval(n.true_value) : eval(n.false_value);
  }
  void visit_cast(const CastNode& n) override { r_ = wrap_int(eval(n.a), n.type); }

 private:
  const std::map<std::string, HostTensor>& tensors_;
  std::map<std::string, int64_t>& env_;
  double r_ = 0;
};

// Calls f(env) for every point of the index space of `names` with `extents`.
template <typename F>
void for_each_index(const std::vector<std::string>& names, const std::vector<int64_t>& extents,
                    std::map<std::string, int64_t>& env, F&& f) {
  for (int64_t e : extents)
    if (e <= 0) return;
  std::vector<int64_t> idx(extents.size(), 0);
  while (true) {
    for (size_t k = 0; k < names.size(); ++k) env[names[k]] = idx[k];
    f();
    size_t k = extents.size();
    while (k > 0) {
      if (++idx[k - 1] < extents[k - 1]) break;
      idx[k - 1] = 0;
      --k;
    }
    if (k == 0) return;
  }
}

}  // namespace

std::map<std::string, HostTensor> interpret(const Program& p, const std::map<std::string, HostTensor>& inputs) {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, int64_t> sizes;
  for (const TensorInfo& in : p.inputs()) {
    const auto it = inputs.find(in.name);
    if (it == inputs.end()) throw ShapeError("reference: missing input '" + in.name + "'");
    if (it->second.shape.size() != in.shape.size())
      throw ShapeError("reference: input '" + in.name + "' has the wrong rank");
    for (size_t k = 0; k < in.shape.size(); ++k) {
      if (in.shape[k].is_symbolic()) sizes.emplace(in.shape[k].sym, it->second.shape[k]);
      else if (in.shape[k].value != it->second.shape[k])
        throw ShapeError("reference: input '" + in.name + "' dim " + std::to_string(k) + " mismatch");
    }
    tensors[in.name] = it->second;
  }
  auto value = [&](const Dim& d) { return d.is_symbolic() ? sizes.at(d.sym) : d.value; };
  for (const Stage& st : p.stages()) {
    HostTensor out;
    for (const Dim& d : st.shape) out.shape.push_back(value(d));
    out.data.assign(static_cast<size_t>(out.numel()), 0.0);
    std::map<std::string, int64_t> env;
    Evaluator ev(tensors, env);
    std::vector<int64_t> rext;
    std::vector<std::string> rnames;
    for (const RVar& r : st.rvars) {
      rnames.push_back(r.name);
      rext.push_back(value(r.extent));
    }
    size_t flat = 0;
    for_each_index(st.vars, out.shape, env, [&] {
      double v = 0;
      if (!st.reduce) {
        v = ev.eval(st.value);
      } else {
        const ReduceOp op = *st.reduce;
        double acc = op == ReduceOp::Sum ? 0 : op == ReduceOp::Prod ? 1
                   : (op == ReduceOp::Min || op == ReduceOp::ArgMin) ? std::numeric_limits<double>::infinity()
                                                                       : -std::numeric_limits<double>::infinity();
        int64_t arg = 0;
        bool first = true;
        for_each_index(rnames, rext, env, [&] {
          const double b = ev.eval(st.value);
          switch (op) {
            case ReduceOp::Sum: acc += b; break;
            case ReduceOp::Prod: acc *= b; break;
            case ReduceOp::Min: acc = std::isnan(b) || std::isnan(acc) ? NAN : std::min(acc, b); break;
            case ReduceOp::Max: acc = std::isnan(b) || std::isnan(acc) ? NAN : std::max(acc, b); break;
            case ReduceOp::ArgMin:
            case ReduceOp::ArgMax: {
              const bool better = op == ReduceOp::ArgMax ? b > acc : b < acc;
              if (!std::isnan(acc) && (better || std::isnan(b) || first)) {
                acc = b;
                arg = env.at(rnames[0]);
              }
              first = false;
              break;
            }
          }
        });
        v = st.is_arg_reduction() ? static_cast<double>(arg) : acc;
      }
      out.data[flat++] = wrap_int(v, st.dtype);
    });
    tensors[st.name] = std::move(out);
  }
  return tensors;
}

double evaluate(const Expr& e, const std::map<std::string, HostTensor>& tensors,
                std::map<std::string, int64_t>& env) {
  return Evaluator(tensors, env).eval(e);
}

}  // namespace pto
