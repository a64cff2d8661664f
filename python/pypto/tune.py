"""`k.tune(...)`: a small random search over schedules, checked against a reference.

Structure (so that the C++ autotuner can take over the search later):
  SearchSpace  -- proposes schedules for one specialization: numeric mutations of
                  the best schedule so far, or fresh generic loop nests (tiles of
                  the two innermost dims, reduction loops between tile loops,
                  vectorized inner loop, parallel outer loop, unrolled rows);
  RandomSearch -- the strategy: draws from the space with a seeded RNG;
  measure()    -- compile, run once and compare with the reference (the plain
                  schedule, opt_level 0) under `max_rel_error`, then time.
`engine="random"` is this Python search; `engine="cpp"` runs the C++ autotuner
(autotuner/, `_pto.tune`: the search of `pto tune`, worker processes, the same
SQLite tuning database) on the signature specialized to these static shapes,
and installs its best schedule for those shapes.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ._ext import _pto
from .errors import CompileError, PtoError, ScheduleError
from .schedule import Schedule

TILES = [4, 8, 16, 32, 64, 128, 256]


@dataclass
class Trial:
    index: int
    ms: float | None           # median; None when rejected
    rel_error: float | None
    status: str                # "ok", "compile-error", "run-error", "wrong-result"
    best_ms: float | None      # best median so far (the tuning curve)
    schedule: str              # JSON


@dataclass
class TuneResult:
    trials: list[Trial] = field(default_factory=list)
    best_schedule: Schedule | None = None
    baseline_ms: float | None = None
    best_ms: float | None = None
    flops: float = 0.0
    # engine="cpp": the tuning database's records (dicts: index, strategy, status, error,
    # median/min/max_ms, reps, max_rel_error, compile_s, schedule), for tables and plots.
    records: list[dict] = field(default_factory=list)

    @property
    def speedup(self) -> float | None:
        return self.baseline_ms / self.best_ms if self.baseline_ms and self.best_ms else None

    @property
    def curve(self) -> list[tuple[int, float]]:
        """(trial, best median so far) for every trial that had a best."""
        return [(t.index, t.best_ms) for t in self.trials if t.best_ms is not None]

    def __str__(self) -> str:
        ok = sum(t.status == "ok" for t in self.trials)
        sp = f", speedup {self.speedup:.2f}x" if self.speedup else ""
        return (f"{len(self.trials)} trials ({ok} valid): baseline {self.baseline_ms:.4g} ms -> "
                f"best {self.best_ms:.4g} ms{sp}")


class SearchSpace:
    def __init__(self, program: Any, base: Schedule, target: str, sizes: dict[str, int]):
        self.program = program
        self.base = base
        self.lanes32 = max(1, _pto.target(target)["vector_bits"] // 32)
        self.sizes = sizes
        self.stages = {s["name"]: s for s in program.stages()}

    def _extent(self, d: int | str) -> int:
        return d if isinstance(d, int) else self.sizes.get(d, 1 << 30)

    def _lanes(self, dtype: str) -> int:
        b = {"f64": 8, "i64": 8, "u64": 8, "f16": 2, "bf16": 2, "i16": 2, "u16": 2, "i8": 1, "u8": 1, "bool": 1}
        return max(1, self.lanes32 * 4 // b.get(dtype, 4))

    def _root_stages(self, s: Schedule) -> list[str]:
        out = []
        for name in self.stages:
            c = s.to_dict()["stages"].get(name, {}).get("compute", "root")
            if c == "root":
                out.append(name)
        return out

    def fresh(self, rng: random.Random) -> Schedule:
        """Generic loop nests for the root stages of the base schedule."""
        s = self.base.copy()
        for name in self._root_stages(self.base):
            st = self.stages[name]
            if not st["vars"]:
                continue
            d = s[name]
            d.clear()
            d._d.pop("update", None)
            self._nest(d, st, rng, update=False)
            if st["reduce"] and st["reduce"] in ("sum", "prod", "min", "max"):
                self._nest(d.update, st, rng, update=True)
        return s

    def _nest(self, d: Any, st: dict[str, Any], rng: random.Random, update: bool) -> None:
        vars_, shape = st["vars"], st["shape"]
        lanes = self._lanes(st["dtype"])
        col, ecol = vars_[-1], self._extent(shape[-1])
        tc = rng.choice([t for t in TILES if lanes <= t <= max(lanes, ecol)] or [lanes])
        tiles = {col: tc}
        order_outer, order_inner = [], []
        if len(vars_) >= 2:
            row, erow = vars_[-2], self._extent(shape[-2])
            tr = rng.choice([t for t in TILES[:5] if t <= erow] or [1])
            if tr > 1:
                tiles[row] = tr
                order_outer, order_inner = [f"{row}_o", f"{col}_o"], [f"{row}_i", f"{col}_i"]
            else:
                order_outer, order_inner = [row, f"{col}_o"], [f"{col}_i"]
        else:
            order_outer, order_inner = [f"{col}_o"], [f"{col}_i"]
        d.tile(**tiles)
        rv = [r for r, _ in st["rvars"]] if update else []
        if rv and rng.random() < 0.5 and len(order_inner) == 2:
            order = order_outer + [order_inner[0]] + rv + [order_inner[1]]
        else:
            order = order_outer + rv + order_inner
        d.order(*(list(vars_[:-2]) if len(vars_) > 2 else []) + order)
        if ecol >= lanes:
            d.vectorize(f"{col}_i", lanes if tc % lanes == 0 else 0)
        if rng.random() < 0.8:
            d.parallel(order[0] if not order[0] in rv else order_outer[0])
        if len(order_inner) == 2 and tiles.get(vars_[-2], 0) <= 8 and rng.random() < 0.5:
            d.unroll(order_inner[0])

    def mutate(self, s: Schedule, rng: random.Random) -> Schedule:
        """Changes one or two tile sizes / vector widths of `s`, keeping its structure."""
        s = s.copy()
        data = s.to_dict()
        knobs = []
        for name, e in data["stages"].items():
            for part in ("", "update"):
                ls = e.get(part, {}) if part else e
                for dim in ls.get("tile", {}):
                    knobs.append((name, part, "tile", dim))
                if "vectorize" in ls:
                    knobs.append((name, part, "vectorize", None))
        if not knobs:
            return self.fresh(rng)
        for _ in range(rng.choice([1, 2])):
            name, part, kind, dim = rng.choice(knobs)
            e = data["stages"][name]
            ls = e[part] if part else e
            if kind == "tile":
                ls["tile"][dim] = [rng.choice(TILES)]
            else:
                ls["vectorize"]["width"] = rng.choice([self.lanes32 // 2, self.lanes32, self.lanes32 * 2])
        return Schedule(data)


class RandomSearch:
    def __init__(self, space: SearchSpace, seed: int):
        self.space = space
        self.rng = random.Random(seed)

    def propose(self, best: Schedule) -> Schedule:
        return self.space.mutate(best, self.rng) if self.rng.random() < 0.5 else self.space.fresh(self.rng)


def _rel_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    worst = 0.0
    for n, w in want.items():
        w64, g64 = w.astype(np.float64), got[n].astype(np.float64)
        scale = max(float(np.abs(w64).max(initial=0.0)), 1e-30)
        err = float(np.abs(g64 - w64).max(initial=0.0)) / scale
        worst = max(worst, err if np.isfinite(err) else float("inf"))
    return worst


def tune(kf: Any, spec: Any, arrays: Sequence[np.ndarray], trials: int, max_rel_error: float, seed: int,
         progress: bool, min_seconds: float, engine: str, db: str = "") -> TuneResult:
    if engine == "cpp":
        return tune_cpp(kf, arrays, trials, max_rel_error, seed, min_seconds, db=db)
    if engine != "random":
        raise ValueError(f"tune: unknown engine '{engine}'; valid: random, cpp")
    ref_sched = Schedule.from_json(_pto.plain_schedule(spec.program))
    reference, _ = spec.run(arrays, ref_sched)
    space = SearchSpace(spec.program, spec.schedule.copy(), spec.target, spec.sizes(arrays))
    search = RandomSearch(space, seed)
    result = TuneResult(flops=spec.program.flops(spec.sizes(arrays)))
    best, best_ms = spec.schedule.copy(), None

    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=trials, desc=f"tune {kf.name}")
    attempts = 0
    while len(result.trials) < trials and attempts < 20 * trials:
        attempts += 1
        cand = best.copy() if not result.trials else search.propose(best)
        text = cand.to_json()
        try:
            _pto.validate(spec.program, text, spec.target)
        except ScheduleError:
            continue  # not a trial: the space proposed something invalid for this program
        status, ms, err = "ok", None, None
        try:
            got, _ = spec.run(arrays, cand)
            err = _rel_error(got, reference)
            if err > max_rel_error:
                status = "wrong-result"
            else:
                t = spec.kernel(cand).time(list(arrays), 1, 3, min_seconds, 1000)
                ms = t["median_ms"]
        except CompileError:
            status = "compile-error"
        except PtoError:
            status = "run-error"
        improved = ms is not None and (best_ms is None or ms < best_ms)
        # Keep memory bounded: only the best schedule so far stays compiled.
        drop = best.to_json() if improved else text
        if drop != (text if improved else best.to_json()):
            spec.compiled.pop(drop, None)
        if improved:
            best, best_ms = cand, ms
        if not result.trials:
            result.baseline_ms = ms
        result.trials.append(Trial(len(result.trials), ms, err, status, best_ms, text))
        if bar is not None:
            bar.update(1)
            bar.set_postfix(best_ms=f"{best_ms:.4g}" if best_ms else "-")
    if bar is not None:
        bar.close()
    result.best_schedule, result.best_ms = best, best_ms
    spec.schedule = best.copy()
    return result


def worker_executable() -> str:
    """The `pto` executable whose hidden `worker` command measures candidates.

    $PTO_WORKER, else `bin/pto` of the build tree the `_pto` module comes from
    (build/python/_pto*.so -> build/bin/pto), else `pto` on $PATH.
    """
    import os
    import shutil
    from pathlib import Path
    env = os.environ.get("PTO_WORKER")
    if env:
        return env
    near = Path(_pto.__file__).resolve().parent.parent / "bin" / "pto"
    if near.is_file() and os.access(near, os.X_OK):
        return str(near)
    found = shutil.which("pto")
    if found:
        return found
    raise FileNotFoundError("engine='cpp' needs the `pto` executable (its worker measures candidates): "
                            f"not found at {near} nor on PATH; set PTO_WORKER=/path/to/pto")


def tune_cpp(kf: Any, arrays: Sequence[np.ndarray], trials: int, max_rel_error: float, seed: int,
             min_seconds: float, db: str = "", strategy: str = "evolutionary") -> TuneResult:
    """The C++ autotuner on this call's static shapes.

    The tuner measures concrete sizes, so the signature is specialized per shape
    (as for ops that need static sizes); the best schedule is installed there.
    `max_rel_error` is the C++ tuner's accuracy budget: 0 (the default when a
    value <= 1e-4 is given) keeps exact f32, larger budgets allow bf16/f16
    intermediates.
    """
    spec = kf.specialize(*arrays)
    static_key = kf.signature(arrays, dynamic=False)
    if spec.key != static_key:
        with kf._lock:
            kf._needs_static.add(spec.key)
            spec = kf._specs.get(static_key) or kf._trace(static_key)
            kf._specs[static_key] = spec
            kf._last = spec
    budget = max_rel_error if max_rel_error > 1e-4 else 0.0
    r = _pto.tune(spec.program, spec.target, trials=trials, db=db, strategy=strategy, seed=seed,
                  max_rel_error=budget, min_seconds=min_seconds, worker=worker_executable())
    result = TuneResult(flops=spec.program.flops(spec.sizes(arrays)))
    best_ms = None
    for t in r["trials"]:
        ok = t["status"] == "ok"
        ms = t["median_ms"] if ok else None
        if ms is not None and (best_ms is None or ms < best_ms):
            best_ms = ms
        result.trials.append(Trial(t["index"], ms, t["max_rel_error"] if ok else None, t["status"], best_ms,
                                   t["schedule"]))
    result.records = r["trials"]
    if r["baseline"] is not None and r["baseline"]["status"] == "ok":
        result.baseline_ms = r["baseline"]["median_ms"]
    if r["best"] is not None:
        result.best_schedule = Schedule.from_json(r["best"]["schedule"])
        result.best_ms = r["best"]["median_ms"]
        spec.schedule = result.best_schedule.copy()
    return result
