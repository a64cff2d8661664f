"""bench_suite: PTO's default schedules on programs nobody tuned for, next to the peers.

    scripts/bench_suite.sh [--json FILE] [--plot FILE.png] [--only a,b] [--rounds 3] [--min-seconds 0.2]
                            [--heldout | --random N --seed S]

For every workload in workloads.py, in one process and on the same inputs:
  pto-default   `pypto.kernel(fn, dynamic=False)`: every size static;
  pto-dynamic   `pypto.kernel(fn)` (the default: every dim other than 1 symbolic),
                compiled once and run at this size;
  onnxruntime   the same computation as an ONNX graph (all tensors graph
                inputs, as PTO's are), intra_op_num_threads = the cores PTO uses;
  numpy         the same numpy expression on float32 (OpenBLAS for matmuls);
  onednn        the oneDNN primitives a user of it would call (apps/suite/onednn_peer.cpp:
                matmul, convolution, pooling, softmax, layer norm, reduction,
                eltwise / binary with post-ops, reorder; attention as matmul +
                softmax + matmul), on the same cores; like the others it gets
                every tensor as an input, so reorders into the layouts it
                prefers run in each call (for convolutions the faster of plain
                NCHW and blocked layouts is kept). The record's "onednn_impl"
                names the kernels it chose.
Every implementation is first checked against the float64 numpy reference:
max |out - ref| / max |ref| <= 1e-4 (float32 rounding of reductions up to a
few 10^4 terms of values in [-1, 1] stays near sqrt(n) * 6e-8 < 2e-5; 1e-4
leaves room for re-association and exp/erf approximations, and still fails on
any wrong index or missing term). A failing implementation is reported and not
timed; the run exits non-zero.

Timing: PTO kernels and oneDNN through the same C++ timing loop
(backends/Timing.h, no Python in the loop); ONNX Runtime and numpy through a
Python loop around their call (what a user of those libraries pays; ONNX
Runtime's `run` adds ~5-10 us per call, numpy's dispatch ~1 us). Rounds interleave the implementations; a record's
median is the median of the round medians, min and max over all rounds.
Output: a table with PTO / best peer per workload, the geometric means, and
with --json the bench record list (workload, impl, median_ms, min_ms, max_ms,
gflops), the contract of apps/plot_bench.py.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import HELDOUT, WORKLOADS, Workload, random_workloads  # noqa: E402

import pypto  # noqa: E402

TOL = 1e-4
PEERS = ("onnxruntime", "numpy", "onednn")


def onednn_module(threads: int) -> Any:
    """The _onednn_peer extension (built with PTO into build/python), on `threads` cores."""
    import _onednn_peer
    _onednn_peer.set_threads(threads)
    return _onednn_peer


def inputs_for(w: Workload, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for i, s in enumerate(w.shapes):
        sc = w.scale[i] if i < len(w.scale) else 1.0
        out.append(rng.uniform(-sc, sc, s).astype(np.float32))
    return out


def rel_error(got: np.ndarray, ref: np.ndarray) -> float:
    got = np.asarray(got, dtype=np.float64).reshape(ref.shape) if got.size == ref.size else None
    if got is None:
        return math.inf
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    both_inf = np.isinf(ref) & (got == ref)
    d = np.where(both_inf, 0.0, np.abs(got - ref))
    return float(np.max(d)) / scale if d.size else 0.0


def time_python(f: Callable[[], Any], min_seconds: float, min_reps: int = 5) -> tuple[float, float, float]:
    f()  # warm-up
    ts = []
    start = time.perf_counter()
    while len(ts) < min_reps or time.perf_counter() - start < min_seconds:
        t0 = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts)), min(ts), max(ts)


def ort_session(w: Workload, arrays: list[np.ndarray], out_shape: tuple[int, ...], threads: int) -> Any:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
    ins = [helper.make_tensor_value_info(f"X{i}", TensorProto.FLOAT, list(a.shape)) for i, a in enumerate(arrays)]
    out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, list(out_shape))
    g = helper.make_graph(w.onnx(), w.name, ins, [out])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", w.opset)] +
                          [helper.make_opsetid(d, v) for d, v in w.domains])
    m.ir_version = min(m.ir_version, 10)
    onnx.checker.check_model(m)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {f"X{i}": a for i, a in enumerate(arrays)}
    return lambda: sess.run(None, feed)[0]


def run_workload(w: Workload, args: argparse.Namespace, threads: int) -> tuple[list[dict], list[str]]:
    rng = np.random.default_rng(1)
    arrays = inputs_for(w, rng)
    ref = w.reference(*[a.astype(np.float64) for a in arrays])
    impls: dict[str, tuple[str, Any]] = {}  # impl -> (kind, callable or kernel)
    problems = []
    static = pypto.kernel(w.pto, dynamic=False, name=w.name)
    dynamic = pypto.kernel(w.pto, name=w.name + "_dyn")
    impls["pto-default"] = ("pto", static)
    impls["pto-dynamic"] = ("pto", dynamic)
    if w.onnx is not None:
        try:
            impls["onnxruntime"] = ("py", ort_session(w, arrays, ref.shape, threads))
        except Exception as e:  # noqa: BLE001 - a peer that cannot run this graph is reported, not fatal
            problems.append(f"{w.name}: onnxruntime: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
    if w.ref is not None:
        impls["numpy"] = ("py", lambda: w.ref(*arrays))
    if w.onednn is not None:
        try:
            impls["onednn"] = ("onednn", w.onednn(onednn_module(threads), *arrays))
        except Exception as e:  # noqa: BLE001 - reported; counts as a failure below
            problems.append(f"{w.name}: onednn failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    # Check first.
    for impl, (kind, f) in list(impls.items()):
        try:
            got = f(*arrays) if kind == "pto" else f.run() if kind == "onednn" else f()
        except Exception as e:  # noqa: BLE001
            problems.append(f"{w.name}: {impl} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            del impls[impl]
            continue
        err = rel_error(got, ref)
        if not err <= TOL:
            problems.append(f"{w.name}: {impl} is wrong: max rel error {err:.3g} > {TOL}")
            del impls[impl]
    notes = []
    if "pto-dynamic" in impls and dynamic._needs_static:
        notes.append("pto-dynamic specialized per shape (the program needs static sizes)")
    elif "pto-dynamic" in impls and dynamic.cache_info["static_variants"]:
        notes.append("pto-dynamic ran a static variant (sizes below its symbolic kernel's tiles)")
    samples: dict[str, list[tuple[float, float, float]]] = {k: [] for k in impls}
    for _ in range(args.rounds):
        for impl, (kind, f) in impls.items():
            # ONNX Runtime's and OpenBLAS's worker threads spin for a while after
            # a call returns (OpenBLAS: 2^28 cycles, ~0.1 s); on 2 cores that
            # spinning would be charged to the implementation timed next, so let
            # them go idle first. With 0.05 s, the static kernel timed after
            # numpy's sgemm ran 1.7x the same kernel timed after another PTO one.
            time.sleep(args.settle)
            if kind == "pto":
                t = f.time(*arrays, min_seconds=args.min_seconds)
                samples[impl].append((t.median_ms, t.min_ms, t.max_ms))
            elif kind == "onednn":
                samples[impl].append(f.time(args.min_seconds))
            else:
                samples[impl].append(time_python(f, args.min_seconds))
    recs = []
    for impl, ss in samples.items():
        med = float(np.median([s[0] for s in ss]))
        recs.append({"workload": w.name, "impl": impl, "median_ms": med, "min_ms": min(s[1] for s in ss),
                     "max_ms": max(s[2] for s in ss), "gflops": w.flops / (med * 1e6) if w.flops else None,
                     "class": w.cls, "model": w.model, "shapes": [list(s) for s in w.shapes]})
        if impl == "onednn":
            recs[-1]["onednn_impl"] = impls[impl][1].impl
    return recs, problems + [f"{w.name}: {n}" for n in notes]


def summarize(recs: list[dict]) -> tuple[str, dict[str, float]]:
    by = {}
    for r in recs:
        by.setdefault(r["workload"], {})[r["impl"]] = r
    lines = [f"{'workload':32} {'class':24} {'pto-default':>11} {'pto-dynamic':>11} {'onnxruntime':>11} "
             f"{'numpy':>9} {'onednn':>9} {'best peer':>11} {'x best':>7} {'dyn/st':>7}",
             "  (median ms; x best = best peer time / PTO default time, > 1 is PTO faster)"]
    vs_peer, dyn = [], []
    for name, d in by.items():
        def ms(i: str) -> str:
            return f"{d[i]['median_ms']:.4g}" if i in d else "-"
        peers = [d[p]["median_ms"] for p in PEERS if p in d]
        st = d.get("pto-default")
        ratio = min(peers) / st["median_ms"] if peers and st else None
        dr = d["pto-dynamic"]["median_ms"] / st["median_ms"] if st and "pto-dynamic" in d else None
        if ratio:
            vs_peer.append(ratio)
        if dr:
            dyn.append(dr)
        best = min((p for p in PEERS if p in d), key=lambda p: d[p]["median_ms"], default="-")
        cls = next(iter(d.values()))["class"]
        lines.append(f"{name:32} {cls:24} {ms('pto-default'):>11} {ms('pto-dynamic'):>11} {ms('onnxruntime'):>11} "
                     f"{ms('numpy'):>9} {ms('onednn'):>9} {best:>11} {f'{ratio:.2f}' if ratio else '-':>7} "
                     f"{f'{dr:.2f}' if dr else '-':>7}")
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")  # noqa: E731
    summary = {"geomean_vs_best_peer": g(vs_peer), "min_vs_best_peer": min(vs_peer, default=float("nan")),
               "below_0.8": sum(r < 0.8 for r in vs_peer), "workloads": len(by),
               "geomean_dynamic_over_static": g(dyn)}
    lines.append("")
    lines.append(f"PTO default vs best peer: geometric mean {summary['geomean_vs_best_peer']:.3f}x, "
                 f"min {summary['min_vs_best_peer']:.3f}x, {summary['below_0.8']} of {len(vs_peer)} below 0.8x")
    lines.append(f"pto-dynamic / pto-default time: geometric mean {summary['geomean_dynamic_over_static']:.3f}")
    return "\n".join(lines), summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="", help="write the bench records (and a summary record) as JSON")
    ap.add_argument("--plot", default="", help="write a bar chart (PTO / best peer per workload) as PNG")
    ap.add_argument("--only", default="", help="comma-separated workload names (substrings)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-seconds", type=float, default=0.2)
    ap.add_argument("--settle", type=float, default=0.3,
                    help="seconds between implementations, for the peers' spinning threads to go idle")
    ap.add_argument("--list", action="store_true", help="print the workloads and exit")
    ap.add_argument("--heldout", action="store_true",
                    help="the held-out shapes instead (workloads.HELDOUT: sizes no rule was measured on)")
    ap.add_argument("--random", type=int, default=0, metavar="N",
                    help="N workloads of random classes and shapes instead (workloads.random_workloads)")
    ap.add_argument("--seed", type=int, default=0, help="the --random draw (the same seed, the same shapes)")
    args = ap.parse_args()
    pool = random_workloads(args.random, args.seed) if args.random else HELDOUT if args.heldout else WORKLOADS
    ws = [w for w in pool if not args.only or any(s in w.name for s in args.only.split(","))]
    if args.list:
        for w in ws:
            print(f"{w.name:32} {w.cls:24} {w.model} {w.shapes}")
        return 0
    threads = len(os.sched_getaffinity(0))
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    import onnxruntime
    print(f"bench_suite: {len(ws)} workloads, {threads} threads, {args.rounds} rounds x {args.min_seconds} s; "
          f"{cpu}; onnxruntime {onnxruntime.__version__}, numpy {np.__version__}, "
          f"oneDNN {onednn_module(threads).version()}", flush=True)
    recs, problems = [], []
    for i, w in enumerate(ws):
        t0 = time.perf_counter()
        r, p = run_workload(w, args, threads)
        recs += r
        problems += p
        print(f"[{i + 1}/{len(ws)}] {w.name}: " + ", ".join(f"{x['impl']} {x['median_ms']:.4g} ms" for x in r) +
              f"  ({time.perf_counter() - t0:.0f} s)", flush=True)
    table, summary = summarize(recs)
    print("\n" + table)
    for p in problems:
        print("note:" if "specialized" in p or "static variant" in p or "onnxruntime:" in p else "FAIL:", p)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(recs, f, indent=1)
        with open(os.path.splitext(args.json)[0] + ".summary.json", "w") as f:
            json.dump(summary, f, indent=1)
    if args.plot:
        plot(recs, args.plot)
    return 1 if any(not ("specialized" in p or "static variant" in p or "onnxruntime:" in p) for p in problems) else 0


def plot(recs: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by = {}
    for r in recs:
        by.setdefault(r["workload"], {})[r["impl"]] = r["median_ms"]
    names = [n for n, d in by.items() if "pto-default" in d and any(p in d for p in PEERS)]
    st = [min(by[n][p] for p in PEERS if p in by[n]) / by[n]["pto-default"] for n in names]
    dy = [min(by[n][p] for p in PEERS if p in by[n]) / by[n].get("pto-dynamic", math.inf) for n in names]
    fig, ax = plt.subplots(figsize=(max(8, 0.32 * len(names)), 4.5))
    x = np.arange(len(names))
    ax.bar(x - 0.2, st, 0.4, label="pto-default (static)")
    ax.bar(x + 0.2, dy, 0.4, label="pto-dynamic")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.axhline(0.8, color="r", lw=0.6, ls="--")
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("best peer time / PTO time (>1: PTO faster)")
    ax.set_title("bench_suite: PTO defaults vs the best of ONNX Runtime / numpy / oneDNN")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
