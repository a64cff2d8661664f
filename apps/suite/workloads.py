"""The bench_suite workloads: one table of programs nobody tuned PTO for.

Each workload is plain data plus four definitions of the same computation:
  pto(*tensors)   the PTO program, written with `pypto.ops` as a user would;
  ref(*arrays)    numpy, used twice: on float64 inputs it is the reference every
                  implementation is checked against, on float32 inputs it is
                  the numpy peer (None where numpy has no such operator, e.g. a
                  convolution: `ref64` then gives the float64 reference only);
  onnx(...)       the same computation as an ONNX graph for ONNX Runtime
                  (nodes from input names X0.. to output Y; None where ONNX has
                  no operator for it);
  onednn(d, *arrays) the oneDNN primitives a user of it would call (`d` is the
                  _onednn_peer module, apps/suite/onednn_peer.cpp; None where
                  oneDNN has no primitive for it).
Shapes come from real models (GPT-2, BERT, Llama, ViT, MobileNetV2, ResNet /
ResNeXt, DeepLab, wav2vec 2.0) and span the stage classes of the default rules
(schedules/defaults/): contractions of every aspect ratio, reductions over
each axis, short and very long rows, window stencils, attention, elementwise
chains and data movement. They were chosen from the models, not from what PTO
runs well.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from onnx import helper

import pypto
from pypto import ops


@dataclass
class Workload:
    name: str
    cls: str                                # stage class of the main stage
    model: str                              # where the shape comes from
    shapes: list[tuple[int, ...]]
    pto: Callable[..., Any]
    ref: Callable[..., np.ndarray] | None   # numpy peer and float64 reference
    onnx: Callable[[], list[Any]] | None    # ONNX nodes X0.. -> Y
    flops: float = 0.0
    ref64: Callable[..., np.ndarray] | None = None  # float64 reference when `ref` is not a peer
    scale: list[float] = field(default_factory=list)  # per-input value range (default 1)
    opset: int = 18
    domains: list[tuple[str, int]] = field(default_factory=list)
    onednn: Callable[..., Any] | None = None  # (_onednn_peer, *arrays) -> Peer

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        return (self.ref64 or self.ref)(*arrays)


def node(op: str, ins: list[str], outs: list[str] | str = "Y", **attrs: Any) -> Any:
    return helper.make_node(op, ins, [outs] if isinstance(outs, str) else outs, **attrs)


# ---- float64 references of the operators numpy lacks ------------------------------
def conv2d_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, stride: int = 1, pad: int = 0, dil: int = 1,
               groups: int = 1) -> np.ndarray:
    """NCHW convolution as a sum over kernel taps of strided views (exact in float64)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    xg = xp.reshape(n, groups, c // groups, xp.shape[2], xp.shape[3])
    wg = w.reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow), dtype=x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            patch = xg[:, :, :, ky * dil: ky * dil + stride * (oh - 1) + 1: stride,
                       kx * dil: kx * dil + stride * (ow - 1) + 1: stride]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, ky, kx], optimize=True)
    out = out.reshape(n, o, oh, ow)
    return out + b.reshape(1, o, 1, 1) if b is not None else out


def conv1d_ref(x: np.ndarray, w: np.ndarray, stride: int) -> np.ndarray:
    return conv2d_ref(x[:, :, None, :], w[:, :, None, :], None, stride)[:, :, 0, :]


def max_pool_ref(x: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf)
    v = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))[:, :, ::s, ::s]
    return v.max(axis=(-2, -1))


