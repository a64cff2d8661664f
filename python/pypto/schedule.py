"""Editable schedules: the JSON schedule format (docs/SCHEDULES.md) as Python objects.

    s = k.schedule()
    s["C"].tile(i=64, j=128).order("i_o", "j_o", "i_i", "j_i").vectorize("j_i", 16).parallel("i_o")
    s["C"].update.tile(i=8).vectorize("j", 16)
    s["mm"].compute_at("out", "i0_o").precision(compute="bf16", accumulate="f32")

A Schedule is a plain dict underneath (`.to_json()` / `Schedule.from_json`), so
what a person edits, what the tuner mutates and what C++ reads are one format;
C++ parses it strictly and validates it against the Program when it compiles,
so a typo is a ScheduleError naming the key and the valid choices.
"""
from __future__ import annotations

import copy
import json
from typing import Any

from ._ext import _pto

# The loop directives of one definition: the JSON keys of C++'s loops
# directive (schedules/directives/Loops.cpp, loop_fields()), the only field
# names Python needs to know itself (clear(), serial()); every other field is
# written as given and checked by the C++ parser.
LOOP_FIELDS = ("tile", "order", "vectorize", "unroll", "parallel")


class LoopDirectives:
    """Loop directives of one definition of a stage (its pure part or its update)."""

    def __init__(self, d: dict[str, Any]):
        self._d = d

    def tile(self, **sizes: int | list[int]) -> "LoopDirectives":
        """tile(i=64) splits dim i into loops i_o, i_i; tile(i=[64, 8]) into i_o, i_m, i_i."""
        t = self._d.setdefault("tile", {})
        for dim, s in sizes.items():
            t[dim] = [int(v) for v in s] if isinstance(s, (list, tuple)) else [int(s)]
        return self

    def order(self, *loops: str) -> "LoopDirectives":
        self._d["order"] = list(loops)
        return self

    def vectorize(self, loop: str, width: int = 0) -> "LoopDirectives":
        self._d["vectorize"] = {"loop": loop, "width": int(width)}
        return self

    def unroll(self, *loops: str, **factors: int) -> "LoopDirectives":
        u = self._d.get("unroll")
        u = dict(u) if isinstance(u, dict) else {l: 0 for l in (u or [])}
        u.update({l: 0 for l in loops})
        u.update({l: int(f) for l, f in factors.items()})
        self._d["unroll"] = u
        return self

    def parallel(self, *loops: str) -> "LoopDirectives":
        self._d["parallel"] = list(loops)
        return self

    def clear(self) -> "LoopDirectives":
        for k in LOOP_FIELDS:
            self._d.pop(k, None)
        return self


