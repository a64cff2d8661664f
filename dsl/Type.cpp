#include "dsl/Type.h"

#include <array>

#include "dsl/Error.h"

namespace pto {
namespace {
struct TypeInfo {
  DType type;
  std::string_view name;
  std::string_view alias;
  int bits;
};
constexpr std::array<TypeInfo, 13> kTypes = {{
    {DType::Bool, "bool", "bool_", 1},
    {DType::I8, "i8", "int8", 8},
    {DType::I16, "i16", "int16", 16},
    {DType::I32, "i32", "int32", 32},
    {DType::I64, "i64", "int64", 64},
    {DType::U8, "u8", "uint8", 8},
    {DType::U16, "u16", "uint16", 16},
    {DType::U32, "u32", "uint32", 32},
    {DType::U64, "u64", "uint64", 64},
    {DType::F16, "f16", "float16", 16},
    {DType::BF16, "bf16", "bfloat16", 16},
    {DType::F32, "f32", "float32", 32},
    {DType::F64, "f64", "float64", 64},
}};
const TypeInfo& info(DType t) { return kTypes[static_cast<size_t>(t)]; }
}  // namespace

std::string_view to_string(DType t) { return info(t).name; }

DType parse_dtype(std::string_view s) {
  for (const auto& ti : kTypes) {
    if (s == ti.name || s == ti.alias) return ti.type;
  }
  if (s == "float") return DType::F32;
  if (s == "double") return DType::F64;
  if (s == "int") return DType::I32;
  throw DTypeError("unknown dtype '" + std::string(s) +
                   "'; valid: bool, i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64");
}

bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
bool is_unsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
bool is_int(DType t) { return !is_float(t) && t != DType::Bool; }
int bits(DType t) { return info(t).bits; }
int bytes(DType t) { return t == DType::Bool ? 1 : info(t).bits / 8; }

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_float(a) != is_float(b)) return is_float(a) ? a : b;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_float(a)) {
    // bf16 and f16 mix to f32, as in numpy/torch.
    if (bits(a) == bits(b)) return DType::F32;
    return bits(a) > bits(b) ? a : b;
  }
  if (is_unsigned(a) == is_unsigned(b)) return bits(a) >= bits(b) ? a : b;
  // Mixed signedness: a signed type wide enough for both.
  const int w = std::max(bits(a), bits(b));
  return w >= 32 ? DType::I64 : (w >= 16 ? DType::I32 : DType::I16);
}

}  // namespace pto
