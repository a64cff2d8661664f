"""ONNX Runtime timings of the BERT-base parts, for bench_bert.

Builds each part (attention, ffn, layernorm, layer) as an ONNX graph with the
`onnx` package, the same math as dsl/models/Bert.h, checks ORT's output
against a float64 numpy reference, times it (2 intra-op threads) and prints
JSON records on stdout: [{"workload", "median_ms", "min_ms", "max_ms", "reps"}].
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

H, NH, F, EPS = 768, 12, 3072, 1e-12


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, arr, base="c"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), n))
        return n

    def op(self, kind, inputs, **attrs):
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    # x W^T + b for W [out, in]: the graph holds W^T ([in, out]) as the MatMul
    # initializer, the weight layout PTO's BERT (dsl/models/Bert.h) takes too.
    def linear(self, x, w, b):
        return self.op("Add", [self.op("MatMul", [x, self.const(w.T.copy(), "wT")]), self.const(b, "b")])

    def layernorm(self, x, r, g, b):
        return self.op("LayerNormalization", [self.op("Add", [x, r]), self.const(g, "g"), self.const(b, "be")], axis=-1, epsilon=EPS)

    def ffn(self, x, w):
        h = self.linear(x, w["W1"], w["b1"])
        # Exact GELU: 0.5 x (1 + erf(x / sqrt 2)); ORT fuses this pattern.
        e = self.op("Erf", [self.op("Div", [h, self.const(np.float32(math.sqrt(2.0)))])])
        g = self.op("Mul", [self.op("Mul", [h, self.op("Add", [e, self.const(np.float32(1.0))])]), self.const(np.float32(0.5))])
        return self.linear(g, w["W2"], w["b2"])

    def attention(self, x, mask, w, B, S):
        D = H // NH
        def heads(t):  # [B, S, H] -> [B, NH, S, D]
            r = self.op("Reshape", [t, self.const(np.array([B, S, NH, D], np.int64))])
            return self.op("Transpose", [r], perm=[0, 2, 1, 3])
        q, k, v = (heads(self.linear(x, w[f"W{n}"], w[f"b{n}"])) for n in "qkv")
        kt = self.op("Transpose", [k], perm=[0, 1, 3, 2])
        s = self.op("Mul", [self.op("MatMul", [q, kt]), self.const(np.float32(1.0 / math.sqrt(D)))])
        m = self.op("Reshape", [mask, self.const(np.array([B, 1, 1, S], np.int64))])
        p = self.op("Softmax", [self.op("Add", [s, m])], axis=-1)
        ctx = self.op("Transpose", [self.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        ctx = self.op("Reshape", [ctx, self.const(np.array([B, S, H], np.int64))])
        return self.linear(ctx, w["Wo"], w["bo"])


def ref_linear(x, w, b):
    return x @ w.T + b


def ref_ln(x, r, g, b):
    y = x + r
    mu = y.mean(-1, keepdims=True)
    var = ((y - mu) ** 2).mean(-1, keepdims=True)
    return (y - mu) / np.sqrt(var + EPS) * g + b


def ref_ffn(x, w):
    from math import erf
    h = ref_linear(x, w["W1"], w["b1"])
    h = 0.5 * h * (1 + np.vectorize(erf)(h / math.sqrt(2)))
    return ref_linear(h, w["W2"], w["b2"])


def ref_attention(x, mask, w, B, S):
    D = H // NH
    q, k, v = (ref_linear(x, w[f"W{n}"], w[f"b{n}"]).reshape(B, S, NH, D).transpose(0, 2, 1, 3) for n in "qkv")
    s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D) + mask.reshape(B, 1, 1, S)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ctx = (p @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
    return ref_linear(ctx, w["Wo"], w["bo"])


def weights(rng, names_shapes):
    return {n: rng.uniform(-0.05, 0.05, s).astype(np.float32) for n, s in names_shapes.items()}


def build(part, B, S, rng):
    g = Graph()
    inputs, feeds = [], {}
    x = rng.uniform(-1, 1, (B, S, H)).astype(np.float32)
    inputs.append(helper.make_tensor_value_info("X", TensorProto.FLOAT, [B, S, H]))
    feeds["X"] = x
    mask = np.zeros((B, S), np.float32)
    mask[:, S - S // 8:] = -1e4
    att_w = weights(rng, {**{f"W{n}": (H, H) for n in "qkvo"}, **{f"b{n}": (H,) for n in "qkvo"}})
    ffn_w = weights(rng, {"W1": (F, H), "b1": (F,), "W2": (H, F), "b2": (H,)})
    g1, b1 = rng.uniform(0.8, 1.2, H).astype(np.float32), rng.uniform(-0.05, 0.05, H).astype(np.float32)
    g2, b2 = rng.uniform(0.8, 1.2, H).astype(np.float32), rng.uniform(-0.05, 0.05, H).astype(np.float32)
    x64 = x.astype(np.float64)
    w64 = {k: v.astype(np.float64) for k, v in {**att_w, **ffn_w}.items()}
    if part in ("attention", "layer"):
        inputs.append(helper.make_tensor_value_info("mask", TensorProto.FLOAT, [B, S]))
        feeds["mask"] = mask
    if part == "attention":
        out = g.attention("X", "mask", att_w, B, S)
        want = ref_attention(x64, mask, w64, B, S)
    elif part == "ffn":
        out = g.ffn("X", ffn_w)
        want = ref_ffn(x64, w64)
    elif part == "layernorm":
        r = rng.uniform(-1, 1, (B, S, H)).astype(np.float32)
        inputs.append(helper.make_tensor_value_info("R", TensorProto.FLOAT, [B, S, H]))
        feeds["R"] = r
        out = g.layernorm("X", "R", g1, b1)
        want = ref_ln(x64, r.astype(np.float64), g1, b1)
    else:
        a = g.attention("X", "mask", att_w, B, S)
        h = g.layernorm(a, "X", g1, b1)
        out = g.layernorm(g.ffn(h, ffn_w), h, g2, b2)
        ha = ref_ln(ref_attention(x64, mask, w64, B, S), x64, g1, b1)
        want = ref_ln(ref_ffn(ha, w64), ha, g2, b2)
    graph = helper.make_graph(g.nodes, f"bert_{part}", inputs,
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, [B, S, H])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, feeds, want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, action="append")
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--part", action="append", choices=["attention", "ffn", "layernorm", "layer"])
    ap.add_argument("--rounds", type=int, default=1, help="timing rounds; the one with the lowest median is kept")
    args = ap.parse_args()
    rng = np.random.default_rng(5)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    records = []
    for S in args.seq or [128, 384]:
        for part in args.part or ("attention", "ffn", "layernorm", "layer"):
            model, feeds, want = build(part, args.batch, S, rng)
            sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
            got = sess.run(None, feeds)[0]
            err = np.abs(got - want).max() / np.abs(want).max()
            if err > 1e-3:
                print(f"onnxruntime bert_{part} S{S}: max rel err {err:.2e} FAILED", file=sys.stderr)
                sys.exit(3)
            print(f"bert_{part} B{args.batch} S{S} onnxruntime max rel err {err:.2e} OK", file=sys.stderr)
            sess.run(None, feeds)
            best = None
            for _ in range(args.rounds):  # the round with the lowest median, as bench_bert does
                times, start = [], time.perf_counter()
                while len(times) < 5 or time.perf_counter() - start < args.min_time:
                    t0 = time.perf_counter()
                    sess.run(None, feeds)
                    times.append((time.perf_counter() - t0) * 1e3)
                times.sort()
                n = len(times)
                med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
                if best is None or med < best["median_ms"]:
                    best = {"workload": f"bert_{part} B{args.batch} S{S}", "median_ms": med,
                            "min_ms": times[0], "max_ms": times[-1], "reps": n}
            records.append(best)
    json.dump(records, sys.stdout)


if __name__ == "__main__":
    main()
