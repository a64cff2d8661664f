// BERT-base encoder layer, written with the operator library and element
// definitions: the report's attention / FFN / LayerNorm parts as separate
// programs (for the before/after table) and the whole layer.
//
// Layout: activations [B, S, H] row-major; the attention mask is additive,
// [B, S] (0 = attend, -1e4 = masked). A projection y = x W + b takes W [in, out]
// (the layout of ONNX MatMul initializers and TensorFlow Dense kernels; a
// PyTorch nn.Linear weight is its transpose), stored blocked by default:
// Wb[out / block, in, block] with Wb[jb, k, jj] = W[k, jb * block + jj]
// (`block_weight`, BlockedWeights.h, converts). That is the prepacked panel a vectorized micro-
// kernel streams for `block` output columns, laid out once at load time as
// ONNX Runtime and oneDNN prepack their weights, instead of a packing copy on
// every call. weight_block = 0 keeps W [in, out]. Mixed bf16 (below) blocks
// them in pairs of input rows as well.
#pragma once

#include <string>
#include <vector>

#include "dsl/Error.h"
#include "dsl/Program.h"
#include "dsl/models/BlockedWeights.h"

namespace pto::models {

struct BertConfig {
  int64_t batch = 1, seq = 128, hidden = 768, heads = 12, ffn = 3072;
  double eps = 1e-12;  // BERT's LayerNorm epsilon
  // Output columns per weight block: 3 AVX-512 vectors, the column tile of
  // the default schedule's 8 x 48 register tile at BERT's shapes; used where
  // it divides the layer's width.
  int64_t weight_block = 48;
  // BF16: bf16 projection weights (half the bytes to stream) and f32
  // activations, arithmetic and accumulation.
  DType weight_dtype = DType::F32;
  // Mixed bf16 (needs bf16 weights): each projection's input is rounded to
  // bf16 as it enters x W, and its weights are blocked in pairs of input rows,
  // Wp[out / block, in / 2, block, 2] (`block_weight_pairs`), so that one
  // vdpbf16ps multiplies two bf16 pairs per f32 lane; products and sums stay
  // f32, and everything outside the projections (attention scores, softmax,
  // GELU, LayerNorm) stays f32.
  bool bf16_activations = false;
};

// attn = MultiHeadSelfAttention(X, mask) projected by Wo: inputs X, mask, Wq, bq, Wk, bk, Wv, bv, Wo, bo.
Program bert_attention(const BertConfig& c);
// ffn = gelu(X W1 + b1) W2 + b2 (GELU with erf): inputs X, W1, b1, W2, b2.
Program bert_ffn(const BertConfig& c);
// Y = LayerNorm(X + R) * gamma + beta: inputs X, R, gamma, beta.
Program bert_layernorm(const BertConfig& c);
// The whole layer: h = LN1(X + attn(X)); Y = LN2(h + ffn(h)).
Program bert_layer(const BertConfig& c);

// Builders that add the parts to an existing program (used by bert_layer).
Tensor add_bert_attention(Program& p, const Tensor& x, const Tensor& mask, const BertConfig& c, const std::string& prefix);
Tensor add_bert_ffn(Program& p, const Tensor& x, const BertConfig& c, const std::string& prefix);
Tensor add_bert_layernorm(Program& p, const Tensor& x, const Tensor& r, const BertConfig& c, const std::string& prefix);

}  // namespace pto::models
