"""Whole ONNX models end to end: PTO (pypto.onnx: import, default schedules,
compiled in parts) against ONNX Runtime (2 threads, all graph optimizations)
on the same .onnx bytes, in one process, side by side.

    build/bin/bench_models [--json FILE] [--only resnet50,bert_base] [--rounds 3] [--min-seconds 0.5]
                           [--impls pto,onnxruntime] [--no-reference]

Models: the nine light models of the ONNX backend suite (real architectures
and input sizes from the onnx wheel, weights built by ConstantOfShape, so
one value per tensor: ResNet-50 scores every class the same), resnet50_random
(the same network, random weights, its logits the output), a
BERT-base encoder (12 layers, sequence 128) and a GPT-2 decoder block
(sequence 128, causal) written with onnx.helper at real sizes, and
MobileNetV2 (224 x 224) with random weights. Every PTO output is checked
against ONNX Runtime's and, unless --no-reference, onnx's reference
evaluator's (float64 inputs and weights: the reference), before timing.

Timing: per round, calls until --min-seconds have passed (at least 3) after a
warm-up call, the rounds of the two implementations interleaved; the median of
the round medians, min and max over all calls.
Prints a table (x_ort = ONNX Runtime time / PTO time, > 1 is PTO faster) and
writes the bench record list with --json (workload, impl, median_ms, min_ms,
max_ms, plus compile_s and max_rel_err for pto).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
         "vgg19", "zfnet512"]


# ---- models ----------------------------------------------------------------------------------------------------

def light_model(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    m = onnx.load(os.path.join(d, f"light_{name}.onnx"))
    init = {t.name for t in m.graph.initializer}
    feeds = {}
    rng = np.random.default_rng(0)
    for i in m.graph.input:
        if i.name in init:
            continue
        shape = [x.dim_value if x.dim_value > 0 else 1 for x in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.random(shape, dtype=np.float32)
    return m, feeds


def with_random_weights(m: onnx.ModelProto, rng: np.random.Generator) -> onnx.ModelProto:
    """The suite's caffe2 models (ResNet-50) build every weight with ConstantOfShape (one value
    each, so every class gets the same score): each becomes a random initializer
    of its shape, scaled as He initialization (batch-norm variances positive)."""
    shapes = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    keep, inits = [], []
    for n in m.graph.node:
        if n.op_type != "ConstantOfShape":
            keep.append(n)
            continue
        shape = tuple(int(d) for d in shapes[n.input[0]])
        out = n.output[0]
        if out.endswith("_riv_0"):
            a = rng.uniform(0.5, 1.5, shape)
        elif out.endswith("_bn_s_0"):
            a = rng.uniform(0.5, 1.0, shape)
        elif out.endswith("_w_0"):
            a = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
        else:
            a = rng.standard_normal(shape) * 0.1
        inits.append(numpy_helper.from_array(a.astype(np.float32), out))
    # The logits are the output (random weights saturate the softmax to one-hot).
    softmax = [n for n in keep if n.op_type == "Softmax"][-1]
    keep.remove(softmax)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    m.graph.initializer.extend(inits)
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info(softmax.input[0], TensorProto.FLOAT, [1, 1000]))
    return m


class Graph:
    """A small builder over onnx.helper: nodes, random initializers, unique names."""

    def __init__(self, seed: int):
        self.nodes, self.inits, self.n = [], [], 0
        self.rng = np.random.default_rng(seed)

    def name(self, p: str) -> str:
        self.n += 1
        return f"{p}{self.n}"

    def weight(self, shape, scale=None) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        n = self.name("w")
        self.inits.append(numpy_helper.from_array(self.rng.uniform(-s, s, shape).astype(np.float32), n))
        return n

    def const(self, values, dtype=np.int64) -> str:
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), n))
        return n

    def op(self, kind: str, inputs, **attrs) -> str:
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def model(self, name, inputs, output, out_shape) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, name, inputs, [helper.make_tensor_value_info(output, TensorProto.FLOAT,
                                                                                         out_shape)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m


def _linear(g: Graph, x: str, fin: int, fout: int) -> str:
    return g.op("Add", [g.op("MatMul", [x, g.weight([fin, fout])]), g.weight([fout], 0.02)])


def _layer_norm(g: Graph, x: str, h: int) -> str:
    return g.op("LayerNormalization", [x, g.weight([h], 1.0), g.weight([h], 0.02)], axis=-1, epsilon=1e-5)


def _attention(g: Graph, x: str, s: int, h: int, heads: int, causal: bool) -> str:
    d = h // heads
    split = g.const([1, s, heads, d])

    def heads_of(t, perm):
        return g.op("Transpose", [g.op("Reshape", [t, split])], perm=perm)

    q = heads_of(_linear(g, x, h, h), [0, 2, 1, 3])
    k = heads_of(_linear(g, x, h, h), [0, 2, 3, 1])
    v = heads_of(_linear(g, x, h, h), [0, 2, 1, 3])
    scores = g.op("Mul", [g.op("MatMul", [q, k]), g.const(np.float32(1 / np.sqrt(d)), np.float32)])
    if causal:
        mask = np.triu(np.full((s, s), -1e9, np.float32), 1)
        scores = g.op("Add", [scores, g.const(mask, np.float32)])
    probs = g.op("Softmax", [scores], axis=-1)
    ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), g.const([1, s, h])])
    return _linear(g, ctx, h, h)


def _gelu(g: Graph, x: str) -> str:  # the erf form exporters emit
    e = g.op("Erf", [g.op("Div", [x, g.const(np.float32(np.sqrt(2)), np.float32)])])
    return g.op("Mul", [g.op("Mul", [x, g.op("Add", [e, g.const(np.float32(1), np.float32)])]),
                        g.const(np.float32(0.5), np.float32)])


def bert_base(layers: int = 12, s: int = 128, h: int = 768, heads: int = 12, ff: int = 3072):
    g = Graph(1)
    x = "x"
    for _ in range(layers):  # post-LayerNorm, as BERT
        x = _layer_norm(g, g.op("Add", [x, _attention(g, x, s, h, heads, causal=False)]), h)
        x = _layer_norm(g, g.op("Add", [x, _linear(g, _gelu(g, _linear(g, x, h, ff)), ff, h)]), h)
    m = g.model("bert_base", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, h])], x, [1, s, h])
    return m, {"x": np.random.default_rng(2).standard_normal((1, s, h)).astype(np.float32)}


def gpt2_block(s: int = 128, h: int = 768, heads: int = 12):
    g = Graph(3)
    x = g.op("Add", ["x", _attention(g, _layer_norm(g, "x", h), s, h, heads, causal=True)])  # pre-LayerNorm, as GPT-2
    y = g.op("Add", [x, _linear(g, _gelu(g, _linear(g, _layer_norm(g, x, h), h, 4 * h)), 4 * h, h)])
    m = g.model("gpt2_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, h])], y, [1, s, h])
    return m, {"x": np.random.default_rng(4).standard_normal((1, s, h)).astype(np.float32)}


def mobilenet_v2(size: int = 224):
    g = Graph(5)

    def conv(x, cin, cout, k, stride, groups=1, relu6=True):
        y = g.op("Conv", [x, g.weight([cout, cin // groups, k, k], np.sqrt(3.0 / (cin // groups * k * k))),
                          g.weight([cout], 0.02)],
                 kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=groups)
        return g.op("Clip", [y, g.const(np.float32(0), np.float32), g.const(np.float32(6), np.float32)]) if relu6 else y

    x, c = conv("x", 3, 32, 3, 2), 32
    for t, cout, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                          (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            y = conv(x, c, c * t, 1, 1) if t != 1 else x
            y = conv(y, c * t, c * t, 3, stride, groups=c * t)
            y = conv(y, c * t, cout, 1, 1, relu6=False)
            x = g.op("Add", [x, y]) if stride == 1 and c == cout else y
            c = cout
    x = g.op("Flatten", [g.op("GlobalAveragePool", [conv(x, c, 1280, 1, 1)])])
    y = g.op("Gemm", [x, g.weight([1000, 1280]), g.weight([1000], 0.02)], transB=1)
    m = g.model("mobilenet_v2", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])], y, [1, 1000])
    return m, {"x": np.random.default_rng(6).random((1, 3, size, size), dtype=np.float32)}


def models() -> dict:
    ms = {"bert_base": bert_base, "gpt2_block": gpt2_block, "mobilenet_v2": mobilenet_v2}
    for n in LIGHT:
        ms[n] = (lambda n=n: light_model(n))

    def resnet50_random():  # the same ResNet-50 with random weights: its logits differ per class
        m, feeds = light_model("resnet50")
        return with_random_weights(m, np.random.default_rng(1)), feeds

    ms["resnet50_random"] = resnet50_random
    return ms


# ---- running ---------------------------------------------------------------------------------------------------

def time_calls(fns: dict, rounds: int, min_seconds: float) -> dict:
    """Per implementation (name -> call): the median of its round medians, min and max over
    all calls. The rounds interleave the implementations (A, B, A, B, ...), so that a drift of
    the machine's speed over the minutes a model takes falls on both alike."""
    for fn in fns.values():
        fn()  # warm-up
    medians = {k: [] for k in fns}
    all_t = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            ts, start = [], time.perf_counter()
            while len(ts) < 3 or time.perf_counter() - start < min_seconds:
                t0 = time.perf_counter()
                fn()
                ts.append((time.perf_counter() - t0) * 1e3)
            medians[k].append(statistics.median(ts))
            all_t[k] += ts
    return {k: (statistics.median(medians[k]), min(all_t[k]), max(all_t[k])) for k in fns}


