#include "backends/Lower.h"

#include <algorithm>
#include <limits>
#include <set>

#include "backends/Amx.h"
#include "backends/Exp.h"
#include "backends/Ieee.h"
#include "backends/OnlineSoftmax.h"
#include "backends/StoreIn.h"
#include "dsl/Analysis.h"
#include "dsl/IRVisitor.h"
#include "schedules/LoopNest.h"
#include "schedules/Validate.h"
#include "schedules/defaults/Defaults.h"
#include "schedules/directives/ComputeWith.h"
#include "schedules/directives/Directive.h"
#include "schedules/directives/PadLanes.h"
#include "schedules/directives/RFactor.h"
#include "schedules/directives/SkipPadding.h"

namespace pto {

Halide::Type halide_type(DType t) {
  switch (t) {
    case DType::Bool: return Halide::Bool();
    case DType::I8: return Halide::Int(8);
    case DType::I16: return Halide::Int(16);
    case DType::I32: return Halide::Int(32);
    case DType::I64: return Halide::Int(64);
    case DType::U8: return Halide::UInt(8);
    case DType::U16: return Halide::UInt(16);
    case DType::U32: return Halide::UInt(32);
    case DType::U64: return Halide::UInt(64);
    case DType::F16: return Halide::Float(16);
    case DType::BF16: return Halide::BFloat(16);
    case DType::F32: return Halide::Float(32);
    case DType::F64: return Halide::Float(64);
  }
  return Halide::Float(32);
}

std::vector<Halide::Argument> LoweredPipeline::arguments() const {
  std::vector<Halide::Argument> args;
  for (const auto& ip : inputs) args.emplace_back(ip);
  return args;
}

namespace {

// Halide turns Func and buffer names into symbols of the generated code; a
// stage called `tanh` or `int` would collide with libm or C. Such names get a
// trailing underscore in Halide (PTO-level names are unchanged).
std::string symbol_name(const std::string& n) {
  static const std::set<std::string> reserved = {
      "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cbrt", "ceil", "cos", "cosh", "erf",
      "erfc", "exp", "exp2", "expm1", "fabs", "floor", "fma", "fmax", "fmin", "fmod", "hypot", "log", "log10",
      "log1p", "log2", "lround", "max", "min", "nearbyint", "pow", "remainder", "rint", "round", "sin", "sinh",
      "sqrt", "tan", "tanh", "trunc", "memcpy", "memset", "malloc", "free", "abort", "exit", "printf",
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "return", "short", "signed", "sizeof",
      "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "true",
      "false", "main", "new", "delete", "class", "this", "template", "namespace", "operator", "private",
      "public", "protected", "virtual", "friend", "throw", "try", "catch", "using", "export", "div", "ldiv"};
  return reserved.count(n) ? n + "_" : n;
}

// Translates one stage's element expression into a Halide Expr.
class ExprLowering : public IRVisitor {
 public:
  ExprLowering(const Program& p, const std::map<std::string, Halide::Expr>& vars,
               const std::map<std::string, Halide::ImageParam>& inputs,
               const std::map<std::string, Halide::Func>& funcs,
               const std::map<std::string, Halide::Type>& func_types, std::optional<DType> compute,
               bool ieee)
      : p_(p),
        vars_(vars),
        inputs_(inputs),
        funcs_(funcs),
        func_types_(func_types),
        compute_(compute),
        ieee_(ieee) {}

  Halide::Expr lower(const Expr& e) {
    visit(e);
    return result_;
  }

 protected:
  // A float type of the definition, as evaluated under the precision schedule.
  Halide::Type ty(DType t) const { return is_float(t) && compute_ ? halide_type(*compute_) : halide_type(t); }

