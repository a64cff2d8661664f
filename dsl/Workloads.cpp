#include "dsl/Workloads.h"

#include <filesystem>
#include <fstream>
#include <cmath>
#include <functional>
#include <sstream>

#include "dsl/ProgramJson.h"
#include "dsl/models/Bert.h"
#include "dsl/models/ResNet.h"
#include "dsl/ops/Ops.h"

namespace pto {
namespace {

using Sizes = std::map<std::string, int64_t>;

// BERT-base with batch and sequence taken from the workload sizes (both must be static).
template <typename D>
models::BertConfig bert_config(const D& d) {
  const Dim b = d("B"), s = d("S");
  if (b.is_symbolic() || s.is_symbolic()) throw ShapeError("bert workloads need static B and S");
  models::BertConfig c;
  c.batch = b.value;
  c.seq = s.value;
  // BF16 = 1: bf16 weights; 2: mixed bf16 (bf16 weights in pairs, projection
  // inputs rounded to bf16). 0, the default, reads as "symbolic" here: f32.
  const Dim bf16 = d("BF16");
  if (!bf16.is_symbolic() && bf16.value != 1 && bf16.value != 2)
    throw ShapeError("bert workloads: BF16=" + bf16.str() + " must be 0 (f32), 1 (bf16 weights) or 2 (mixed bf16)");
  if (!bf16.is_symbolic()) c.weight_dtype = DType::BF16;
  c.bf16_activations = !bf16.is_symbolic() && bf16.value == 2;
  return c;
}
struct Entry {
  WorkloadInfo info;
  std::function<Program(const std::function<Dim(const std::string&)>&)> build;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> e = {
      {{"matmul", "C = A @ B, A: [M, K], B: [K, N]", {{"M", 1024}, {"N", 1024}, {"K", 1024}}},
       [](const auto& d) {
         Program p("matmul");
         const Tensor a = p.input("A", {d("M"), d("K")});
         const Tensor b = p.input("B", {d("K"), d("N")});
         p.output(ops::matmul(a, b, "C"));
         return p;
       }},
      {{"matmul_bias_relu",
        "out = relu(A @ B + bias), the fused-epilogue example",
        {{"M", 1024}, {"N", 1024}, {"K", 1024}}},
       [](const auto& d) {
         Program p("matmul_bias_relu");
         const Tensor a = p.input("A", {d("M"), d("K")});
         const Tensor b = p.input("B", {d("K"), d("N")});
         const Tensor bias = p.input("bias", {d("N")});
         const Tensor mm = ops::matmul(a, b, "mm");
         const Tensor out = ops::relu(ops::add(mm, bias, "biased"), "out");
         p.output(out);
         return p;
       }},
      {{"softmax", "row softmax of X: [R, C]", {{"R", 384}, {"C", 768}}},
       [](const auto& d) {
         Program p("softmax");
         p.output(ops::softmax(p.input("X", {d("R"), d("C")}), -1, "Y"));
         return p;
       }},
      {{"layer_norm",
        "layer_norm over the last dim of X: [R, C] with gamma, beta",
        {{"R", 384}, {"C", 768}}},
       [](const auto& d) {
         Program p("layer_norm");
         const Tensor x = p.input("X", {d("R"), d("C")});
         p.output(ops::layer_norm(x, p.input("gamma", {d("C")}), p.input("beta", {d("C")}), 1e-5, "Y"));
         return p;
       }},
      {{"mlp", "BERT FFN: gelu(X @ W1^T + b1) @ W2^T + b2", {{"S", 128}, {"H", 768}, {"F", 3072}}},
       [](const auto& d) {
         Program p("mlp");
         const Tensor x = p.input("X", {d("S"), d("H")});
         const Tensor h = ops::gelu(ops::linear(x, p.input("W1", {d("F"), d("H")}), p.input("b1", {d("F")}), "fc1"), false, "act");
         p.output(ops::linear(h, p.input("W2", {d("H"), d("F")}), p.input("b2", {d("H")}), "fc2"));
         return p;
       }},
      {{"attention", "softmax(Q K^T / sqrt(D)) V for Q, K, V: [S, D]", {{"S", 128}, {"D", 64}}},
       [](const auto& d) {
         Program p("attention");
         const Tensor q = p.input("Q", {d("S"), d("D")});
         const Tensor k = p.input("K", {d("S"), d("D")});
         const Tensor v = p.input("V", {d("S"), d("D")});
         const Dim dd = d("D");
         const double scale = dd.is_symbolic() ? 0.125 : 1.0 / std::sqrt(static_cast<double>(dd.value));
         // Element definition: scores(i, j) = sum_e Q(i, e) K(j, e) * scale.
         const Tensor s = p.define_reduce("scores", {"i", "j"}, {d("S"), d("S")}, ReduceOp::Sum, {{"e", dd}},
                                          q(var("i"), var("e")) * k(var("j"), var("e")) * scale,
                                          OpKind::Contraction, "matmul");
         p.output(ops::matmul(ops::softmax(s, -1, "probs"), v, "O"));
         return p;
       }},
      {{"conv2d",
        "ResNet-50 3x3 conv, NCHW, stride 1, pad 1, with bias + ReLU",
        {{"N", 1}, {"C", 64}, {"H", 56}, {"W", 56}, {"O", 64}}},
       [](const auto& d) {
         Program p("conv2d");
         const Tensor x = p.input("X", {d("N"), d("C"), d("H"), d("W")});
         const Tensor w = p.input("Wt", {d("O"), d("C"), 3, 3});
         p.output(ops::relu(ops::conv2d(x, w, p.input("b", {d("O")}), {1, 1}, {1, 1}, {1, 1}, 1, "conv"), "Y"));
         return p;
       }},
      {{"conv2d_nhwc",
        "ResNet-50 3x3 conv, channels last (NHWC input, HWIO weights; PAIRS=1: blocked pairs "
        "[O/16, 3, 3, C/2, 16, 2]), "
        "stride 1, pad 1, with bias + ReLU",
        {{"N", 1}, {"C", 64}, {"H", 56}, {"W", 56}, {"O", 64}, {"PAIRS", 0}}},
       [](const auto& d) {
         Program p("conv2d_nhwc");
         const Tensor x = p.input("X", {d("N"), d("H"), d("W"), d("C")});
         const bool pairs = d("PAIRS").value == 1;
         if (pairs && (d("C").is_symbolic() || d("O").is_symbolic() || d("C").value % 2 || d("O").value % 16))
           throw ShapeError("conv2d_nhwc: PAIRS=1 needs an even C and O a multiple of 16, got C = " + d("C").str() +
                            ", O = " + d("O").str());
         const Tensor w = pairs ? p.input("Wt", {d("O").value / 16, 3, 3, d("C").value / 2, 16, 2})
                                : p.input("Wt", {3, 3, d("C"), d("O")});
         p.output(ops::relu(ops::conv2d_nhwc(x, w, p.input("b", {d("O")}), {1, 1}, {1, 1}, {1, 1}, "conv"), "Y"));
         return p;
       }},
      {{"bert_attention",
        "BERT-base self-attention block (QKV, scores, mask, softmax, context, output proj.)",
        {{"B", 1}, {"S", 128}, {"BF16", 0}}},
       [](const auto& d) { return models::bert_attention(bert_config(d)); }},
      {{"bert_ffn",
        "BERT-base FFN: gelu(X W1 + b1) W2 + b2 (BF16=1: bf16 weights)",
        {{"B", 1}, {"S", 128}, {"BF16", 0}}},
       [](const auto& d) { return models::bert_ffn(bert_config(d)); }},
      {{"bert_layernorm",
        "BERT-base residual add + LayerNorm",
        {{"B", 1}, {"S", 128}, {"BF16", 0}}},
       [](const auto& d) { return models::bert_layernorm(bert_config(d)); }},
      {{"bert_layer", "BERT-base encoder layer", {{"B", 1}, {"S", 128}, {"BF16", 0}}},
       [](const auto& d) { return models::bert_layer(bert_config(d)); }},
      {{"resnet50_conv",
        "one ResNet-50 conv layer + bias + ReLU, weights blocked by 32 channels (layer = index "
        "0..22, see pto show; "
        "BF16=1: bf16 with weights in channel pairs, the stem's 3 channels padded to 4)",
        {{"layer", 2}, {"N", 1}, {"BF16", 0}}},
       [](const auto& d) {
         const auto& layers = models::resnet50_conv_layers();
         // A size of 0 means "symbolic" to --set; for an index it is layer 0.
         const Dim l = d("layer");
         const int64_t li = l.is_symbolic() ? 0 : l.value;
         if (li >= static_cast<int64_t>(layers.size()))
           throw ShapeError("resnet50_conv: layer must be 0.." + std::to_string(layers.size() - 1));
         const auto& layer = layers[static_cast<size_t>(li)];
         const bool bf16 = d("BF16").value == 1;
         return models::resnet_conv(layer, d("N").value, bf16 ? DType::BF16 : DType::F32, 32, bf16);
       }},
      {{"column_sum",
        "Y = X.sum(axis=0), X: [R, C] (a reduction over the outer axis)",
        {{"R", 4096}, {"C", 4096}}},
       [](const auto& d) {
         Program p("column_sum");
         p.output(ops::reduce_sum(p.input("X", {d("R"), d("C")}), {0}, false, "Y"));
         return p;
       }},
      {{"grouped_conv2d",
        "grouped KxK conv, NCHW, G groups, stride 1, pad K/2, with bias",
        {{"N", 1}, {"C", 64}, {"H", 30}, {"W", 30}, {"O", 64}, {"G", 4}, {"K", 3}}},
       [](const auto& d) {
         Program p("grouped_conv2d");
         const int64_t g = d("G").value, k = d("K").value;
         if (d("G").is_symbolic() || d("K").is_symbolic() || g < 1 || k < 1 ||
             d("C").is_symbolic() || d("O").is_symbolic() || d("C").value % g || d("O").value % g)
           throw ShapeError(
               "grouped_conv2d: G and K must be static and positive, C and O static multiples of "
               "G; got C = " +
               d("C").str() + ", O = " + d("O").str() + ", G = " + d("G").str() +
               ", K = " + d("K").str());
         const Tensor x = p.input("X", {d("N"), d("C"), d("H"), d("W")});
         const Tensor w = p.input("Wt", {d("O"), d("C").value / g, k, k});
         const int pad = static_cast<int>(k / 2);
         p.output(ops::conv2d(x, w, p.input("b", {d("O")}), {1, 1}, {pad, pad}, {1, 1},
                              static_cast<int>(g), "Y"));
         return p;
       }},
      {{"batched_matmul",
        "C[b] = A[b] @ B[b], A: [Bt, M, K], B: [Bt, K, N] (matmul with a batch dim)",
        {{"Bt", 8}, {"M", 256}, {"N", 256}, {"K", 256}}},
       [](const auto& d) {
         Program p("batched_matmul");
         const Tensor a = p.input("A", {d("Bt"), d("M"), d("K")});
         const Tensor b = p.input("B", {d("Bt"), d("K"), d("N")});
         p.output(ops::matmul(a, b, "C"));
         return p;
       }},
  };
  return e;
}

}  // namespace

const std::vector<WorkloadInfo>& workloads() {
  static const std::vector<WorkloadInfo> w = [] {
    std::vector<WorkloadInfo> v;
    for (const auto& e : entries()) v.push_back(e.info);
    return v;
  }();
  return w;
}

Program make_workload(const std::string& name, const Sizes& sizes) {
  for (const auto& e : entries()) {
    if (e.info.name != name) continue;
    for (const auto& [k, v] : sizes) {
      if (!e.info.defaults.count(k)) {
        std::string valid;
        for (const auto& [dk, dv] : e.info.defaults) valid += (valid.empty() ? "" : ", ") + dk;
        throw DefinitionError("workload '" + name + "' has no size '" + k + "'; sizes: " + valid);
      }
      if (v < 0) throw ShapeError("workload '" + name + "': size " + k + "=" + std::to_string(v) + " must be positive (0 = symbolic)");
    }
    return e.build([&](const std::string& k) {
      const auto it = sizes.find(k);
      const int64_t v = it == sizes.end() ? e.info.defaults.at(k) : it->second;
      return v == 0 ? Dim::symbol(k) : Dim(v);
    });
  }
  std::string valid;
  for (const auto& e : entries()) valid += (valid.empty() ? "" : ", ") + e.info.name;
  throw DefinitionError("unknown workload '" + name + "'; workloads: " + valid + " (or a program .json file)");
}

Program load_program(const std::string& name_or_path, const Sizes& sizes) {
  if (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".json") {
    std::ifstream f(name_or_path);
    if (!f) throw DefinitionError("cannot open program file '" + name_or_path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    if (!sizes.empty()) throw DefinitionError("--set applies to workloads, not to program files");
    return program_from_json_string(ss.str());
  }
  return make_workload(name_or_path, sizes);
}

}  // namespace pto
