"""Troubleshooting tools from the report: profile(), check_numerics(), debug_print(), memory_limit().

    with pypto.profile() as prof:        # every kernel call: time, peak heap bytes, allocations
        y = f(x)
    print(prof.report())
    f.profile_stages(x)                  # per stage: wall time of root stages, placement, buffers
    with pypto.profile(stages=True):     # the same for every call inside

    with pypto.check_numerics():         # NaN/Inf in any output raises KernelError naming the
        y = f(x)                         # first stage that produced it, where, and what it read

    @pypto.kernel
    def f(x):
        h = pypto.debug_print(x @ x, "h") # prints shape, min/max/mean and leading values at run time
        return pypto.ops.relu(h)

    with pypto.memory_limit(1 << 20):    # intermediates over 1 MiB -> DeviceMemoryError
        f(x)                             # (DEVICE_MEMORY_EXHAUSTED), caught, never an abort

    with pypto.memory_limit(1 << 20, shard=True) as m:
        f(x)                             # split along the batch axis into shards that fit
    m.shards                             # how many (the most of the calls inside)

check_numerics compiles the kernel with the schedule option `check_numerics`
(C++ checks f32/f64 outputs) and checks the other float outputs (f16, bf16) here;
a non-finite output then runs the instrumented build of debug/CheckNumerics.h
(every stage materialized, plain loops, the schedule's precision and fast_math)
to name the first stage in execution order that produced it.
debug_print adds a copy of the tensor as an extra output of the Program (so it
is materialized; the stage itself keeps its default placement) and prints its
statistics after each call.
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

_state = threading.local()


def now() -> float:
    return time.perf_counter()


@dataclass
class CallRecord:
    kernel: str
    signature: str
    ms: float
    peak_bytes: int
    allocations: int
    compile_ms: float = 0.0
    shards: int = 1


@dataclass
class Profile:
    """Calls recorded inside a `with pypto.profile()` block; with `stages=True` also each
    call's per-stage profile (`stage_profiles`, StageProfile: traced runs, see
    `KernelFunction.profile_stages`)."""
    calls: list[CallRecord] = field(default_factory=list)
    with_stages: bool = False
    stage_profiles: list[Any] = field(default_factory=list)

    def record(self, kernel: str, spec: Any, ms: float, stats: dict[str, int], compile_ms: float = 0.0) -> None:
        sig = ", ".join(f"{dt}[{', '.join(map(str, dims))}]" for dt, dims in spec.key)
        self.calls.append(CallRecord(kernel, sig, ms, int(stats["peak_bytes"]), int(stats["allocations"]),
                                     compile_ms, int(stats.get("shards", 1))))

    @property
    def peak_bytes(self) -> int:
        """The largest peak of intermediate heap memory over the recorded calls."""
        return max((c.peak_bytes for c in self.calls), default=0)

    def report(self) -> str:
        rows = [f"{'kernel':<20} {'run ms':>10} {'compile ms':>10} {'peak bytes':>12} {'allocs':>7} {'shards':>6}"
                "  signature"]
        for c in self.calls:
            rows.append(f"{c.kernel:<20} {c.ms:>10.3f} {c.compile_ms:>10.1f} {c.peak_bytes:>12} {c.allocations:>7}"
                        f" {c.shards:>6}  {c.signature}")
        for sp in self.stage_profiles:
            rows.append("")
            rows.append(sp.report.rstrip())
        return "\n".join(rows)


@contextlib.contextmanager
def profile(stages: bool = False) -> Iterator[Profile]:
    """Records each kernel call inside (time, compile time, heap peak, shards); with
    `stages=True` each call is also profiled per stage (its kernel traced and rerun)."""
    prev = getattr(_state, "profile", None)
    _state.profile = p = Profile(with_stages=stages)
    try:
        yield p
    finally:
        _state.profile = prev


def active_profile() -> Profile | None:
    return getattr(_state, "profile", None)


class check_numerics(contextlib.ContextDecorator):
    """Context manager / decorator: kernels called inside fail on NaN or Inf outputs."""

    def __enter__(self) -> "check_numerics":
        _state.numerics = getattr(_state, "numerics", 0) + 1
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.numerics -= 1


def numerics_checked() -> bool:
    return getattr(_state, "numerics", 0) > 0


def plain() -> bool:
    """No profile, numerics check or memory limit is active on this thread (a
    kernel call may then take its fast path)."""
    d = _state.__dict__
    return not (d.get("profile") or d.get("numerics") or d.get("memory_limit"))


def check_finite(outputs: dict[str, np.ndarray]) -> None:
    from .errors import KernelError
    for name, a in outputs.items():
        if a.dtype.kind in "fV":  # f16/f32/f64 and ml_dtypes.bfloat16
            f = a.astype(np.float32)
            bad = ~np.isfinite(f)
            if bad.any():
                k = int(np.flatnonzero(bad.ravel())[0])
                kind = "NaN" if np.isnan(f.ravel()[k]) else "Inf"
                raise KernelError(f"check_numerics: tensor '{name}' has {kind} at flat index {k}")


@dataclass
class MemoryLimit:
    """The limit a `with pypto.memory_limit(...)` block sets, and what its calls did."""
    nbytes: int
    shard: bool = False
    shards: int = 1       # the most shards one call inside was split into
    peak_bytes: int = 0   # the largest peak of one call (one shard's, when sharded)

    def record(self, stats: dict[str, int]) -> None:
        self.shards = max(self.shards, int(stats.get("shards", 1)))
        self.peak_bytes = max(self.peak_bytes, int(stats["peak_bytes"]))


@contextlib.contextmanager
def memory_limit(nbytes: int, shard: bool = False) -> Iterator[MemoryLimit]:
    """Caps each kernel call's intermediate allocations (bytes). Over it: DeviceMemoryError
    naming the stage, or with `shard=True` the call is split along the program's batch axis
    (an outer axis every output slice depends on alone) into as many shards as needed."""
    if int(nbytes) <= 0:
        raise ValueError(f"memory_limit: nbytes must be positive, got {nbytes}")
    prev = getattr(_state, "memory_limit", None)
    _state.memory_limit = m = MemoryLimit(int(nbytes), bool(shard))
    try:
        yield m
    finally:
        _state.memory_limit = prev


def current_memory_limit() -> MemoryLimit | None:
    return getattr(_state, "memory_limit", None)


def debug_print(t: Any, label: str | None = None) -> Any:
    """Inside a kernel: print tensor `t`'s values (statistics) each time the kernel runs."""
    from .tensor import Tensor, current_trace
    if not isinstance(t, Tensor):
        raise TypeError(f"debug_print expects a pypto.Tensor inside a kernel, got {type(t).__name__}")
    trace = current_trace()
    if trace is None or trace is not t._trace:
        raise ValueError("debug_print must be called inside the @pypto.kernel function that made the tensor")
    if t.name in [i[0] for i in trace.program.inputs()]:  # read from the arguments
        trace.taps.append((label or t.name, t.name))
        return t
    # A copy of it becomes the extra output, so that the stage itself keeps the
    # placement its default schedule gives it (an output is computed at root:
    # `debug_print(A @ A)` then failed to fuse into the operation after it).
    from . import ops
    copy = ops.identity(t, name=f"{t.name}_print")
    trace.taps.append((label or t.name, copy.name))
    return t


