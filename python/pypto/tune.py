"""`kernel.tune(...)`: the C++ autotuner on one call's static shapes.

The search is the one of `pto tune` (autotuner/, bound as `_pto.tune`): its
strategies, worker processes that check every candidate against the float64
plain schedule, and the SQLite tuning database (a rerun resumes). The tuner
measures concrete sizes, so the signature is specialized to these shapes (as
for ops that need static sizes) and the best schedule is installed there.
Python only translates the result and draws the progress bar, which the C++
tuner drives through a per-trial callback.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._ext import _pto
from .schedule import Schedule


@dataclass
class Trial:
    index: int
    ms: float | None           # median; None when rejected
    rel_error: float | None
    status: str                # the C++ TrialStatus: "ok", "compile-error", "wrong-result", ...
    best_ms: float | None      # best median so far (the tuning curve)
    schedule: str              # JSON


@dataclass
class TuneResult:
    trials: list[Trial] = field(default_factory=list)
    best_schedule: Schedule | None = None
    baseline_ms: float | None = None   # the default schedule's trial
    best_ms: float | None = None       # the picked trial's median in its worker
    # The picked trial and the default timed again side by side after the search
    # (None when there was nothing to confirm): the pick is the faster there.
    confirmed_ms: float | None = None
    confirmed_default_ms: float | None = None
    flops: float = 0.0
    # The tuning database's records (dicts: index, strategy, status, error,
    # median/min/max_ms, reps, max_rel_error, compile_s, schedule), for tables and plots.
    records: list[dict] = field(default_factory=list)
    db: str = ""

    @property
    def speedup(self) -> float | None:
        return self.baseline_ms / self.best_ms if self.baseline_ms and self.best_ms else None

    @property
    def curve(self) -> list[tuple[int, float]]:
        """(trial, best median so far) for every trial that had a best."""
        return [(t.index, t.best_ms) for t in self.trials if t.best_ms is not None]

    def __str__(self) -> str:
        ok = sum(t.status == "ok" for t in self.trials)
        fmt = lambda ms: f"{ms:.4g} ms" if ms is not None else "-"  # noqa: E731
        sp = f", speedup {self.speedup:.2f}x" if self.speedup else ""
        return f"{len(self.trials)} trials ({ok} valid): baseline {fmt(self.baseline_ms)} -> best {fmt(self.best_ms)}{sp}"


def worker_executable() -> str:
    """The `pto` executable whose hidden `worker` command measures candidates.

    $PTO_WORKER, else `bin/pto` of the build tree the `_pto` module comes from
    (build/python/_pto*.so -> build/bin/pto), else `pto` on $PATH.
    """
    env = os.environ.get("PTO_WORKER")
    if env:
        return env
    near = Path(_pto.__file__).resolve().parent.parent / "bin" / "pto"
    if near.is_file() and os.access(near, os.X_OK):
        return str(near)
    found = shutil.which("pto")
    if found:
        return found
    raise FileNotFoundError("tune needs the `pto` executable (its worker measures candidates): "
                            f"not found at {near} nor on PATH; set PTO_WORKER=/path/to/pto")


def _progress_bar(name: str, trials: int) -> tuple[Any, Any]:
    """A tqdm bar and the callback `_pto.tune` calls after every trial to advance it."""
    from tqdm.auto import tqdm
    bar = tqdm(total=trials, desc=f"tune {name}")

    def report(p: dict) -> None:
        bar.update(p["trial"] - bar.n)
        bar.set_postfix(best_ms=f"{p['best_ms']:.4g}" if p["best_ms"] else "-", failed=p["failures"])
    return bar, report


def tune(kf: Any, arrays: Sequence[np.ndarray], trials: int, max_rel_error: float, seed: int, progress: bool,
         min_seconds: float, db: str, strategy: str) -> TuneResult:
    """Runs the C++ tuner for `kf` on `arrays`' shapes; installs and returns its best schedule.

    `max_rel_error` is the C++ tuner's accuracy budget: 0 keeps exact f32 (every
    candidate still matches the f64 reference within the worker's tolerance),
    larger budgets let it try f16 (>= 2e-3) and bf16 (>= 1e-2) intermediates.
    """
    spec = kf.specialize(*arrays)
    static_key = kf.signature(arrays, dynamic=False)
    if spec.key != static_key:
        with kf._lock:
            kf._needs_static.add(spec.key)
            spec = kf._specs.get(static_key) or kf._trace(static_key)
            kf._specs[static_key] = spec
            kf._last = spec
    bar, report = _progress_bar(kf.name, trials) if progress else (None, None)
    try:
        r = _pto.tune(spec.program, spec.target, trials=trials, db=db, strategy=strategy, seed=seed,
                      max_rel_error=max_rel_error, min_seconds=min_seconds, worker=worker_executable(),
                      progress=report)
    finally:
        if bar is not None:
            bar.close()
    result = TuneResult(flops=spec.program.flops(spec.sizes(arrays)), records=r["trials"], db=r["db"])
    best_ms = None
    for t in r["trials"]:
        ok = t["status"] == "ok"
        ms = t["median_ms"] if ok else None
        if ms is not None and (best_ms is None or ms < best_ms):
            best_ms = ms
        result.trials.append(Trial(t["index"], ms, t["max_rel_error"] if ok else None, t["status"], best_ms,
                                   t["schedule"]))
    if r["baseline"] is not None and r["baseline"]["status"] == "ok":
        result.baseline_ms = r["baseline"]["median_ms"]
    if r["best"] is not None:
        result.best_schedule = Schedule.from_json(r["best"]["schedule"])
        result.best_ms = r["best"]["median_ms"]
        spec.schedule = result.best_schedule.copy()
    result.confirmed_ms, result.confirmed_default_ms = r["confirmed_ms"], r["confirmed_default_ms"]
    return result