  void visit_const(const ConstNode& n) override {
    const Halide::Type t = ty(n.type);
    if (t.is_float()) result_ = Halide::Internal::make_const(t, n.value);
    else if (t.is_bool()) result_ = Halide::Internal::make_const(t, n.value != 0 ? 1 : 0);
    else result_ = Halide::Internal::make_const(t, static_cast<int64_t>(n.value));
  }
  void visit_var(const VarNode& n) override { result_ = vars_.at(n.name); }
  void visit_access(const AccessNode& n) override {
    std::vector<Halide::Expr> args;
    for (auto it = n.args.rbegin(); it != n.args.rend(); ++it) args.push_back(lower(*it));
    Halide::Expr v;
    if (auto in = inputs_.find(n.tensor); in != inputs_.end()) v = in->second(args);
    else v = funcs_.at(n.tensor)(args);
    const Halide::Type want = ty(n.type);
    result_ = v.type() == want ? v : Halide::cast(want, v);
  }
  void visit_unary(const UnaryNode& n) override {
    const Halide::Expr a = lower(n.a);
    // Halide's transcendental functions are f32/f64; narrow floats compute in f32.
    auto math = [&](auto f) {
      const Halide::Type t = a.type();
      if (t.is_float() && t.bits() < 32) return Halide::cast(t, f(Halide::cast(Halide::Float(32), a)));
      return f(a);
    };
    switch (n.op) {
      case UnOp::Neg: result_ = -a; break;
      case UnOp::Not: result_ = !a; break;
      case UnOp::Abs: result_ = Halide::cast(a.type(), Halide::abs(a)); break;
      case UnOp::Exp: {
        // Softmax's exponent is at most 0: no overflow to check.
        const bool nonpositive = minus_row_max(p_, n.a);
        result_ = math([&](auto x) {
          return x.type() != Halide::Float(32) ? Halide::exp(x) : nonpositive ? exp_nonpositive(x) : exp_f32(x);
        });
        break;
      }
      case UnOp::Log:
        result_ =
            math([&](auto x) { return ieee_ ? ieee_log(x, Halide::log(x)) : Halide::log(x); });
        break;
      case UnOp::Sqrt: result_ = math([](auto x) { return Halide::sqrt(x); }); break;
      case UnOp::Sin: result_ = math([](auto x) { return Halide::sin(x); }); break;
      case UnOp::Cos: result_ = math([](auto x) { return Halide::cos(x); }); break;
      case UnOp::Tan: result_ = math([](auto x) { return Halide::tan(x); }); break;
      case UnOp::Asin: result_ = math([](auto x) { return Halide::asin(x); }); break;
      case UnOp::Acos: result_ = math([](auto x) { return Halide::acos(x); }); break;
      case UnOp::Atan: result_ = math([](auto x) { return Halide::atan(x); }); break;
      case UnOp::Sinh: result_ = math([](auto x) { return Halide::sinh(x); }); break;
      case UnOp::Cosh: result_ = math([](auto x) { return Halide::cosh(x); }); break;
      case UnOp::Tanh: result_ = math([](auto x) { return Halide::tanh(x); }); break;
      case UnOp::Asinh: result_ = math([](auto x) { return Halide::asinh(x); }); break;
      case UnOp::Acosh: result_ = math([](auto x) { return Halide::acosh(x); }); break;
      case UnOp::Atanh: result_ = math([](auto x) { return Halide::atanh(x); }); break;
      case UnOp::Erf: {
        const Halide::Type t = a.type();
        const Halide::Expr x = Halide::cast(Halide::Float(32), a);
        const auto erf = [](const Halide::Expr& v) { return Halide::erf(v); };
        result_ = Halide::cast(t, ieee_ ? ieee_erf(x, erf) : erf(x));
        break;
      }
      case UnOp::Floor: result_ = math([](auto x) { return Halide::floor(x); }); break;
      case UnOp::Ceil: result_ = math([](auto x) { return Halide::ceil(x); }); break;
      case UnOp::Round: result_ = math([](auto x) { return Halide::round(x); }); break;
      case UnOp::Trunc: result_ = math([](auto x) { return Halide::trunc(x); }); break;
      case UnOp::IsNan:
        result_ = ieee_ && a.type().is_float() ? is_nan_bits(a) : Halide::is_nan(a);
        break;
      case UnOp::IsInf:
        result_ = ieee_ && a.type().is_float() ? is_inf_bits(a) : Halide::is_inf(a);
        break;
      case UnOp::BitNot:
        result_ = ~a;
        break;
    }
  }
  void visit_binary(const BinaryNode& n) override {
    Halide::Expr a = lower(n.a), b = lower(n.b);
    const bool fl = a.type().is_float();
    // IEEE (backends/Ieee.h): float compares guarded for NaN, and the
    // arithmetic Halide's simplifier would fold into a wrong answer for NaN or
    // Inf (x * 0 and 0 / x to 0, x - x to 0, x / x to 1) or a zero's sign
    // (x + 0 to x, 0 - x to -x: -0 + 0 and 0 - 0 are +0) kept as written.
    // Nothing else is kept strict: a strict subexpression loses its FMAs
    // ((x - mean) * (x - mean) kept strict made layer_norm 1.3x slower).
    const auto folds = [&] {
      using Halide::Internal::equal;
      using Halide::Internal::is_const_zero;
      if (!fl || !ieee_) return false;
      switch (n.op) {
        case BinOp::Add:
        case BinOp::Mul:
          return is_const_zero(a) || is_const_zero(b);
        case BinOp::Div:
          return is_const_zero(a) || equal(a, b);
        case BinOp::Sub:
          return is_const_zero(a) || equal(a, b);
        default:
          return false;
      }
    };
    const auto kept = [&](const Halide::Expr& e) { return folds() ? strict(e) : e; };
    const bool ieee_compare = fl && ieee_;
    switch (n.op) {
      case BinOp::Add:
        result_ = kept(a + b);
        break;
      case BinOp::Sub:
        result_ = kept(a - b);
        break;
      case BinOp::Mul:
        result_ = kept(a * b);
        break;
      case BinOp::Div:
        result_ = kept(a / b);
        break;
      case BinOp::Mod: result_ = a % b; break;
      case BinOp::Min:
        result_ = ieee_ ? ieee_min(a, b) : Halide::min(a, b);
        break;
      case BinOp::Max:
        result_ = ieee_ ? ieee_max(a, b) : Halide::max(a, b);
        break;
      case BinOp::Pow: {
        const Halide::Type t = a.type();
        const Halide::Expr x = t.bits() < 32 ? Halide::cast(Halide::Float(32), a) : a;
        const Halide::Expr y = t.bits() < 32 ? Halide::cast(Halide::Float(32), b) : b;
        result_ = Halide::cast(t, ieee_ && x.type().is_float() ? ieee_pow(x, y, Halide::pow(x, y))
                                                               : Halide::pow(x, y));
        break;
      }
      case BinOp::Atan2: {
        const Halide::Type t = a.type();
        if (t.bits() < 32) result_ = Halide::cast(t, Halide::atan2(Halide::cast(Halide::Float(32), a), Halide::cast(Halide::Float(32), b)));
        else result_ = Halide::atan2(a, b);
        break;
      }
      case BinOp::Lt:
        result_ = ieee_compare ? ieee_lt(a, b) : a < b;
        break;
      case BinOp::Le:
        result_ = ieee_compare ? ieee_le(a, b) : a <= b;
        break;
      case BinOp::Gt:
        result_ = ieee_compare ? ieee_lt(b, a) : a > b;
        break;
      case BinOp::Ge:
        result_ = ieee_compare ? ieee_le(b, a) : a >= b;
        break;
      case BinOp::Eq:
        result_ = ieee_compare ? ieee_eq(a, b) : a == b;
        break;
      case BinOp::Ne:
        result_ = ieee_compare ? !ieee_eq(a, b) : a != b;
        break;
      case BinOp::And: result_ = a && b; break;
      case BinOp::Or: result_ = a || b; break;
      case BinOp::CopySign:
        result_ = copysign_bits(a, b);
        break;
      case BinOp::BitAnd:
        result_ = a & b;
        break;
      case BinOp::BitOr:
        result_ = a | b;
        break;
      case BinOp::BitXor:
        result_ = a ^ b;
        break;
      case BinOp::Shl:
        result_ = a << b;
        break;
      case BinOp::Shr:
        result_ = a >> b;
        break;
    }
  }
  void visit_select(const SelectNode& n) override {
    Halide::Expr c = lower(n.cond), t = lower(n.true_value), f = lower(n.false_value);
    result_ = Halide::select(c, t, f);
  }
  void visit_cast(const CastNode& n) override {
    const Halide::Type to = ty(n.type);
    Halide::Expr a = lower(n.a);
    // f64 -> f16 goes through f32: the JIT lacks compiler-rt's __truncdfhf2
    // (the double rounding differs from the direct one only on ties of f32's).
    if (to.is_float() && to.bits() == 16 && a.type().is_float() && a.type().bits() == 64)
      a = Halide::cast(Halide::Float(32), a);
    result_ = Halide::cast(to, a);
  }

