// Element types.
//
// A tensor's DType in a Program is its *logical* type; for floating-point
// stages the schedule may pick a different storage / compute / accumulate type
// (see schedules/Schedule.h). Only types at a generated library's interface are
// fixed by the user.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pto {

enum class DType : uint8_t { Bool, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64 };

std::string_view to_string(DType t);
// Parses "f32", "float32", "bf16", "i8", "bool", ...; throws DTypeError.
DType parse_dtype(std::string_view s);

bool is_float(DType t);
bool is_int(DType t);  // signed or unsigned integer, not bool
bool is_unsigned(DType t);
int bits(DType t);
int bytes(DType t);
// The type both operands are converted to in a binary arithmetic operation.
DType promote(DType a, DType b);

}  // namespace pto
