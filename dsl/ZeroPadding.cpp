#include "dsl/ZeroPadding.h"

#include <algorithm>

#include "dsl/IRVisitor.h"

namespace pto {
namespace {

// The factors of a product (through casts, which keep zero zero).
void factors(const Expr& e, std::vector<Expr>& out) {
  if (const auto* m = e.as<BinaryNode>(); m && m->op == BinOp::Mul) {
    factors(m->a, out);
    factors(m->b, out);
  } else if (const auto* c = e.as<CastNode>()) {
    factors(c->a, out);
  } else {
    out.push_back(e);
  }
}

void conjuncts(const Expr& e, std::vector<Expr>& out) {
  if (const auto* a = e.as<BinaryNode>(); a && a->op == BinOp::And) {
    conjuncts(a->a, out);
    conjuncts(a->b, out);
  } else {
    out.push_back(e);
  }
}

bool mentions(const Expr& e, const std::string& v) {
  bool found = false;
  substitute_vars(e, [&](const std::string& n) {
    found |= n == v;
    return Expr();
  });
  return found;
}

bool is_zero(const Expr& e) {
  const auto* c = e.as<ConstNode>();
  return c && c->value == 0;
}

// The factor of st's body read from a zero-padded stage, and that stage.
std::pair<const AccessNode*, const Stage*> padded_factor(const Program& p, const Stage& st) {
  if (!st.reduce || *st.reduce != ReduceOp::Sum) return {nullptr, nullptr};
  std::vector<Expr> fs;
  factors(st.value, fs);
  for (const Expr& f : fs) {
    const auto* a = f.as<AccessNode>();
    const Stage* pad = a ? p.find_stage(a->tensor) : nullptr;
    if (!pad || pad->reduce || pad->vars.size() != a->args.size()) continue;
    const auto* sel = pad->value.as<SelectNode>();
    if (sel && is_zero(sel->false_value)) return {a, pad};
  }
  return {nullptr, nullptr};
}

// `e`, an expression in the padded stage's variables, at the point a read of
// that stage names (its variables replaced by the read's indices).
Expr at_read(const Stage& pad, const std::vector<Expr>& args, const Expr& e) {
  return substitute_vars(e, [&](const std::string& n) -> Expr {
    for (size_t k = 0; k < pad.vars.size(); ++k)
      if (pad.vars[k] == n) return args[k];
    return Expr();
  });
}

}  // namespace

std::optional<PaddedRead> padded_read(const Program& p, const Stage& st) {
  const auto [a, pad] = padded_factor(p, st);
  if (!pad) return std::nullopt;
  PaddedRead r{pad, {}};
  for (const std::string& v : pad->vars)
    if (mentions(pad->value.as<SelectNode>()->cond, v)) r.dims.push_back(v);
  return r;
}

std::optional<Expr> padding_predicate(const Program& p, const Stage& st,
                                      const std::vector<std::string>& dims) {
  const auto [a, pad] = padded_factor(p, st);
  if (!pad) return std::nullopt;
  std::vector<Expr> cs;
  conjuncts(pad->value.as<SelectNode>()->cond, cs);
  Expr cond;
  for (const Expr& c : cs) {
    bool keep = dims.empty();
    for (const std::string& d : dims) keep |= mentions(c, d);
    if (keep) cond = cond.defined() ? (cond && c) : c;
  }
  if (!cond.defined()) return std::nullopt;
  return at_read(*pad, a->args, cond);
}

std::optional<Expr> read_through_padding(const Program& p, const Stage& st,
                                         const std::vector<std::string>& dims) {
  const auto pr = padded_read(p, st);
  if (!pr) return std::nullopt;
  for (const std::string& d : pr->dims)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) return std::nullopt;
  const Stage& pad = *pr->stage;
  const Expr inside = pad.value.as<SelectNode>()->true_value;
  struct ReadThrough : IRMutator {
    const Stage& pad;
    const Expr& inside;
    ReadThrough(const Stage& s, const Expr& v) : pad(s), inside(v) {}
    Expr mutate_access(const AccessNode& n, const Expr& self) override {
      if (n.tensor != pad.name) return IRMutator::mutate_access(n, self);
      return at_read(pad, n.args, inside);
    }
  } rt(pad, inside);
  return rt.mutate(st.value);
}

}  // namespace pto
