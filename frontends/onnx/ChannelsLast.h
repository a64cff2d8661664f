// Channels-last values between a channels-first model's convolutions.
//
// ONNX models are NCHW; PTO's fast dense convolutions are channels-last
// (ops::conv2d_channels_last: output channels along the vectors, the layout
// oneDNN and ONNX Runtime's NCHWc kernels compute in). Transposing in and out
// around every convolution costs two passes over each activation and keeps
// the epilogues that follow (bias, batch norm, ReLU, the residual add) from
// fusing into the convolution's register tile. So, as ONNX Runtime's layout
// transformer and TVM's ConvertLayout do, the importer keeps a value
// channels-last (Value::channels_last) from a convolution through the
// operators that do not care about layout, elementwise ones with their
// broadcast operands permuted alike, batch norm, Concat, global pooling and
// the next convolution, and makes the NCHW tensor, a transpose, only where an
// operator that needs it reads the value (NodeContext::input).
#pragma once

#include <optional>
#include <string>

#include "frontends/onnx/Converter.h"

namespace pto::onnx::channels_last {

// The axis of a channels-last value [N, H, W, C] holding NCHW axis `a` (0-3).
int axis(int a);
// Is the op type elementwise with numpy broadcasting, so that it computes the
// channels-last output from channels-last operands?
bool elementwise(const std::string& op_type);
// A constant that broadcasts against rank-4 NCHW values (rank <= 4),
// permuted to broadcast the same way against their channels-last forms.
Constant permute(const Constant& c);
// The transposes between the layouts (data-movement stages).
Tensor from_nchw(const Tensor& nchw, const std::string& name);
Tensor to_nchw(const Tensor& nhwc, const std::string& name);

}  // namespace pto::onnx::channels_last
