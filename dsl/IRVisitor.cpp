#include "dsl/IRVisitor.h"

namespace pto {

void IRVisitor::visit(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Const: return visit_const(*e.as<ConstNode>());
    case ExprKind::Var: return visit_var(*e.as<VarNode>());
    case ExprKind::Access: return visit_access(*e.as<AccessNode>());
    case ExprKind::Unary: return visit_unary(*e.as<UnaryNode>());
    case ExprKind::Binary: return visit_binary(*e.as<BinaryNode>());
    case ExprKind::Select: return visit_select(*e.as<SelectNode>());
    case ExprKind::Cast: return visit_cast(*e.as<CastNode>());
  }
}
void IRVisitor::visit_access(const AccessNode& n) {
  for (const Expr& a : n.args) visit(a);
}
void IRVisitor::visit_binary(const BinaryNode& n) {
  visit(n.a);
  visit(n.b);
}
void IRVisitor::visit_select(const SelectNode& n) {
  visit(n.cond);
  visit(n.true_value);
  visit(n.false_value);
}

Expr IRMutator::mutate(const Expr& e) {
  switch (e.kind()) {
    case ExprKind::Const: return mutate_const(*e.as<ConstNode>(), e);
    case ExprKind::Var: return mutate_var(*e.as<VarNode>(), e);
    case ExprKind::Access: return mutate_access(*e.as<AccessNode>(), e);
    case ExprKind::Unary: return mutate_unary(*e.as<UnaryNode>(), e);
    case ExprKind::Binary: return mutate_binary(*e.as<BinaryNode>(), e);
    case ExprKind::Select: return mutate_select(*e.as<SelectNode>(), e);
    case ExprKind::Cast: return mutate_cast(*e.as<CastNode>(), e);
  }
  return e;
}
Expr IRMutator::mutate_access(const AccessNode& n, const Expr& self) {
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr& a : n.args) {
    args.push_back(mutate(a));
    changed |= !args.back().same_as(a);
  }
  return changed ? access(n.tensor, std::move(args), n.type) : self;
}
Expr IRMutator::mutate_unary(const UnaryNode& n, const Expr& self) {
  Expr a = mutate(n.a);
  return a.same_as(n.a) ? self : unary(n.op, a);
}
Expr IRMutator::mutate_binary(const BinaryNode& n, const Expr& self) {
  Expr a = mutate(n.a), b = mutate(n.b);
  return a.same_as(n.a) && b.same_as(n.b) ? self : binary(n.op, a, b);
}
Expr IRMutator::mutate_select(const SelectNode& n, const Expr& self) {
  Expr c = mutate(n.cond), t = mutate(n.true_value), f = mutate(n.false_value);
  return c.same_as(n.cond) && t.same_as(n.true_value) && f.same_as(n.false_value)
             ? self
             : select(c, t, f);
}
Expr IRMutator::mutate_cast(const CastNode& n, const Expr& self) {
  Expr a = mutate(n.a);
  return a.same_as(n.a) ? self : cast(n.type, a);
}

bool read_at(const Expr& e, const std::string& tensor, const Shape& shape, const std::vector<std::string>& idx) {
  struct Reads : IRVisitor {
    const std::string& tensor;
    const Shape& shape;
    const std::vector<std::string>& idx;
    bool any = false, all = true;
    Reads(const std::string& t, const Shape& s, const std::vector<std::string>& i) : tensor(t), shape(s), idx(i) {}
    void visit_access(const AccessNode& a) override {
      IRVisitor::visit_access(a);
      if (a.tensor != tensor) return;
      any = true;
      if (a.args.size() != idx.size() || shape.size() != idx.size()) {
        all = false;
        return;
      }
      for (size_t k = 0; k < idx.size(); ++k) {
        const auto* v = a.args[k].as<VarNode>();
        const Expr& arg = a.args[k];
        const auto* c = arg.as<CastNode>() ? arg.as<CastNode>()->a.as<ConstNode>() : arg.as<ConstNode>();
        if (!(v && v->name == idx[k]) && !(shape[k].is_one() && c && c->value == 0.0)) all = false;
      }
    }
  } r(tensor, shape, idx);
  r.visit(e);
  return r.any && r.all;
}

}  // namespace pto