 private:
  const Program& p_;
  const std::map<std::string, Halide::Expr>& vars_;
  const std::map<std::string, Halide::ImageParam>& inputs_;
  const std::map<std::string, Halide::Func>& funcs_;
  const std::map<std::string, Halide::Type>& func_types_;
  std::optional<DType> compute_;
  const bool ieee_;  // IEEE semantics (backends/Ieee.h); false: the stage's fast_math
  Halide::Expr result_;
};

Halide::Expr type_max(Halide::Type t) { return t.is_float() ? Halide::Internal::make_const(t, std::numeric_limits<double>::infinity()) : t.max(); }
Halide::Expr type_min(Halide::Type t) { return t.is_float() ? Halide::Internal::make_const(t, -std::numeric_limits<double>::infinity()) : t.min(); }

// The identity of an associative reduction (sum, prod, min, max) in type
// `t`, and its combine of an accumulated value `a` with a step's value `v`.
Halide::Expr reduce_identity(ReduceOp op, Halide::Type t) {
  return op == ReduceOp::Sum ? Halide::cast(t, 0) : op == ReduceOp::Prod ? Halide::cast(t, 1) : op == ReduceOp::Min ? type_max(t) : type_min(t);
}
Halide::Expr reduce_combine(ReduceOp op, const Halide::Expr& a, const Halide::Expr& v) {
  return op == ReduceOp::Sum ? a + v : op == ReduceOp::Prod ? a * v : op == ReduceOp::Min ? Halide::min(a, v) : Halide::max(a, v);
}

// The tensors `st` reads with an index divided or taken modulo by a constant
// (x[p / w, p % w]: a flattened view of them).
std::set<std::string> flattened_reads(const Stage& st) {
  struct Find : IRVisitor {
    std::set<std::string> found;
    bool in_index = false, divides = false;
    void visit_access(const AccessNode& a) override {
      const bool outer_index = in_index, outer_divides = divides;
      for (const Expr& x : a.args) {
        divides = false;
        in_index = true;
        visit(x);
        if (divides) found.insert(a.tensor);
      }
      in_index = outer_index, divides = outer_divides;
    }
    void visit_binary(const BinaryNode& b) override {
      if (in_index && (b.op == BinOp::Div || b.op == BinOp::Mod) && b.b.as<ConstNode>()) divides = true;
      IRVisitor::visit_binary(b);
    }
  } f;
  f.visit(st.value);
  return f.found;
}

class Lowering {
 public:
  Lowering(const Program& p, const Schedule& s, const Target& t, const LowerOptions& o) : p_(p), s_(s), t_(t), o_(o) {}

  LoweredPipeline run() {
    LoweredPipeline out;
    out.target = Halide::Target(t_.halide);
    if (!s_.options.bounds_checks) out.target = out.target.with_feature(Halide::Target::NoAsserts);
    if (s_.options.profile) out.target = out.target.with_feature(Halide::Target::Profile);
    for (const TensorInfo& in : p_.inputs()) {
      Halide::ImageParam ip(halide_type(in.dtype), static_cast<int>(in.shape.size()), symbol_name(in.name));
      constrain(ip, in.shape, in.name);
      inputs_.emplace(in.name, ip);
      out.inputs.push_back(ip);
    }
    for (const std::string& o : p_.outputs())
      if (!p_.consumers(o).empty() || combines_own_values(o)) read_outputs_.insert(o);
    for (const Stage& st : p_.stages()) define(st);
    // A dot_pairs stage loads (pair, lane) vectors across two dims of what it
    // reads; Halide needs their strides to know the pairs are adjacent. Such
    // inputs must then be dense row-major (Kernel::run copies a strided view
    // dense; generated libraries take dense arrays).
    // An input read through a flattened index (an im2col copy of a 1x1
    // convolution, a reshape: x[c, p / 14, p % 14]) is dense as well: with its
    // strides known, Halide folds (p / 14) * 14 + p % 14 back to p, and a
    // vector of p loads consecutive floats instead of gathering them (1x1
    // convolution 256 -> 512 at 14x14: its copy 0.025 -> 0.0045 ms).
    const auto make_dense = [&](const std::string& r, const std::string& why) {
      auto in = inputs_.find(r);
      if (in == inputs_.end() || !out.dense_inputs.emplace(r, why).second) return;
      for (int k = 1; k < in->second.dimensions(); ++k)
        in->second.dim(k).set_stride(in->second.dim(k - 1).stride() * in->second.dim(k - 1).extent());
    };
    if (s_.options.opt_level != 0)
      for (const Stage& st : p_.stages()) {
        if (const StageSchedule* ss = s_.find(st.name); ss && !ss->dot_pairs.empty())
          for (const std::string& r : st.reads())
            make_dense(r, "stage '" + st.name + "' reads it in adjacent pairs: dot_pairs");
        for (const std::string& r : flattened_reads(st))
          make_dense(r, "stage '" + st.name + "' reads it through a flattened index");
      }
    out.outputs = p_.outputs();
    for (const std::string& o : out.outputs) {
      if (read_outputs_.count(o)) output_copy(o);
      constrain(output_func(o).output_buffer(), p_.stage(o).shape);
    }
    if (o_.for_autoscheduler) set_estimates(out);
    else
      for (const Stage& st : p_.stages()) apply_schedule(st);
    std::vector<Halide::Func> outs;
    for (const std::string& o : out.outputs) outs.push_back(output_func(o));
    out.pipeline = Halide::Pipeline(outs);
    if (!o_.for_autoscheduler && s_.options.opt_level != 0)
      for (const auto& [name, ss] : s_.stages)
        if (!ss.store_in.empty())
          out.pipeline.add_custom_lowering_pass(make_store_in_pass(
              funcs_.at(name).name(), funcs_.at(ss.store_in).name(), ss.compute.loop));
    out.funcs = funcs_;
    return out;
  }

