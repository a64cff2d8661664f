"""This machine's peak compute and memory bandwidth, measured roughly, for rooflines.

Peak FLOP/s: the best of a few float32 matrix products of 1024^3 through numpy
(OpenBLAS, all cores): an *attainable* peak, below the theoretical FMA peak.
Bandwidth: the best of a few copies of a 256 MiB float32 array (read + write
bytes counted): attainable streaming bandwidth. Both take about a second and
are cached per process; pass numbers explicitly to the plots to skip them.
"""
from __future__ import annotations

import functools
import time

import numpy as np


def _best(f, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


@functools.lru_cache(maxsize=1)
def peak_gflops(n: int = 1024, reps: int = 3) -> float:
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    a @ a  # warm-up (thread pool)
    return 2.0 * n ** 3 / _best(lambda: a @ a, reps) / 1e9


@functools.lru_cache(maxsize=1)
def peak_gbs(mib: int = 256, reps: int = 3) -> float:
    src = np.ones(mib * 1024 * 1024 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    return 2.0 * src.nbytes / _best(lambda: np.copyto(dst, src), reps) / 1e9
