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
// the layout of bf16 dot products (dot_pairs).
Program resnet_conv(const ConvLayer& l, int64_t batch = 1, DType dtype = DType::F32, int64_t weight_block = 32,
                    bool weight_pairs = false);

// HWIO weights [k, k, cin, cout] -> [cout / block, k, k, cin, block].
template <typename T>
std::vector<T> block_conv_weight(const std::vector<T>& hwio, const ConvLayer& l, int64_t block) {
  return block_weight(hwio.data(), l.kernel * l.kernel * l.cin, l.cout, block);
}

template <typename T>
std::vector<T> block_conv_weight_pairs(const std::vector<T>& hwio, const ConvLayer& l, int64_t block) {
  return block_weight_pairs(hwio.data(), l.kernel * l.kernel * l.cin, l.cout, block);
}

}  // namespace pto::models