 private:
  // Min 0, the static extents and a dense innermost dim, so that Halide can
  // specialize on them and report a wrong-shape buffer by name. The dense
  // dim is the innermost one past static extents of 1: a column [K, 1]'s K
  // has stride 1 too, and without saying so every vector load along it is a
  // gather ([4096, 4096] @ [4096, 1]: 5.7 ms, with a [4096] vector 2.1).
  // Extent-1 dims are never stepped, so callers pass them with the dense
  // stride whatever numpy reports (Jit.cpp's fill).
  void constrain(Halide::OutputImageParam b, const Shape& shape, const std::string& input = "") {
    const int r = static_cast<int>(shape.size());
    const auto syms = p_.symbols();
    bool unit_inside = true;  // every dim inside k has static extent 1
    for (int k = 0; k < r; ++k) {
      const int axis = r - 1 - k;
      const Dim& d = shape[static_cast<size_t>(axis)];
      b.dim(k).set_min(0);
      if (unit_inside) b.dim(k).set_stride(1);
      unit_inside = unit_inside && !d.is_symbolic() && d.value == 1;
      if (!d.is_symbolic()) {
        b.dim(k).set_extent(static_cast<int>(d.value));
      } else if (const auto& src = syms.at(d.sym); src != std::make_pair(input, axis)) {
        // Must agree with where the size is bound; when that is an earlier axis of this
        // same input (a square [S, S]), the input is not registered yet: use its dim.
        b.dim(k).set_extent(src.first == input ? b.dim(r - 1 - src.second).extent() : symbol(d.sym));
      }
    }
  }

  // Autoscheduler input: the extents of every input and output as estimates.
  void set_estimates(const LoweredPipeline& out) {
    auto region = [&](const Shape& shape, const std::string& what) {
      Halide::Region r;
      for (auto it = shape.rbegin(); it != shape.rend(); ++it) {
        if (it->is_symbolic())
          throw ShapeError("Halide's autoschedulers need static sizes; " + what + " has symbolic size '" + it->sym + "'");
        r.emplace_back(0, static_cast<int>(it->value));
      }
      return r;
    };
    for (const TensorInfo& in : p_.inputs()) inputs_.at(in.name).set_estimates(region(in.shape, "input '" + in.name + "'"));
    for (const std::string& o : out.outputs) output_func(o).set_estimates(region(p_.stage(o).shape, "output '" + o + "'"));
  }

  // A symbolic size, read from the first input that has it.
  Halide::Expr symbol(const std::string& sym) {
    const auto syms = p_.symbols();
    const auto it = syms.find(sym);
    if (it == syms.end())
      throw ShapeError("symbolic size '" + sym + "' appears in no input of program '" + p_.name() + "'; it cannot be bound");
    const auto& [tensor, axis] = it->second;
    const Halide::ImageParam& ip = inputs_.at(tensor);
    return ip.dim(ip.dimensions() - 1 - axis).extent();
  }
  Halide::Expr extent(const Dim& d) { return d.is_symbolic() ? symbol(d.sym) : Halide::Expr(static_cast<int>(d.value)); }

  // Does the stage keep IEEE semantics (backends/Ieee.h), or drop them by its fast_math?
  bool ieee(const std::string& stage) const {
    const StageSchedule* ss = s_.options.opt_level == 0 ? nullptr : s_.find(stage);
    return !(ss && ss->fast_math);
  }

  // Does the stage's definition, with the stages inlined into it, hold an
  // infinite float literal (a mask's -inf, a pad value)? Halide gives LLVM
  // the no-infs flag, so arithmetic that LLVM sees applied to an infinite
  // constant is poison: x + select(c, 0, -inf), the select hoisted out of the
  // add, became x in both arms (an attention mask that masked nothing). Such
  // a definition is lowered strict (Halide's strict_float: no fast-math flags
  // on its arithmetic, the inlined stages' included); the stages that read it
  // from memory are not affected.
  bool sees_infinity(const Stage& st) {
    if (const auto it = sees_inf_.find(st.name); it != sees_inf_.end()) return it->second;
    struct Finder : IRVisitor {
      std::vector<std::string> reads;
      bool inf = false;
      void visit_const(const ConstNode& n) override {
        inf |= is_float(n.type) && std::isinf(n.value);
      }
      void visit_access(const AccessNode& n) override {
        reads.push_back(n.tensor);
        IRVisitor::visit_access(n);
      }
      // A compare with an infinite literal compares order keys (integers):
      // that literal reaches no float arithmetic.
      void visit_binary(const BinaryNode& n) override {
        const bool compare = n.op == BinOp::Eq || n.op == BinOp::Ne || n.op == BinOp::Lt ||
                             n.op == BinOp::Le || n.op == BinOp::Gt || n.op == BinOp::Ge;
        const auto literal_inf = [](const Expr& e) {
          const auto* c = e.as<ConstNode>();
          return c && std::isinf(c->value);
        };
        if (!compare || !literal_inf(n.a)) visit(n.a);
        if (!compare || !literal_inf(n.b)) visit(n.b);
      }
    } f;
    f.visit(st.value);
    bool r = f.inf;
    sees_inf_[st.name] = r;  // a cycle guard; stages form a DAG
    for (const std::string& t : f.reads) {
      const Stage* ps = p_.find_stage(t);
      if (r || !ps) continue;
      const StageSchedule* ts = s_.options.opt_level == 0 ? nullptr : s_.find(t);
      if (ts && ts->compute.kind == Placement::Kind::Inline) r = sees_infinity(*ps);
    }
    sees_inf_[st.name] = r;
    return r;
  }
  Halide::Expr strict_if_infinite(const Stage& st, const Halide::Expr& e) {
    return ieee(st.name) && sees_infinity(st) ? strict(e) : e;
  }

  // Does `st` (a min / max over floats accumulated in `acc`) reduce order keys?
  bool keyed_reduction(const Stage& st, Halide::Type acc) const {
    return acc.is_float() && (*st.reduce == ReduceOp::Min || *st.reduce == ReduceOp::Max) &&
           ieee(st.name);
  }

