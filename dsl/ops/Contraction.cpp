// Contractions: matmul (numpy semantics, batch broadcasting), linear and einsum.
#include <algorithm>
#include <cctype>
#include <map>

#include "dsl/ops/Ops.h"

namespace pto::ops {

Tensor matmul(const Tensor& a, const Tensor& b, const std::string& name) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa.empty() || sb.empty())
    throw ShapeError("matmul: operands must have rank >= 1, got '" + a.name() + "' " + to_string(sa) +
                     " and '" + b.name() + "' " + to_string(sb));
  if (a.dtype() != b.dtype())
    throw DTypeError("matmul: '" + a.name() + "' is " + std::string(to_string(a.dtype())) + " but '" +
                     b.name() + "' is " + std::string(to_string(b.dtype())));
  // Promote 1-D operands as numpy does, then drop the added dim from the result.
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  const Shape ma = a1 ? Shape{1, sa[0]} : sa;
  const Shape mb = b1 ? Shape{sb[0], 1} : sb;
  const Dim k = ma.back(), k2 = mb[mb.size() - 2];
  if (k != k2)
    throw ShapeError("matmul: inner dimensions differ: '" + a.name() + "' " + to_string(sa) + " has " + k.str() +
                     " columns but '" + b.name() + "' " + to_string(sb) + " has " + k2.str() + " rows");
  const Shape batch_a(ma.begin(), ma.end() - 2), batch_b(mb.begin(), mb.end() - 2);
  const Shape batch = broadcast_shapes("matmul", batch_a, batch_b);
  const Dim m = ma[ma.size() - 2], n = mb.back();

  Shape out = batch;
  std::vector<std::string> vars = index_vars(batch.size(), "b");
  if (!a1) {
    out.push_back(m);
    vars.push_back("i");
  }
  if (!b1) {
    out.push_back(n);
    vars.push_back("j");
  }
  auto batch_idx = [&](const Shape& bs) {
    std::vector<Expr> idx;
    const size_t off = batch.size() - bs.size();
    for (size_t d = 0; d < bs.size(); ++d) idx.push_back(bs[d].is_one() ? Expr(0) : var("b" + std::to_string(off + d)));
    return idx;
  };
  std::vector<Expr> ia = batch_idx(batch_a), ib = batch_idx(batch_b);
  if (!a1) ia.push_back(var("i"));
  ia.push_back(var("k"));
  ib.push_back(var("k"));
  if (!b1) ib.push_back(var("j"));
  Program p = a.program();
  return p.define_reduce(name.empty() ? p.unique_name("matmul") : name, vars, out, ReduceOp::Sum, {{"k", k}},
                         a(ia) * b(ib), OpKind::Contraction, "matmul");
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const std::string& name) {
  const Shape& sx = x.shape();
  const Shape& sw = w.shape();
  if (sw.size() != 2)
    throw ShapeError("linear: weight '" + w.name() + "' must be [out, in], got " + to_string(sw));
  if (sx.empty() || sx.back() != sw[1])
    throw ShapeError("linear: input '" + x.name() + "' " + to_string(sx) + " has last dim " +
                     (sx.empty() ? std::string("none") : sx.back().str()) + " but weight '" + w.name() + "' " +
                     to_string(sw) + " expects " + sw[1].str());
  if (b.defined() && (b.rank() != 1 || b.shape()[0] != sw[0]))
    throw ShapeError("linear: bias '" + b.name() + "' must be [" + sw[0].str() + "], got " + to_string(b.shape()));
  Program p = x.program();
  const std::string out_name = name.empty() ? p.unique_name("linear") : name;
  Shape out(sx.begin(), sx.end() - 1);
  out.push_back(sw[0]);
  auto vars = index_vars(out.size());
  std::vector<Expr> ix;
  for (size_t d = 0; d + 1 < out.size(); ++d) ix.push_back(var(vars[d]));
  ix.push_back(var("k"));
  const Expr o = var(vars.back());
  const Tensor mm = p.define_reduce(b.defined() ? p.unique_name(out_name + "_mm") : out_name, vars, out,
                                    ReduceOp::Sum, {{"k", sw[1]}}, x(ix) * w(o, var("k")),
                                    OpKind::Contraction, "linear");
  if (!b.defined()) return mm;
  std::vector<Expr> im;
  for (const auto& v : vars) im.push_back(var(v));
  return p.define(out_name, vars, out, mm(im) + b(o), OpKind::Elementwise, "linear");
}

}  // namespace pto::ops

