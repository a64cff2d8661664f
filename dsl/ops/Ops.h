// The operator library, written in the DSL itself.
//
// Every operator takes Tensor handles of one Program and adds one or more
// stages to it, returning the result handle; shapes are checked and inferred
// (numpy broadcasting for elementwise operators). Stage names default to the
// operator name made unique ("matmul", "matmul_1", ...); pass `name` to choose.
// Each operator type is listed once in registry() with its kind, which is what
// `pto ops` prints and what default schedules key on.
#pragma once

#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dsl/Program.h"

namespace pto::ops {

struct OpInfo {
  std::string name;
  OpKind kind;
  std::string summary;
};
// All operator types, sorted by name.
const std::vector<OpInfo>& registry();

// Calls any operator by its registry name with attributes as JSON, e.g.
// call("softmax", {x}, {{"axis", -1}}). This is how Python, the CLI and graph
// importers reach the whole library without a binding per operator. Unknown
// names or attributes throw DefinitionError naming the valid ones.
Tensor call(const std::string& op, const std::vector<Tensor>& inputs, const nlohmann::json& attrs = {},
            const std::string& name = "");

// ---- building blocks -------------------------------------------------------
// numpy broadcasting of two shapes; throws ShapeError naming `op` and both shapes.
Shape broadcast_shapes(const std::string& op, const Shape& a, const Shape& b);
// Index expressions reading tensor `t` (of shape t.shape) at the broadcast
// position given by `vars` (of the broadcast output rank).
std::vector<Expr> broadcast_index(const Tensor& t, const std::vector<std::string>& vars);
// Index variable names for a rank-r stage: i0, i1, ...
std::vector<std::string> index_vars(size_t rank, const std::string& prefix = "i");
// Elementwise map over broadcast inputs: out(idx) = f(in_0(idx'), in_1(idx''), ...).
Tensor map(const std::string& op, const std::vector<Tensor>& inputs,
           const std::function<Expr(const std::vector<Expr>&)>& f, const std::string& name = "");

// ---- elementwise -----------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor sub(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor mul(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor div(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor maximum(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor minimum(const Tensor& a, const Tensor& b, const std::string& name = "");
Tensor relu(const Tensor& x, const std::string& name = "");

Tensor gelu(const Tensor& x, bool tanh_approximation = false, const std::string& name = "");

// ---- normalization ---------------------------------------------------------
// Numerically stable softmax along `axis` (max-subtracted).
Tensor softmax(const Tensor& x, int axis = -1, const std::string& name = "");
// (x - mean) / sqrt(var + eps) * gamma + beta over the last dim; gamma/beta optional.
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5,
                  const std::string& name = "");

// ---- reductions ------------------------------------------------------------
// Reduces `axes` (negative counts from the end; empty = all) with sum/prod/min/max.
Tensor reduce(const std::string& op, ReduceOp r, const Tensor& x, std::vector<int> axes, bool keepdims,
              const std::string& name = "");
Tensor reduce_sum(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_max(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
Tensor reduce_mean(const Tensor& x, std::vector<int> axes = {}, bool keepdims = false, const std::string& name = "");
// Normalizes an axis against a rank; throws ShapeError naming `op`.
int normalize_axis(const std::string& op, int axis, int rank);

// ---- contractions ----------------------------------------------------------
// numpy matmul semantics: 1-D operands are promoted, batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b, const std::string& name = "");
// x @ w^T + b, w of shape [out, in], b of shape [out] (optional: pass an undefined Tensor).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b, const std::string& name = "");
// 2-D convolution, NCHW input [N, C, H, W], weight [O, C/groups, KH, KW], optional bias [O].
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride = {1, 1},
              std::array<int, 2> padding = {0, 0}, std::array<int, 2> dilation = {1, 1}, int groups = 1,
              const std::string& name = "");

}  // namespace pto::ops
