// Element type conversion between any two DTypes (f64, f32, f16, bf16, i8,
// i32, i64, bool, ...). Float -> int truncates toward zero as in C and numpy's
// astype; values outside the target range are unspecified (as in C), so
// callers clip first when that matters. Anything -> bool is `x != 0`.
#include "dsl/ops/Ops.h"

namespace pto::ops {

Tensor cast(const Tensor& x, DType to, const std::string& name) {
  return map("cast", {x}, [&](const std::vector<Expr>& v) {
    if (to == DType::Bool) return v[0] != make_const(0, v[0].type());
    return pto::cast(to, v[0]);
  }, name);
}

}  // namespace pto::ops