class StageSchedule(LoopDirectives):
    """One stage's entry: placement, storage (store_at, store_in), precision, pipelining, rfactor, skip_padding, device, and its loop directives."""

    def __init__(self, d: dict[str, Any]):
        super().__init__(d)

    @property
    def update(self) -> LoopDirectives:
        """Directives of the reduction's update (its loops include the reduction variables)."""
        return LoopDirectives(self._d.setdefault("update", {}))

    def compute_root(self) -> "StageSchedule":
        self._d["compute"] = "root"
        return self

    def compute_inline(self) -> "StageSchedule":
        self._d["compute"] = "inline"
        return self

    def compute_at(self, consumer: str, loop: str) -> "StageSchedule":
        self._d["compute"] = {"at": consumer, "loop": loop}
        return self

    def store_at(self, consumer: str, loop: str) -> "StageSchedule":
        self._d["store"] = {"at": consumer, "loop": loop}
        return self

    def precision(self, storage: str | None = None, compute: str | None = None,
                  accumulate: str | None = None) -> "StageSchedule":
        p = self._d.setdefault("precision", {})
        for k, v in (("storage", storage), ("compute", compute), ("accumulate", accumulate)):
            if v is not None:
                p[k] = _pto.parse_dtype(v)
        return self

    def pipeline(self, ring_buffer: int | None = None, async_: bool | None = None,
                 prefetch: list[dict[str, Any]] | None = None) -> "StageSchedule":
        p = self._d.setdefault("pipeline", {})
        if ring_buffer is not None:
            p["ring_buffer"] = int(ring_buffer)
        if async_ is not None:
            p["async"] = bool(async_)
        if prefetch is not None:
            p["prefetch"] = prefetch
        return self

    def rfactor(self, rvar: str, factor: int, parallel: bool = False,
                vector_lanes: int = 0) -> "StageSchedule":
        """Vectorized partial reductions: reduction variable `rvar` split into `factor` lanes.

        With `parallel`, `rvar` is split into chunks of `factor` run across cores instead, each
        chunk with `vector_lanes` partials (0: vectorized along the stage's innermost dim)."""
        rf: dict[str, Any] = {"rvar": rvar, "factor": int(factor)}
        if parallel:
            rf["parallel"] = True
        if vector_lanes:
            rf["vector_lanes"] = int(vector_lanes)
        self._d["rfactor"] = rf
        return self

    def specialize(self, on: bool = True) -> "StageSchedule":
        """A second version of the loops for symbolic extents that hold every tile (tails shift inwards)."""
        if on:
            self._d["specialize"] = True
        else:
            self._d.pop("specialize", None)
        return self

    def online_softmax(self, rows: int, keys: int) -> "StageSchedule":
        """Attention as one fused loop over blocks of `rows` queries x `keys` keys (running max and sum)."""
        self._d["online_softmax"] = {"rows": int(rows), "keys": int(keys)}
        return self

    # The entry's keys that shape its own loops: a directive that owns them (amx) replaces them.
    _LOOP_KEYS = ("tile", "order", "vectorize", "unroll", "parallel", "update", "accumulator_at", "cache",
                  "rfactor", "skip_padding", "dot_pairs", "pipeline", "pad_lanes", "specialize", "store_in",
                  "store")

    def amx(self, on: bool = True) -> "StageSchedule":
        """Run the contraction on AMX tiles (16 x 16 f32 accumulators, bf16 factors; Sapphire Rapids).

        The stage must be a sum over k of L(.., i, k) * R(.., k, j); it is computed at root and the
        tiles replace its loop directives. f32 factors are rounded to bf16."""
        if on:
            for k in self._LOOP_KEYS:
                self._d.pop(k, None)
            self._d["compute"] = "root"
            self._d["amx"] = True
        else:
            self._d.pop("amx", None)
        return self

    def store_in(self, consumer: str | None) -> "StageSchedule":
        """Store the stage in `consumer`'s buffer, which rewrites it in place (softmax's exponentials
        written into the output row and scaled there); None stores it in its own again."""
        if consumer:
            self._d["store_in"] = consumer
        else:
            self._d.pop("store_in", None)
        return self

    def skip_padding(self, *dims: str) -> "StageSchedule":
        """Leave out the reduction steps that read a zero-padded stage's padding along these of its dims."""
        self._d["skip_padding"] = list(dims)
        return self

    def accumulator_at(self, loop: str) -> "StageSchedule":
        """Accumulate into a tile per iteration of pure loop `loop` (a register tile), then store it."""
        self._d["accumulator_at"] = loop
        return self

    def dot_pairs(self, rvar: str) -> "StageSchedule":
        """Sum reduction variable `rvar` in adjacent pairs per vector lane (vdpbf16ps for bf16 pairs).

        The update's loop `rvar` then counts pairs; an operand must be laid out in pairs along it."""
        self._d["dot_pairs"] = rvar
        return self

    def pad_lanes(self, var: str) -> "StageSchedule":
        """Compute pure var `var` of the accumulator tile in whole vectors past its extent.

        Needs `accumulator_at`, the update vectorizing `var`, and a `cache` of each tensor read along it."""
        self._d["pad_lanes"] = var
        return self

    def fast_math(self, on: bool = True) -> "StageSchedule":
        """Lower this stage without the IEEE guards (NaN, Inf and signed zeros then follow no rule)."""
        if on:
            self._d["fast_math"] = True
        else:
            self._d.pop("fast_math", None)
        return self

    def device(self, name: str) -> "StageSchedule":
        self._d["device"] = name
        return self

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._d)

    def __repr__(self) -> str:
        return f"StageSchedule({json.dumps(self._d)})"


class Schedule:
    """A whole schedule: options and one StageSchedule per stage (created on first access)."""

    def __init__(self, data: dict[str, Any] | None = None):
        self._d = copy.deepcopy(data) if data else {"schema": 1, "stages": {}}
        self._d.setdefault("schema", 1)
        self._d.setdefault("stages", {})
        self._d.setdefault("options", {})

    @classmethod
    def from_json(cls, text: str | dict[str, Any]) -> "Schedule":
        """Parses (strictly, in C++: a bad key is a ScheduleError naming it) and wraps."""
        s = text if isinstance(text, str) else json.dumps(text)
        return cls(json.loads(_pto.normalize_schedule(s)))

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self._d, indent=indent, sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._d)

    def copy(self) -> "Schedule":
        return Schedule(self._d)

    def __getitem__(self, stage: str) -> StageSchedule:
        return StageSchedule(self._d["stages"].setdefault(stage, {}))

    def __delitem__(self, stage: str) -> None:
        self._d["stages"].pop(stage, None)

    def __contains__(self, stage: str) -> bool:
        return stage in self._d["stages"]

    @property
    def stages(self) -> list[str]:
        return sorted(self._d["stages"])

    @property
    def options(self) -> dict[str, Any]:
        """Editable options: opt_level, bounds_checks, threads, profile, check_numerics."""
        return self._d["options"]

    def set_options(self, **opts: Any) -> "Schedule":
        self._d["options"].update(opts)
        return self

    def serial(self) -> "Schedule":
        """A copy without `parallel` directives: each call then uses one core (e.g. to
        pipeline a kernel next to CPU work on the other cores)."""
        s = self.copy()
        for e in s._d["stages"].values():
            e.pop("parallel", None)
            if isinstance(e.get("update"), dict):
                e["update"].pop("parallel", None)
        return s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schedule) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Schedule({self.to_json()})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(self.to_json(indent=2))
