#include "dsl/Expr.h"

#include <array>
#include <cmath>
#include <sstream>
#include <utility>

#include "dsl/Error.h"
#include "dsl/IRVisitor.h"

namespace pto {
namespace {

// clang-format off
constexpr std::array<std::string_view, 26> kUnOpNames = {
    "neg",  "not",  "abs",   "exp",   "log",   "sqrt",  "sin",   "cos",  "tan",
    "asin", "acos", "atan",  "sinh",  "cosh",  "tanh",  "asinh", "acosh", "atanh",
    "erf",  "floor", "ceil", "round", "trunc", "isnan", "isinf", "bitnot"};
constexpr std::array<std::string_view, 23> kBinOpNames = {
    "add", "sub", "mul", "div", "mod", "min", "max", "pow", "atan2",
    "lt",  "le",  "gt",  "ge",  "eq",  "ne",  "and", "or",  "copysign",
    "bitand", "bitor", "bitxor", "shl", "shr"};
constexpr std::array<std::string_view, 23> kBinOpSymbols = {
    "+", "-", "*", "/", "%", "min", "max", "pow", "atan2",
    "<", "<=", ">", ">=", "==", "!=", "&&", "||", "copysign",
    "&", "|", "^", "<<", ">>"};
// clang-format on

bool is_weak(const Expr& e) {
  const auto* c = e.as<ConstNode>();
  return c && c->weak;
}

Expr retype_weak(const Expr& c, DType t) {
  return make_const(c.as<ConstNode>()->value, t);
}

Expr to_bool(const Expr& e) {
  if (e.type() == DType::Bool) return e;
  return binary(BinOp::Ne, e, make_const(0, e.type()));
}

// Brings both operands of an arithmetic operator to one type.
void unify(Expr& a, Expr& b) {
  const bool wa = is_weak(a), wb = is_weak(b);
  if (wa && wb) {
    if (a.type() != b.type()) {
      const Expr* f = is_float(a.type()) ? &a : &b;
      const DType t = f->type();
      a = Expr(std::make_shared<const ConstNode>(a.as<ConstNode>()->value, t, true));
      b = Expr(std::make_shared<const ConstNode>(b.as<ConstNode>()->value, t, true));
    }
    return;
  }
  if (wa || wb) {
    Expr& w = wa ? a : b;
    Expr& s = wa ? b : a;
    const double v = w.as<ConstNode>()->value;
    if (!is_float(s.type()) && (is_float(w.type()) || v != std::floor(v))) {
      s = cast(DType::F32, s);  // int tensor op float literal computes in f32
    }
    w = retype_weak(w, s.type() == DType::Bool ? DType::I32 : s.type());
    if (s.type() == DType::Bool) s = cast(DType::I32, s);
    return;
  }
  const DType t = promote(a.type(), b.type());
  if (a.type() != t) a = cast(t, a);
  if (b.type() != t) b = cast(t, b);
}

}  // namespace

std::string_view to_string(UnOp op) { return kUnOpNames[static_cast<size_t>(op)]; }
std::string_view to_string(BinOp op) { return kBinOpNames[static_cast<size_t>(op)]; }
UnOp parse_unop(std::string_view s) {
  for (size_t i = 0; i < kUnOpNames.size(); ++i)
    if (kUnOpNames[i] == s) return static_cast<UnOp>(i);
  throw DefinitionError("unknown unary operator '" + std::string(s) + "'");
}
BinOp parse_binop(std::string_view s) {
  for (size_t i = 0; i < kBinOpNames.size(); ++i)
    if (kBinOpNames[i] == s) return static_cast<BinOp>(i);
  throw DefinitionError("unknown binary operator '" + std::string(s) + "'");
}
bool is_comparison(BinOp op) { return op >= BinOp::Lt && op <= BinOp::Ne; }
bool is_logical(BinOp op) { return op == BinOp::And || op == BinOp::Or; }

Expr::Expr(int v) : node_(std::make_shared<const ConstNode>(v, DType::I32, true)) {}
Expr::Expr(double v) : node_(std::make_shared<const ConstNode>(v, DType::F32, true)) {}
ExprKind Expr::kind() const { return node_->kind; }
DType Expr::type() const { return node_->type; }

Expr make_const(double v, DType t) {
  if (t == DType::Bool) v = v != 0 ? 1 : 0;
  return Expr(std::make_shared<const ConstNode>(v, t, false));
}
Expr var(const std::string& name) { return Expr(std::make_shared<const VarNode>(name)); }
Expr access(const std::string& tensor, std::vector<Expr> args, DType t) {
  for (Expr& a : args) {
    if (!a.defined()) throw DefinitionError("access to '" + tensor + "' with an undefined index");
    if (is_float(a.type()))
      throw DTypeError("index of '" + tensor + "' has float type " +
                       std::string(to_string(a.type())) + "; indices must be integers");
    if (a.type() != DType::I32) a = cast(DType::I32, a);
  }
  return Expr(std::make_shared<const AccessNode>(tensor, std::move(args), t));
}

Expr unary(UnOp op, Expr a) {
  if (!a.defined()) throw DefinitionError(std::string(to_string(op)) + ": undefined operand");
  switch (op) {
    case UnOp::Not:
      return Expr(std::make_shared<const UnaryNode>(op, to_bool(a), DType::Bool));
    case UnOp::IsNan:
    case UnOp::IsInf:
      if (!is_float(a.type())) return make_const(0, DType::Bool);
      return Expr(std::make_shared<const UnaryNode>(op, a, DType::Bool));
    case UnOp::Neg:
    case UnOp::Abs:
      if (a.type() == DType::Bool) a = cast(DType::I32, a);
      if (is_weak(a)) {
        const double v = a.as<ConstNode>()->value;
        return Expr(std::make_shared<const ConstNode>(op == UnOp::Neg ? -v : std::fabs(v),
                                                      a.type(), true));
      }
      return Expr(std::make_shared<const UnaryNode>(op, a, a.type()));
    case UnOp::BitNot:
      if (is_float(a.type()))
        throw DTypeError("bitnot: needs an integer or bool operand, got " +
                         std::string(to_string(a.type())));
      if (a.type() == DType::Bool)
        return Expr(std::make_shared<const UnaryNode>(UnOp::Not, a, DType::Bool));
      return Expr(std::make_shared<const UnaryNode>(op, a, a.type()));
    case UnOp::Floor:
    case UnOp::Ceil:
    case UnOp::Round:
    case UnOp::Trunc:
      if (!is_float(a.type())) return a;
      return Expr(std::make_shared<const UnaryNode>(op, a, a.type()));
    default:
      if (!is_float(a.type())) a = cast(DType::F32, a);
      return Expr(std::make_shared<const UnaryNode>(op, a, a.type()));
  }
}

Expr binary(BinOp op, Expr a, Expr b) {
  if (!a.defined() || !b.defined())
    throw DefinitionError(std::string(to_string(op)) + ": undefined operand");
  if (is_logical(op)) {
    return Expr(std::make_shared<const BinaryNode>(op, to_bool(a), to_bool(b), DType::Bool));
  }
  unify(a, b);
  if (op >= BinOp::BitAnd) {
    if (is_float(a.type()))
      throw DTypeError(std::string(to_string(op)) + ": needs integer operands, got " +
                       std::string(to_string(a.type())));
    if (a.type() == DType::Bool && (op == BinOp::Shl || op == BinOp::Shr))
      throw DTypeError(std::string(to_string(op)) + ": needs integer operands, got bool");
  }
  if ((op == BinOp::Pow || op == BinOp::Atan2 || op == BinOp::CopySign) && !is_float(a.type())) {
    a = is_weak(a) ? retype_weak(a, DType::F32) : cast(DType::F32, a);
    b = is_weak(b) ? retype_weak(b, DType::F32) : cast(DType::F32, b);
  }
  const DType t = is_comparison(op) ? DType::Bool : a.type();
  return Expr(std::make_shared<const BinaryNode>(op, a, b, t));
}

Expr select(Expr cond, Expr t, Expr f) {
  if (!cond.defined() || !t.defined() || !f.defined())
    throw DefinitionError("select: undefined operand");
  unify(t, f);
  return Expr(std::make_shared<const SelectNode>(to_bool(cond), t, f, t.type()));
}

Expr cast(DType t, Expr a) {
  if (!a.defined()) throw DefinitionError("cast: undefined operand");
  if (a.type() == t && !is_weak(a)) return a;
  if (const auto* c = a.as<ConstNode>()) return make_const(c->value, t);
  return Expr(std::make_shared<const CastNode>(t, a));
}

Expr operator+(Expr a, Expr b) { return binary(BinOp::Add, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(BinOp::Sub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(BinOp::Mul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return binary(BinOp::Div, std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) { return binary(BinOp::Mod, std::move(a), std::move(b)); }
Expr operator-(Expr a) { return unary(UnOp::Neg, std::move(a)); }
Expr operator<(Expr a, Expr b) { return binary(BinOp::Lt, std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return binary(BinOp::Le, std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return binary(BinOp::Gt, std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return binary(BinOp::Ge, std::move(a), std::move(b)); }
Expr operator==(Expr a, Expr b) { return binary(BinOp::Eq, std::move(a), std::move(b)); }
Expr operator!=(Expr a, Expr b) { return binary(BinOp::Ne, std::move(a), std::move(b)); }
Expr operator&&(Expr a, Expr b) { return binary(BinOp::And, std::move(a), std::move(b)); }
Expr operator||(Expr a, Expr b) { return binary(BinOp::Or, std::move(a), std::move(b)); }
Expr operator!(Expr a) { return unary(UnOp::Not, std::move(a)); }
Expr min(Expr a, Expr b) { return binary(BinOp::Min, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(BinOp::Max, std::move(a), std::move(b)); }
Expr pow(Expr a, Expr b) { return binary(BinOp::Pow, std::move(a), std::move(b)); }
Expr copysign(Expr a, Expr b) {
  return binary(BinOp::CopySign, std::move(a), std::move(b));
}
Expr clamp(Expr x, Expr lo, Expr hi) { return min(max(std::move(x), std::move(lo)), std::move(hi)); }

namespace {
class Printer : public IRVisitor {
 public:
  std::ostringstream os;

 protected:
  void visit_const(const ConstNode& n) override {
    if (n.type == DType::Bool) {
      os << (n.value != 0 ? "true" : "false");
    } else if (is_float(n.type)) {
      std::ostringstream v;
      v.precision(9);
      v << n.value;
      std::string s = v.str();
      if (s.find_first_of(".einn") == std::string::npos) s += ".0";
      os << s << (n.type == DType::F32 ? "f" : "");
      if (n.type != DType::F32 && n.type != DType::F64) os << "_" << to_string(n.type);
    } else {
      os << static_cast<long long>(n.value);
    }
  }
  void visit_var(const VarNode& n) override { os << n.name; }
  void visit_access(const AccessNode& n) override {
    os << n.tensor << "(";
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) os << ", ";
      visit(n.args[i]);
    }
    os << ")";
  }
  void visit_unary(const UnaryNode& n) override {
    if (n.op == UnOp::Neg) {
      os << "-";
      visit(n.a);
      return;
    }
    if (n.op == UnOp::Not) os << "!";
    else os << to_string(n.op);
    os << "(";
    visit(n.a);
    os << ")";
  }
  void visit_binary(const BinaryNode& n) override {
    const auto sym = kBinOpSymbols[static_cast<size_t>(n.op)];
    if (std::isalpha(static_cast<unsigned char>(sym[0]))) {
      os << sym << "(";
      visit(n.a);
      os << ", ";
      visit(n.b);
      os << ")";
    } else {
      os << "(";
      visit(n.a);
      os << " " << sym << " ";
      visit(n.b);
      os << ")";
    }
  }
  void visit_select(const SelectNode& n) override {
    os << "select(";
    visit(n.cond);
    os << ", ";
    visit(n.true_value);
    os << ", ";
    visit(n.false_value);
    os << ")";
  }
  void visit_cast(const CastNode& n) override {
    os << to_string(n.type) << "(";
    visit(n.a);
    os << ")";
  }
};
}  // namespace

std::string to_string(const Expr& e) {
  if (!e.defined()) return "<undefined>";
  Printer p;
  p.visit(e);
  return p.os.str();
}

}  // namespace pto
