// The distinct convolution layers of ResNet-50 (v1.5, stride on the 3x3) at
// 224x224, each with its bias + ReLU epilogue (batch norm folded into the
// weights and bias, as inference engines do).
#pragma once

#include <string>
#include <vector>

#include "dsl/Program.h"
#include "dsl/models/BlockedWeights.h"

namespace pto::models {

struct ConvLayer {
  std::string name;
  int64_t cin, cout, kernel, stride, pad, hw;  // hw: input height = width
  int64_t out_hw() const { return (hw + 2 * pad - kernel) / stride + 1; }
  double flops(int64_t batch) const { return 2.0 * batch * cout * out_hw() * out_hw() * cin * kernel * kernel; }
};

const std::vector<ConvLayer>& resnet50_conv_layers();
// relu(conv2d_nhwc(X, W) + b) for one layer, channels last (the layout in which
// output channels are the vector dim for every layer, 7x7 maps included):
// inputs X [N, hw, hw, cin] (NHWC), b [cout]; W blocked by `weight_block`
// output channels, [cout / block, k, k, cin, block] (block_conv_weight
// converts HWIO; each 32-channel register tile's weights contiguous, as oneDNN
// reorders them), or HWIO [k, k, cin, cout] with weight_block = 0; output Y
// [N, out_hw, out_hw, cout]; all of `dtype` (bf16: bench_resnet50 --bf16).
// The blocked layout measured 3-7% faster on the deep layers (the HWIO rows of
// 2-8 KB are read 128 bytes at a time) and the same on the others.
// weight_pairs: weights [O/B, KH, KW, C/2, B, 2] (block_conv_weight_pairs),
// the layout of bf16 dot products (dot_pairs). An odd channel count (the
// stem's 3) is padded to even, as oneDNN pads channels in its blocked
// layouts: X takes one more channel (its values are multiplied by the zero
// weights of that channel: pass zeros, `pad_channels`).
Program resnet_conv(const ConvLayer& l, int64_t batch = 1, DType dtype = DType::F32, int64_t weight_block = 32,
                    bool weight_pairs = false);

// Input channels of the program resnet_conv builds: C, or C rounded up to even with weight pairs.
inline int64_t paired_channels(const ConvLayer& l, bool weight_pairs) { return weight_pairs ? l.cin + l.cin % 2 : l.cin; }

// NHWC (or HWIO with `inner` = O) values with `c` channels, each channel row
// padded with zeros to `c_to` channels: the padded channel of a paired layer.
template <typename T>
std::vector<T> pad_channels(const std::vector<T>& v, int64_t c, int64_t c_to, int64_t inner = 1) {
  if (c_to == c) return v;
  const int64_t outer = static_cast<int64_t>(v.size()) / (c * inner);
  std::vector<T> r(static_cast<size_t>(outer * c_to * inner), T{});
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < c * inner; ++k) r[static_cast<size_t>(o * c_to * inner + k)] = v[static_cast<size_t>(o * c * inner + k)];
  return r;
}

// HWIO weights [k, k, cin, cout] -> [cout / block, k, k, cin, block].
template <typename T>
std::vector<T> block_conv_weight(const std::vector<T>& hwio, const ConvLayer& l, int64_t block) {
  return block_weight(hwio.data(), l.kernel * l.kernel * l.cin, l.cout, block);
}

// HWIO weights of `l` (C input channels) as blocked pairs, an odd C padded with a zero channel.
template <typename T>
std::vector<T> block_conv_weight_pairs(const std::vector<T>& hwio, const ConvLayer& l, int64_t block) {
  const int64_t c = paired_channels(l, true);
  const std::vector<T> padded = pad_channels(hwio, l.cin, c, l.cout);
  return block_weight_pairs(padded.data(), l.kernel * l.kernel * c, l.cout, block);
}

}  // namespace pto::models
