// Rotary position embedding (RoPE; ONNX RotaryEmbedding, Llama's and
// GPT-NeoX's): the first rotary_dim features of every head are rotated in
// pairs by the angles of the cos / sin caches, the rest pass through. Pairs
// are the two halves of the rotated features (interleaved = false, GPT-NeoX)
// or neighbours (interleaved = true, GPT-J). Inputs as ONNX lays them out:
// x [batch, heads, seq, head] or [batch, seq, heads * head] (num_heads),
// caches [batch, seq, rotary_dim / 2], or [positions, rotary_dim / 2] read at
// position_ids [batch, seq]. One elementwise stage.
#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using Ins = std::vector<Tensor>;

Tensor rotary_embedding(const Ins& in, const Attrs& a, const std::string& name) {
  const std::string op = "rotary_embedding";
  const Tensor& x = in[0];
  const Tensor &cs = in[1], &sn = in[2];
  require_float(op, x);
  const bool four = x.rank() == 4;
  if (x.rank() != 3 && x.rank() != 4)
    throw ShapeError(op + ": '" + x.name() +
                     "' must be [batch, heads, seq, head] or [batch, seq, hidden], got " +
                     to_string(x.shape()));
  int64_t head = 0;
  if (four) {
    head = static_dim(op, x, 3);
  } else {
    const int64_t heads = a.get<int64_t>("num_heads"), hidden = static_dim(op, x, 2);
    if (heads < 1 || hidden % heads)
      throw ShapeError(op + ": hidden size " + std::to_string(hidden) + " of '" + x.name() +
                       "' is not a multiple of num_heads " + std::to_string(heads) +
                       " (3-D input needs num_heads)");
    head = hidden / heads;
  }
  int64_t rd = a.get<int64_t>("rotary_dim");
  if (rd == 0) rd = head;
  if (rd < 2 || rd > head || rd % 2)
    throw ShapeError(op + ": rotary_dim " + std::to_string(rd) + " must be even and in [2, " +
                     std::to_string(head) + "]");
  const int half = static_cast<int>(rd / 2);
  const bool with_pos = in.size() > 3;
  const int want = with_pos ? 2 : 3;
  for (const Tensor* c : {&cs, &sn})
    if (c->rank() != want || static_dim(op, *c, want - 1) != half)
      throw ShapeError(op + ": cache '" + c->name() + "' " + to_string(c->shape()) + " must be " +
                       (with_pos ? "[positions, " : "[batch, seq, ") + std::to_string(half) + "]");
  const auto v = index_vars(static_cast<size_t>(x.rank()));
  const Expr b = var(v[0]), s = var(v[four ? 2 : 1]);
  // The feature index inside its head, and the head's first feature.
  const Expr f = four ? var(v[3]) : var(v[2]) % static_cast<int>(head);
  const Expr base = four ? Expr(0) : var(v[2]) - f;
  const bool inter = a.get<bool>("interleaved");
  const Expr i = inter ? f / 2 : select(f < half, f, f - half);  // the pair's angle
  const Expr first = inter ? f % 2 == 0 : f < half;              // first element of its pair
  const Expr lo = inter ? (f / 2) * 2 : i, hi = inter ? lo + 1 : i + half;
  const int last = static_cast<int>(static_dim(op, x, x.rank() - 1) - 1);
  auto at =
      [&](const Expr& feature) {  // clamped: the pass-through lanes compute an unused rotation
        std::vector<Expr> idx = vars_of(v);
        idx.back() = clamp(base + feature, 0, last);
        return x(idx);
      };
  std::vector<Expr> ci;
  if (with_pos) {
    const Tensor& pos = in[3];
    if (!is_int(pos.dtype()))
      throw DTypeError(op + ": position_ids '" + pos.name() + "' must be integers");
    const int64_t n = static_dim(op, cs, 0);
    ci = {clamp(cast(DType::I32, pos({b, s})), 0, static_cast<int>(n - 1)), clamp(i, 0, half - 1)};
  } else {
    ci = {b, s, clamp(i, 0, half - 1)};
  }
  const Expr c = cast(x.dtype(), cs(ci)), sv = cast(x.dtype(), sn(ci));
  const Expr x1 = at(lo), x2 = at(hi);
  const Expr rotated = select(first, c * x1 - sv * x2, sv * x1 + c * x2);
  Program p = x.program();
  return p.define(name.empty() ? p.unique_name(op) : name, v, x.shape(),
                  select(f < static_cast<int>(rd), rotated, x(vars_of(v))), OpKind::Elementwise,
                  op);
}

}  // namespace

std::vector<OpInfo> rotary_ops() {
  return {{"rotary_embedding",
           OpKind::Elementwise,
           "rotary position embedding of x [b, heads, s, head] or [b, s, hidden] by cos / sin "
           "caches, optional "
           "position_ids (interleaved, rotary_dim, num_heads)",
           3,
           4,
           {{"interleaved", AttrType::Bool, false},
            {"rotary_dim", AttrType::Int, 0},
            {"num_heads", AttrType::Int, 0}},
           rotary_embedding}};
}

}  // namespace pto::ops
