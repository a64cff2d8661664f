"""ONNX Runtime timings of ResNet-50 conv layers (Conv + bias + Relu), for bench_resnet50.

The layer table mirrors dsl/models/ResNet.cpp. Each layer is checked on sampled
points against float64 numpy before timing; prints JSON records on stdout.
"""
import argparse
import json
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

LAYERS = [  # name, cin, cout, kernel, stride, pad, hw
    ("conv1_7x7_s2", 3, 64, 7, 2, 3, 224), ("l1_1x1_64_64", 64, 64, 1, 1, 0, 56), ("l1_3x3_64", 64, 64, 3, 1, 1, 56),
    ("l1_1x1_64_256", 64, 256, 1, 1, 0, 56), ("l1_1x1_256_64", 256, 64, 1, 1, 0, 56),
    ("l2_1x1_256_128", 256, 128, 1, 1, 0, 56), ("l2_3x3_128_s2", 128, 128, 3, 2, 1, 56),
    ("l2_1x1_128_512", 128, 512, 1, 1, 0, 28), ("l2_ds_256_512_s2", 256, 512, 1, 2, 0, 56),
    ("l2_1x1_512_128", 512, 128, 1, 1, 0, 28), ("l2_3x3_128", 128, 128, 3, 1, 1, 28),
    ("l3_1x1_512_256", 512, 256, 1, 1, 0, 28), ("l3_3x3_256_s2", 256, 256, 3, 2, 1, 28),
    ("l3_1x1_256_1024", 256, 1024, 1, 1, 0, 14), ("l3_ds_512_1024_s2", 512, 1024, 1, 2, 0, 28),
    ("l3_1x1_1024_256", 1024, 256, 1, 1, 0, 14), ("l3_3x3_256", 256, 256, 3, 1, 1, 14),
    ("l4_1x1_1024_512", 1024, 512, 1, 1, 0, 14), ("l4_3x3_512_s2", 512, 512, 3, 2, 1, 14),
    ("l4_1x1_512_2048", 512, 2048, 1, 1, 0, 7), ("l4_ds_1024_2048_s2", 1024, 2048, 1, 2, 0, 14),
    ("l4_1x1_2048_512", 2048, 512, 1, 1, 0, 7), ("l4_3x3_512", 512, 512, 3, 1, 1, 7),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="")
    ap.add_argument("--min-time", type=float, default=0.2)
    args = ap.parse_args()
    idx = [int(i) for i in args.layers.split(",")] if args.layers else range(len(LAYERS))
    rng = np.random.default_rng(1)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    opts.inter_op_num_threads = 1
    records = []
    for li in idx:
        name, cin, cout, k, s, p, hw = LAYERS[li]
        x = rng.uniform(-1, 1, (1, cin, hw, hw)).astype(np.float32)
        w = rng.uniform(-0.1, 0.1, (cout, cin, k, k)).astype(np.float32)
        b = rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        o = (hw + 2 * p - k) // s + 1
        conv = helper.make_node("Conv", ["X", "W", "B"], ["C"], kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p])
        relu = helper.make_node("Relu", ["C"], ["Y"])
        g = helper.make_graph([conv, relu], name, [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, cout, o, o])],
                              [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        y = sess.run(None, {"X": x})[0]
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
        err, scale = 0.0, 1e-30
        for _ in range(200):
            co, yy, xx = rng.integers(cout), rng.integers(o), rng.integers(o)
            patch = xp[0, :, yy * s:yy * s + k, xx * s:xx * s + k]
            want = max(0.0, float((patch * w[co].astype(np.float64)).sum() + b[co]))
            err, scale = max(err, abs(want - y[0, co, yy, xx])), max(scale, abs(want))
        if err / scale > 1e-4:
            print(f"onnxruntime layer {li}: sampled rel err {err / scale:.2e} FAILED", file=sys.stderr)
            sys.exit(3)
        times, start = [], time.perf_counter()
        while len(times) < 5 or time.perf_counter() - start < args.min_time:
            t0 = time.perf_counter()
            sess.run(None, {"X": x})
            times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        n = len(times)
        med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
        records.append({"layer": li, "median_ms": med, "min_ms": times[0], "max_ms": times[-1], "reps": n})
    json.dump(records, sys.stdout)


if __name__ == "__main__":
    main()
