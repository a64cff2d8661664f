// Tensor shapes whose dimensions are integers or named symbolic sizes.
//
// A symbolic dim such as `seq` is bound when the kernel runs, from the first
// input tensor that has it; generated libraries then serve every size without
// recompiling. Two dims are equal when both are the same integer or the same
// symbol; an integer and a symbol never compare equal at definition time
// (broadcasting a symbol against 1 is allowed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pto {

struct Dim {
  int64_t value = 0;  // the extent when `sym` is empty
  std::string sym;    // symbolic size name, else empty

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT(google-explicit-constructor)
  Dim(int v) : value(v) {}      // NOLINT(google-explicit-constructor)
  static Dim symbol(std::string name) {
    Dim d;
    d.sym = std::move(name);
    return d;
  }
  bool is_symbolic() const { return !sym.empty(); }
  bool is_one() const { return sym.empty() && value == 1; }
  std::string str() const { return is_symbolic() ? sym : std::to_string(value); }
  bool operator==(const Dim& o) const { return sym == o.sym && (is_symbolic() || value == o.value); }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};

using Shape = std::vector<Dim>;

std::string to_string(const Shape& s);  // "[64, seq, 768]"
// Number of elements, or -1 when a dim is symbolic.
int64_t static_numel(const Shape& s);

}  // namespace pto
