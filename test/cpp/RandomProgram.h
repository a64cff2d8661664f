// Random programs: 2-6 library operators composed over random valid shapes
// (size-1 dims, odd and prime sizes, powers of two, broadcasting, symbolic
// dims), for the test that every composition compiles with its default
// schedule and matches the float64 interpreter (test_random_programs.cpp).
//
// A program is generated from a seed alone, so a failure is reproduced by its
// seed (PTO_RANDOM_PROGRAM_SEED). Operators are chosen among those whose
// values stay bounded for inputs in [-1, 1] (no exp/log/division), so that a
// mismatch is a code-generation bug, not an ill-conditioned reference; a
// contraction's second operand is scaled by 1/K by the input generator
// (`weight_inputs`) for the same reason.
//
// With `convolutions`, every program starts from a 2-D channels-first
// convolution (dense, grouped or depthwise; kernel 1-5, stride, dilation,
// padding, bias; each default rule's path: channels-last, im2col, window
// tile) and later ops may add more. A separate mode, so that a seed builds
// the same program without it as it always did.
#pragma once

#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "Helpers.h"
#include "dsl/Error.h"
#include "dsl/ops/Ops.h"
#include "dsl/ops/Registry.h"

namespace pto::test {

struct RandomProgram {
  Program program{"random"};
  std::vector<std::string> steps;              // the ops applied, for messages
  std::map<std::string, int64_t> fan_in;       // contraction weights: input -> K (scale 1/K)
  std::map<std::string, int64_t> symbol_size;  // symbolic dim -> the size it runs at
  std::string str() const {
    std::string r;
    for (const auto& s : steps) r += (r.empty() ? "" : " -> ") + s;
    return r;
  }
};

class RandomProgramBuilder {
 public:
  explicit RandomProgramBuilder(uint64_t seed, bool convolutions = false)
      : rng_(seed), convolutions_(convolutions) {}

  RandomProgram build() {
    RandomProgram r;
    r_ = &r;
    if (coin(0.35)) r.symbol_size["n"] = pick_size();
    const int inputs = 1 + uniform(0, 1);
    for (int i = 0; i < inputs; ++i) pool_.push_back(new_input(random_shape()));
    const int ops = uniform(2, 6);
    // Often the shape of a model layer first: a projection, its bias and
    // activation (the epilogue a contraction's default fuses), then anything.
    std::vector<int> forced;
    if (convolutions_) forced = {kConv};
    else if (coin(0.4)) forced = {kMatmul, kBinary, kUnary};
    int applied = 0;
    for (int tries = 0; applied < ops && tries < 60; ++tries) {
      const int k = static_cast<size_t>(applied) < forced.size() ? forced[static_cast<size_t>(applied)] : -1;
      if (apply_random_op(k)) ++applied;
    }
    // The last result is an output; sometimes an intermediate too (a stage
    // that is both read and returned must be computed at root).
    r.program.output(pool_.back());
    if (pool_.size() > 2 && coin(0.25)) {
      const Tensor& mid = pool_[static_cast<size_t>(uniform(0, static_cast<int>(pool_.size()) - 2))];
      if (r.program.find_stage(mid.name()) && mid.name() != pool_.back().name()) r.program.output(mid);
    }
    return r;
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  int64_t pick_size() {
    static const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 24, 31, 32, 33, 48, 64, 97, 128, 256};
    return sizes[uniform(0, static_cast<int>(std::size(sizes)) - 1)];
  }
  Dim pick_dim() {
    if (!r_->symbol_size.empty() && coin(0.4)) return Dim::symbol("n");
    return Dim(pick_size());
  }
  Shape random_shape() {
    Shape s;
    const int rank = uniform(1, 3);
    for (int i = 0; i < rank; ++i) s.push_back(pick_dim());
    return s;
  }
  static int64_t static_size(const Dim& d, const RandomProgram& r) {
    return d.is_symbolic() ? r.symbol_size.at(d.sym) : d.value;
  }
  int64_t elements(const Shape& s) const {
    int64_t n = 1;
    for (const Dim& d : s) n *= static_size(d, *r_);
    return n;
  }
  Tensor new_input(const Shape& s) { return r_->program.input("X" + std::to_string(next_input_++), s); }
  std::string name(const std::string& op) { return op + std::to_string(next_stage_++); }

  // A shape that broadcasts against `s`: a suffix of it with some dims set to 1.
  Shape broadcast_partner(const Shape& s) {
    Shape b;
    const size_t drop = s.empty() ? 0 : static_cast<size_t>(uniform(0, static_cast<int>(s.size()) - 1));
    for (size_t i = drop; i < s.size(); ++i) b.push_back(coin(0.3) ? Dim(1) : s[i]);
    return b;
  }

