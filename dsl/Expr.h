// PTO's expression IR: the element-level language of compute definitions.
//
// A stage defines each element of its output tensor as an Expr over index
// variables and accesses to other tensors, e.g. `A(i, r) * B(r, j)`. The IR is
// small on purpose (constants, variables, tensor accesses, unary and binary
// operators, select, cast) so that passes can analyse it: shape checks, FLOP
// and byte counts, fingerprints, JSON. It is lowered to Halide only in
// backends/Lower.cpp. Reductions are not expressions: they belong to a Stage
// (see Stage.h), which keeps every reduction schedulable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dsl/Type.h"

namespace pto {

enum class ExprKind { Const, Var, Access, Unary, Binary, Select, Cast };

// clang-format off
enum class UnOp {
  Neg, Not, Abs, Exp, Log, Sqrt, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Tanh,
  Asinh, Acosh, Atanh, Erf, Floor, Ceil, Round, Trunc, IsNan, IsInf,
  BitNot,  // integers, in their own type
};
enum class BinOp {
  Add, Sub, Mul, Div, Mod, Min, Max, Pow, Atan2, Lt, Le, Gt, Ge, Eq, Ne, And, Or, CopySign,
  BitAnd, BitOr, BitXor, Shl, Shr,  // integers (bool for the first three), in their own type
};
// clang-format on

std::string_view to_string(UnOp op);
std::string_view to_string(BinOp op);
UnOp parse_unop(std::string_view s);   // throws DefinitionError
BinOp parse_binop(std::string_view s); // throws DefinitionError
bool is_comparison(BinOp op);
bool is_logical(BinOp op);

struct ExprNode;

// A reference-counted, immutable expression. Cheap to copy.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}
  // Numeric literals are "weak": they take the type of the other operand.
  Expr(int v);     // NOLINT(google-explicit-constructor)
  Expr(double v);  // NOLINT(google-explicit-constructor)
  Expr(float v) : Expr(static_cast<double>(v)) {}  // NOLINT

  bool defined() const { return node_ != nullptr; }
  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  ExprKind kind() const;
  DType type() const;
  template <typename T>
  const T* as() const {
    return node_ && T::kKind == kind() ? static_cast<const T*>(node_.get()) : nullptr;
  }
  bool same_as(const Expr& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

struct ExprNode {
  ExprNode(ExprKind k, DType t) : kind(k), type(t) {}
  virtual ~ExprNode() = default;
  const ExprKind kind;
  const DType type;
};

struct ConstNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Const;
  ConstNode(double v, DType t, bool w) : ExprNode(kKind, t), value(v), weak(w) {}
  const double value;
  const bool weak;  // literal without an explicit type; adopts its partner's type
};

// An index variable: a pure dimension of the stage or a reduction variable.
struct VarNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Var;
  explicit VarNode(std::string n) : ExprNode(kKind, DType::I32), name(std::move(n)) {}
  const std::string name;
};

// Element of a tensor; indices are row-major (last index is contiguous).
struct AccessNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Access;
  AccessNode(std::string t, std::vector<Expr> a, DType ty)
      : ExprNode(kKind, ty), tensor(std::move(t)), args(std::move(a)) {}
  const std::string tensor;
  const std::vector<Expr> args;
};

struct UnaryNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Unary;
  UnaryNode(UnOp o, Expr x, DType t) : ExprNode(kKind, t), op(o), a(std::move(x)) {}
  const UnOp op;
  const Expr a;
};

struct BinaryNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Binary;
  BinaryNode(BinOp o, Expr x, Expr y, DType t)
      : ExprNode(kKind, t), op(o), a(std::move(x)), b(std::move(y)) {}
  const BinOp op;
  const Expr a, b;
};

struct SelectNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Select;
  SelectNode(Expr c, Expr t, Expr f, DType ty)
      : ExprNode(kKind, ty), cond(std::move(c)), true_value(std::move(t)),
        false_value(std::move(f)) {}
  const Expr cond, true_value, false_value;
};

struct CastNode final : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Cast;
  CastNode(DType t, Expr x) : ExprNode(kKind, t), a(std::move(x)) {}
  const Expr a;
};

// Constructors. They type-check and fold weak literals; errors throw DTypeError.
Expr make_const(double v, DType t);
Expr var(const std::string& name);
Expr access(const std::string& tensor, std::vector<Expr> args, DType t);
Expr unary(UnOp op, Expr a);
Expr binary(BinOp op, Expr a, Expr b);
Expr select(Expr cond, Expr t, Expr f);
Expr cast(DType t, Expr a);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr pow(Expr a, Expr b);
// |a| with the sign of b (C's copysign; floats, integers computed in f32).
Expr copysign(Expr a, Expr b);
Expr clamp(Expr x, Expr lo, Expr hi);

// Readable form, e.g. `max((A(i, r) * B(r, j)), 0.0f)`.
std::string to_string(const Expr& e);

}  // namespace pto
