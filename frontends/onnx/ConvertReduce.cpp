// ONNX reductions: Reduce* (axes as an attribute before opset 13 / 18, as an
// input since, keepdims, noop_with_empty_axes), ArgMax / ArgMin with
// select_last_index, CumSum.
#include "dsl/Error.h"
#include "dsl/ops/Ops.h"
#include "frontends/onnx/Converter.h"

namespace pto::onnx {
namespace {

using nlohmann::json;

// The axes a Reduce* node reduces, normalized; empty: the node is a no-op.
std::optional<std::vector<int>> reduce_axes(NodeContext& c, int rank) {
  std::vector<int64_t> axes;
  if (c.has_attr("axes"))
    axes = c.attr_ints("axes");
  else if (c.has_input(1))
    axes = c.ints_input(1, "axes");
  if (axes.empty()) {
    if (c.attr_int("noop_with_empty_axes", 0)) return std::nullopt;
    std::vector<int> all(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i) all[static_cast<size_t>(i)] = i;
    return all;
  }
  std::vector<int> out;
  for (const int64_t a : axes) out.push_back(normalize_axis(a, rank, c, "axis"));
  return out;
}

// `op` of the library over the node's axes; `post` applied to its result.
Converter reduce(const std::string& op, const std::string& post = "") {
  return [op, post](NodeContext& c) {
    c.check_attrs({"axes", "keepdims", "noop_with_empty_axes"});
    const Tensor x = c.input(0);
    const auto axes = reduce_axes(c, x.rank());
    if (!axes) return one(ops::call("identity", {x}, json::object(), c.out_name()));
    const json a = {{"axes", *axes}, {"keepdims", c.attr_int("keepdims", 1) != 0}};
    if (post.empty()) return one(ops::call(op, {x}, a, c.out_name()));
    return one(ops::call(post, {ops::call(op, {x}, a)}, json::object(), c.out_name()));
  };
}

Converter arg(const std::string& op) {
  return [op](NodeContext& c) {
    c.check_attrs({"axis", "keepdims", "select_last_index"});
    Tensor x = c.input(0);
    const int axis = normalize_axis(c.attr_int("axis", 0), x.rank(), c);
    const bool keep = c.attr_int("keepdims", 1) != 0;
    if (!c.attr_int("select_last_index", 0))
      return one(ops::call(op, {x}, {{"axis", axis}, {"keepdims", keep}}, c.out_name()));
    // The last extreme: the first one of the reversed axis, counted from the end.
    const int64_t n = static_shape(x, c.where())[static_cast<size_t>(axis)];
    const Tensor first = ops::call(op, {ops::call("flip", {x}, {{"axes", {axis}}})},
                                   {{"axis", axis}, {"keepdims", keep}});
    const Tensor last =
        literal(c.program(), static_cast<double>(n - 1), DType::I64, c.out_name() + "_n");
    return one(ops::call("sub", {last, first}, json::object(), c.out_name()));
  };
}

}  // namespace

void add_reduce_converters(std::map<std::string, Converter>& t) {
  t["ReduceSum"] = reduce("reduce_sum");
  t["ReduceMean"] = reduce("reduce_mean");
  t["ReduceMax"] = reduce("reduce_max");
  t["ReduceMin"] = reduce("reduce_min");
  t["ReduceProd"] = reduce("reduce_prod");
  t["ReduceL1"] = reduce("reduce_l1");
  t["ReduceL2"] = reduce("reduce_l2");
  t["ReduceSumSquare"] = reduce("reduce_sum_square");
  t["ReduceLogSumExp"] = reduce("reduce_logsumexp");
  t["ReduceLogSum"] = reduce("reduce_sum", "log");
  t["ArgMax"] = arg("argmax");
  t["ArgMin"] = arg("argmin");
  for (const auto& [onnx_op, op] : {std::pair{"CumSum", "cumsum"}, std::pair{"CumProd", "cumprod"}})
    t[onnx_op] = [op = std::string(op)](NodeContext& c) {
      c.check_attrs({"exclusive", "reverse"});
      const Tensor x = c.input(0);
      const auto axis = c.ints_input(1, "axis");
      if (axis.size() != 1) c.fail("axis must hold one value, got " + std::to_string(axis.size()));
      return one(ops::call(op, {x},
                           {{"axis", normalize_axis(axis[0], x.rank(), c)},
                            {"exclusive", c.attr_int("exclusive", 0) != 0},
                            {"reverse", c.attr_int("reverse", 0) != 0}},
                           c.out_name()));
    };
}

}  // namespace pto::onnx
