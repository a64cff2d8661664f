// Visitors and mutators over the expression IR.
//
// Passes (printing, JSON, analysis, Halide lowering, renaming) derive from
// these instead of switching on node kinds themselves. The default
// implementations walk every child; a mutator rebuilds a node only when a
// child changed, so untouched subtrees stay shared.
#pragma once

#include <string>
#include <vector>

#include "dsl/Expr.h"
#include "dsl/Shape.h"

namespace pto {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  void visit(const Expr& e);

 protected:
  virtual void visit_const(const ConstNode&) {}
  virtual void visit_var(const VarNode&) {}
  virtual void visit_access(const AccessNode& n);
  virtual void visit_unary(const UnaryNode& n) { visit(n.a); }
  virtual void visit_binary(const BinaryNode& n);
  virtual void visit_select(const SelectNode& n);
  virtual void visit_cast(const CastNode& n) { visit(n.a); }
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  Expr mutate(const Expr& e);

 protected:
  virtual Expr mutate_const(const ConstNode&, const Expr& self) { return self; }
  virtual Expr mutate_var(const VarNode&, const Expr& self) { return self; }
  virtual Expr mutate_access(const AccessNode& n, const Expr& self);
  virtual Expr mutate_unary(const UnaryNode& n, const Expr& self);
  virtual Expr mutate_binary(const BinaryNode& n, const Expr& self);
  virtual Expr mutate_select(const SelectNode& n, const Expr& self);
  virtual Expr mutate_cast(const CastNode& n, const Expr& self);
};

// Returns `e` with index variables renamed by `f(name) -> Expr` (null Expr keeps the variable).
template <typename F>
Expr substitute_vars(const Expr& e, F&& f) {
  struct Sub : IRMutator {
    F& fn;
    explicit Sub(F& g) : fn(g) {}
    Expr mutate_var(const VarNode& n, const Expr& self) override {
      Expr r = fn(n.name);
      return r.defined() ? r : self;
    }
  } sub(f);
  return sub.mutate(e);
}

// Are all accesses to `tensor` (of shape `shape`) in `e` at exactly `idx`
// (variable names), or at 0 along its dims of extent 1 (a broadcast head)?
// False when `e` reads no element of it.
bool read_at(const Expr& e, const std::string& tensor, const Shape& shape, const std::vector<std::string>& idx);

}  // namespace pto