  // An output that other stages read is computed into a Func of its own
  // (`<stage>__val`), which its readers load from, and copied to the caller's
  // buffer by the output Func. Halide takes the alignment of its own
  // allocations for loads from an output Func as well, and so emitted aligned
  // vector loads (vmovaps) from a caller's buffer that malloc had aligned to
  // 16 or 32 bytes: softmax vectorized over a layer_norm output crashed at
  // some addresses (found by the random program test). The copy costs one
  // pass over that output.
  // An output whose schedule reads its own values as vectors (an rfactor's
  // combine across cores, or an update vectorized in the output's own Func:
  // a row sum's update over rows in vectors, the reduction outside, crashed
  // at some addresses) is computed into a Func of its own as well.
  bool combines_own_values(const std::string& o) const {
    if (s_.options.opt_level == 0 || o_.for_autoscheduler || t_.has_device()) return false;
    const StageSchedule* ss = s_.find(o);
    if (!ss) return false;
    const bool own_vector_update = p_.stage(o).reduce && ss->update &&
                                   !ss->update->vectorize.empty() && ss->accumulator_at.empty() &&
                                   !ss->rfactor;
    return directives::combines_in_vectors(*ss) || own_vector_update;
  }
  std::string func_name(const std::string& stage) const {
    return symbol_name(stage) + (read_outputs_.count(stage) ? "__val" : "");
  }
  Halide::Func output_func(const std::string& o) const {
    const auto c = output_copies_.find(o);
    return c == output_copies_.end() ? funcs_.at(o) : c->second;
  }
  void output_copy(const std::string& o) {
    const Stage& st = p_.stage(o);
    const Halide::Func v = funcs_.at(o);
    Halide::Func c(symbol_name(o));
    std::vector<Halide::Var> args = v.args();
    c(args) = v(args);
    output_copies_.emplace(o, c);
    if (o_.for_autoscheduler || args.empty()) return;
    // A copy at memory speed: vector lanes along the contiguous dim, one
    // block of the outermost dim per core where there is enough to split.
    const int lanes = t_.vector_lanes(st.dtype == DType::Bool ? DType::U8 : st.dtype);
    const Dim& inner = st.shape.back();
    if (lanes > 1 && (inner.is_symbolic() || inner.value >= lanes))
      c.vectorize(args[0], lanes, inner.is_symbolic() ? Halide::TailStrategy::GuardWithIf : Halide::TailStrategy::ShiftInwards);
    int64_t n = 1;
    for (const Dim& d : st.shape) n = d.is_symbolic() ? -1 : n < 0 ? -1 : n * d.value;
    if (args.size() >= 2 && (n < 0 || n >= (int64_t{1} << 14))) c.parallel(args.back());
  }

  void define(const Stage& st) {
    const StagePrecision prec = stage_precision(p_, s_, st.name);
    std::map<std::string, Halide::Expr> vars;
    std::vector<Halide::Var> hv;
    for (auto it = st.vars.rbegin(); it != st.vars.rend(); ++it) {
      hv.emplace_back(*it);
      vars[*it] = hv.back();
    }
    std::vector<Halide::Expr> args(hv.begin(), hv.end());
    std::optional<DType> compute;
    if (is_float(st.value.type())) compute = prec.compute;

    // The stage's schedule; opt level 0 lowers the plain definition.
    const StageSchedule* ss = s_.options.opt_level == 0 ? nullptr : s_.find(st.name);
    if (ss && ss->online_softmax) {
      define_online_softmax(st, *ss->online_softmax);
      return;
    }
    if (ss && ss->amx) {
      define_amx(st);
      return;
    }
    if (ss && ss->compute_with) {
      define_computed_with(st, *ss->compute_with, args, vars, compute, prec);
      return;
    }
    if (st.reduce && s_.options.opt_level != 0)
      if (const Stage* e = directives::computed_with(p_, s_, st.name)) {
        define_fused_reduction(st, *e, args, vars, compute, prec);
        return;
      }
    if (!st.reduce) {
      Halide::Func f(func_name(st.name));
      ExprLowering el(p_, vars, inputs_, funcs_, types_, compute, ieee(st.name));
      Halide::Expr v = strict_if_infinite(st, el.lower(st.value));
      f(args) = Halide::cast(halide_type(prec.storage), v);
      funcs_.emplace(st.name, f);
      types_[st.name] = halide_type(prec.storage);
      return;
    }

    // dot_pairs: reduction variable k runs as pairs, k = 2 k + k_2, with k_2
    // the innermost reduction loop (the dot_pairs directive vectorizes it).
    const std::string pairs = ss ? ss->dot_pairs : "";
    // rfactor's last step shifted inwards (directives::shifted_last_step): the
    // variable runs over whole steps of `factor`, the last one reading the
    // final `factor` points; `repeated` marks the points an earlier step read.
    const RFactor* shifted = directives::shifted_last_step(st, ss);
    Halide::RDom rd = make_named_rdom(st, pairs, shifted);
    const int shift = pairs.empty() ? 0 : 1;
    Halide::Expr repeated;
    for (size_t k = 0; k < st.rvars.size(); ++k) {
      const std::string& n = st.rvars[st.rvars.size() - 1 - k].name;
      const Halide::Expr v = rd[static_cast<int>(k) + shift];
      vars[n] = v;
      if (n == pairs) vars[n] = 2 * v + rd[0];
      if (shifted && n == shifted->rvar) {
        // min(v, extent - f + v % f) is min(step, extent - f) + v % f, in a form
        // whose interval bounds stay in [0, extent) (Halide bounds v - v % f
        // below by 1 - f).
        const int f = shifted->factor;
        const int e = static_cast<int>(st.rvars[st.rvars.size() - 1 - k].extent.value);
        vars[n] = Halide::min(v, e - f + v % f);
        repeated = vars[n] < v - v % f;
      }
    }

    const Halide::Type acc = halide_type(prec.accumulate);
    // pad_lanes: the stage reads through clamped views, in copies of the maps.
    std::optional<std::map<std::string, Halide::ImageParam>> padded_ins;
    std::optional<std::map<std::string, Halide::Func>> padded_fs;
    if (ss && !ss->pad_lanes.empty()) {
      padded_ins = inputs_;
      padded_fs = funcs_;
      pad_reads(st, ss->pad_lanes, *padded_ins, *padded_fs);
    }
    ExprLowering el(p_, vars, padded_ins ? *padded_ins : inputs_, padded_fs ? *padded_fs : funcs_,
                    types_, compute, ieee(st.name));
    // skip_padding: the steps that read the zero padding are left out of the
    // reduction domain (Halide guards them, then trims or folds the guards);
    // with every padded dim skipped, the rest read the unpadded source.
    const directives::SkippedPadding skipped = directives::skipped_padding(p_, st, ss);
    if (skipped.where) rd.where(el.lower(*skipped.where));
    Halide::Expr body = strict_if_infinite(st, el.lower(skipped.value));
    // Halide takes an update's reduction domain from the RVars its expressions
    // mention: a body that ignores a reduction variable (sum of a constant, a
    // count) would silently lose that loop. Mention each one with a zero term.
    for (int k = 0; k < rd.dimensions(); ++k)
      body = body + Halide::cast(body.type(), rd[k] * 0);
    const ReduceOp op = *st.reduce;
    if (st.is_arg_reduction()) {
      Halide::Func g(func_name(st.name) + "__arg");
      const Halide::Type vt = body.type();
      g(args) = Halide::Tuple(Halide::cast(Halide::Int(64), 0), op == ReduceOp::ArgMax ? type_min(vt) : type_max(vt));
      // Strict comparison keeps the first extreme index, as numpy does; NaN wins like numpy.
      const Halide::Expr best = g(args)[1];
      const Halide::Expr better = op == ReduceOp::ArgMax ? (body > best) : (body < best);
      const Halide::Expr take = (better || (Halide::is_nan(body) && !Halide::is_nan(best))) && !Halide::is_nan(best);
      g(args) = Halide::Tuple(Halide::select(vt.is_float() ? take : better, Halide::cast(Halide::Int(64), rd[0]), g(args)[0]),
                              Halide::select(vt.is_float() ? take : better, body, best));
      Halide::Func f(func_name(st.name));
      f(args) = g(args)[0];
      helpers_.emplace(st.name, g);
      funcs_.emplace(st.name, f);
      types_[st.name] = Halide::Int(64);
      return;
    }
    // When storage and accumulator types differ, the reduction runs in its own
    // Func `<stage>__acc` and the stage's Func stores the narrowed result. So
    // does a float min / max under IEEE semantics, over order keys
    // (backends/Ieee.h), so that a NaN wins.
    const bool keyed = keyed_reduction(st, acc);
    const bool wrapped =
        keyed || prec.storage != prec.accumulate || (ss && !ss->accumulator_at.empty());
    Halide::Func f(wrapped ? func_name(st.name) + "__acc" : func_name(st.name));
    Halide::Expr b = Halide::cast(acc, body);
    // Min and max may take a point twice; a sum or product takes its identity there.
    if (repeated.defined() && (op == ReduceOp::Sum || op == ReduceOp::Prod))
      b = Halide::select(repeated, reduce_identity(op, acc), b);
    const auto key = [&](const Halide::Expr& v) {
      return keyed ? order_key(v, op == ReduceOp::Max) : v;
    };
    f(args) = key(reduce_identity(op, acc));
    f(args) = reduce_combine(op, f(args), key(b));
    if (wrapped) {
      Halide::Func w(func_name(st.name));
      w(args) =
          Halide::cast(halide_type(prec.storage), keyed ? from_order_key(f(args), acc) : f(args));
      helpers_.emplace(st.name, f);
      funcs_.emplace(st.name, w);
      types_[st.name] = halide_type(prec.storage);
      return;
    }
    funcs_.emplace(st.name, f);
    types_[st.name] = acc;
  }

