#include "dsl/models/ResNet.h"

#include "dsl/ops/Ops.h"

namespace pto::models {

const std::vector<ConvLayer>& resnet50_conv_layers() {
  static const std::vector<ConvLayer> layers = {
      {"conv1_7x7_s2", 3, 64, 7, 2, 3, 224},
      {"l1_1x1_64_64", 64, 64, 1, 1, 0, 56},
      {"l1_3x3_64", 64, 64, 3, 1, 1, 56},
      {"l1_1x1_64_256", 64, 256, 1, 1, 0, 56},
      {"l1_1x1_256_64", 256, 64, 1, 1, 0, 56},
      {"l2_1x1_256_128", 256, 128, 1, 1, 0, 56},
      {"l2_3x3_128_s2", 128, 128, 3, 2, 1, 56},
      {"l2_1x1_128_512", 128, 512, 1, 1, 0, 28},
      {"l2_ds_256_512_s2", 256, 512, 1, 2, 0, 56},
      {"l2_1x1_512_128", 512, 128, 1, 1, 0, 28},
      {"l2_3x3_128", 128, 128, 3, 1, 1, 28},
      {"l3_1x1_512_256", 512, 256, 1, 1, 0, 28},
      {"l3_3x3_256_s2", 256, 256, 3, 2, 1, 28},
      {"l3_1x1_256_1024", 256, 1024, 1, 1, 0, 14},
      {"l3_ds_512_1024_s2", 512, 1024, 1, 2, 0, 28},
      {"l3_1x1_1024_256", 1024, 256, 1, 1, 0, 14},
      {"l3_3x3_256", 256, 256, 3, 1, 1, 14},
      {"l4_1x1_1024_512", 1024, 512, 1, 1, 0, 14},
      {"l4_3x3_512_s2", 512, 512, 3, 2, 1, 14},
      {"l4_1x1_512_2048", 512, 2048, 1, 1, 0, 7},
      {"l4_ds_1024_2048_s2", 1024, 2048, 1, 2, 0, 14},
      {"l4_1x1_2048_512", 2048, 512, 1, 1, 0, 7},
      {"l4_3x3_512", 512, 512, 3, 1, 1, 7},
  };
  return layers;
}

Program resnet_conv(const ConvLayer& l, int64_t batch, DType dtype, int64_t weight_block, bool weight_pairs) {
  if (weight_block < 0 || (weight_block > 0 && l.cout % weight_block))
    throw ShapeError("resnet_conv " + l.name + ": weight_block " + std::to_string(weight_block) +
                     " must be 0 (HWIO) or divide the " + std::to_string(l.cout) + " output channels");
  Program p("resnet_" + l.name);
  if (weight_pairs && !weight_block)
    throw ShapeError("resnet_conv " + l.name + ": weight pairs need a weight_block (blocked pairs [O/B, KH, KW, C/2, B, 2])");
  const int64_t cin = paired_channels(l, weight_pairs);
  const Tensor x = p.input("X", {batch, l.hw, l.hw, cin}, dtype);
  const Tensor w = weight_pairs ? p.input("W", {l.cout / weight_block, l.kernel, l.kernel, cin / 2, weight_block, 2}, dtype)
                   : weight_block ? p.input("W", {l.cout / weight_block, l.kernel, l.kernel, l.cin, weight_block}, dtype)
                                  : p.input("W", {l.kernel, l.kernel, l.cin, l.cout}, dtype);
  const Tensor b = p.input("b", {l.cout}, dtype);
  const int s = static_cast<int>(l.stride), pd = static_cast<int>(l.pad);
  p.output(ops::relu(ops::conv2d_nhwc(x, w, b, {s, s}, {pd, pd}, {1, 1}, "conv"), "Y"));
  return p;
}

}  // namespace pto::models
