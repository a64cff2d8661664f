"""Per-stage times: each stage of a kernel compiled and timed as a one-stage program.

A stage's inputs become the sub-program's inputs (random values of the right
shapes and dtypes: timing does not depend on the values), its loop directives
are kept and it is computed at root. Inlined or compute_at stages therefore cost
what they would cost materialized alone; the figures locate hot stages, they do
not add up to the fused kernel's time.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np

from ._ext import _pto
from .errors import CompileError, ScheduleError


def _random(shape: list[int], dtype: str, rng: np.random.Generator) -> np.ndarray:
    from ml_dtypes import bfloat16
    np_dt = {"bf16": bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64, "bool": np.bool_}.get(dtype)
    if np_dt is None:
        return np.zeros(shape, dtype=np.dtype({"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
                                                "u8": "uint8", "u16": "uint16", "u32": "uint32",
                                                "u64": "uint64"}[dtype]))
    return rng.random(shape).astype(np_dt)


def stage_times(spec: Any, arrays: Sequence[np.ndarray], min_seconds: float = 0.05) -> dict[str, Any]:
    from .kernel import Timing
    p = spec.program
    sizes = spec.sizes(arrays)
    full = json.loads(p.to_json())
    by_name = {s["name"]: s for s in full["stages"]}
    sched = spec.schedule.to_dict()
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for st in p.stages():
        name = st["name"]
        ins = []
        for r in st["reads"]:
            t = p.tensor(r)
            ins.append({"name": r, "shape": t.shape, "dtype": t.dtype})
        sub = {"schema": full.get("schema", 1), "name": f"{full['name']}_{name}", "inputs": ins,
               "stages": [by_name[name]], "outputs": [name]}
        entry = dict(sched["stages"].get(name, {}))
        # Loop directives written for a stage computed inside a consumer's tile (a
        # full unroll of a tile-sized loop) would apply to the whole extent alone:
        # a window convolution's rows and columns unrolled over the whole image
        # compiled for over 12 minutes. Such a stage takes its own default.
        at_consumer = isinstance(entry.get("compute"), dict)
        for k in ("compute", "store", "pipeline"):
            entry.pop(k, None)
        sub_sched = {"schema": 1, "options": sched.get("options", {}), "stages": {name: entry}}
        sub_p = _pto.Program.from_json(json.dumps(sub))
        default = _pto.default_schedule(sub_p, spec.target)
        try:
            k = _pto.Kernel(sub_p, default if at_consumer else json.dumps(sub_sched), spec.target)
        except (ScheduleError, CompileError):
            # Directives that do not fit the stage alone: its default.
            k = _pto.Kernel(sub_p, default, spec.target)
        data = [_random([sizes.get(d, d) if isinstance(d, str) else d for d in t["shape"]], t["dtype"], rng)
                for t in ins]
        t = k.time(data, 1, 3, min_seconds, 1000)
        out[name] = Timing(t["median_ms"], t["min_ms"], t["max_ms"], t["reps"], p.stage_flops(name, sizes))
    return out