  // compute_with (directives/ComputeWith.h): the stage as an update over
  // whole steps of `lanes` points along its last dim (its pure definition
  // undefined) and one over the rest of the row; its value is a Func of its
  // own, inlined both here and in the reduction's partials
  // (define_fused_reduction), which use the same steps.
  void define_computed_with(const Stage& st, const ComputeWith& cw, const std::vector<Halide::Expr>& args,
                            const std::map<std::string, Halide::Expr>& vars, std::optional<DType> compute,
                            const StagePrecision& prec) {
    const Halide::Type storage = halide_type(prec.storage);
    ExprLowering el(p_, vars, inputs_, funcs_, types_, compute, ieee(st.name));
    Halide::Func value(func_name(st.name) + "__value");
    value(args) = Halide::cast(storage, el.lower(st.value));
    const std::string& r = p_.stage(cw.stage).rvars[0].name;
    const int64_t n = st.shape.back().value, whole = n / cw.lanes * cw.lanes;
    FusedSteps fs;
    fs.value = value;
    fs.steps = Halide::RDom(Halide::Internal::ReductionDomain(
        {{inner_loop(r), 0, cw.lanes}, {outer_loop(r), 0, static_cast<int>(n / cw.lanes)}}));
    if (whole < n)
      fs.rest = Halide::RDom(Halide::Internal::ReductionDomain({{split_rest(r), static_cast<int>(whole), static_cast<int>(n - whole)}}));
    Halide::Func f(func_name(st.name));
    f(args) = Halide::undef(storage);
    std::vector<Halide::Expr> at = args;
    at[0] = fs.steps[1] * cw.lanes + fs.steps[0];  // Halide's dim 0 is the last one
    f(at) = value(at);
    if (fs.rest.defined()) {
      at[0] = fs.rest[0];
      f(at) = value(at);
    }
    fused_steps_.emplace(cw.stage, fs);
    funcs_.emplace(st.name, f);
    types_[st.name] = storage;
  }

