"""TVM MetaSchedule tuning of one workload, the "tvm-metaschedule" peer of bench_tune.

bench_tune compares PTO's autotuner with other tuners on the same computations
under the same trial budget. This helper defines each workload of
dsl/Workloads.cpp (plus column_sum and grouped_conv2d) in TVM TE, tunes it
with MetaSchedule's defaults (evolutionary search, XGBoost cost model) for
--trials measured candidates, compiles the best schedule, checks it against
an independent float64 numpy reference, times it, and writes one JSON object
to --json: timings, the tuning wall time and the best-so-far curve over the
trials, read in measurement order from MetaSchedule's JSON database.

Needs apache-tvm 0.27 (MetaSchedule at tvm.s_tir.meta_schedule) with
xgboost and cloudpickle. Exits 1 (still writing the JSON, ok=false) on any
failure.
"""
import argparse
import contextlib
import json
import logging
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import te  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402

TOLERANCE = 1e-4  # max relative error of the float32 result
FAILED_RUN_S = 1e9  # MetaSchedule records failed builds / runs with run_secs of 1e10
MAX_ERROR_CHARS = 4000

Sizes = dict[str, int]


# --- TE definitions -----------------------------------------------------------------------


def _f32(v: float) -> tvm.tirx.FloatImm:
    return tvm.tirx.const(v, "float32")


def _matmul(a: te.Tensor, b: te.Tensor, name: str) -> te.Tensor:
    """a [M, K] @ b [K, N]."""
    k = te.reduce_axis((0, a.shape[1]), name="k")
    return te.compute((a.shape[0], b.shape[1]), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=name)


def _linear(x: te.Tensor, w: te.Tensor, b: te.Tensor, name: str) -> te.Tensor:
    """x [S, In] @ w^T + b for w [Out, In]: a reduction stage, then the bias stage."""
    k = te.reduce_axis((0, x.shape[1]), name="k")
    mm = te.compute((x.shape[0], w.shape[0]), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name=name + "_mm")
    return te.compute(mm.shape, lambda i, j: mm[i, j] + b[j], name=name)


def _softmax(x: te.Tensor, name: str) -> te.Tensor:
    """Numerically stable softmax over the last dim of x [R, C]."""
    rows, cols = x.shape
    c = te.reduce_axis((0, cols), name="c")
    mx = te.compute((rows,), lambda i: te.max(x[i, c], axis=c), name=name + "_max")
    e = te.compute(x.shape, lambda i, j: te.exp(x[i, j] - mx[i]), name=name + "_exp")
    c2 = te.reduce_axis((0, cols), name="c2")
    s = te.compute((rows,), lambda i: te.sum(e[i, c2], axis=c2), name=name + "_sum")
    return te.compute(x.shape, lambda i, j: e[i, j] / s[i], name=name)


