// Convolutions. Padding is folded into the access as a guarded read (zero
// outside the image), so no padded copy is materialized unless a schedule asks.
#include "dsl/ops/Ops.h"

namespace pto::ops {

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, std::array<int, 2> stride,
              std::array<int, 2> padding, std::array<int, 2> dilation, int groups, const std::string& name) {
  const std::string op = "conv2d";
  if (x.rank() != 4) throw ShapeError(op + ": input '" + x.name() + "' must be NCHW (rank 4), got " + to_string(x.shape()));
  if (w.rank() != 4) throw ShapeError(op + ": weight '" + w.name() + "' must be [O, C/groups, KH, KW], got " + to_string(w.shape()));
  if (x.dtype() != w.dtype())
    throw DTypeError(op + ": input is " + std::string(to_string(x.dtype())) + " but weight is " + std::string(to_string(w.dtype())));
  for (int k = 0; k < 2; ++k) {
    if (stride[k] < 1) throw ShapeError(op + ": stride " + std::to_string(stride[k]) + " must be >= 1");
    if (dilation[k] < 1) throw ShapeError(op + ": dilation " + std::to_string(dilation[k]) + " must be >= 1");
    if (padding[k] < 0) throw ShapeError(op + ": padding " + std::to_string(padding[k]) + " must be >= 0");
  }
  for (size_t k = 1; k < 4; ++k)
    if (x.shape()[k].is_symbolic()) throw ShapeError(op + ": dim " + std::to_string(k) + " of '" + x.name() + "' must be static");
  for (size_t k = 0; k < 4; ++k)
    if (w.shape()[k].is_symbolic()) throw ShapeError(op + ": weight dims must be static");
  const int64_t C = x.shape()[1].value, H = x.shape()[2].value, W = x.shape()[3].value;
  const int64_t O = w.shape()[0].value, Cg = w.shape()[1].value, KH = w.shape()[2].value, KW = w.shape()[3].value;
  if (groups < 1 || C % groups || O % groups)
    throw ShapeError(op + ": groups " + std::to_string(groups) + " must divide input channels " + std::to_string(C) +
                     " and output channels " + std::to_string(O));
  if (Cg * groups != C)
    throw ShapeError(op + ": weight '" + w.name() + "' has " + std::to_string(Cg) + " input channels per group; input '" +
                     x.name() + "' has " + std::to_string(C) + " channels in " + std::to_string(groups) + " groups");
  if (b.defined() && (b.rank() != 1 || b.shape()[0] != Dim(O)))
    throw ShapeError(op + ": bias '" + b.name() + "' must be [" + std::to_string(O) + "], got " + to_string(b.shape()));
  const int64_t OH = (H + 2 * padding[0] - dilation[0] * (KH - 1) - 1) / stride[0] + 1;
  const int64_t OW = (W + 2 * padding[1] - dilation[1] * (KW - 1) - 1) / stride[1] + 1;
  if (OH < 1 || OW < 1)
    throw ShapeError(op + ": kernel " + std::to_string(KH) + "x" + std::to_string(KW) + " does not fit input " +
                     std::to_string(H) + "x" + std::to_string(W) + " with this padding/dilation");
  Program p = x.program();
  const std::string out = name.empty() ? p.unique_name(op) : name;
  const Expr n = var("n"), o = var("o"), y = var("y"), xx = var("x"), c = var("c"), ky = var("ky"), kx = var("kx");
  const Expr iy = y * stride[0] + ky * dilation[0] - padding[0];
  const Expr ix = xx * stride[1] + kx * dilation[1] - padding[1];
  const Expr ic = (o / static_cast<int>(O / groups)) * static_cast<int>(Cg) + c;
  Expr in = x(n, ic, clamp(iy, 0, static_cast<int>(H - 1)), clamp(ix, 0, static_cast<int>(W - 1)));
  if (padding[0] || padding[1]) {
    const Expr inside = iy >= 0 && iy < static_cast<int>(H) && ix >= 0 && ix < static_cast<int>(W);
    in = select(inside, in, make_const(0, x.dtype()));
  }
  const Shape oshape{x.shape()[0], O, OH, OW};
  const Tensor acc = p.define_reduce(b.defined() ? p.unique_name(out + "_acc") : out, {"n", "o", "y", "x"}, oshape,
                                     ReduceOp::Sum, {{"c", Cg}, {"ky", KH}, {"kx", KW}}, in * w(o, c, ky, kx),
                                     OpKind::Convolution, op);
  if (!b.defined()) return acc;
  return p.define(out, {"n", "o", "y", "x"}, oshape, acc(n, o, y, xx) + b(o), OpKind::Elementwise, op);
}

}  // namespace pto::ops