def rel_err(got: np.ndarray, want: np.ndarray) -> float:
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / max(np.max(np.abs(want)), 1e-30))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default="")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--impls", default="pto,onnxruntime")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-seconds", type=float, default=0.5)
    ap.add_argument("--no-reference", action="store_true", help="skip onnx's reference evaluator (slow on big models)")
    args = ap.parse_args()
    all_models = models()
    names = [n for n in args.only.split(",") if n] or list(all_models)
    unknown = [n for n in names if n not in all_models]
    if unknown:
        print(f"bench_models: unknown model(s) {unknown}; models: {', '.join(all_models)}", file=sys.stderr)
        return 2
    impls = [i for i in args.impls.split(",") if i]

    import onnxruntime as ort
    import pypto.onnx

    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    recs, failed = [], []
    for k, name in enumerate(names):
        m, feeds = all_models[name]()
        data = m.SerializeToString()
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
        print(f"[{k + 1}/{len(names)}] {name}: {len(m.graph.node)} nodes", flush=True)
        calls, pto_rec = {}, None
        if "onnxruntime" in impls:
            calls["onnxruntime"] = lambda: sess.run(None, feeds)
        if "pto" in impls:
            t0 = time.perf_counter()
            model = pypto.onnx.load(data)
            got = model(**feeds)
            compile_s = time.perf_counter() - t0
            err_ort = max(rel_err(g, w) for g, w in zip(got, want))
            err_ref = None
            if not args.no_reference:
                err_ref = max(rel_err(g, w) for g, w in zip(got, pypto.onnx.reference(m, feeds)))
            # f32 through up to ~100 layers: 1e-3 of the output's scale (a wrong kernel is O(1) off).
            ok = err_ort <= 1e-3 and (err_ref is None or err_ref <= 1e-3)
            if not ok:
                failed.append(name)
            calls["pto"] = lambda: model(**feeds)
            pto_rec = {"compile_s": compile_s, "parts": len(next(iter(model._by_shape.values())).parts),
                       "max_rel_err_vs_ort": err_ort, "max_rel_err_vs_reference": err_ref}
            print(f"    pto compiled in {compile_s:.1f} s; max rel err {err_ort:.2g} vs ORT"
                  + (f", {err_ref:.2g} vs reference" if err_ref is not None else "") + ("" if ok else "  WRONG"),
                  flush=True)
        for impl, (med, lo, hi) in time_calls(calls, args.rounds, args.min_seconds).items():
            recs.append({"workload": name, "impl": impl, "median_ms": med, "min_ms": lo, "max_ms": hi,
                         **(pto_rec if impl == "pto" else {})})
            print(f"    {impl} {med:.3f} ms", flush=True)

    print(f"\n{'model':<16} {'pto ms':>10} {'ort ms':>10} {'x_ort':>7} {'compile s':>10} {'rel err':>9}")
    by = {}
    for r in recs:
        by.setdefault(r["workload"], {})[r["impl"]] = r
    for name in names:
        p, o = by.get(name, {}).get("pto"), by.get(name, {}).get("onnxruntime")
        ratio = o["median_ms"] / p["median_ms"] if p and o else None
        print(f"{name:<16} {p['median_ms'] if p else float('nan'):>10.3f} {o['median_ms'] if o else float('nan'):>10.3f} "
              f"{ratio if ratio else float('nan'):>7.2f} {p['compile_s'] if p else float('nan'):>10.1f} "
              f"{p['max_rel_err_vs_ort'] if p else float('nan'):>9.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(recs, f, indent=1)
    if failed:
        print(f"bench_models: outputs differ from the references: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
