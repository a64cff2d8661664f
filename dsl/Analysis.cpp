#include "dsl/Analysis.h"

#include <algorithm>

#include "dsl/IRVisitor.h"

namespace pto {
namespace {
// Counts the definition's arithmetic: the operations on values read from
// tensors. Operations on index variables and constants alone are address
// computation or bounds guards (a padded convolution's `inside` test), not
// work, and a select or cast moves a value without computing one; counting
// them made a padded convolution's FLOPs 13x the conventional count.
class OpCounter : public IRVisitor {
 public:
  double ops = 0;

 protected:
  void visit_unary(const UnaryNode& n) override {
    if (reads_data(n.a)) ops += 1;
  }
  void visit_binary(const BinaryNode& n) override {
    const bool a = reads_data(n.a), b = reads_data(n.b);
    if (a || b) ops += 1;
  }
  void visit_access(const AccessNode&) override { data_ = true; }

 private:
  // Visits `e` (counting its operations) and says whether it reads a tensor.
  bool reads_data(const Expr& e) {
    const bool outer = data_;
    data_ = false;
    visit(e);
    const bool inner = data_;
    data_ = outer || inner;
    return inner;
  }
  bool data_ = false;
};
}  // namespace

int64_t dim_value(const Dim& d, const std::map<std::string, int64_t>& sizes) {
  if (!d.is_symbolic()) return d.value;
  const auto it = sizes.find(d.sym);
  if (it == sizes.end()) throw ShapeError("symbolic size '" + d.sym + "' is not bound");
  return it->second;
}

double stage_flops(const Stage& st, const std::map<std::string, int64_t>& sizes) {
  double n = 1;
  for (const Dim& d : st.shape) n *= static_cast<double>(dim_value(d, sizes));
  OpCounter c;
  c.visit(st.value);
  if (!st.reduce) return n * c.ops;
  for (const RVar& r : st.rvars) n *= static_cast<double>(dim_value(r.extent, sizes));
  return n * (c.ops + 1);
}

double program_flops(const Program& p, const std::map<std::string, int64_t>& sizes) {
  double f = 0;
  for (const Stage& s : p.stages()) f += stage_flops(s, sizes);
  return f;
}

double program_io_bytes(const Program& p, const std::map<std::string, int64_t>& sizes) {
  double b = 0;
  auto add = [&](const Shape& s, DType t) {
    double n = bytes(t);
    for (const Dim& d : s) n *= static_cast<double>(dim_value(d, sizes));
    b += n;
  };
  for (const auto& in : p.inputs()) add(in.shape, in.dtype);
  for (const auto& o : p.outputs()) add(p.stage(o).shape, p.stage(o).dtype);
  return b;
}

std::optional<std::string> pair_rvar(const Stage& st, std::optional<DType> dtype) {
  struct Find : IRVisitor {
    std::optional<DType> dtype;
    std::optional<std::string> k;
    void visit_access(const AccessNode& a) override {
      if ((!dtype || a.type == *dtype) && !a.args.empty())
        if (const auto* m = a.args.back().as<BinaryNode>(); m && m->op == BinOp::Mod)
          if (const auto* v = m->a.as<VarNode>())
            if (const auto* two = m->b.as<ConstNode>(); two && two->value == 2) k = v->name;
      IRVisitor::visit_access(a);
    }
  } f;
  f.dtype = dtype;
  f.visit(st.value);
  if (!f.k) return std::nullopt;
  for (const RVar& r : st.rvars)
    if (r.name == *f.k) return f.k;
  return std::nullopt;
}

bool minus_row_max(const Program& p, const Expr& e) {
  const auto* d = e.as<BinaryNode>();
  if (!d || d->op != BinOp::Sub) return false;
  const auto* x = d->a.as<AccessNode>();
  const auto* m = d->b.as<AccessNode>();
  const Stage* max = m ? p.find_stage(m->tensor) : nullptr;
  if (!x || !max || max->reduce != ReduceOp::Max || max->rvars.size() != 1 ||
      x->args.size() != m->args.size() + 1 || max->vars.size() != m->args.size())
    return false;
  // M is T itself at (its vars, r): a max of anything else bounds nothing.
  const auto* mv = max->value.as<AccessNode>();
  std::vector<std::string> row = max->vars;
  row.push_back(max->rvars[0].name);
  const Shape& shape = p.tensor(x->tensor).shape;
  if (!mv || mv->tensor != x->tensor || !read_at(max->value, x->tensor, shape, row) ||
      max->rvars[0].extent != shape.back())  // over the whole row
    return false;
  // Both read the same row: the same variables before T's last index.
  for (size_t k = 0; k < m->args.size(); ++k) {
    const auto* a = x->args[k].as<VarNode>();
    const auto* b = m->args[k].as<VarNode>();
    if (!a || !b || a->name != b->name) return false;
  }
  return true;
}

std::optional<std::pair<int64_t, int64_t>> index_range(
    const Expr& e, const std::map<std::string, int64_t>& extents) {
  using R = std::optional<std::pair<int64_t, int64_t>>;
  if (const auto* c = e.as<ConstNode>()) {
    const auto v = static_cast<int64_t>(c->value);
    if (static_cast<double>(v) != c->value) return std::nullopt;
    return std::pair{v, v};
  }
  if (const auto* v = e.as<VarNode>()) {
    const auto it = extents.find(v->name);
    if (it == extents.end() || it->second < 1) return std::nullopt;
    return std::pair<int64_t, int64_t>{0, it->second - 1};
  }
  if (const auto* c = e.as<CastNode>())
    return is_float(c->type) ? std::nullopt : index_range(c->a, extents);
  if (const auto* s = e.as<SelectNode>()) {
    const R t = index_range(s->true_value, extents), f = index_range(s->false_value, extents);
    if (!t || !f) return std::nullopt;
    return std::pair{std::min(t->first, f->first), std::max(t->second, f->second)};
  }
  if (const auto* u = e.as<UnaryNode>()) {
    const R a = index_range(u->a, extents);
    if (!a || u->op != UnOp::Neg) return std::nullopt;
    return std::pair{-a->second, -a->first};
  }
  const auto* b = e.as<BinaryNode>();
  if (!b) return std::nullopt;
  const R x = index_range(b->a, extents), y = index_range(b->b, extents);
  if (!x || !y) return std::nullopt;
  const auto [a0, a1] = *x;
  const auto [b0, b1] = *y;
  switch (b->op) {
    case BinOp::Add:
      return std::pair{a0 + b0, a1 + b1};
    case BinOp::Sub:
      return std::pair{a0 - b1, a1 - b0};
    case BinOp::Min:
      return std::pair{std::min(a0, b0), std::min(a1, b1)};
    case BinOp::Max:
      return std::pair{std::max(a0, b0), std::max(a1, b1)};
    case BinOp::Mul: {
      const int64_t p[] = {a0 * b0, a0 * b1, a1 * b0, a1 * b1};
      return std::pair{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
    }
    case BinOp::Div:  // floor division by a positive constant
      if (b0 != b1 || b0 < 1) return std::nullopt;
      return std::pair{a0 >= 0 ? a0 / b0 : -((-a0 + b0 - 1) / b0),
                       a1 >= 0 ? a1 / b0 : -((-a1 + b0 - 1) / b0)};
    case BinOp::Mod:
      if (b0 != b1 || b0 < 1) return std::nullopt;
      if (a0 >= 0 && a1 < b0) return std::pair{a0, a1};
      return std::pair<int64_t, int64_t>{0, b0 - 1};
    default:
      return std::nullopt;
  }
}

std::vector<std::string> reads_outside(const Program& p, const Stage& stage) {
  std::map<std::string, int64_t> extents;
  for (size_t i = 0; i < stage.vars.size(); ++i)
    if (!stage.shape[i].is_symbolic()) extents[stage.vars[i]] = stage.shape[i].value;
  for (const RVar& r : stage.rvars)
    if (!r.extent.is_symbolic()) extents[r.name] = r.extent.value;
  struct Find : IRVisitor {
    const Program& p;
    const std::map<std::string, int64_t>& extents;
    std::vector<std::string> out;
    Find(const Program& q, const std::map<std::string, int64_t>& e) : p(q), extents(e) {}
    void visit_access(const AccessNode& n) override {
      IRVisitor::visit_access(n);
      if (std::find(out.begin(), out.end(), n.tensor) != out.end()) return;
      const Shape& shape = p.tensor(n.tensor).shape;
      for (size_t d = 0; d < n.args.size() && d < shape.size(); ++d) {
        const auto r = index_range(n.args[d], extents);
        if (!r || shape[d].is_symbolic() || r->first < 0 || r->second >= shape[d].value) {
          out.push_back(n.tensor);
          return;
        }
      }
    }
  } find(p, extents);
  find.visit(stage.value);
  return find.out;
}

}  // namespace pto