def show(label: str, name: str, a: np.ndarray) -> None:
    f = a.astype(np.float64)
    head = np.array2string(f.ravel()[:6], precision=4, separator=", ")
    stats = f"min {f.min():.4g} max {f.max():.4g} mean {f.mean():.4g}" if f.size else "empty"
    print(f"[debug_print] {label} ({name}): {a.dtype}{list(a.shape)} {stats} first {head}")


@dataclass
class StageRecord:
    """One stage of a StageProfile (debug/StageProfile.h)."""
    stage: str
    op: str
    placement: str       # "root", "inside <stage>", "inlined"
    ms: float            # root stages: wall time per run, the stages fused into it included
    share: float         # root stages: share of the run
    productions: float   # per run
    buffer_bytes: int    # its largest buffer


class StageProfile:
    """What `k.profile_stages(*arrays)` measured: `.stages` (StageRecord, in order of first
    production), `.run_ms`, `.runs`, `.peak_bytes`; prints as the table of `pto run --profile`."""

    def __init__(self, d: dict[str, Any]):
        self.program: str = d["program"]
        self.stages = [StageRecord(**r) for r in d["stages"]]
        self.run_ms: float = d["run_ms"]
        self.runs: int = d["runs"]
        self.peak_bytes: int = d["peak_bytes"]
        self.report: str = d["report"]

    @property
    def roots(self) -> list[StageRecord]:
        """The stages with loops at root: their times add up to the run's."""
        return [s for s in self.stages if s.placement == "root"]

    def __str__(self) -> str:
        return self.report

    def __repr__(self) -> str:
        return f"StageProfile({self.program!r}, {len(self.roots)} root stages, {self.run_ms:.4g} ms per run)"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(self.report)


class BisectResult:
    """What `k.bisect(*arrays)` found (autotuner/Bisect.h): the culprit stage, the fields of
    its schedule entry with the error without each and with each alone, the errors of the
    whole schedule and of the plain loops. Prints as the same table as `pto bisect`."""

    def __init__(self, d: dict[str, Any]):
        self.__dict__.update(d)

    @property
    def culprits(self) -> list[str]:
        """The fields of the culprit stage's entry that make the difference."""
        return [f["field"] for f in self.fields if f["culprit"]]

    def __str__(self) -> str:
        return self.report

    def __repr__(self) -> str:
        return f"BisectResult(stage={self.stage!r}, culprits={self.culprits!r}, error {self.error_given:.2e})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython
        p.text(self.report)

