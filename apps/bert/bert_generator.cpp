// The BERT app's generator program: the encoder layer as library kernels.
// `pto_add_library(bert GENERATOR bert_gen ...)` (CMakeLists.txt) turns them
// into libbert.a + bert_pto.h, with the tuning database's best schedules when
// one is named; run_bert_layer.cpp is the plain C++ program that uses it.
//   layer       BERT-base, batch 1, sequence 128, f32
//   layer_bf16  the same with bf16 weights (f32 activations and accumulation)
//   layer_mixed mixed bf16: bf16 weights blocked in pairs, each projection's
//               input rounded to bf16, f32 products and sums (vdpbf16ps)
#include "backends/GeneratorRegistry.h"
#include "dsl/models/Bert.h"

namespace {
pto::models::BertConfig config(pto::DType weights, bool mixed = false) {
  pto::models::BertConfig c;  // BERT-base: hidden 768, 12 heads, FFN 3072
  c.batch = 1;
  c.seq = 128;
  c.weight_dtype = weights;
  c.bf16_activations = mixed;
  return c;
}
}  // namespace

PTO_REGISTER_KERNEL(layer, [] { return pto::models::bert_layer(config(pto::DType::F32)); });
PTO_REGISTER_KERNEL(layer_bf16, [] { return pto::models::bert_layer(config(pto::DType::BF16)); });
PTO_REGISTER_KERNEL(layer_mixed, [] { return pto::models::bert_layer(config(pto::DType::BF16, true)); });