  static constexpr int kUnary = 0, kBinary = 2, kMatmul = 4, kConv = 9;

  // `forced` >= 0: that op class, else a weighted random one.
  bool apply_random_op(int forced = -1) {
    // Mostly chains (the last value: producer-consumer fusion is where
    // default schedules interact), sometimes branches from an earlier value.
    const Tensor x = forced >= 0 || coin(0.7) ? pool_.back() : pool_[static_cast<size_t>(uniform(0, static_cast<int>(pool_.size()) - 1))];
    const Shape& s = x.shape();
    const int rank = static_cast<int>(s.size());
    std::function<Tensor()> make;
    std::string label;
    // Op classes weighted towards what models compose: elementwise chains
    // around contractions, closed by a row-wise normalization.
    std::discrete_distribution<int> klass({13, 12, 13, 12, 15, 8, 9, 9, 9});
    int op_class = forced;
    if (op_class < 0) op_class = convolutions_ && coin(0.2) ? kConv : klass(rng_);
    switch (op_class) {
      case 0:
      case 1: {
        static const char* unary[] = {"relu", "tanh", "sigmoid", "gelu", "abs", "neg", "silu", "sin", "softplus"};
        const std::string op = unary[uniform(0, static_cast<int>(std::size(unary)) - 1)];
        label = op;
        make = [=, this] { return ops::call(op, {x}, {}, name(op)); };
        break;
      }
      case 2:
      case 3: {
        static const char* binary[] = {"add", "sub", "mul", "maximum", "minimum"};
        const std::string op = binary[uniform(0, static_cast<int>(std::size(binary)) - 1)];
        const bool swap = coin(0.3);
        label = op;
        // Another value in the pool if it broadcasts to a small result, else a new input.
        const Tensor cand = pool_[static_cast<size_t>(uniform(0, static_cast<int>(pool_.size()) - 1))];
        bool use_cand = coin(0.5);
        try {
          use_cand = use_cand && elements(ops::broadcast_shapes(op, x.shape(), cand.shape())) <= kMaxElements;
        } catch (const ShapeError&) {
          use_cand = false;
        }
        make = [=, this] {
          const Tensor y = use_cand ? cand : new_input(broadcast_partner(s));
          return swap ? ops::call(op, {y, x}, {}, name(op)) : ops::call(op, {x, y}, {}, name(op));
        };
        break;
      }
      case 4: {
        if (rank < 2 || elements(s) > 32768) {
          if (forced < 0) return false;
          // A projection needs a matrix: start one.
          pool_.push_back(new_input({pick_dim(), pick_dim()}));
          return false;
        }
        label = "matmul";
        const Dim k = s.back(), n = pick_dim();
        if (elements(s) / static_size(k, *r_) * static_size(n, *r_) > kMaxElements) return false;
        make = [=, this] {
          const Tensor w = new_input({k, n});
          r_->fan_in[w.name()] = static_size(k, *r_);
          return ops::matmul(x, w, name("matmul"));
        };
        break;
      }
      case 5: {
        if (rank < 1) return false;
        const int axis = uniform(0, rank - 1);
        const bool keep = coin(0.5);
        static const char* red[] = {"reduce_sum", "reduce_max", "reduce_mean", "reduce_min"};
        const std::string op = red[uniform(0, 3)];
        label = op + "(axis " + std::to_string(axis) + (keep ? ", keepdims)" : ")");
        make = [=, this] {
          if (op == "reduce_sum") return ops::reduce_sum(x, {axis}, keep, name(op));
          if (op == "reduce_max") return ops::reduce_max(x, {axis}, keep, name(op));
          if (op == "reduce_min") return ops::reduce_min(x, {axis}, keep, name(op));
          return ops::reduce_mean(x, {axis}, keep, name(op));
        };
        break;
      }
      case 6: {
        if (rank < 1) return false;
        const int axis = uniform(-1, rank - 1);
        label = "softmax(axis " + std::to_string(axis) + ")";
        make = [=, this] { return ops::softmax(x, axis, name("softmax")); };
        break;
      }
      case 7: {
        // Rows of a normalized dim of 1 have zero variance: the reference is
        // exactly 0 there, and any other value is a real error.
        if (rank < 1) return false;
        label = "layer_norm";
        make = [=, this] {
          const Tensor g = new_input({s.back()});
          const Tensor b = new_input({s.back()});
          return ops::layer_norm(x, g, b, 1e-5, name("layer_norm"));
        };
        break;
      }
      case 8: {
        if (rank < 2) return false;
        std::vector<int> perm(static_cast<size_t>(rank));
        for (int i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
        std::shuffle(perm.begin(), perm.end(), rng_);
        label = "transpose";
        make = [=, this] { return ops::transpose(x, perm, name("transpose")); };
        break;
      }
      case kConv: {
        // On the value where it is [N, C, H, W] with static C, H, W, else on a new input.
        bool use_x = rank == 4;
        for (int d = 1; d < rank && use_x; ++d) use_x = !s[static_cast<size_t>(d)].is_symbolic();
        static const int64_t channels[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 24, 32, 33, 48, 64};
        static const int64_t spatial[] = {1, 2, 3, 5, 7, 8, 13, 16, 17, 28, 31, 33};
        const auto pick = [&](const auto& v) { return v[uniform(0, static_cast<int>(std::size(v)) - 1)]; };
        const Shape in = use_x ? s : Shape{coin(0.7) ? Dim(1) : pick_dim(), Dim(pick(channels)), Dim(pick(spatial)),
                                           Dim(pick(spatial))};
        const int64_t c = in[1].value;
        static const int kernels[] = {1, 2, 3, 3, 5};
        const int kh = pick(kernels), kw = coin(0.8) ? kh : pick(kernels);
        const int stride = coin(0.7) ? 1 : 2, dil = kh > 1 && coin(0.2) ? 2 : 1;
        const int pad = coin(0.7) ? dil * (std::max(kh, kw) / 2) : 0;
        const int mode = uniform(0, 4);  // 0-2 dense, 3 depthwise, 4 grouped
        int groups = 1;
        if (mode == 3) groups = static_cast<int>(c);
        if (mode == 4) {
          std::vector<int> divs;
          for (int g = 2; g < c; ++g)
            if (c % g == 0) divs.push_back(g);
          if (!divs.empty()) groups = divs[static_cast<size_t>(uniform(0, static_cast<int>(divs.size()) - 1))];
        }
        // Whole vectors of output channels a third of the time (the channels-last route's).
        const int64_t o = mode == 3 ? c * (coin(0.7) ? 1 : 2) : groups * (coin(0.3) ? 16 * uniform(1, 4) : pick(channels));
        const bool bias = coin(0.5);
        // Bounded for the interpreter: output elements and multiply-adds.
        const int64_t oh = (static_size(in[2], *r_) + 2 * pad - dil * (kh - 1) - 1) / stride + 1;
        const int64_t ow = (static_size(in[3], *r_) + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
        const int64_t out = static_size(in[0], *r_) * o * std::max<int64_t>(oh, 0) * std::max<int64_t>(ow, 0);
        if (out > kMaxElements || out * (c / groups) * kh * kw > (int64_t{1} << 24)) return false;
        std::ostringstream os;
        os << "conv2d(" << kh << "x" << kw << " s" << stride << " d" << dil << " p" << pad << " g" << groups
           << " -> " << o << (bias ? ", bias)" : ")");
        label = os.str();
        make = [=, this] {
          const Tensor xin = use_x ? x : new_input(in);
          const Tensor w = new_input({Dim(o), Dim(c / groups), Dim(kh), Dim(kw)});
          r_->fan_in[w.name()] = c / groups * kh * kw;
          const Tensor b = bias ? new_input({Dim(o)}) : Tensor();
          return ops::conv2d(xin, w, b, {stride, stride}, {pad, pad}, {dil, dil}, groups, name("conv2d"));
        };
        break;
      }
    }
    if (!make) return false;
    // An op that rejects these shapes (a symbolic dim it needs static) is a
    // typed construction error, not a bug: draw another op. An input it added
    // stays unused, which every program must tolerate.
    try {
      const Tensor y = make();
      pool_.push_back(y);
      r_->steps.push_back(label + " " + y.name());
      return true;
    } catch (const ShapeError&) {
      return false;
    }
  }

  static constexpr int64_t kMaxElements = 1 << 17;  // per tensor: the interpreter's pace
  std::mt19937_64 rng_;
  bool convolutions_ = false;
  RandomProgram* r_ = nullptr;
  std::vector<Tensor> pool_;
  int next_input_ = 0, next_stage_ = 0;
};

// Inputs for `r` from `seed`: U(-1, 1), a contraction's second operand
// U(-1/K, 1/K), symbolic dims at the sizes the program runs at.
inline std::map<std::string, HostTensor> random_program_inputs(const RandomProgram& r,
                                                               uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed * 2654435761u + 1));
  std::map<std::string, HostTensor> in;
  for (const auto& i : r.program.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& d : i.shape)
      shape.push_back(d.is_symbolic() ? r.symbol_size.at(d.sym) : d.value);
    const auto k = r.fan_in.find(i.name);
    const double s = k == r.fan_in.end() ? 1.0 : 1.0 / static_cast<double>(k->second);
    in[i.name] = random_tensor(shape, rng, -s, s);
  }
  return in;
}

}  // namespace pto::test
