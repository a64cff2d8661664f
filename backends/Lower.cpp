#include "backends/Lower.h"

#include <algorithm>
#include <limits>
#include <set>

#include "dsl/IRVisitor.h"
#include "dsl/ZeroPadding.h"
#include "schedules/LoopNest.h"
#include "schedules/Validate.h"

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
  ExprLowering(const std::map<std::string, Halide::Expr>& vars,
               const std::map<std::string, Halide::ImageParam>& inputs,
               const std::map<std::string, Halide::Func>& funcs,
               const std::map<std::string, Halide::Type>& func_types, std::optional<DType> compute)
      : vars_(vars), inputs_(inputs), funcs_(funcs), func_types_(func_types), compute_(compute) {}

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
      case UnOp::Exp: result_ = math([](auto x) { return Halide::exp(x); }); break;
      case UnOp::Log: result_ = math([](auto x) { return Halide::log(x); }); break;
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
        result_ = Halide::cast(t, Halide::erf(Halide::cast(Halide::Float(32), a)));
        break;
      }
      case UnOp::Floor: result_ = math([](auto x) { return Halide::floor(x); }); break;
      case UnOp::Ceil: result_ = math([](auto x) { return Halide::ceil(x); }); break;
      case UnOp::Round: result_ = math([](auto x) { return Halide::round(x); }); break;
      case UnOp::Trunc: result_ = math([](auto x) { return Halide::trunc(x); }); break;
      case UnOp::IsNan: result_ = Halide::is_nan(a); break;
      case UnOp::IsInf: result_ = Halide::is_inf(a); break;
    }
  }
  void visit_binary(const BinaryNode& n) override {
    Halide::Expr a = lower(n.a), b = lower(n.b);
    switch (n.op) {
      case BinOp::Add: result_ = a + b; break;
      case BinOp::Sub: result_ = a - b; break;
      case BinOp::Mul: result_ = a * b; break;
      case BinOp::Div: result_ = a / b; break;
      case BinOp::Mod: result_ = a % b; break;
      case BinOp::Min: result_ = Halide::min(a, b); break;
      case BinOp::Max: result_ = Halide::max(a, b); break;
      case BinOp::Pow: {
        const Halide::Type t = a.type();
        if (t.bits() < 32) result_ = Halide::cast(t, Halide::pow(Halide::cast(Halide::Float(32), a), Halide::cast(Halide::Float(32), b)));
        else result_ = Halide::pow(a, b);
        break;
      }
      case BinOp::Atan2: {
        const Halide::Type t = a.type();
        if (t.bits() < 32) result_ = Halide::cast(t, Halide::atan2(Halide::cast(Halide::Float(32), a), Halide::cast(Halide::Float(32), b)));
        else result_ = Halide::atan2(a, b);
        break;
      }
      case BinOp::Lt: result_ = a < b; break;
      case BinOp::Le: result_ = a <= b; break;
      case BinOp::Gt: result_ = a > b; break;
      case BinOp::Ge: result_ = a >= b; break;
      case BinOp::Eq: result_ = a == b; break;
      case BinOp::Ne: result_ = a != b; break;
      case BinOp::And: result_ = a && b; break;
      case BinOp::Or: result_ = a || b; break;
    }
  }
  void visit_select(const SelectNode& n) override {
    Halide::Expr c = lower(n.cond), t = lower(n.true_value), f = lower(n.false_value);
    result_ = Halide::select(c, t, f);
  }
  void visit_cast(const CastNode& n) override { result_ = Halide::cast(ty(n.type), lower(n.a)); }

 private:
  const std::map<std::string, Halide::Expr>& vars_;
  const std::map<std::string, Halide::ImageParam>& inputs_;
  const std::map<std::string, Halide::Func>& funcs_;
  const std::map<std::string, Halide::Type>& func_types_;
  std::optional<DType> compute_;
  Halide::Expr result_;
};