  // The reduction a stage is computed with: `lanes` partials updated over
  // that stage's steps (and the rest of the row, into the first lanes),
  // reading its value where the definition reads the stage; then the
  // reduction of the lanes.
  void define_fused_reduction(const Stage& st, const Stage& with, const std::vector<Halide::Expr>& args,
                              std::map<std::string, Halide::Expr> vars, std::optional<DType> compute,
                              const StagePrecision& prec) {
    const FusedSteps& fs = fused_steps_.at(st.name);
    const Halide::Type acc = halide_type(prec.accumulate);
    const std::string& r = st.rvars[0].name;
    const int lanes = fs.steps[0].extent().as<Halide::Internal::IntImm>()->value;
    std::map<std::string, Halide::Func> fns = funcs_;
    fns[with.name] = fs.value;
    const ReduceOp op = *st.reduce;
    const auto body = [&](const Halide::Expr& point) {
      vars[r] = point;
      ExprLowering el(p_, vars, inputs_, fns, types_, compute, ieee(st.name));
      return Halide::cast(acc, el.lower(st.value));
    };
    // Under IEEE semantics a float min / max runs over order keys
    // (backends/Ieee.h), partials and lanes, in `<stage>__acc`; the stage's
    // Func is the float of the key.
    const bool keyed = keyed_reduction(st, acc);
    const auto key = [&](const Halide::Expr& v) {
      return keyed ? order_key(v, op == ReduceOp::Max) : v;
    };
    const Halide::Expr init = key(reduce_identity(op, acc));
    const auto combine = [op](const Halide::Expr& a, const Halide::Expr& v) { return reduce_combine(op, a, v); };
    const auto at = [&](const Halide::Expr& lane) {
      std::vector<Halide::Expr> a{lane};
      a.insert(a.end(), args.begin(), args.end());
      return a;
    };
    Halide::Func part(func_name(st.name) + "__partials");
    part(at(Halide::Var(rfactor_lane(r)))) = init;
    part(at(fs.steps[0])) =
        combine(part(at(fs.steps[0])), key(body(fs.steps[1] * lanes + fs.steps[0])));
    if (fs.rest.defined()) {
      const Halide::Expr lane = fs.rest[0] - fs.rest[0].min();
      part(at(lane)) = combine(part(at(lane)), key(body(fs.rest[0])));
    }
    const Halide::RDom all(Halide::Internal::ReductionDomain({{rfactor_lane(r), 0, lanes}}));
    Halide::Func f(func_name(st.name) + (keyed ? "__acc" : ""));
    f(args) = init;
    f(args) = combine(f(args), part(at(all[0])));
    partials_.emplace(st.name, part);
    types_[st.name] = acc;
    if (!keyed) {
      funcs_.emplace(st.name, f);
      return;
    }
    Halide::Func w(func_name(st.name));
    w(args) = from_order_key(f(args), acc);
    helpers_.emplace(st.name, f);
    funcs_.emplace(st.name, w);
  }

  // What a stage that defines its Funcs itself (online_softmax, amx) lowers
  // expressions with; `funcs` replace stages or inputs in them.
  FusedLowering fused_lowering(const Stage& st) {
    FusedLowering fl;
    fl.lower = [this, ieee = ieee(st.name)](const Expr& e,
                                            const std::map<std::string, Halide::Expr>& vars,
                                            const std::map<std::string, Halide::Func>& funcs) {
      std::map<std::string, Halide::ImageParam> ins = inputs_;
      std::map<std::string, Halide::Func> fs = funcs_;
      for (const auto& [n, f] : funcs) {
        ins.erase(n);
        fs[n] = f;
      }
      ExprLowering el(p_, vars, ins, fs, types_, std::nullopt, ieee);
      return el.lower(e);
    };
    fl.extent = [this](const Dim& d) { return extent(d); };
    fl.input = [this](const std::string& n) -> std::optional<Halide::ImageParam> {
      const auto in = inputs_.find(n);
      if (in == inputs_.end()) return std::nullopt;
      return in->second;
    };
    fl.stage_func = [this](const std::string& n) { return funcs_.at(n); };
    return fl;
  }

  // online_softmax (backends/OnlineSoftmax.h): the stage as FlashAttention's loop.
  void define_online_softmax(const Stage& st, const OnlineSoftmax& os) {
    funcs_.emplace(st.name, lower_online_softmax(p_, st, os, t_, func_name(st.name),
                                                 fused_lowering(st), !o_.for_autoscheduler));
    types_[st.name] = Halide::Float(32);
  }

  // amx (backends/Amx.h): the contraction on AMX tiles.
  void define_amx(const Stage& st) {
    funcs_.emplace(
        st.name, lower_amx(p_, st, func_name(st.name), fused_lowering(st), !o_.for_autoscheduler));
    types_[st.name] = Halide::Float(32);
  }

  // pad_lanes (directives/PadLanes.h): the stage reads each tensor indexed
  // by `var` through a view clamped to its extents along those axes, so that
  // the points past the extent read in bounds; the view replaces the tensor
  // in `ins` / `fs`, and is what the stage's packed copies copy.
  void pad_reads(const Stage& st, const std::string& var, std::map<std::string, Halide::ImageParam>& ins,
                 std::map<std::string, Halide::Func>& fs) {
    for (const auto& [tensor, axes] : directives::padded_reads(st, var)) {
      const Shape& shape = p_.tensor(tensor).shape;
      const int r = static_cast<int>(shape.size());
      std::vector<Halide::Var> a;
      for (int k = 0; k < r; ++k) a.emplace_back("c" + std::to_string(k));
      std::vector<Halide::Expr> idx(a.begin(), a.end());
      for (const int axis : axes) {
        const int k = r - 1 - axis;  // Halide's dim 0 is the last axis
        idx[static_cast<size_t>(k)] = Halide::clamp(a[static_cast<size_t>(k)], 0, extent(shape[static_cast<size_t>(axis)]) - 1);
      }
      Halide::Func view(symbol_name(st.name) + "__" + symbol_name(tensor) + "_clamped");
      const auto in = ins.find(tensor);
      view(a) = in != ins.end() ? in->second(idx) : fs.at(tensor)(idx);
      if (in != ins.end()) ins.erase(in);
      fs[tensor] = view;
      padded_[st.name][tensor] = view;
    }
  }

  Halide::RDom make_named_rdom(const Stage& st, const std::string& pairs = "", const RFactor* shifted = nullptr) {
    // Halide names RDom dims "<rdom>.x/.y/..."; we need them to carry our names,
    // so that schedules can split and reorder them as RVars. With `pairs`, that
    // variable counts pairs (extent / 2) and "<pairs>_2" (extent 2) comes first;
    // the `shifted` rfactor's variable runs to whole steps.
    std::vector<Halide::Internal::ReductionVariable> v;
    if (!pairs.empty()) v.push_back({pair_loop(pairs), 0, 2});
    for (auto it = st.rvars.rbegin(); it != st.rvars.rend(); ++it) {
      Halide::Expr e = extent(it->extent);
      if (it->name == pairs) e = e / 2;
      if (shifted && it->name == shifted->rvar) {
        const int64_t n = it->extent.value, f = shifted->factor;
        e = static_cast<int>((n + f - 1) / f * f);
      }
      v.push_back({it->name, 0, e});
    }
    return Halide::RDom(Halide::Internal::ReductionDomain(v));
  }