def softmax_ref(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    s = (q @ np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    return softmax_ref(s) @ v


def gelu_ref(x: np.ndarray) -> np.ndarray:
    from math import erf  # numpy has no erf: a float64 reference only, no numpy peer
    return 0.5 * x * (1 + np.vectorize(erf, otypes=[np.float64])(x / np.sqrt(2)))


def layer_norm_ref(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-5) * g + b


# ---- workload builders -----------------------------------------------------------
def matmul(name: str, model: str, m: int, k: int, n: int, batch: int = 0) -> Workload:
    a = (batch, m, k) if batch else (m, k)
    b = (batch, k, n) if batch else (k, n)
    if n == 1 and not batch:
        b = (k,)  # matrix-vector: a 1-D vector
    return Workload(name, "contraction", model, [a, b], lambda A, B: A @ B, lambda A, B: A @ B,
                    lambda: [node("MatMul", ["X0", "X1"])], 2.0 * max(batch, 1) * m * n * k,
                    onednn=lambda d, A, B: d.matmul(A, B))


def reduce(name: str, model: str, op: str, shape: tuple[int, ...], axes: list[int]) -> Workload:
    onnx_op = {"reduce_sum": "ReduceSum", "reduce_max": "ReduceMax", "reduce_mean": "ReduceMean"}[op]
    np_op = {"reduce_sum": np.sum, "reduce_max": np.max, "reduce_mean": np.mean}[op]
    cls = "reduction (inner axis)" if axes == [len(shape) - 1] else "reduction (outer axis)"

    def onnx() -> list[Any]:
        c = helper.make_tensor("axes", 7, [len(axes)], axes)
        return [node("Constant", [], "axes", value=c), node(onnx_op, ["X0", "axes"], keepdims=0)]
    return Workload(name, cls, model, [shape], lambda X: getattr(ops, op)(X, axes=axes),
                    lambda X: np_op(X, axis=tuple(axes)), onnx, float(np.prod(shape)),
                    onednn=lambda d, X: d.reduce(X, op[len("reduce_"):], axes))


def softmax(name: str, model: str, shape: tuple[int, ...], log: bool = False) -> Workload:
    if log:
        return Workload(name, "row-wise", model, [shape], lambda X: ops.log_softmax(X, axis=-1),
                        lambda X: np.log(softmax_ref(X)) if X.dtype == np.float64 else
                        (X - X.max(-1, keepdims=True)) - np.log(np.exp(X - X.max(-1, keepdims=True)).sum(-1, keepdims=True)),
                        lambda: [node("LogSoftmax", ["X0"], axis=-1)], 4.0 * np.prod(shape),
                        onednn=lambda d, X: d.softmax(X, -1, log=True))
    return Workload(name, "row-wise", model, [shape], lambda X: ops.softmax(X, axis=-1), softmax_ref,
                    lambda: [node("Softmax", ["X0"], axis=-1)], 4.0 * np.prod(shape),
                    onednn=lambda d, X: d.softmax(X, -1))


def conv(name: str, model: str, c: int, o: int, hw: int, k: int, stride: int = 1, pad: int = 0, dil: int = 1,
         groups: int = 1) -> Workload:
    oh = (hw + 2 * pad - dil * (k - 1) - 1) // stride + 1
    cls = "depthwise conv" if groups == c and groups > 1 else "grouped conv" if groups > 1 else "conv"
    return Workload(
        name, cls, model, [(1, c, hw, hw), (o, c // groups, k, k), (o,)],
        lambda X, W, B: ops.conv2d(X, W, B, stride=[stride, stride], padding=[pad, pad], dilation=[dil, dil],
                                   groups=groups),
        None,
        lambda: [node("Conv", ["X0", "X1", "X2"], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4,
                      dilations=[dil, dil], group=groups)],
        2.0 * o * (c // groups) * k * k * oh * oh,
        ref64=lambda X, W, B: conv2d_ref(X, W, B, stride, pad, dil, groups), scale=[1, 0.2, 0.1],
        onednn=lambda d, X, W, B: d.conv(X, W, B, [stride] * 2, [pad] * 2, [dil] * 2, groups))


def attention(name: str, model: str, heads: int, s: int, d: int, causal: bool) -> Workload:
    scale = 1.0 / np.sqrt(d)

    def onnx() -> list[Any]:
        mask = np.where(np.tril(np.ones((s, s), dtype=bool)), 0.0, -np.inf).astype(np.float32)
        from onnx import numpy_helper
        nodes = [node("Transpose", ["X1"], "kt", perm=[0, 2, 1]), node("MatMul", ["X0", "kt"], "qk"),
                 node("Constant", [], "sc", value=numpy_helper.from_array(np.array(scale, np.float32))),
                 node("Mul", ["qk", "sc"], "s")]
        if causal:
            nodes += [node("Constant", [], "mask", value=numpy_helper.from_array(mask)), node("Add", ["s", "mask"], "sm")]
        nodes += [node("Softmax", ["sm" if causal else "s"], "p", axis=-1), node("MatMul", ["p", "X2"])]
        return nodes
    flops = 4.0 * heads * s * s * d * (0.5 if causal else 1.0)
    return Workload(name, "attention", model, [(heads, s, d)] * 3,
                    lambda Q, K, V: ops.scaled_dot_product_attention(Q, K, V, causal=causal, scale=float(scale)),
                    lambda Q, K, V: attention_ref(Q, K, V, causal), onnx, flops,
                    onednn=lambda d, Q, K, V: d.attention(Q, K, V, float(scale), causal))


WORKLOADS: list[Workload] = [
    # Contractions: square, tall, skinny, tiny, odd/prime, matrix-vector, batched.
    matmul("matmul_1024", "square", 1024, 1024, 1024),
    matmul("gpt2_qkv_128", "GPT-2 QKV projection, 128 tokens", 128, 768, 2304),
    matmul("vit_mlp_197", "ViT-B MLP fc1, 197 tokens (prime)", 197, 768, 3072),
    matmul("llama_up_16", "Llama-7B up-projection, 16 tokens", 16, 4096, 11008),
    matmul("tall_16384x128", "tall-skinny (per-pixel MLP)", 16384, 128, 128),
    matmul("odd_257x1000x333", "odd sizes", 257, 1000, 333),
    matmul("tiny_64", "tiny", 64, 64, 64),
    matmul("matvec_4096", "Llama-7B decode q-projection (matrix-vector)", 4096, 4096, 1),
    matmul("matvec_11008x4096", "Llama-7B decode up-projection", 11008, 4096, 1),
    matmul("vecmat_768x3072", "GPT-2 decode MLP fc1 (vector-matrix)", 1, 768, 3072),
    matmul("bert_scores_b12", "BERT-base scores, 12 heads", 128, 64, 128, batch=12),
    matmul("small_batched_64", "batched small matmuls", 64, 64, 64, batch=64),
    # Reductions over each axis, short and very long rows.
    reduce("colsum_30522x768", "BERT embedding-table column sum", "reduce_sum", (30522, 768), [0]),
    reduce("colsum_4096", "square column sum", "reduce_sum", (4096, 4096), [0]),
    reduce("rowsum_4096", "square row sum", "reduce_sum", (4096, 4096), [1]),
    reduce("rowmax_8x50257", "GPT-2 logits row max", "reduce_max", (8, 50257), [1]),
    reduce("batchmean_32x197x768", "ViT mean over the batch", "reduce_mean", (32, 197, 768), [0]),
    reduce("tokenmean_8x197x768", "ViT mean over tokens (middle axis)", "reduce_mean", (8, 197, 768), [1]),
    softmax("softmax_8x50257", "GPT-2 vocabulary, 8 rows", (8, 50257)),
    softmax("softmax_1x32000", "Llama vocabulary, 1 row", (1, 32000)),
    softmax("softmax_scores_1536x128", "BERT scores, 12 heads x 128 rows", (1536, 128)),
    softmax("logsoftmax_128x30522", "BERT MLM head", (128, 30522), log=True),
    Workload("layernorm_197x768", "row-wise", "ViT-B LayerNorm", [(197, 768), (768,), (768,)],
             lambda X, G, B: ops.layer_norm(X, G, B, eps=1e-5), layer_norm_ref,
             lambda: [node("LayerNormalization", ["X0", "X1", "X2"], axis=-1, epsilon=1e-5)], 8.0 * 197 * 768,
             onednn=lambda d, X, G, B: d.layer_norm(X, G, B, 1e-5)),
    # Window stencils.
    conv("dw3x3_mbv2_144x56", "MobileNetV2 depthwise 3x3", 144, 144, 56, 3, 1, 1, groups=144),
    conv("dw3x3_s2_mbv2_96x112", "MobileNetV2 depthwise 3x3 stride 2", 96, 96, 112, 3, 2, 1, groups=96),
    conv("dw3x3_mbv2_576x14", "MobileNetV2 depthwise 3x3", 576, 576, 14, 3, 1, 1, groups=576),
    conv("dw7x7_convnext_96x56", "ConvNeXt-T stage 1 depthwise 7x7", 96, 96, 56, 7, 1, 3, groups=96),
    conv("grouped3x3_resnext_128x56", "ResNeXt-50 grouped 3x3, 32 groups", 128, 128, 56, 3, 1, 1, groups=32),
    conv("dilated3x3_deeplab_256x33", "DeepLab dilated 3x3, dilation 2", 256, 256, 33, 3, 1, 2, dil=2),
    conv("conv3x3_s2_resnet_128x56", "ResNet-50 layer2 strided 3x3", 128, 128, 56, 3, 2, 1),
    conv("pointwise_mbv2_32x112", "MobileNetV2 pointwise 1x1", 32, 16, 112, 1),
    Workload("conv1d_wav2vec_k10s5", "conv", "wav2vec 2.0 feature encoder layer 1 (kernel 10, stride 5)",
             [(1, 1, 16000), (512, 1, 10)], lambda X, W: ops.conv1d(X, W, stride=[5]), None,
             lambda: [node("Conv", ["X0", "X1"], kernel_shape=[10], strides=[5])], 2.0 * 512 * 10 * 3199,
             ref64=lambda X, W: conv1d_ref(X, W, 5), onednn=lambda d, X, W: d.conv(X, W, None, [5], [0], [1])),
    Workload("maxpool3x3_s2_resnet_64x112", "pooling", "ResNet-50 stem max pool", [(1, 64, 112, 112)],
             lambda X: ops.max_pool2d(X, kernel=[3, 3], stride=[2, 2], padding=[1, 1]),
             lambda X: max_pool_ref(X, 3, 2, 1),
             lambda: [node("MaxPool", ["X0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
             9.0 * 64 * 56 * 56, onednn=lambda d, X: d.pool(X, "max", [3, 3], [2, 2], [1, 1])),
    Workload("globalavgpool_2048x7", "pooling", "ResNet-50 head", [(1, 2048, 7, 7)],
             lambda X: ops.global_avg_pool(X), lambda X: X.mean(axis=(2, 3), keepdims=True),
             lambda: [node("GlobalAveragePool", ["X0"])], 2048.0 * 49,
             onednn=lambda d, X: d.pool(X, "avg", [7, 7], [1, 1], [0, 0])),
    # Attention, causal at several lengths.
    attention("attn_causal_gpt2_s128", "GPT-2, 12 heads", 12, 128, 64, True),
    attention("attn_causal_gpt2_s512", "GPT-2, 12 heads", 12, 512, 64, True),
    attention("attn_causal_gpt2_s1024", "GPT-2, 12 heads", 12, 1024, 64, True),
    attention("attn_bert_s384", "BERT-base SQuAD, 12 heads", 12, 384, 64, False),
    # Elementwise chains and data movement.
    Workload("gelu_512x3072", "elementwise", "BERT FFN activation", [(512, 3072)], lambda X: ops.gelu(X),
             None, lambda: [node("Gelu", ["X0"])], 512.0 * 3072 * 8, ref64=gelu_ref, opset=20,
             onednn=lambda d, X: d.eltwise(X, "gelu")),
    Workload("swiglu_64x11008", "elementwise", "Llama MLP gate: silu(g) * u", [(64, 11008), (64, 11008)],
             lambda G, U: ops.silu(G) * U, lambda G, U: G / (1 + np.exp(-G)) * U,
             lambda: [node("Sigmoid", ["X0"], "s"), node("Mul", ["X0", "s"], "g"), node("Mul", ["g", "X1"])],
             64.0 * 11008 * 4, onednn=lambda d, G, U: d.eltwise(G, "swish", U)),
    Workload("bias_relu_3136x256", "elementwise", "ResNet-50 bias + ReLU, 56x56 pixels", [(3136, 256), (256,)],
             lambda X, B: pypto.relu(X + B), lambda X, B: np.maximum(X + B, 0),
             lambda: [node("Add", ["X0", "X1"], "s"), node("Relu", ["s"])], 3136.0 * 256 * 2,
             onednn=lambda d, X, B: d.add(X, B, "relu")),
    Workload("transpose_1024", "data movement", "square transpose", [(1024, 1024)],
             lambda X: ops.transpose(X, perm=[1, 0]), lambda X: np.ascontiguousarray(X.T),
             lambda: [node("Transpose", ["X0"], perm=[1, 0])], onednn=lambda d, X: d.transpose(X, [1, 0])),
    Workload("split_heads_128x12x64", "data movement", "BERT split heads [S, H, D] -> [H, S, D]", [(128, 12, 64)],
             lambda X: ops.transpose(X, perm=[1, 0, 2]), lambda X: np.ascontiguousarray(X.transpose(1, 0, 2)),
             lambda: [node("Transpose", ["X0"], perm=[1, 0, 2])], onednn=lambda d, X: d.transpose(X, [1, 0, 2])),
]

# Held-out shapes: the same builders at sizes no default rule was measured on
# (`bench_suite.py --heldout`). They check that a rule holds beyond the shapes
# above; a workload is moved here from nowhere else, and none of them is used
# to choose a rule's constants.
HELDOUT: list[Workload] = [
    matmul("mm_96x3000x200", "held out", 96, 3000, 200),
    matmul("mm_500x64x500", "held out", 500, 64, 500),
    matmul("mm_33x4096x33", "held out", 33, 4096, 33),
    matmul("mm_2000x300x17", "held out", 2000, 300, 17),
    matmul("bmm_8x100x80x60", "held out", 100, 80, 60, batch=8),
    matmul("mv_3000x700", "held out", 3000, 700, 1),
    matmul("vm_1x1000x5000", "held out", 1, 1000, 5000),
    reduce("colsum_1000x3000", "held out", "reduce_sum", (1000, 3000), [0]),
    reduce("rowsum_3000x1000", "held out", "reduce_sum", (3000, 1000), [1]),
    reduce("mean_mid_16x300x100", "held out", "reduce_mean", (16, 300, 100), [1]),
    reduce("max_100000x7", "held out", "reduce_max", (100000, 7), [1]),
    softmax("softmax_64x1000", "held out", (64, 1000)),
    softmax("softmax_4096x64", "held out", (4096, 64)),
    softmax("softmax_3x100003", "held out", (3, 100003)),
    softmax("logsoftmax_32x50257", "held out", (32, 50257), log=True),
    conv("conv3x3_64x28", "held out", 64, 64, 28, 3, 1, 1),
    conv("conv3x3_s2_256x28", "held out", 256, 256, 28, 3, 2, 1),
    conv("conv5x5_32x40", "held out", 32, 48, 40, 5, 1, 2),
    conv("conv1x1_256x14", "held out", 256, 512, 14, 1),
    conv("dw5x5_240x28", "held out", 240, 240, 28, 5, 1, 2, groups=240),
    conv("grouped3x3_64x30_g4", "held out", 64, 64, 30, 3, 1, 1, groups=4),
    conv("conv7x7_s2_3x224", "held out", 3, 64, 224, 7, 2, 3),
    attention("attn_causal_s256_h8_d32", "held out", 8, 256, 32, True),
    attention("attn_s200_h4_d64", "held out", 4, 200, 64, False),
    attention("attn_causal_s2048_h4_d64", "held out", 4, 2048, 64, True),
    attention("attn_s1000_h2_d128", "held out", 2, 1000, 128, False),
]


# Random shapes: a fresh held-out set per seed (`bench_suite.py --random N --seed S`). Each draw
# picks a stage class and sizes from ranges real models span (log-uniform, so small, odd and
# prime sizes come up as often as large powers of two), bounded so that one call takes about
# 0.01-20 ms. A rule that holds only on the shapes above fails here on shapes nobody chose.
def _log_int(rng: Any, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _random_matmul(rng: Any) -> Workload:
    while True:
        kind = rng.choice(["general", "general", "general", "matvec", "vecmat", "batched"])
        m, k, n = _log_int(rng, 2, 4096), _log_int(rng, 8, 8192), _log_int(rng, 2, 4096)
        batch = 0
        if kind == "matvec":
            n = 1
        elif kind == "vecmat":
            m = 1
        elif kind == "batched":
            batch, m, k, n = _log_int(rng, 2, 64), _log_int(rng, 8, 512), _log_int(rng, 8, 512), _log_int(rng, 8, 512)
        flops = 2.0 * max(batch, 1) * m * k * n
        if 2e5 <= flops <= 4e9 and max(batch, 1) * (m * k + k * n) <= 6e7:
            name = f"rnd_mm_{'%dx' % batch if batch else ''}{m}x{k}x{n}"
            return matmul(name, "random", m, k, n, batch=batch)


def _random_reduce(rng: Any) -> Workload:
    while True:
        rank = int(rng.choice([2, 2, 3]))
        shape = tuple(_log_int(rng, 1 if rank == 3 else 2, 60000) for _ in range(rank))
        if not 1e4 <= np.prod(shape) <= 4e7 or min(shape) < 2:
            continue
        axis = int(rng.integers(rank))
        op = str(rng.choice(["reduce_sum", "reduce_max", "reduce_mean"]))
        return reduce(f"rnd_{op[7:]}_{'x'.join(map(str, shape))}_ax{axis}", "random", op, shape, [axis])


def _random_softmax(rng: Any) -> Workload:
    while True:
        rows, cols = _log_int(rng, 1, 20000), _log_int(rng, 5, 150000)
        if 1e3 <= rows * cols <= 2e7:
            log = bool(rng.random() < 0.3)
            return softmax(f"rnd_{'log' if log else ''}softmax_{rows}x{cols}", "random", (rows, cols), log=log)


def _random_conv(rng: Any) -> Workload:
    while True:
        kind = rng.choice(["dense", "dense", "depthwise", "grouped"])
        c = _log_int(rng, 3, 512) if kind != "depthwise" else _log_int(rng, 8, 1024)
        k = int(rng.choice([1, 3, 3, 5, 7]))
        stride = int(rng.choice([1, 1, 2]))
        dil = int(rng.choice([1, 1, 1, 2])) if k > 1 else 1
        pad = dil * (k // 2)
        hw = _log_int(rng, 7, 160)
        if kind == "depthwise":
            groups, o = c, c
        elif kind == "grouped":
            divs = [g for g in range(2, c) if c % g == 0 and g <= 64]
            if not divs:
                continue
            groups = int(rng.choice(divs))
            o = groups * max(1, _log_int(rng, 1, 64))
        else:
            groups, o = 1, _log_int(rng, 8, 512)
        oh = (hw + 2 * pad - dil * (k - 1) - 1) // stride + 1
        flops = 2.0 * o * (c // groups) * k * k * oh * oh
        if oh >= 1 and 1e5 <= flops <= 2e9:
            name = f"rnd_{kind}_c{c}_o{o}_hw{hw}_k{k}s{stride}d{dil}" + (f"g{groups}" if kind == "grouped" else "")
            return conv(name, "random", c, o, hw, k, stride, pad, dil, groups)


def _random_attention(rng: Any) -> Workload:
    while True:
        h, s, d = _log_int(rng, 1, 16), _log_int(rng, 16, 2048), int(rng.choice([32, 64, 64, 80, 96, 128]))
        causal = bool(rng.random() < 0.5)
        if 4.0 * h * s * s * d <= 8e9:
            return attention(f"rnd_attn{'_causal' if causal else ''}_h{h}_s{s}_d{d}", "random", h, s, d, causal)


RANDOM_CLASSES = {"contraction": _random_matmul, "reduction": _random_reduce, "row-wise": _random_softmax,
                  "conv": _random_conv, "attention": _random_attention}


def random_workloads(n: int, seed: int) -> list[Workload]:
    """`n` workloads of random classes and shapes, the same for the same seed."""
    rng = np.random.default_rng(seed)
    weights = {"contraction": 3, "reduction": 2, "row-wise": 2, "conv": 3, "attention": 1}
    names = list(weights)
    p = np.array([weights[c] for c in names], dtype=float)
    out, seen = [], set()
    while len(out) < n:
        w = RANDOM_CLASSES[names[int(rng.choice(len(names), p=p / p.sum()))]](rng)
        if w.name not in seen:
            seen.add(w.name)
            out.append(w)
    return out
