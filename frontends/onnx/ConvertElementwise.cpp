// ONNX elementwise operators: unary and binary math, comparisons, logic,
// activations with their attributes, Cast, Where, Clip and the variadic
// Sum / Mean / Max / Min. Most are one row of the operator library; those
// whose attributes the library's row does not take are composed of rows
// (Selu's gamma, Elu's alpha, Shrink, ThresholdedRelu, ...).
#include <cmath>

#include "dsl/Error.h"
#include "dsl/ops/Ops.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

using nlohmann::json;

// A scalar of x's type, fused into its consumer.
// A row of the library applied to every input, no attributes.
Converter direct(const std::string& op) {
  return [op](NodeContext& c) {
    c.check_attrs({});
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.num_inputs(); ++i) in.push_back(c.input(i));
    return one(ops::call(op, in, json::object(), c.out_name()));
  };
}

// f(x, alpha[, beta]) for rows with the same attributes under other names.
Converter with_attrs(const std::string& op,
                     std::vector<std::pair<std::string, std::pair<std::string, double>>> map) {
  return [op, map](NodeContext& c) {
    std::vector<std::string> known;
    json a = json::object();
    for (const auto& [onnx_name, pto] : map) {
      known.push_back(onnx_name);
      a[pto.first] = c.attr_float(onnx_name, pto.second);
    }
    c.check_attrs(known);
    return one(ops::call(op, {c.input(0)}, a, c.out_name()));
  };
}

// Sum / Mean / Max / Min over any number of inputs, broadcasting.
Converter variadic(const std::string& op, bool mean) {
  return [op, mean](NodeContext& c) {
    c.check_attrs({});
    if (c.num_inputs() == 0) c.fail("needs at least one input");
    Tensor acc = c.input(0);
    if (c.num_inputs() == 1) return one(ops::call("identity", {acc}, json::object(), c.out_name()));
    for (size_t i = 1; i < c.num_inputs(); ++i) {
      const bool last = i + 1 == c.num_inputs() && !mean;
      acc = ops::call(op, {acc, c.input(i)}, json::object(), last ? c.out_name() : "");
    }
    if (mean)
      acc = ops::call("div", {acc, scalar(c, static_cast<double>(c.num_inputs()), acc.dtype())},
                      json::object(), c.out_name());
    return one(acc);
  };
}

// op(a, b) in float64, cast to a's (integer) type.
Tensor in_f64(NodeContext& c, const std::string& op, const Tensor& a, const Tensor& b) {
  const json f64 = {{"dtype", "f64"}};
  const Tensor r = ops::call(op, {ops::call("cast", {a}, f64), ops::call("cast", {b}, f64)});
  return ops::call("cast", {r}, {{"dtype", std::string(to_string(a.dtype()))}}, c.out_name());
}

std::vector<Value> cast(NodeContext& c, DType to) {
  return one(
      ops::call("cast", {c.input(0)}, {{"dtype", std::string(to_string(to))}}, c.out_name()));
}

}  // namespace