  // The stage's directives, applied in registry order (schedules/directives/);
  // with a helper Func, those that schedule it first. An inline stage has no
  // loops of its own: only its placement applies.
  void apply_schedule(const Stage& st) {
    const StageSchedule* found = s_.options.opt_level == 0 ? nullptr : s_.find(st.name);
    const StageSchedule none;
    StageContext c(*this, st, found ? *found : none);
    const bool inlined = c.schedule().compute.kind == Placement::Kind::Inline;
    const auto apply_if = [&](auto which) {
      for (const directives::Directive* d : directives::directives())
        if ((!inlined || d->applies_to_inline()) && which(*d)) d->apply(c);
    };
    if (c.helper()) {
      apply_if([](const directives::Directive& d) { return d.schedules_reduction(); });
      apply_if([](const directives::Directive& d) { return !d.schedules_reduction(); });
    } else {
      apply_if([](const directives::Directive&) { return true; });
    }
  }

  // What a directive sees of one stage being lowered.
  class StageContext : public directives::ApplyContext {
   public:
    StageContext(Lowering& l, const Stage& st, const StageSchedule& ss) : l_(l), st_(st), ss_(ss) {}
    const Program& program() const override { return l_.p_; }
    const Target& target() const override { return l_.t_; }
    const Stage& stage() const override { return st_; }
    const StageSchedule& schedule() const override { return ss_; }
    const StageSchedule* schedule_of(const std::string& stage) const override {
      return l_.s_.options.opt_level == 0 ? nullptr : l_.s_.find(stage);
    }
    Halide::Func func() override { return l_.funcs_.at(st_.name); }
    bool caller_buffer() const override { return l_.p_.is_output(st_.name) && !l_.read_outputs_.count(st_.name); }
    std::optional<Halide::Func> helper() override {
      const auto h = l_.helpers_.find(st_.name);
      if (h == l_.helpers_.end()) return std::nullopt;
      return h->second;
    }
    // Producers live in the consumer's last definition: its update, which for
    // a wrapped reduction (argmin/argmax, narrow storage) is the helper Func's.
    Halide::LoopLevel consumer_loop(const Placement& pl) override {
      const Stage& c = l_.p_.stage(pl.stage);
      const auto h = l_.helpers_.find(pl.stage);
      const Halide::Func cf = c.reduce && h != l_.helpers_.end() ? h->second : l_.funcs_.at(pl.stage);
      return Halide::LoopLevel(cf, Halide::VarOrRVar(pl.loop, is_reduction_loop(c, pl.loop)));
    }
    std::optional<Halide::ImageParam> input(const std::string& tensor) override {
      if (padded(tensor)) return std::nullopt;
      const auto in = l_.inputs_.find(tensor);
      if (in == l_.inputs_.end()) return std::nullopt;
      return in->second;
    }
    // A tensor this stage reads through its clamped view (pad_lanes) is that view.
    Halide::Func stage_func(const std::string& name) override {
      if (const auto v = padded(name)) return *v;
      return l_.funcs_.at(name);
    }
    Halide::Expr extent(const Dim& d) override { return l_.extent(d); }
    Halide::Func fused_partials(const std::string& reduction) override { return l_.partials_.at(reduction); }
    Halide::Func reducer_of(const std::string& stage) override {
      const auto h = l_.helpers_.find(stage);
      return h != l_.helpers_.end() ? h->second : l_.funcs_.at(stage);
    }

   private:
    std::optional<Halide::Func> padded(const std::string& tensor) const {
      const auto s = l_.padded_.find(st_.name);
      if (s == l_.padded_.end()) return std::nullopt;
      const auto v = s->second.find(tensor);
      if (v == s->second.end()) return std::nullopt;
      return v->second;
    }

    Lowering& l_;
    const Stage& st_;
    const StageSchedule& ss_;
  };

  const Program& p_;
  const Schedule& s_;
  const Target& t_;
  const LowerOptions o_;
  std::map<std::string, Halide::ImageParam> inputs_;
  std::map<std::string, Halide::Func> funcs_;
  std::set<std::string> read_outputs_;                 // outputs other stages read (func_name)
  std::map<std::string, Halide::Func> output_copies_;  // their output Funcs
  // Per stage, the Func that runs its reduction when that is not the stage's
  // own Func (argmin/argmax tuples "<stage>__arg", wide accumulators "<stage>__acc").
  std::map<std::string, Halide::Func> helpers_;
  // A stage computed with a reduction (compute_with): the steps of the fused
  // loop and the stage's value, keyed by the reduction; its partials' Func.
  struct FusedSteps {
    Halide::Func value;
    Halide::RDom steps;  // (point in the step, step) over the whole steps
    Halide::RDom rest;   // the points past them (undefined: none)
  };
  std::map<std::string, FusedSteps> fused_steps_;
  std::map<std::string, Halide::Func> partials_;
  // Per stage, the clamped views its pad_lanes reads (pad_reads).
  std::map<std::string, std::map<std::string, Halide::Func>> padded_;
  std::map<std::string, Halide::Type> types_;
  std::map<std::string, bool> sees_inf_;  // sees_infinity, per stage
};

}  // namespace

std::string stage_of_func(std::string name, const Program& p) {
  // Halide's wrapper of a Func or input for one consumer (`in()`: the packed
  // copies of `cache`), "<source>$2_in_<consumer>$3".
  if (const size_t in = name.find("_in_"); in != std::string::npos && !p.find_stage(name))
    return stage_of_func(name.substr(in + 4), p);
  if (const size_t cut = name.find_first_of(".$"); cut != std::string::npos) name.resize(cut);
  if (p.find_stage(name)) return name;
  if (name.ends_with('_') && p.find_stage(name.substr(0, name.size() - 1)))  // symbol_name's suffix
    return name.substr(0, name.size() - 1);
  if (const size_t sep = name.rfind("__");
      sep != std::string::npos && p.find_stage(name.substr(0, sep)))
    return name.substr(0, sep);
  return name;
}

LoweredPipeline lower(const Program& p, const Schedule& given, const Target& t,
                      const LowerOptions& o) {
  if (p.outputs().empty())
    throw DefinitionError("lowering program '" + p.name() +
                          "': it has no outputs; mark the tensors it returns with output()");
  validate(p, given, &t);
  // The schedule at its opt level (0 plain, 1 vectorize + parallel, 2 as
  // given, 3 fast-math): schedules/defaults/OptLevel.cpp.
  const Schedule s = at_opt_level(p, given, t);
  return with_halide_errors("lowering program '" + p.name() + "' for target " + t.name,
                            [&] { return Lowering(p, s, t, o).run(); });
}

}  // namespace pto
