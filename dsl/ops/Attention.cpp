// Scaled dot-product attention: softmax(q k^T * scale + mask) v, built from a
// score contraction, the library's softmax and matmul, so every piece keeps
// its own schedulable stage. Masked-out scores are -inf; a row whose every
// score is masked gives NaN, as in PyTorch.
#include <cmath>
#include <limits>

#include "dsl/ops/Ops.h"

namespace pto::ops {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal,
                                    std::optional<double> scale, const std::string& name) {
  const std::string op = "scaled_dot_product_attention";
  require_float(op, q);
  for (const Tensor* t : {&k, &v})
    if (t->dtype() != q.dtype())
      throw DTypeError(op + ": '" + t->name() + "' is " + std::string(to_string(t->dtype())) + " but query '" + q.name() +
                       "' is " + std::string(to_string(q.dtype())));
  for (const Tensor* t : {&q, &k, &v})
    if (t->rank() < 2) throw ShapeError(op + ": '" + t->name() + "' must be [..., L, D], got " + to_string(t->shape()));
  const Dim D = q.shape().back();
  if (k.shape().back() != D)
    throw ShapeError(op + ": key '" + k.name() + "' has head dim " + k.shape().back().str() + " but query '" + q.name() +
                     "' has " + D.str());
  const Dim Lk = k.shape()[k.shape().size() - 2];
  if (v.shape()[v.shape().size() - 2] != Lk)
    throw ShapeError(op + ": value '" + v.name() + "' has " + v.shape()[v.shape().size() - 2].str() +
                     " positions but key '" + k.name() + "' has " + Lk.str());
  const Dim Lq = q.shape()[q.shape().size() - 2];
  const Shape bq(q.shape().begin(), q.shape().end() - 2), bk(k.shape().begin(), k.shape().end() - 2);
  const Shape batch = broadcast_shapes(op, bq, bk);
  double sc = 0;
  if (scale) sc = *scale;
  else if (D.is_symbolic())
    throw SymbolicSizeError(op + ": the head dim of '" + q.name() +
                            "' is symbolic; pass scale explicitly");
  else sc = 1.0 / std::sqrt(static_cast<double>(D.value));

  Program p = q.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  std::vector<std::string> vars = index_vars(batch.size(), "b");
  auto bidx = [&](const Shape& bs) {
    std::vector<Expr> idx;
    const size_t off = batch.size() - bs.size();
    for (size_t d = 0; d < bs.size(); ++d) idx.push_back(bs[d].is_one() ? Expr(0) : var(vars[off + d]));
    return idx;
  };
  std::vector<Expr> qi = bidx(bq), ki = bidx(bk);
  qi.push_back(var("i"));
  qi.push_back(var("d"));
  ki.push_back(var("j"));
  ki.push_back(var("d"));
  vars.push_back("i");
  vars.push_back("j");
  Shape sshape = batch;
  sshape.push_back(Lq);
  sshape.push_back(Lk);
  const Tensor dots = p.define_reduce(p.unique_name(out + "_scores"), vars, sshape, ReduceOp::Sum, {{"d", D}},
                                      q(qi) * k(ki), OpKind::Contraction, op);
  Expr s = dots(vars_of(vars)) * make_const(sc, q.dtype());
  const Expr neg_inf = make_const(-std::numeric_limits<double>::infinity(), q.dtype());
  if (mask.defined()) {
    const Shape ms = broadcast_shapes(op, sshape, mask.shape());
    if (ms != sshape)
      throw ShapeError(op + ": mask '" + mask.name() + "' " + to_string(mask.shape()) + " does not broadcast to scores " +
                       to_string(sshape));
    const Expr m = mask(broadcast_index(mask, vars));
    s = mask.dtype() == DType::Bool ? select(m, s, neg_inf) : s + cast(q.dtype(), m);
  }
  if (causal) s = select(var("j") <= var("i"), s, neg_inf);
  const Tensor masked = p.define(p.unique_name(out + "_masked"), vars, sshape, s, OpKind::Elementwise, op);
  const Tensor probs = softmax(masked, -1, p.unique_name(out + "_probs"));
  return matmul(probs, v, out);
}

}  // namespace pto::ops