def _conv(x: te.Tensor, w: te.Tensor, groups: int, name: str) -> te.Tensor:
    """NCHW conv, stride 1, pad K // 2, weights [O, C / groups, K, K], no bias."""
    n, c, h, wd = (int(d) for d in x.shape)
    o, cg, k = int(w.shape[0]), int(w.shape[1]), int(w.shape[2])
    p, og = k // 2, o // groups
    xp = te.compute(
        (n, c, h + 2 * p, wd + 2 * p),
        lambda b, ci, y, z: te.if_then_else(
            te.all(y >= p, y < h + p, z >= p, z < wd + p), x[b, ci, y - p, z - p], _f32(0)),
        name=name + "_pad")
    rc = te.reduce_axis((0, cg), name="rc")
    ry = te.reduce_axis((0, k), name="ry")
    rx = te.reduce_axis((0, k), name="rx")
    return te.compute(
        (n, o, h, wd),
        lambda b, oc, y, z: te.sum(xp[b, oc // og * cg + rc, y + ry, z + rx] * w[oc, rc, ry, rx], axis=[rc, ry, rx]),
        name=name)


def define_matmul(s: Sizes) -> list[te.Tensor]:
    a = te.placeholder((s["M"], s["K"]), name="A")
    b = te.placeholder((s["K"], s["N"]), name="B")
    return [a, b, _matmul(a, b, "C")]


def define_mlp(s: Sizes) -> list[te.Tensor]:
    x = te.placeholder((s["S"], s["H"]), name="X")
    w1, b1 = te.placeholder((s["F"], s["H"]), name="W1"), te.placeholder((s["F"],), name="b1")
    w2, b2 = te.placeholder((s["H"], s["F"]), name="W2"), te.placeholder((s["H"],), name="b2")
    fc1 = _linear(x, w1, b1, "fc1")
    act = te.compute(  # exact GELU, as ops::gelu(x, false)
        fc1.shape, lambda i, j: _f32(0.5) * fc1[i, j] * (_f32(1) + te.erf(fc1[i, j] * _f32(math.sqrt(0.5)))),
        name="act")
    return [x, w1, b1, w2, b2, _linear(act, w2, b2, "fc2")]


def define_softmax(s: Sizes) -> list[te.Tensor]:
    x = te.placeholder((s["R"], s["C"]), name="X")
    return [x, _softmax(x, "Y")]


def define_layer_norm(s: Sizes) -> list[te.Tensor]:
    rows, cols = s["R"], s["C"]
    x = te.placeholder((rows, cols), name="X")
    gamma, beta = te.placeholder((cols,), name="gamma"), te.placeholder((cols,), name="beta")
    # Two-pass statistics; a reduction must be a stage's whole value, so the divisions by C come after.
    c = te.reduce_axis((0, cols), name="c")
    total = te.compute((rows,), lambda i: te.sum(x[i, c], axis=c), name="total")
    mean = te.compute((rows,), lambda i: total[i] / _f32(cols), name="mean")
    c2 = te.reduce_axis((0, cols), name="c2")
    sq = te.compute((rows,), lambda i: te.sum((x[i, c2] - mean[i]) * (x[i, c2] - mean[i]), axis=c2), name="sqdev")
    y = te.compute(
        (rows, cols),
        lambda i, j: (x[i, j] - mean[i]) / te.sqrt(sq[i] / _f32(cols) + _f32(1e-5)) * gamma[j] + beta[j], name="Y")
    return [x, gamma, beta, y]


def define_conv2d(s: Sizes) -> list[te.Tensor]:
    x = te.placeholder((s["N"], s["C"], s["H"], s["W"]), name="X")
    w = te.placeholder((s["O"], s["C"], 3, 3), name="Wt")
    b = te.placeholder((s["O"],), name="b")
    conv = _conv(x, w, 1, "conv")
    return [x, w, b, te.compute(conv.shape, lambda n, o, y, z: te.max(conv[n, o, y, z] + b[o], _f32(0)), name="Y")]


def define_attention(s: Sizes) -> list[te.Tensor]:
    q, k, v = (te.placeholder((s["S"], s["D"]), name=n) for n in "QKV")
    e = te.reduce_axis((0, s["D"]), name="e")
    scale = _f32(1 / math.sqrt(s["D"]))
    scores = te.compute((s["S"], s["S"]), lambda i, j: te.sum(q[i, e] * k[j, e] * scale, axis=e), name="scores")
    return [q, k, v, _matmul(_softmax(scores, "probs"), v, "O")]


def define_batched_matmul(s: Sizes) -> list[te.Tensor]:
    a = te.placeholder((s["Bt"], s["M"], s["K"]), name="A")
    b = te.placeholder((s["Bt"], s["K"], s["N"]), name="B")
    k = te.reduce_axis((0, s["K"]), name="k")
    c = te.compute((s["Bt"], s["M"], s["N"]), lambda t, i, j: te.sum(a[t, i, k] * b[t, k, j], axis=k), name="C")
    return [a, b, c]


def define_column_sum(s: Sizes) -> list[te.Tensor]:
    x = te.placeholder((s["R"], s["C"]), name="X")
    r = te.reduce_axis((0, s["R"]), name="r")
    return [x, te.compute((s["C"],), lambda j: te.sum(x[r, j], axis=r), name="Y")]


def define_grouped_conv2d(s: Sizes) -> list[te.Tensor]:
    g = s["G"]
    if g < 1 or s["C"] % g or s["O"] % g:
        raise ValueError(f"grouped_conv2d: G={g} must divide C={s['C']} and O={s['O']}")
    x = te.placeholder((s["N"], s["C"], s["H"], s["W"]), name="X")
    w = te.placeholder((s["O"], s["C"] // g, s["K"], s["K"]), name="Wt")
    b = te.placeholder((s["O"],), name="b")
    conv = _conv(x, w, g, "conv")
    return [x, w, b, te.compute(conv.shape, lambda n, o, y, z: conv[n, o, y, z] + b[o], name="Y")]


# --- float64 numpy references (inputs in the order of the definition's placeholders) -------


def ref_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ref_conv(x: np.ndarray, w: np.ndarray, groups: int) -> np.ndarray:
    n, _, h, wd = x.shape
    o, cg, k, _ = w.shape
    p = k // 2
    win = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))), (k, k), axis=(2, 3))
    out = np.einsum("ngchwij,gocij->ngohw", win.reshape(n, groups, cg, h, wd, k, k),
                    w.reshape(groups, o // groups, cg, k, k))
    return out.reshape(n, o, h, wd)


def ref_mlp(x: np.ndarray, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> np.ndarray:
    h = x @ w1.T + b1
    h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    return h @ w2.T + b2


def ref_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * gamma + beta


def ref_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    return ref_softmax(q @ k.T / math.sqrt(q.shape[1])) @ v


@dataclass(frozen=True)
class Workload:
    size_names: tuple[str, ...]
    define: Callable[[Sizes], list[te.Tensor]]  # placeholders..., output
    reference: Callable[..., np.ndarray]  # (sizes, *float64 inputs) -> float64 output


WORKLOADS: dict[str, Workload] = {
    "matmul": Workload(("M", "K", "N"), define_matmul, lambda s, a, b: a @ b),
    "mlp": Workload(("S", "H", "F"), define_mlp, lambda s, *xs: ref_mlp(*xs)),
    "softmax": Workload(("R", "C"), define_softmax, lambda s, x: ref_softmax(x)),
    "layer_norm": Workload(("R", "C"), define_layer_norm, lambda s, *xs: ref_layer_norm(*xs)),
    "conv2d": Workload(("N", "C", "H", "W", "O"), define_conv2d,
                       lambda s, x, w, b: np.maximum(ref_conv(x, w, 1) + b[:, None, None], 0)),
    "attention": Workload(("S", "D"), define_attention, lambda s, *xs: ref_attention(*xs)),
    "batched_matmul": Workload(("Bt", "M", "K", "N"), define_batched_matmul, lambda s, a, b: a @ b),
    "column_sum": Workload(("R", "C"), define_column_sum, lambda s, x: x.sum(0)),
    "grouped_conv2d": Workload(("N", "C", "H", "W", "O", "G", "K"), define_grouped_conv2d,
                               lambda s, x, w, b: ref_conv(x, w, s["G"]) + b[:, None, None]),
}


# --- target, tuning, checking, timing -------------------------------------------------------


def host_mcpu() -> str | None:
    """LLVM CPU name for this host; None leaves LLVM's generic default."""
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    if "GenuineIntel" in info and "amx_tile" in flags:
        return "sapphirerapids"
    if "AuthenticAMD" in info and "avx512f" in flags:
        return "znver4"
    cpu = tvm.target.codegen.llvm_get_system_cpu()
    if cpu and cpu != "generic":
        return cpu
    return "x86-64-v3" if {"avx2", "fma"} <= set(flags) else None


def make_target() -> tvm.target.Target:
    config: dict = {"kind": "llvm", "num-cores": os.cpu_count() or 1}
    mcpu = host_mcpu()
    if mcpu:
        config["mcpu"] = mcpu
    return tvm.target.Target(config)


def parse_sizes(kind: str, text: str) -> Sizes:
    sizes = json.loads(text)
    names = WORKLOADS[kind].size_names
    if not isinstance(sizes, dict) or set(sizes) != set(names):
        raise ValueError(f"{kind} needs sizes {{{', '.join(names)}}}, got {text}")
    if not all(isinstance(v, int) and v > 0 for v in sizes.values()):
        raise ValueError(f"sizes must be positive ints, got {text}")
    return {n: sizes[n] for n in names}


def tune(func: tvm.tirx.PrimFunc, target: tvm.target.Target, work_dir: Path, trials: int, seed: int) -> ms.Database:
    """MetaSchedule's tune_tir with its defaults; its log goes to work_dir/logs, warnings to stderr."""
    if (work_dir / "database_tuning_record.json").exists():
        raise ValueError(f"work dir {work_dir} already holds a tuning database")
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    np.random.seed(seed)  # the XGBoost model scores its first, untrained round with np.random
    with contextlib.redirect_stdout(sys.stderr):  # MetaSchedule's console handler binds sys.stdout
        return ms.tune_tir(func, target, str(work_dir), max_trials_global=trials,
                           num_trials_per_iter=min(64, trials), seed=seed)


def tuning_curve(work_dir: Path) -> list[float | None]:
    """Best-so-far latency (ms) after each measured trial; None before the first success."""
    best, curve = math.inf, []
    with open(work_dir / "database_tuning_record.json") as f:
        for line in f:
            run_secs = json.loads(line)[1][1] or []
            mean = sum(run_secs) / len(run_secs) if run_secs else math.inf
            if mean < FAILED_RUN_S:
                best = min(best, mean)
            curve.append(best * 1e3 if math.isfinite(best) else None)
    return curve


def trials_to_90(curve: list[float | None]) -> int | None:
    """1-based trial at which the best-so-far first is within 90% of the final best's speed."""
    if not curve or curve[-1] is None:
        return None
    return next(i for i, c in enumerate(curve, 1) if c is not None and c <= curve[-1] / 0.9)


def random_inputs(placeholders: list[te.Tensor], seed: int) -> list[np.ndarray]:
    """Uniform [-1, 1] float32 inputs; conv weights (Wt) scaled by 0.2."""
    rng = np.random.default_rng(seed)
    return [(rng.uniform(-1, 1, [int(d) for d in t.shape]) * (0.2 if t.op.name == "Wt" else 1)).astype(np.float32)
            for t in placeholders]


def time_kernel(run: tvm.runtime.Module, args: list, min_seconds: float, rounds: int) -> tuple[float, float, float]:
    """(median, min, max) ms over the repeats of the round with the lowest median."""
    dev = tvm.cpu()
    once = max(run.time_evaluator("main", dev, number=1, repeat=1)(*args).mean, 1e-9)
    per_round = min_seconds / rounds
    number = max(1, math.ceil(per_round / 5 / once))
    repeat = max(3, math.ceil(per_round / (number * once)))
    evaluator = run.time_evaluator("main", dev, number=number, repeat=repeat)
    best = None
    for _ in range(rounds):
        times = sorted(evaluator(*args).results)
        round_stats = (statistics.median(times), times[0], times[-1])
        if best is None or round_stats[0] < best[0]:
            best = round_stats
    return tuple(t * 1e3 for t in best)


def run_workload(args: argparse.Namespace, work_dir: Path, result: dict) -> None:
    """Tunes, checks and times; fills `result` as it goes and raises on failure."""
    workload = WORKLOADS[args.workload]
    sizes = parse_sizes(args.workload, args.sizes)
    result["sizes"] = sizes
    target = make_target()
    result["target"] = str(target)
    tensors = workload.define(sizes)
    func = te.create_prim_func(tensors)
    log(f"tuning {args.workload} {sizes} for {args.trials} trials on {target} in {work_dir}")
    start = time.perf_counter()
    database = tune(func, target, work_dir, args.trials, args.seed)
    result["tuning_s"] = time.perf_counter() - start
    curve = tuning_curve(work_dir)
    result.update(trials=len(curve), curve=curve, trials_to_90=trials_to_90(curve))
    log(f"tuned in {result['tuning_s']:.1f} s: {len(curve)} trials, best {curve[-1] if curve else None} ms, "
        f"90% at trial {result['trials_to_90']}")
    schedule = ms.tir_integration.compile_tir(database, func, target)
    if schedule is None:
        raise RuntimeError("MetaSchedule found no valid schedule")
    built = tvm.build(schedule.mod, target=target)
    inputs = random_inputs(tensors[:-1], args.seed)
    dev = tvm.cpu()
    out_shape = [int(d) for d in tensors[-1].shape]
    call_args = [tvm.runtime.tensor(a, dev) for a in inputs] + [tvm.runtime.empty(out_shape, "float32", dev)]
    built["main"](*call_args)
    want = workload.reference(sizes, *(a.astype(np.float64) for a in inputs))
    err = float(np.abs(call_args[-1].numpy() - want).max() / max(np.abs(want).max(), 1e-30))
    result["max_rel_error"] = err if math.isfinite(err) else None  # JSON has no NaN
    log(f"max rel error {err:.2e}")
    if not err <= TOLERANCE:
        raise RuntimeError(f"wrong result: max rel error {err:.3e} > {TOLERANCE}")
    result["median_ms"], result["min_ms"], result["max_ms"] = time_kernel(built, call_args, args.min_seconds, args.rounds)
    log(f"median {result['median_ms']:.4f} ms (min {result['min_ms']:.4f}, max {result['max_ms']:.4f})")
    result.update(ok=True, error="")


def log(msg: str) -> None:
    print(f"tvm_metaschedule: {msg}", file=sys.stderr, flush=True)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the kinds and their size names, then exit")
    ap.add_argument("--workload", choices=sorted(WORKLOADS))
    ap.add_argument("--sizes", help='JSON object of ints, e.g. \'{"M":1024,"K":1024,"N":1024}\'')
    ap.add_argument("--trials", type=int, help="MetaSchedule's max_trials_global")
    ap.add_argument("--json", type=Path, help="where to write the result object")
    ap.add_argument("--label", help="the result's workload name (default: the kind)")
    ap.add_argument("--work-dir", type=Path, help="MetaSchedule's work dir (default: a fresh temp dir, removed)")
    ap.add_argument("--min-seconds", type=float, default=0.5, help="timing time over all rounds")
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds; the one with the lowest median is kept")
    ap.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the search")
    args = ap.parse_args()
    if not args.list and None in (args.workload, args.sizes, args.trials, args.json):
        ap.error("--workload, --sizes, --trials and --json are required")
    if not args.list and (args.trials < 1 or args.rounds < 1 or args.min_seconds <= 0):
        ap.error("--trials and --rounds must be >= 1, --min-seconds > 0")
    return args


def main() -> int:
    args = parse_args()
    if args.list:
        for kind, workload in WORKLOADS.items():
            print(kind, " ".join(workload.size_names))
        return 0
    result: dict = {"impl": "tvm-metaschedule", "workload": args.label or args.workload, "kind": args.workload,
                    "sizes": {}, "target": "", "ok": False, "error": "", "median_ms": None, "min_ms": None,
                    "max_ms": None, "max_rel_error": None, "tuning_s": None, "trials": 0, "curve": [],
                    "trials_to_90": None}
    try:
        with contextlib.ExitStack() as stack:
            work_dir = args.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tvm_ms_")))
            work_dir.mkdir(parents=True, exist_ok=True)
            run_workload(args, work_dir, result)
    except Exception as e:  # noqa: BLE001 -- any failure is reported in the JSON
        result["error"] = f"{type(e).__name__}: {e}"[:MAX_ERROR_CHARS]
        log(f"FAILED: {result['error']}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