void add_elementwise_converters(std::map<std::string, Converter>& t) {
  const std::vector<std::pair<std::string, std::string>> same = {
      {"Abs", "abs"},
      {"Acos", "acos"},
      {"Acosh", "acosh"},
      {"Asin", "asin"},
      {"Asinh", "asinh"},
      {"Atan", "atan"},
      {"Atanh", "atanh"},
      {"Ceil", "ceil"},
      {"Cos", "cos"},
      {"Cosh", "cosh"},
      {"Erf", "erf"},
      {"Exp", "exp"},
      {"Floor", "floor"},
      {"Log", "log"},
      {"Neg", "neg"},
      {"Reciprocal", "reciprocal"},
      {"Relu", "relu"},
      {"Round", "round"},
      {"Sigmoid", "sigmoid"},
      {"Sign", "sign"},
      {"Sin", "sin"},
      {"Sinh", "sinh"},
      {"Softplus", "softplus"},
      {"Softsign", "softsign"},
      {"Sqrt", "sqrt"},
      {"Tan", "tan"},
      {"Tanh", "tanh"},
      {"IsNaN", "isnan"},
      {"Not", "logical_not"},
      {"Mish", "mish"},
      {"HardSwish", "hard_swish"},
      {"Add", "add"},
      {"Sub", "sub"},
      {"Mul", "mul"},
      {"Equal", "equal"},
      {"Greater", "greater"},
      {"GreaterOrEqual", "greater_equal"},
      {"Less", "less"},
      {"LessOrEqual", "less_equal"},
      {"And", "logical_and"},
      {"Or", "logical_or"},
      {"Xor", "logical_xor"},
      {"PRelu", "prelu"},
      {"BitwiseAnd", "bitwise_and"},
      {"BitwiseOr", "bitwise_or"},
      {"BitwiseXor", "bitwise_xor"},
      {"BitwiseNot", "bitwise_not"},
      {"Where", "where"},
  };
  for (const auto& [onnx_op, op] : same) t[onnx_op] = direct(op);

  // Integer division truncates toward zero in ONNX (C's), floats divide.
  t["Div"] = [](NodeContext& c) {
    c.check_attrs({});
    const Tensor a = c.input(0), b = c.input(1);
    if (!is_int(a.dtype())) return one(ops::call("div", {a, b}, json::object(), c.out_name()));
    const Tensor q = ops::call("div", {ops::call("cast", {a}, {{"dtype", "f64"}}),
                                       ops::call("cast", {b}, {{"dtype", "f64"}})});
    return one(ops::call("cast", {ops::call("trunc", {q})},
                         {{"dtype", std::string(to_string(a.dtype()))}}, c.out_name()));
  };
  t["Mod"] = [](NodeContext& c) {
    c.check_attrs({"fmod"});
    const bool fmod = c.attr_int("fmod", 0) != 0;
    const Tensor a = c.input(0), b = c.input(1);
    if (!fmod && is_float(a.dtype()))
      c.fail("fmod=0 is only valid for integer inputs (the ONNX rule)");
    if (!fmod || !is_int(a.dtype()))
      return one(ops::call(fmod ? "fmod" : "mod", {a, b}, json::object(), c.out_name()));
    return one(in_f64(c, "fmod", a, b));
  };
  // X's type: integers computed in float64 (exact below 2^53), cast back.
  t["Pow"] = [](NodeContext& c) {
    c.check_attrs({});
    const Tensor a = c.input(0), b = c.input(1);
    if (!is_int(a.dtype())) return one(ops::call("pow", {a, b}, json::object(), c.out_name()));
    return one(in_f64(c, "pow", a, b));
  };
  t["IsInf"] = [](NodeContext& c) {
    c.check_attrs({"detect_negative", "detect_positive"});
    const bool neg = c.attr_int("detect_negative", 1) != 0,
               pos = c.attr_int("detect_positive", 1) != 0;
    const Tensor x = c.input(0);
    if (neg && pos) return one(ops::call("isinf", {x}, json::object(), c.out_name()));
    // One sign of infinity (an infinity by its bits, its sign by a compare),
    // or none (false everywhere: NaN == 0 is).
    if (!neg && !pos)
      return one(ops::call("equal", {x, scalar(c, NAN, x.dtype())}, json::object(), c.out_name()));
    const Tensor side = ops::call(neg ? "less" : "greater", {x, scalar(c, 0, x.dtype())});
    return one(
        ops::call("logical_and", {ops::call("isinf", {x}), side}, json::object(), c.out_name()));
  };
  t["BitShift"] = [](NodeContext& c) {
    c.check_attrs({"direction"});
    const std::string d = c.attr_string("direction");
    if (d != "LEFT" && d != "RIGHT") c.fail("direction '" + d + "' is not LEFT or RIGHT");
    return one(ops::call(d == "LEFT" ? "left_shift" : "right_shift", {c.input(0), c.input(1)},
                         json::object(), c.out_name()));
  };
  t["Sum"] = variadic("add", false);
  t["Mean"] = variadic("add", true);
  t["Max"] = variadic("maximum", false);
  t["Min"] = variadic("minimum", false);

  t["LeakyRelu"] = with_attrs("leaky_relu", {{"alpha", {"alpha", 0.01}}});
  t["Celu"] = with_attrs("celu", {{"alpha", {"alpha", 1.0}}});
  t["HardSigmoid"] =
      with_attrs("hard_sigmoid", {{"alpha", {"alpha", 0.2}}, {"beta", {"beta", 0.5}}});
  t["Elu"] = with_attrs("elu", {{"alpha", {"alpha", 1.0}}});
  t["Selu"] = [](NodeContext& c) {
    c.check_attrs({"alpha", "gamma"});
    const double alpha = c.attr_float("alpha", 1.67326319217681884765625),
                 gamma = c.attr_float("gamma", 1.05070102214813232421875);
    const Tensor x = c.input(0);
    // gamma * (x > 0 ? x : alpha * (exp(x) - 1))
    const Tensor neg = ops::call("mul", {scalar(c, alpha, x.dtype()), ops::call("expm1", {x})});
    const Tensor pos = ops::call("greater", {x, scalar(c, 0, x.dtype())});
    return one(ops::call("mul", {scalar(c, gamma, x.dtype()), ops::call("where", {pos, x, neg})},
                         json::object(), c.out_name()));
  };
  t["ThresholdedRelu"] = [](NodeContext& c) {
    c.check_attrs({"alpha"});
    return one(ops::call("thresholded_relu", {c.input(0)}, {{"alpha", c.attr_float("alpha", 1.0)}},
                         c.out_name()));
  };
  t["Shrink"] = [](NodeContext& c) {
    c.check_attrs({"bias", "lambd"});
    return one(
        ops::call("shrink", {c.input(0)},
                  {{"lambd", c.attr_float("lambd", 0.5)}, {"bias", c.attr_float("bias", 0.0)}},
                  c.out_name()));
  };
  t["Swish"] = [](NodeContext& c) {
    c.check_attrs({"alpha"});
    return one(
        ops::call("swish", {c.input(0)}, {{"alpha", c.attr_float("alpha", 1.0)}}, c.out_name()));
  };
  t["Gelu"] = [](NodeContext& c) {
    c.check_attrs({"approximate"});
    const std::string a = c.attr_string("approximate", "none");
    if (a != "none" && a != "tanh") c.fail("approximate '" + a + "' is not one of none, tanh");
    return one(
        ops::call(a == "tanh" ? "gelu_tanh" : "gelu", {c.input(0)}, json::object(), c.out_name()));
  };
  t["Clip"] = [](NodeContext& c) {
    c.check_attrs({"min", "max"});
    Tensor y = c.input(0);
    const DType d = y.dtype();
    // opset < 11: attributes; since: optional inputs 1 and 2.
    const auto bound = [&](size_t i, const std::string& attr) -> std::optional<Tensor> {
      if (c.has_attr(attr)) return scalar(c, c.attr_float(attr), d);
      if (c.has_input(i)) return c.input(i);
      return std::nullopt;
    };
    const auto lo = bound(1, "min"), hi = bound(2, "max");
    if (lo) y = ops::call("maximum", {y, *lo});
    if (hi) y = ops::call("minimum", {y, *hi});
    return one(ops::call("identity", {y}, json::object(), c.out_name()));
  };
  t["Cast"] = [](NodeContext& c) {
    c.check_attrs({"to", "saturate"});
    return cast(c, dtype_of(static_cast<int32_t>(c.attr_int("to")), c.where() + " attribute 'to'"));
  };
  t["CastLike"] = [](NodeContext& c) {
    c.check_attrs({"saturate"});
    return cast(c, c.input(1).dtype());
  };
  t["Identity"] = direct("identity");
  // Inference: Dropout passes its input (and an all-true mask).
  t["Dropout"] = [](NodeContext& c) {
    c.check_attrs({"seed", "ratio"});
    if (c.has_input(2) && (!c.constant(2) || c.constant(2)->data.at(0) != 0))
      c.fail(
          "training_mode must be a constant false (inference only; a run-time or true "
          "training_mode is not supported)");
    std::vector<Value> out = one(ops::call("identity", {c.input(0)}, json::object(), c.out_name()));
    if (c.has_output(1)) {
      Constant mask{DType::Bool, static_shape(c.input(0), c.where()), {}};
      mask.data.assign(static_cast<size_t>(mask.numel()), 1.0);
      out.push_back(Value::of(std::move(mask)));
    }
    return out;
  };
}

}  // namespace pto::onnx
