// Loss functions: negative log-likelihood and softmax cross-entropy (ONNX's
// NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss: class dim 1, optional
// per-class weights, ignore_index), mean squared / absolute / Huber error,
// binary cross-entropy on logits and KL divergence, each with PyTorch's
// `reduction` (none, sum, mean). They are compositions of library operators;
// the per-element terms are one elementwise stage each so schedules fuse them.
#include <numeric>

#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using json = nlohmann::json;
using Ins = std::vector<Tensor>;

const AttrSpec kReduction = {"reduction", AttrType::String, "mean"};

// `loss` reduced as asked: `name` names the result.
Tensor reduced(const std::string& op, const Tensor& loss, const Attrs& a, const std::string& name) {
  const std::string red = a.get<std::string>("reduction");
  std::vector<int> all(static_cast<size_t>(loss.rank()));
  std::iota(all.begin(), all.end(), 0);
  const json axes = {{"axes", all}, {"keepdims", false}};
  if (red == "none") return call("identity", {loss}, json::object(), name);
  if (red == "sum") return call("reduce_sum", {loss}, axes, name);
  if (red == "mean") return call("reduce_mean", {loss}, axes, name);
  throw DefinitionError(op + ": reduction '" + red + "' is not one of none, sum, mean");
}

// -w[t] lp[n, t, d...] over [N, d...], weighted mean over the kept elements.
Tensor nll(const std::string& op, const Tensor& lp, const Tensor& target, const Tensor& weight,
           const Attrs& a, const std::string& name) {
  require_float(op, lp);
  if (!is_int(target.dtype()))
    throw DTypeError(op + ": target '" + target.name() + "' must be an integer type, is " +
                     std::string(to_string(target.dtype())));
  if (lp.rank() < 2 || target.rank() != lp.rank() - 1)
    throw ShapeError(op + ": input '" + lp.name() +
                     "' must be [N, C, d...] and target [N, d...], got " + to_string(lp.shape()) +
                     " and " + to_string(target.shape()));
  const std::string red = a.get<std::string>("reduction");
  if (red != "none" && red != "sum" && red != "mean")
    throw DefinitionError(op + ": reduction '" + red + "' is not one of none, sum, mean");
  const DType dt = lp.dtype();
  const Tensor picked = call(
      "squeeze",
      {call("gather_elements", {lp, call("unsqueeze", {target}, {{"axes", {1}}})}, {{"axis", 1}})},
      {{"axes", {1}}});
  Tensor w = weight.defined() ? call("gather", {weight, target}, {{"axis", 0}}) : Tensor();
  if (a.has("ignore_index")) {
    const double ignore = static_cast<double>(a.get<int64_t>("ignore_index"));
    const Tensor keep = map(op, {target}, [&](const std::vector<Expr>& t) {
      return cast(dt, t[0] != make_const(ignore, t[0].type()));
    });
    w = w.defined() ? call("mul", {w, keep}) : keep;
  }
  const Tensor loss =
      w.defined() ? map(op, {picked, w}, [](const std::vector<Expr>& v) { return -(v[0] * v[1]); })
                  : call("neg", {picked});
  if (red != "mean" || !w.defined()) return reduced(op, loss, a, name);
  const json all = {{"axes", json::array()}, {"keepdims", false}};
  return call("div", {call("reduce_sum", {loss}, all), call("reduce_sum", {w}, all)},
              json::object(), name);
}

// A loss whose per-element term is f(a, b) (broadcast), then reduced.
OpInfo pointwise(const std::string& name, const std::string& summary,
                 std::function<Expr(const Expr&, const Expr&, const Attrs&)> f,
                 std::vector<AttrSpec> extra = {}) {
  extra.push_back(kReduction);
  return {name,
          OpKind::Reduction,
          summary,
          2,
          2,
          extra,
          [name, f](const Ins& in, const Attrs& a, const std::string& n) {
            require_float(name, in[0]);
            const Tensor term = map(name, in, [&](const std::vector<Expr>& v) {
              return f(v[0], cast(v[0].type(), v[1]), a);
            });
            return reduced(name, term, a, n);
          }};
}

Expr k(double v, const Expr& like) {
  return make_const(v, like.type());
}

}  // namespace

std::vector<OpInfo> loss_ops() {
  const AttrSpec ignore = {"ignore_index", AttrType::Int};
  std::vector<OpInfo> r;
  r.push_back({"nll_loss",
               OpKind::Reduction,
               "negative log-likelihood of log-probabilities [N, C, d...] at integer targets "
               "(weight, ignore_index, reduction)",
               2,
               3,
               {kReduction, ignore},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return nll("nll_loss", in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a, n);
               }});
  r.push_back({"cross_entropy",
               OpKind::Reduction,
               "nll_loss of log_softmax over the class dim 1 of logits [N, C, d...] (weight, "
               "ignore_index, reduction)",
               2,
               3,
               {kReduction, ignore},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 const Tensor lp = call("log_softmax", {in[0]}, {{"axis", 1}});
                 return nll("cross_entropy", lp, in[1], in.size() > 2 ? in[2] : Tensor(), a, n);
               }});
  r.push_back(
      pointwise("mse_loss", "mean squared error (a - b)^2 (reduction)",
                [](const Expr& x, const Expr& y, const Attrs&) { return (x - y) * (x - y); }));
  r.push_back(pointwise(
      "l1_loss", "mean absolute error |a - b| (reduction)",
      [](const Expr& x, const Expr& y, const Attrs&) { return unary(UnOp::Abs, x - y); }));
  r.push_back(pointwise(
      "huber_loss",
      "(a - b)^2 / 2 within delta, delta (|a - b| - delta / 2) outside (delta, reduction)",
      [](const Expr& x, const Expr& y, const Attrs& a) {
        const double d = a.get<double>("delta");
        if (!(d > 0))
          throw DefinitionError("huber_loss: delta " + std::to_string(d) + " must be > 0");
        const Expr e = unary(UnOp::Abs, x - y);
        return select(e <= k(d, e), k(0.5, e) * e * e, k(d, e) * (e - k(0.5 * d, e)));
      },
      {{"delta", AttrType::Float, 1.0}}));
  r.push_back(pointwise(
      "bce_with_logits",
      "binary cross-entropy of sigmoid(logits) against targets, overflow-free (reduction)",
      [](const Expr& x, const Expr& y, const Attrs&) {
        // max(x, 0) - x y + log(1 + e^-|x|)
        const Expr t = unary(UnOp::Exp, -unary(UnOp::Abs, x));
        return max(x, k(0, x)) - x * y + log1p_expr(t);
      }));
  r.push_back(pointwise("kl_div",
                        "target (log target - input) with input as log-probabilities, 0 where "
                        "target is 0 (log_target, reduction)",
                        [](const Expr& x, const Expr& y, const Attrs& a) {
                          if (a.get<bool>("log_target")) return unary(UnOp::Exp, y) * (y - x);
                          return select(y == k(0, y), k(0, y), y * (unary(UnOp::Log, y) - x));
                        },
                        {{"log_target", AttrType::Bool, false}}));
  return r;
}

}  // namespace pto::ops
