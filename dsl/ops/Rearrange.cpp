// Rearrangements that move elements between dims by a fixed formula:
// depth_to_space / space_to_depth (ONNX; PyTorch's pixel_shuffle is
// depth_to_space in CRD mode), reverse_sequence (each batch row's first
// seq_len steps reversed, ONNX ReverseSequence) and eye_like (ONNX EyeLike).
// Each is one stage whose index expressions do the move.
#include "dsl/ops/Ops.h"

namespace pto::ops {
namespace {

using Ins = std::vector<Tensor>;

Tensor stage(const std::string& op, const Tensor& x, const std::string& name,
             const std::vector<std::string>& vars, const Shape& shape, const Expr& value) {
  Program p = x.program();
  return p.define(name.empty() ? p.unique_name(op) : name, vars, shape, value, OpKind::DataMovement,
                  op);
}

struct Nchw {
  int64_t n, c, h, w;
};
Nchw nchw(const std::string& op, const Tensor& x) {
  if (x.rank() != 4)
    throw ShapeError(op + ": '" + x.name() + "' must be NCHW (rank 4), got " +
                     to_string(x.shape()));
  return {static_dim(op, x, 0), static_dim(op, x, 1), static_dim(op, x, 2), static_dim(op, x, 3)};
}

Tensor depth_to_space(const Tensor& x, int64_t b, const std::string& mode,
                      const std::string& name) {
  const std::string op = "depth_to_space";
  const Nchw s = nchw(op, x);
  if (b < 1 || s.c % (b * b))
    throw ShapeError(op + ": channels " + std::to_string(s.c) + " of '" + x.name() +
                     "' must be a multiple of block^2 (block " + std::to_string(b) + ")");
  if (mode != "DCR" && mode != "CRD")
    throw DefinitionError(op + ": mode '" + mode + "' is not DCR or CRD");
  const int c2 = static_cast<int>(s.c / (b * b)), bi = static_cast<int>(b);
  const auto v = index_vars(4);
  const Expr c = var(v[1]), h = var(v[2]), w = var(v[3]);
  const Expr off = (h % bi) * bi + w % bi;  // position inside the block
  const Expr ch = mode == "DCR" ? off * c2 + c : c * (bi * bi) + off;
  return stage(op, x, name, v, {Dim(s.n), Dim(c2), Dim(s.h * b), Dim(s.w * b)},
               x({var(v[0]), ch, h / bi, w / bi}));
}

Tensor space_to_depth(const Tensor& x, int64_t b, const std::string& mode,
                      const std::string& name) {
  const std::string op = "space_to_depth";
  const Nchw s = nchw(op, x);
  if (b < 1 || s.h % b || s.w % b)
    throw ShapeError(op + ": height and width of '" + x.name() + "' " + to_string(x.shape()) +
                     " must be multiples of block " + std::to_string(b));
  if (mode != "DCR" && mode != "CRD")
    throw DefinitionError(op + ": mode '" + mode + "' is not DCR or CRD");
  const int c = static_cast<int>(s.c), bi = static_cast<int>(b);
  const auto v = index_vars(4);
  const Expr ch = var(v[1]);
  // The block offset (row in block * b + column) and the input channel.
  const Expr q = mode == "DCR" ? ch / c : ch % (bi * bi);
  const Expr in_ch = mode == "DCR" ? ch % c : ch / (bi * bi);
  return stage(op, x, name, v, {Dim(s.n), Dim(s.c * b * b), Dim(s.h / b), Dim(s.w / b)},
               x({var(v[0]), in_ch, var(v[2]) * bi + q / bi, var(v[3]) * bi + q % bi}));
}

Tensor reverse_sequence(const Tensor& x, const Tensor& lens, int batch_axis, int time_axis,
                        const std::string& name) {
  const std::string op = "reverse_sequence";
  if (!is_int(lens.dtype()))
    throw DTypeError(op + ": sequence lengths '" + lens.name() + "' must be integers, are " +
                     std::string(to_string(lens.dtype())));
  const int b = normalize_axis(op, batch_axis, x.rank()),
            t = normalize_axis(op, time_axis, x.rank());
  if (b == t) throw ShapeError(op + ": batch_axis and time_axis are both " + std::to_string(b));
  if (lens.rank() != 1 || lens.shape()[0] != x.shape()[static_cast<size_t>(b)])
    throw ShapeError(op + ": sequence lengths '" + lens.name() + "' " + to_string(lens.shape()) +
                     " must be 1-D with one length per batch row (" +
                     x.shape()[static_cast<size_t>(b)].str() + ")");
  const int64_t steps = static_dim(op, x, t);
  const auto v = index_vars(static_cast<size_t>(x.rank()));
  const Expr len =
      clamp(cast(DType::I32, lens({var(v[static_cast<size_t>(b)])})), 0, static_cast<int>(steps));
  const Expr i = var(v[static_cast<size_t>(t)]);
  std::vector<Expr> at = vars_of(v);
  // Clamped: the bounds of a data-dependent index are the whole axis.
  at[static_cast<size_t>(t)] =
      clamp(select(i < len, len - 1 - i, i), 0, static_cast<int>(steps - 1));
  return stage(op, x, name, v, x.shape(), x(at));
}

Tensor eye_like(const Tensor& x, int64_t k, DType t, const std::string& name) {
  const std::string op = "eye_like";
  if (x.rank() != 2)
    throw ShapeError(op + ": '" + x.name() + "' must be 2-D, got " + to_string(x.shape()));
  const auto v = index_vars(2);
  const Expr on = var(v[1]) - var(v[0]) == static_cast<int>(k);
  return stage(op, x, name, v, x.shape(), select(on, make_const(1, t), make_const(0, t)));
}

}  // namespace

std::vector<OpInfo> rearrange_ops() {
  using S = AttrType;
  std::vector<OpInfo> r;
  r.push_back(
      {"depth_to_space",
       OpKind::DataMovement,
       "NCHW channel blocks moved into space (block; mode DCR or CRD, CRD is pixel_shuffle)",
       1,
       1,
       {{"block", S::Int, nullptr, true}, {"mode", S::String, "DCR"}},
       [](const Ins& in, const Attrs& a, const std::string& n) {
         return depth_to_space(in[0], a.get<int64_t>("block"), a.get<std::string>("mode"), n);
       }});
  r.push_back({"space_to_depth",
               OpKind::DataMovement,
               "NCHW space blocks moved into channels (block; mode DCR or CRD)",
               1,
               1,
               {{"block", S::Int, nullptr, true}, {"mode", S::String, "DCR"}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return space_to_depth(in[0], a.get<int64_t>("block"), a.get<std::string>("mode"),
                                       n);
               }});
  r.push_back({"reverse_sequence",
               OpKind::DataMovement,
               "each batch row's first seq_len steps reversed (x, seq_lens; batch_axis, time_axis)",
               2,
               2,
               {{"batch_axis", S::Int, 1}, {"time_axis", S::Int, 0}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return reverse_sequence(in[0], in[1], a.get<int>("batch_axis"),
                                         a.get<int>("time_axis"), n);
               }});
  r.push_back({"eye_like",
               OpKind::DataMovement,
               "ones on diagonal k of a 2-D tensor's shape, zeros elsewhere (k, dtype)",
               1,
               1,
               {{"k", S::Int, 0}, {"dtype", S::DType}},
               [](const Ins& in, const Attrs& a, const std::string& n) {
                 return eye_like(in[0], a.get<int64_t>("k"),
                                 a.has("dtype") ? a.dtype("dtype") : in[0].dtype(), n);
               }});
  return r;
}

}  // namespace pto::ops
