// The deploy example's generator program: it names three kernels; the CMake
// calls in CMakeLists.txt turn them into one library per target (or one
// multi-target library with CPU dispatch) with pto_add_library(... GENERATOR
// deploy_gen ...). Interface: f32 row-major arrays of the sizes in Sizes.h.
#include "apps/deploy/Sizes.h"
#include "backends/GeneratorRegistry.h"
#include "dsl/Workloads.h"
#include "dsl/ops/Ops.h"

PTO_REGISTER_KERNEL(matmul, [] {
  return pto::make_workload("matmul", {{"M", deploy::kM}, {"N", deploy::kN}, {"K", deploy::kK}});
});

PTO_REGISTER_KERNEL(softmax, [] {
  return pto::make_workload("softmax", {{"R", deploy::kRows}, {"C", deploy::kSoftmaxCols}});
});

// Written out rather than taken from the workload list, to show the DSL in a generator.
PTO_REGISTER_KERNEL(layer_norm, [] {
  pto::Program p("layer_norm");
  const pto::Tensor x = p.input("X", {deploy::kRows, deploy::kNormCols});
  const pto::Tensor gamma = p.input("gamma", {deploy::kNormCols});
  const pto::Tensor beta = p.input("beta", {deploy::kNormCols});
  p.output(pto::ops::layer_norm(x, gamma, beta, deploy::kNormEps, "Y"));
  return p;
});