Halide::Expr type_max(Halide::Type t) { return t.is_float() ? Halide::Internal::make_const(t, std::numeric_limits<double>::infinity()) : t.max(); }
Halide::Expr type_min(Halide::Type t) { return t.is_float() ? Halide::Internal::make_const(t, -std::numeric_limits<double>::infinity()) : t.min(); }

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
    for (const Stage& st : p_.stages()) define(st);
    // A dot_pairs stage loads (pair, lane) vectors across two dims of what it
    // reads; Halide needs their strides to know the pairs are adjacent. Such
    // inputs must then be dense row-major (a strided view is rejected at run
    // time by Halide's constraint check).
    if (s_.options.opt_level != 0)
      for (const Stage& st : p_.stages())
        if (const StageSchedule* ss = s_.find(st.name); ss && !ss->dot_pairs.empty())
          for (const std::string& r : st.reads())
            if (auto in = inputs_.find(r); in != inputs_.end()) {
              out.dense_inputs.emplace(r, st.name);
              for (int k = 1; k < in->second.dimensions(); ++k)
                in->second.dim(k).set_stride(in->second.dim(k - 1).stride() * in->second.dim(k - 1).extent());
            }
    out.outputs = p_.outputs();
    for (const std::string& o : out.outputs) {
      const Halide::Func f = funcs_.at(o);
      const Stage& st = p_.stage(o);
      constrain(f.output_buffer(), st.shape);
    }
    if (o_.for_autoscheduler) set_estimates(out);
    else
      for (const Stage& st : p_.stages()) apply_schedule(st);
    std::vector<Halide::Func> outs;
    for (const std::string& o : out.outputs) outs.push_back(funcs_.at(o));
    out.pipeline = Halide::Pipeline(outs);
    out.funcs = funcs_;
    return out;
  }

 private:
  // Dense row-major layout, min 0, and the static extents, so that Halide can
  // specialize on them and report a wrong-shape buffer by name.
  void constrain(Halide::OutputImageParam b, const Shape& shape, const std::string& input = "") {
    const int r = static_cast<int>(shape.size());
    const auto syms = p_.symbols();
    for (int k = 0; k < r; ++k) {
      const int axis = r - 1 - k;
      const Dim& d = shape[static_cast<size_t>(axis)];
      b.dim(k).set_min(0);
      if (k == 0) b.dim(k).set_stride(1);
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
    for (const std::string& o : out.outputs) funcs_.at(o).set_estimates(region(p_.stage(o).shape, "output '" + o + "'"));
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

    if (!st.reduce) {
      Halide::Func f(symbol_name(st.name));
      ExprLowering el(vars, inputs_, funcs_, types_, compute);
      Halide::Expr v = el.lower(st.value);
      f(args) = Halide::cast(halide_type(prec.storage), v);
      funcs_.emplace(st.name, f);
      types_[st.name] = halide_type(prec.storage);
      return;
    }

    // dot_pairs: reduction variable k runs as pairs, k = 2 k + k_2, with k_2
    // the innermost reduction loop (apply_dot_pairs vectorizes it).
    const StageSchedule* sp = s_.options.opt_level == 0 ? nullptr : s_.find(st.name);
    const std::string pairs = sp ? sp->dot_pairs : "";
    Halide::RDom rd = make_named_rdom(st, pairs);
    const int shift = pairs.empty() ? 0 : 1;
    for (size_t k = 0; k < st.rvars.size(); ++k) {
      const std::string& n = st.rvars[st.rvars.size() - 1 - k].name;
      vars[n] = rd[static_cast<int>(k) + shift];
      if (n == pairs) vars[n] = 2 * rd[static_cast<int>(k) + shift] + rd[0];
    }

    const Halide::Type acc = halide_type(prec.accumulate);
    ExprLowering el(vars, inputs_, funcs_, types_, compute);
    // skip_padding: the steps that read the zero padding are left out of the
    // reduction domain (Halide guards them, then trims or folds the guards);
    // with every padded dim skipped, the rest read the unpadded source.
    Expr value = st.value;
    if (sp && !sp->skip_padding.empty()) {
      if (const auto pred = padding_predicate(p_, st, sp->skip_padding)) rd.where(el.lower(*pred));
      if (const auto through = read_through_padding(p_, st, sp->skip_padding)) value = *through;
    }
    Halide::Expr body = el.lower(value);
    // Halide takes an update's reduction domain from the RVars its expressions
    // mention: a body that ignores a reduction variable (sum of a constant, a
    // count) would silently lose that loop. Mention each one with a zero term.
    for (int k = 0; k < rd.dimensions(); ++k)
      body = body + Halide::cast(body.type(), rd[k] * 0);
    const ReduceOp op = *st.reduce;
    if (op == ReduceOp::ArgMin || op == ReduceOp::ArgMax) {
      Halide::Func g(symbol_name(st.name) + "__arg");
      const Halide::Type vt = body.type();
      g(args) = Halide::Tuple(Halide::cast(Halide::Int(64), 0), op == ReduceOp::ArgMax ? type_min(vt) : type_max(vt));
      // Strict comparison keeps the first extreme index, as numpy does; NaN wins like numpy.
      const Halide::Expr best = g(args)[1];
      const Halide::Expr better = op == ReduceOp::ArgMax ? (body > best) : (body < best);
      const Halide::Expr take = (better || (Halide::is_nan(body) && !Halide::is_nan(best))) && !Halide::is_nan(best);
      g(args) = Halide::Tuple(Halide::select(vt.is_float() ? take : better, Halide::cast(Halide::Int(64), rd[0]), g(args)[0]),
                              Halide::select(vt.is_float() ? take : better, body, best));
      Halide::Func f(symbol_name(st.name));
      f(args) = g(args)[0];
      helpers_.emplace(st.name, g);
      funcs_.emplace(st.name, f);
      types_[st.name] = Halide::Int(64);
      return;
    }
    // When storage and accumulator types differ, the reduction runs in its own
    // Func `<stage>__acc` and the stage's Func stores the narrowed result.
    const StageSchedule* ss = s_.options.opt_level == 0 ? nullptr : s_.find(st.name);
    const bool wrapped = prec.storage != prec.accumulate || (ss && !ss->accumulator_at.empty());
    Halide::Func f(wrapped ? symbol_name(st.name) + "__acc" : symbol_name(st.name));
    const Halide::Expr b = Halide::cast(acc, body);
    switch (op) {
      case ReduceOp::Sum: f(args) = Halide::cast(acc, 0); f(args) = f(args) + b; break;
      case ReduceOp::Prod: f(args) = Halide::cast(acc, 1); f(args) = f(args) * b; break;
      case ReduceOp::Min: f(args) = type_max(acc); f(args) = Halide::min(f(args), b); break;
      case ReduceOp::Max: f(args) = type_min(acc); f(args) = Halide::max(f(args), b); break;
      default: break;
    }
    if (wrapped) {
      Halide::Func w(symbol_name(st.name));
      w(args) = Halide::cast(halide_type(prec.storage), f(args));
      helpers_.emplace(st.name, f);
      funcs_.emplace(st.name, w);
      types_[st.name] = halide_type(prec.storage);
      return;
    }
    funcs_.emplace(st.name, f);
    types_[st.name] = acc;
  }

  Halide::RDom make_named_rdom(const Stage& st, const std::string& pairs = "") {
    // Halide names RDom dims "<rdom>.x/.y/..."; we need them to carry our names,
    // so that schedules can split and reorder them as RVars. With `pairs`, that
    // variable counts pairs (extent / 2) and "<pairs>_2" (extent 2) comes first.
    std::vector<Halide::Internal::ReductionVariable> v;
    if (!pairs.empty()) v.push_back({pairs + "_2", 0, 2});
    for (auto it = st.rvars.rbegin(); it != st.rvars.rend(); ++it) {
      Halide::Expr e = extent(it->extent);
      if (it->name == pairs) e = e / 2;
      v.push_back({it->name, 0, e});
    }
    return Halide::RDom(Halide::Internal::ReductionDomain(v));
  }

  bool is_rvar(const Stage& st, const std::string& loop) {
    for (const RVar& r : st.rvars) {
      if (loop == r.name + "_t") return true;  // the intermediate of a two-level split
      for (size_t lv = 0; lv <= 2; ++lv)
        for (const auto& n : split_names(r.name, lv))
          if (n == loop) return true;
    }
    return false;
  }

  // Tails: a root stage's pure loops over static dims shift the last tile
  // inwards (recomputing a few points, keeping every tile full-size and so
  // every inner extent constant); everything else is guarded, because a stage
  // computed at a consumer sees regions of any size, symbolic dims may be
  // smaller than a tile, and updates must not run twice on one point.
  void apply_loops(const Stage& st, Halide::Stage hs, const LoopSchedule& ls, bool update, bool root) {
    const auto nest = loop_nest(st, ls, update);
    auto vr = [&](const std::string& n) { return Halide::VarOrRVar(n, update && is_rvar(st, n)); };
    auto tail = [&](const std::string& dim) {
      for (size_t k = 0; k < st.vars.size(); ++k)
        if (st.vars[k] == dim && root && !update && !st.shape[k].is_symbolic()) return Halide::TailStrategy::ShiftInwards;
      return Halide::TailStrategy::GuardWithIf;
    };
    auto extent_of = [&](const std::string& n) {
      for (const Loop& l : nest)
        if (l.name == n) return l;
      return Loop{};
    };
    // Vector lanes that evenly divide a guarded tile's innermost loop are split
    // off the dim first, so that the lanes are the innermost split of the dim
    // itself. Halide's vectorize(x_i, w) splits the inner loop of a guarded
    // split again, and that shape let guarded lanes store out of bounds (a
    // crash found by test_differential). Same loops, names and extents.
    const Loop vl = ls.vectorize.empty() ? Loop{} : extent_of(ls.vectorize);
    const int w = ls.vector_width;
    const bool lanes_first = !vl.name.empty() && vl.name != vl.dim && w > 0 && vl.extent > w && vl.extent % w == 0 &&
                             ls.tile.count(vl.dim) && vl.name == split_names(vl.dim, ls.tile.at(vl.dim).size()).back() &&
                             tail(vl.dim) == Halide::TailStrategy::GuardWithIf;
    const std::string lane = vl.dim + "_v";
    for (const auto& [dim, sizes] : ls.tile) {
      const auto names = split_names(dim, sizes.size());
      std::string d = dim;
      int64_t inner = sizes.back();
      if (lanes_first && dim == vl.dim) {
        hs.split(vr(dim), vr(dim + "_x"), vr(lane), w, tail(dim));
        d = dim + "_x";
        inner /= w;
      }
      if (sizes.size() == 1) {
        hs.split(vr(d), vr(names[0]), vr(names[1]), static_cast<int>(inner), tail(dim));
        continue;
      }
      // Two levels: split off the innermost tile first, then split its outer
      // loop into tiles of T1/T2 (same loops and tails). Splitting the outer
      // tile first and guarding both splits let Halide store guarded vector
      // lanes out of bounds when the inner loop was vectorized (a crash,
      // found by test_differential; regression test in test_lowering_regressions.cpp).
      hs.split(vr(d), vr(dim + "_t"), vr(names[2]), static_cast<int>(inner), tail(dim));
      hs.split(vr(dim + "_t"), vr(names[0]), vr(names[1]), static_cast<int>(sizes[0] / sizes[1]), tail(dim));
    }
    if (!ls.order.empty()) {
      std::vector<Halide::VarOrRVar> order;  // innermost first; the lanes stay just inside their loop
      for (auto it = nest.rbegin(); it != nest.rend(); ++it) {
        if (lanes_first && it->name == vl.name) order.push_back(vr(lane));
        order.push_back(vr(it->name));
      }
      hs.reorder(order);
    }
    // A width equal to a tile's inner extent needs no further split; width 0
    // (or factor 0) means the whole loop, which must have a constant extent.
    if (lanes_first) {
      hs.vectorize(vr(lane));
    } else if (!ls.vectorize.empty()) {
      const Loop l = extent_of(ls.vectorize);
      if (w == 0 || (l.extent == w && l.name != l.dim)) hs.vectorize(vr(ls.vectorize));
      else hs.vectorize(vr(ls.vectorize), w, l.name == l.dim ? tail(l.dim) : Halide::TailStrategy::GuardWithIf);
    }
    for (const auto& [n, factor] : ls.unroll) {
      const Loop l = extent_of(n);
      if (factor == 0 || (l.extent == factor && l.name != l.dim)) hs.unroll(vr(n));
      else hs.unroll(vr(n), factor, l.name == l.dim ? tail(l.dim) : Halide::TailStrategy::GuardWithIf);
    }
    for (const auto& n : ls.parallel) hs.parallel(vr(n));
  }

  void apply_schedule(const Stage& st) {
    Halide::Func f = funcs_.at(st.name);
    const StageSchedule* ss = s_.options.opt_level == 0 ? nullptr : s_.find(st.name);
    // Helper Funcs (argmin/argmax tuples, wide accumulators) are computed
    // inside the stage's Func and take the stage's "update" directives.
    if (auto g = helpers_.find(st.name); g != helpers_.end()) {
      // The accumulator is computed per iteration of `accumulator_at` (a tile
      // it keeps in registers or cache), else once for the whole stage.
      if (ss && !ss->accumulator_at.empty()) g->second.compute_at(f, Halide::Var(ss->accumulator_at));
      else g->second.compute_at(f, Halide::Var::outermost());
      if (ss && ss->update) apply_loops(st, g->second.update(0), *ss->update, true, false);
      if (ss && !ss->dot_pairs.empty()) apply_dot_pairs(g->second.update(0), ss->dot_pairs);
      if (ss && ss->rfactor) apply_rfactor(st, g->second, *ss->rfactor);
      if (ss) schedule_func(st, f, *ss, false);
      else f.compute_root();
      return;
    }
    if (!ss) {
      f.compute_root();
      return;
    }
    schedule_func(st, f, *ss, st.reduce.has_value());
  }

  void schedule_func(const Stage& st, Halide::Func f, const StageSchedule& ss, bool has_update) {
    // Producers live in the consumer's last definition: its update, which for
    // a wrapped reduction (argmin/argmax, narrow storage) is the helper Func's.
    auto consumer_loop = [&](const Placement& pl) {
      const Stage& c = p_.stage(pl.stage);
      const auto h = helpers_.find(pl.stage);
      const Halide::Func cf = c.reduce && h != helpers_.end() ? h->second : funcs_.at(pl.stage);
      return Halide::LoopLevel(cf, Halide::VarOrRVar(pl.loop, is_rvar(c, pl.loop)));
    };
    switch (ss.compute.kind) {
      case Placement::Kind::Root: f.compute_root(); break;
      case Placement::Kind::Inline: break;
      case Placement::Kind::At: f.compute_at(consumer_loop(ss.compute)); break;
    }
    // `store` places the allocation only (Halide's hoist_storage): the values
    // computed stay those compute_at asks for. Halide's store_at would also
    // enable sliding window, which may compute points outside the tensor and
    // read inputs out of bounds (found by test_differential).
    if (ss.store && ss.compute.kind == Placement::Kind::At) {
      if (ss.store->kind == Placement::Kind::Root) f.hoist_storage(Halide::LoopLevel::root());
      else if (ss.store->kind == Placement::Kind::At) f.hoist_storage(consumer_loop(*ss.store));
    }
    if (ss.compute.kind == Placement::Kind::Inline) return;
    const bool root = ss.compute.kind == Placement::Kind::Root;
    // Packed copies: Halide's in() wrapper of the tensor, used only by the
    // Func that reads it (the accumulator's when there is one), computed at
    // the loop and vectorized along its contiguous dim.
    for (const CacheRead& c : ss.cache) {
      const auto h = helpers_.find(st.name);
      const Halide::Func reader = st.reduce && h != helpers_.end() ? h->second : f;
      Halide::Func w = inputs_.count(c.tensor) ? inputs_.at(c.tensor).in(reader) : funcs_.at(c.tensor).in(reader);
      // Validation put the loop among the pure loops down to the accumulator tile or the update's loops.
      const bool in_update = st.reduce && !pure_loop_above_accumulator(st, ss, c.loop);
      if (in_update) w.compute_at(Halide::LoopLevel(reader, Halide::VarOrRVar(c.loop, is_rvar(st, c.loop))));
      else w.compute_at(f, Halide::Var(c.loop));
      const DType dt = p_.tensor(c.tensor).dtype;
      const int lanes = t_.vector_lanes(dt == DType::Bool ? DType::U8 : dt);
      // Halide's dim 0 is the tensor's last axis; a transposed copy stores dim 1 innermost.
      std::vector<Halide::Var> args = w.args();
      if (c.transpose && args.size() >= 2) {
        std::vector<Halide::Var> order = args;
        std::swap(order[0], order[1]);
        w.reorder_storage(order);
        w.reorder(std::vector<Halide::VarOrRVar>(order.begin(), order.end()));
        std::swap(args[0], args[1]);
      }
      if (c.transpose && args.size() >= 2 && lanes > 1) {
        // Transpose lanes x lanes blocks in registers: contiguous loads along
        // the source rows, shuffles, contiguous stores. A strided gather per
        // vector was 2x slower overall on x @ W^T with K = 3072 (6.3 -> 3.4 ms
        // per core, 128 x 3072 x 768).
        Halide::Var ko("__tk"), ki("__tki"), oo("__to"), oi("__toi");
        w.tile(args[0], args[1], oo, ko, oi, ki, lanes, lanes, Halide::TailStrategy::GuardWithIf)
            .vectorize(oi).unroll(ki);
      } else if (lanes > 1 && !args.empty()) w.vectorize(args[0], lanes, Halide::TailStrategy::GuardWithIf);
    }
    apply_loops(st, f, ss.loops, false, root);
    if (has_update && ss.update) apply_loops(paired_update(st, ss.dot_pairs), f.update(0), *ss.update, true, false);
    if (has_update && !ss.dot_pairs.empty()) apply_dot_pairs(f.update(0), ss.dot_pairs);
    if (has_update && ss.rfactor) apply_rfactor(st, f, *ss.rfactor);
    if (ss.pipeline.async) f.async();
    if (ss.pipeline.ring_buffer) f.ring_buffer(ss.pipeline.ring_buffer);
    for (const Prefetch& pf : ss.pipeline.prefetch) {
      Halide::Stage hs = has_update ? Halide::Stage(f.update(0)) : Halide::Stage(f);
      const Halide::VarOrRVar at(pf.loop, has_update && is_rvar(st, pf.loop));
      if (auto in = inputs_.find(pf.tensor); in != inputs_.end()) hs.prefetch(in->second, at, at, pf.distance);
      else hs.prefetch(funcs_.at(pf.tensor), at, at, pf.distance);
    }
    if (ss.device != "cpu") {
      map_to_gpu(Halide::Stage(f), ss);
      // A reduction's update runs on the device too when its loops carry the
      // same GPU loop names (tile its pure dims like the pure definition);
      // otherwise Halide runs it on the host, copying the buffer across.
      if (has_update && ss.update) {
        const auto nest = loop_nest(st, *ss.update, true);
        bool all = true;
        for (const auto* names : {&ss.gpu.blocks, &ss.gpu.threads})
          for (const auto& n : *names)
            all = all && std::any_of(nest.begin(), nest.end(), [&](const Loop& l) { return l.name == n; });
        if (all) map_to_gpu(f.update(0), ss);
      }
    }
  }

  // dot_pairs (Schedule.h): the pair loop <k>_2 stays the innermost loop (the
  // update's order never names it) and is vectorized atomically under the
  // update's vector lanes; Halide reduces each pair of lanes into one
  // (VectorReduce), which it emits as vdpbf16ps for bf16 x bf16 -> f32 on
  // avx512_bf16 targets.
  void apply_dot_pairs(Halide::Stage up, const std::string& k) { up.atomic().vectorize(Halide::RVar(k + "_2")); }

  // rfactor (RFactor in Schedule.h): split the reduction variable and turn
  // its inner part into the pure lane dim of an intermediate Func, computed
  // per point of the reduction (inside the update's innermost pure loop) with
  // the lanes innermost and vectorized; the update then reduces the lanes.
  // Validation guarantees an associative op, a divisible static extent and
  // no update directives, so the split needs no tail.
  void apply_rfactor(const Stage& st, Halide::Func red, const RFactor& rf) {
    const Halide::RVar r(rf.rvar), ro(rf.rvar + "_o"), ri(rf.rvar + "_i");
    const Halide::Var lane(rf.rvar + "_lane");
    Halide::Stage up = red.update(0);
    up.split(r, ro, ri, rf.factor);
    Halide::Func intm = up.rfactor(ri, lane);
    if (st.vars.empty()) intm.compute_at(red, Halide::Var::outermost());
    else intm.compute_at(red, Halide::Var(st.vars.back()));
    intm.vectorize(lane);
    std::vector<Halide::VarOrRVar> order{Halide::VarOrRVar(lane), Halide::VarOrRVar(ro)};
    for (auto it = st.rvars.rbegin(); it != st.rvars.rend(); ++it)
      if (it->name != rf.rvar) order.emplace_back(Halide::RVar(it->name));
    intm.update(0).reorder(order).vectorize(lane);
    // The stage's own update now reduces `factor` lanes. Vectorized as an
    // atomic reduction, Halide emits one VectorReduce: a halving tree of
    // shuffles and vector ops (log2(factor) steps) instead of `factor`
    // dependent scalar ops, which dominated short rows (layer_norm: two
    // such combines per 768-wide row).
    red.update(0).atomic().vectorize(ri);
  }

  void map_to_gpu(Halide::Stage hs, const StageSchedule& ss) {
    const Halide::DeviceAPI api = ss.device == "cuda" ? Halide::DeviceAPI::CUDA : Halide::DeviceAPI::OpenCL;
    auto v = [&](const std::vector<std::string>& n, size_t k) { return Halide::VarOrRVar(n[k], false); };
    const auto& b = ss.gpu.blocks;
    const auto& th = ss.gpu.threads;
    if (b.size() == 1) hs.gpu_blocks(v(b, 0), api);
    if (b.size() == 2) hs.gpu_blocks(v(b, 1), v(b, 0), api);
    if (b.size() == 3) hs.gpu_blocks(v(b, 2), v(b, 1), v(b, 0), api);
    if (th.size() == 1) hs.gpu_threads(v(th, 0), api);
    if (th.size() == 2) hs.gpu_threads(v(th, 1), v(th, 0), api);
    if (th.size() == 3) hs.gpu_threads(v(th, 2), v(th, 1), v(th, 0), api);
    if (th.empty() && b.empty()) hs.gpu_single_thread(api);
  }

  // Is `loop` one of the pure loops enclosing the stage's accumulator tile?
  static bool pure_loop_above_accumulator(const Stage& st, const StageSchedule& ss, const std::string& loop) {
    if (ss.accumulator_at.empty()) return false;
    for (const Loop& l : loop_nest(st, ss.loops, false)) {
      if (l.name == loop) return true;
      if (l.name == ss.accumulator_at) break;
    }
    return false;
  }

  const Program& p_;
  const Schedule& s_;
  const Target& t_;
  const LowerOptions o_;
  std::map<std::string, Halide::ImageParam> inputs_;
  std::map<std::string, Halide::Func> funcs_;
  // Per stage, the Func that runs its reduction when that is not the stage's
  // own Func (argmin/argmax tuples "<stage>__arg", wide accumulators "<stage>__acc").
  std::map<std::string, Halide::Func> helpers_;
  std::map<std::string, Halide::Type> types_;
};

}  // namespace

LoweredPipeline lower(const Program& p, const Schedule& s, const Target& t, const LowerOptions& o) {
  validate(p, s, &t);
  return with_halide_errors("lowering program '" + p.name() + "' for target " + t.name,
                            [&] { return Lowering(p, s, t, o).run(); });
}

}  // namespace pto
