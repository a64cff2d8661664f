"""The report's example kernel with its default (dynamic) signature vs numpy's `a @ b`.

    scripts/bench_suite.sh is the wide benchmark; this one answers one question:
    PYTHONPATH=python:build/python .venv/bin/python apps/suite/dynamic_matmul.py [--sizes 512,1000,2048]

    @pypto.kernel
    def matmul(A, B): return A @ B      # every dim symbolic: one compiled kernel for all sizes

Checked against float64 first; then PTO (C++ timing loop) and numpy (Python loop,
OpenBLAS on all cores) interleaved over rounds; medians of the round medians.
"""
import argparse
import time

import numpy as np

import pypto


@pypto.kernel
def matmul(A, B):
    return A @ B


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="512,1000,2048")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'n':>6} {'pto-dynamic ms':>15} {'numpy ms':>10} {'pto/numpy':>10}")
    for n in map(int, args.sizes.split(",")):
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        err = np.abs(matmul(a, b) - ref).max() / np.abs(ref).max()
        assert err < 1e-5, err
        pto, npy = [], []
        for _ in range(args.rounds):
            # OpenBLAS's threads spin ~0.1 s after a call: let them go idle
            # before timing the other side (bench_suite's --settle).
            time.sleep(0.3)
            pto.append(matmul.time(a, b, min_seconds=0.3).median_ms)
            time.sleep(0.3)
            ts = []
            t_end = time.perf_counter() + 0.3
            while time.perf_counter() < t_end or len(ts) < 3:
                t0 = time.perf_counter()
                a @ b
                ts.append((time.perf_counter() - t0) * 1e3)
            npy.append(float(np.median(ts)))
        p, q = float(np.median(pto)), float(np.median(npy))
        print(f"{n:>6} {p:>15.3f} {q:>10.3f} {p / q:>10.2f}", flush=True)
    info = matmul.cache_info
    print(f"compiled kernels: {info['compiled']} ({info['static_variants']} static variants for sizes below the "
          f"symbolic kernel's tiles)")


if __name__ == "__main__":
    main()