namespace pto::ops {

Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, const std::string& name) {
  const std::string op = "einsum";
  if (operands.empty()) throw DefinitionError(op + ": needs at least one operand");
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  if (eq.find("...") != std::string::npos)
    throw DefinitionError(op + ": ellipsis in '" + equation + "' is not supported; spell out the dims");
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    const size_t c = lhs.find(',', s);
    terms.push_back(lhs.substr(s, c == std::string::npos ? std::string::npos : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  if (terms.size() != operands.size())
    throw DefinitionError(op + ": equation '" + equation + "' has " + std::to_string(terms.size()) + " operands, got " +
                          std::to_string(operands.size()) + " tensors");
  std::map<char, Dim> size;
  std::map<char, int> count;
  std::string order;  // letters in first-appearance order
  for (size_t t = 0; t < terms.size(); ++t) {
    const Tensor& x = operands[t];
    if (!x.program().same_as(operands[0].program()))
      throw DefinitionError(op + ": operands belong to different programs");
    if (x.dtype() != operands[0].dtype())
      throw DTypeError(op + ": operand '" + x.name() + "' is " + std::string(to_string(x.dtype())) + " but '" +
                       operands[0].name() + "' is " + std::string(to_string(operands[0].dtype())));
    if (static_cast<int>(terms[t].size()) != x.rank())
      throw ShapeError(op + ": subscripts '" + terms[t] + "' have " + std::to_string(terms[t].size()) +
                       " letters but operand '" + x.name() + "' has rank " + std::to_string(x.rank()));
    for (size_t k = 0; k < terms[t].size(); ++k) {
      const char c = terms[t][k];
      if (!std::isalpha(static_cast<unsigned char>(c)))
        throw DefinitionError(op + ": bad subscript '" + std::string(1, c) + "' in '" + equation + "'");
      const Dim& d = x.shape()[k];
      if (!size.count(c)) {
        size[c] = d;
        order += c;
      } else if (size[c] != d) {
        if (size[c].is_one()) size[c] = d;  // size-1 dims broadcast
        else if (!d.is_one())
          throw ShapeError(op + ": subscript '" + std::string(1, c) + "' is " + size[c].str() + " in one operand and " +
                           d.str() + " in '" + x.name() + "'");
      }
      ++count[c];
    }
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    for (char c : out) {
      if (!size.count(c))
        throw DefinitionError(op + ": output subscript '" + std::string(1, c) + "' appears in no input of '" + equation + "'");
      if (std::count(out.begin(), out.end(), c) > 1)
        throw DefinitionError(op + ": output subscript '" + std::string(1, c) + "' repeats in '" + equation + "'");
    }
  } else {  // implicit mode: letters that appear once, alphabetically
    for (const auto& [c, n] : count)
      if (n == 1) out += c;
  }
  auto vname = [](char c) { return std::string("e_") + c; };
  std::vector<std::string> vars;
  Shape shape;
  for (char c : out) {
    vars.push_back(vname(c));
    shape.push_back(size[c]);
  }
  std::vector<RVar> rvars;
  for (char c : order)
    if (out.find(c) == std::string::npos) rvars.push_back({vname(c), size[c]});
  Expr body;
  for (size_t t = 0; t < terms.size(); ++t) {
    std::vector<Expr> idx;
    for (size_t k = 0; k < terms[t].size(); ++k)
      idx.push_back(operands[t].shape()[k].is_one() ? Expr(0) : var(vname(terms[t][k])));
    const Expr a = operands[t](idx);
    body = body.defined() ? body * a : a;
  }
  Program p = operands[0].program();
  const std::string n = name.empty() ? p.unique_name(op) : name;
  if (rvars.empty()) return p.define(n, vars, shape, body, OpKind::Contraction, op);
  return p.define_reduce(n, vars, shape, ReduceOp::Sum, rvars, body, OpKind::Contraction, op);
}

}  // namespace pto::ops
