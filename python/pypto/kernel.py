"""`@pypto.kernel`: trace a Python function into a Program, compile per signature, run on numpy.

    @pypto.kernel
    def matmul(A: pypto.Tensor, B: pypto.Tensor):
        return A @ B

    C = matmul(a, b)            # traces, schedules (default), JIT-compiles, runs
    s = matmul.schedule()       # the live, editable schedule of that signature
    s["matmul"].update.tile(i=32).vectorize("j", 16)
    C2 = matmul(a, b)           # recompiles once for the edited schedule

Specialization. A call's *signature* is, per argument, its dtype and its dims,
where (with `dynamic=True`, the default) every dim other than 1 is a symbolic
size: dims with equal values share one symbol (annotations such as
`pypto.Tensor["M", "K"]` name them explicitly; int annotations fix a dim). A new
size with the same pattern of equalities reuses the compiled kernel: no
retrace, no recompile: the default schedules tile and vectorize symbolic dims,
with a version specialized for sizes that hold whole tiles (the `specialize`
directive), so one kernel runs about as fast as the static kernel of each size
(dynamic `A @ B` at 512-2048: 0.9-1.07x of `dynamic=False`). Sizes below those
tiles (a symbol smaller than its `full_speed_extents`: 17 columns under a
64-column tile) would run the kernel's guarded loops, up to 30x slower; such
a call runs a static variant compiled for its exact shape instead (at most
`MAX_STATIC_VARIANTS` per signature, then the guarded loops; `static_variants=False`: never), so the shapes
that get their own kernel are the few small ones. A schedule edited by hand
is always the one that runs. `dynamic=False` fixes every size (one compile per
shape). Compiled kernels are cached per (signature, schedule JSON), so editing
a schedule compiles once per edit.
"""
from __future__ import annotations

import functools
import inspect
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from . import debug
from ._ext import _pto
from .errors import DTypeError, KernelError, ShapeError, SymbolicSizeError
from .schedule import Schedule
from .tensor import Tensor, TensorSpec, _pop, _push, _Trace, dtype_name

# Static-shaped variants one symbolic signature may compile for sizes below its
# tiles (module doc); past this many, such sizes run the guarded loops.
MAX_STATIC_VARIANTS = 64


@dataclass
class Timing:
    """Wall time of one kernel call: median and spread over `reps` runs (timing loop in C++)."""
    median_ms: float
    min_ms: float
    max_ms: float
    reps: int
    flops: float = 0.0

    @property
    def gflops(self) -> float | None:
        return self.flops / (self.median_ms * 1e6) if self.flops and self.median_ms > 0 else None

    def __str__(self) -> str:
        g = f", {self.gflops:.1f} GFLOP/s" if self.gflops else ""
        return (f"median {self.median_ms:.4g} ms (min {self.min_ms:.4g}, max {self.max_ms:.4g}, "
                f"{self.reps} reps){g}")


class Text(str):
    """A str that notebooks display as preformatted text (explain output)."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(str(self))


@dataclass
class Specialization:
    """One traced signature: its Program, live Schedule and compiled kernels."""
    key: tuple
    trace: _Trace
    arg_names: list[str]
    user_outputs: list[str]
    schedule: Schedule
    target: str
    compiled: dict[str, Any] = field(default_factory=dict)
    default_json: str = ""                  # the schedule as traced (edits make it differ)
    _full_speed: dict[str, int] | None = None
    # A snapshot of the last schedule turned into JSON, and that JSON: a call
    # compares the live schedule with it (dict equality, in C) instead of
    # serializing it again (json.dumps took most of a small kernel's call).
    _json_of: tuple[dict[str, Any], str] | None = None

    def schedule_json(self, schedule: Schedule | None = None) -> str:
        """The JSON of `schedule` (default: the live one, edits included)."""
        s = schedule or self.schedule
        last = self._json_of
        if last is not None and last[0] == s._d:
            return last[1]
        text = s.to_json()
        self._json_of = (s.to_dict(), text)
        return text

    def full_speed_extents(self) -> dict[str, int]:
        """Per size symbol, the least size at which the default loops run unguarded."""
        if self._full_speed is None:
            self._full_speed = dict(_pto.full_speed_extents(self.program, self.default_json))
        return self._full_speed

    def below_full_speed(self, arrays: Sequence[np.ndarray]) -> bool:
        """Would these sizes run the guarded loops of an unedited symbolic schedule?"""
        if not self.default_json or self.schedule_json() != self.default_json:
            return False
        need = self.full_speed_extents()
        return any(n < need.get(sym, 0) for sym, n in self.sizes(arrays).items())

    @property
    def program(self) -> Any:
        return self.trace.program

    def sizes(self, arrays: Sequence[np.ndarray]) -> dict[str, int]:
        out: dict[str, int] = {}
        for (dt, dims), a in zip(self.key, arrays):
            for d, n in zip(dims, a.shape):
                if isinstance(d, str):
                    out[d] = int(n)
        return out

    def kernel(self, schedule: Schedule | None = None) -> Any:
        s = schedule or self.schedule
        # The cache key: an edited schedule compiles once.
        if debug.numerics_checked():
            text = s.copy().set_options(check_numerics=True).to_json()
        else:
            text = self.schedule_json(s)
        k = self.compiled.get(text)
        if k is None:
            k = _pto.Kernel(self.program, text, self.target)
            self.compiled[text] = k
        return k

    def run(self, arrays: Sequence[np.ndarray], schedule: Schedule | None = None,
            memory_limit: int = 0, shard: bool = False) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        # Views are passed in place with their strides, except that kernels vectorize
        # along the last axis (past trailing axes of 1) and need it dense: only such
        # arrays are copied.
        arrays = [a if _dense_innermost(a) else np.ascontiguousarray(a) for a in arrays]
        outs, stats = self.kernel(schedule).run(list(arrays), None, memory_limit, shard)
        return dict(zip(self.program.outputs(), outs)), stats


class KernelFunction:
    """A traced, compiled-on-demand kernel (see module doc); made by `@pypto.kernel`."""

    def __init__(self, fn: Callable[..., Any], *, target: str = "host", dynamic: bool = True,
                 name: str | None = None, schedule: Callable[[Any, Schedule], Schedule | None] | None = None,
                 static_variants: bool = True, opt_level: int | None = None):
        if opt_level is not None and opt_level not in (0, 1, 2, 3):
            raise ValueError(f"opt_level={opt_level!r}: valid levels are 0 (plain loops), 1 (vectorize and "
                             "parallelize only), 2 (the schedule, the default) and 3 (with fast-math)")
        functools.update_wrapper(self, fn)
        self.opt_level = opt_level
        self.fn = fn
        self.target = target
        self.dynamic = dynamic
        self.static_variants = static_variants
        self.name = name or fn.__name__
        self.precision = getattr(fn, "__pypto_precision__", None)
        self.schedule_hook = schedule
        self._specs: dict[tuple, Specialization] = {}
        self._last: Specialization | None = None
        self._lock = threading.RLock()
        self._needs_static: set[tuple] = set()
        self._static_variants: dict[tuple, set[tuple]] = {}  # symbolic key -> static keys it dispatched to
        self._param_cache: list[tuple[str, Any]] | None = None
        # The last plain call, to repeat without tracing, signatures or lookups:
        # (per argument (dtype, shape), the specialization, its schedule's JSON
        # then, the compiled kernel, the user outputs' positions in its outputs).
        self._fast: tuple | None = None
        self.trace_count = 0

    # ---- signatures and tracing ------------------------------------------------
    def _params(self) -> list[tuple[str, Any]]:
        if self._param_cache is None:  # inspect.signature costs tens of microseconds per call
            sig = inspect.signature(self.fn)
            self._param_cache = [(p.name, p.annotation) for p in sig.parameters.values()]
        return self._param_cache

    def _arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        params = self._params()
        if len(args) != len(params):
            raise TypeError(f"{self.name}() takes {len(params)} arrays ({', '.join(n for n, _ in params)}), "
                            f"got {len(args)}")
        out = []
        for (n, _), a in zip(params, args):
            if isinstance(a, np.ndarray):
                out.append(a)
            elif isinstance(a, (list, tuple, int, float)) or np.isscalar(a):
                out.append(np.asarray(a))
            else:
                raise DTypeError(f"argument '{n}' of {self.name}() must be a numpy array, got {type(a).__name__}")
        return out

    def signature(self, arrays: Sequence[np.ndarray], dynamic: bool | None = None) -> tuple:
        """The cache key of a call: per argument (dtype, dims); dims are ints or symbol names."""
        dynamic = self.dynamic if dynamic is None else dynamic
        params = self._params()
        key = []
        sym_value: dict[str, int] = {}
        value_sym: dict[int, str] = {}
        for (n, ann), a in zip(params, arrays):
            try:
                dt = dtype_name(a.dtype)
            except DTypeError as e:
                raise DTypeError(f"argument '{n}' of {self.name}(): {e}") from None
            spec = ann if isinstance(ann, TensorSpec) else None
            if spec and spec.dtype and spec.dtype != dt:
                raise DTypeError(f"argument '{n}' of {self.name}() has dtype {dt}; its annotation {spec} "
                                 f"requires {spec.dtype}")
            if spec and spec.shape is not None and len(spec.shape) != a.ndim:
                raise ShapeError(f"argument '{n}' of {self.name}() has shape {list(a.shape)}; its annotation "
                                 f"{spec} requires rank {len(spec.shape)}")
            dims: list[int | str] = []
            for ax, size in enumerate(a.shape):
                size = int(size)
                want = spec.shape[ax] if spec and spec.shape is not None else None
                if isinstance(want, int):
                    if want != size:
                        raise ShapeError(f"argument '{n}' of {self.name}() has size {size} on axis {ax}; "
                                         f"its annotation {spec} requires {want}")
                    dims.append(size)
                elif isinstance(want, str):
                    if sym_value.setdefault(want, size) != size:
                        raise ShapeError(f"argument '{n}' of {self.name}() binds '{want}' to {size} on axis {ax}, "
                                         f"but an earlier argument bound it to {sym_value[want]}")
                    value_sym.setdefault(size, want)
                    dims.append(want)
                elif not dynamic or size == 1:
                    dims.append(size)
                else:
                    s = value_sym.get(size)
                    if s is None:
                        s = f"{n}_{ax}"
                        value_sym[size] = s
                        sym_value[s] = size
                    dims.append(s)
            key.append((dt, tuple(dims)))
        return tuple(key)

    def _trace(self, key: tuple) -> Specialization:
        names = [n for n, _ in self._params()]
        trace = _Trace(self.name)
        inputs = [Tensor(trace.program.input(n, list(dims), dt), trace) for n, (dt, dims) in zip(names, key)]
        _push(trace)
        try:
            result = self.fn(*inputs)
        finally:
            _pop()
        self.trace_count += 1
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if not results:
            raise TypeError(f"{self.name}() returned nothing; a kernel returns one or more pypto.Tensors")
        outs = []
        for i, r in enumerate(results):
            if not isinstance(r, Tensor):
                raise TypeError(f"{self.name}() must return pypto.Tensors; result {i} is {type(r).__name__}")
            if r.name in names:  # returning an input: copy it, outputs are stages
                r = r._binary(0, "add", None)
            trace.program.output(r._h)
            outs.append(r.name)
        for _, t in trace.taps:
            if t not in outs and t not in names:
                trace.program.output(t)
        sched = Schedule.from_json(_pto.default_schedule(trace.program, self.target))
        for stage, device in trace.devices.items():
            sched[stage].device(device)
        if self.precision is not None:
            self.precision.apply(trace.program, sched)
        if self.schedule_hook is not None:
            sched = self.schedule_hook(trace.program, sched) or sched
        if self.opt_level is not None:
            sched.set_options(opt_level=self.opt_level)
        return Specialization(key, trace, names, outs, sched, self.target, default_json=sched.to_json())

    def specialize(self, *args: Any) -> Specialization:
        """The specialization for these arrays (traced on first use; cached by signature)."""
        return self._specialize(self._arrays(args))

    def _specialize(self, arrays: list[np.ndarray]) -> Specialization:
        key = self.signature(arrays)
        with self._lock:
            if key in self._needs_static:
                key = self.signature(arrays, dynamic=False)
            spec = self._specs.get(key)
            if spec is None:
                try:
                    spec = self._specs[key] = self._trace(key)
                except SymbolicSizeError:
                    # Something in the function needs static sizes: specialize this
                    # pattern per shape from now on (compiles once per shape).
                    static = self.signature(arrays, dynamic=False)
                    if static == key:
                        raise
                    self._needs_static.add(key)
                    spec = self._specs.get(static) or self._trace(static)
                    self._specs[static] = spec
            spec = self._static_variant(spec, arrays)
            self._last = spec
        return spec

    def _static_variant(self, spec: Specialization, arrays: list[np.ndarray]) -> Specialization:
        """The static-shaped kernel for sizes below the symbolic kernel's tiles (module doc)."""
        if not self.static_variants or not spec.below_full_speed(arrays):
            return spec
        static = self.signature(arrays, dynamic=False)
        variants = self._static_variants.setdefault(spec.key, set())
        if static not in variants and len(variants) >= MAX_STATIC_VARIANTS:
            return spec
        variant = self._specs.get(static)
        if variant is None:
            variant = self._specs[static] = self._trace(static)
        variants.add(static)
        return variant

    def _spec(self, args: Sequence[Any]) -> Specialization:
        if args:
            return self.specialize(*args)
        if self._last is None:
            raise ValueError(f"{self.name}: call it once (or pass example arrays) to pick a shape/dtype signature")
        return self._last

    # ---- running ---------------------------------------------------------------------
    def __call__(self, *args: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        # Fast path: the same dtypes and shapes as the last call, contiguous
        # arrays, the schedule unedited since, and no debug context (a call of
        # a small kernel took 16 us through the path below, 2.5 us here).
        fast = self._fast
        if fast is not None and debug.plain():
            key = _fast_key(args)
            if key == fast[0] and fast[1].schedule_json() is fast[2]:
                self._last = fast[1]
                outs, _ = fast[3].run(list(args), None, 0)
                return outs[fast[4][0]] if len(fast[4]) == 1 else tuple(outs[i] for i in fast[4])
        arrays = self._arrays(args)
        spec = self._specialize(arrays)
        prof = debug.active_profile()
        n_compiled = len(spec.compiled)
        t0 = debug.now()
        spec.kernel()  # compile (cached) outside the timed run
        t1 = debug.now()
        compile_ms = (t1 - t0) * 1e3 if len(spec.compiled) > n_compiled else 0.0
        try:
            limit = debug.current_memory_limit()
            outs, stats = spec.run(arrays, memory_limit=limit.nbytes if limit else 0,
                                   shard=bool(limit and limit.shard))
            if limit:
                limit.record(stats)
            if debug.numerics_checked():
                debug.check_finite(outs)
        except KernelError as e:
            if not (debug.numerics_checked() and str(e).startswith("check_numerics")):
                raise
            # Name the stage where the NaN or Inf first appeared, not just the output.
            where = _pto.locate_nonfinite(spec.program, spec.schedule_json(), spec.target, list(arrays))
            raise KernelError(where["message"] if where["found"] else str(e)) from None
        if prof is not None:
            prof.record(self.name, spec, (debug.now() - t1) * 1e3, stats, compile_ms)
            if prof.with_stages:
                prof.stage_profiles.append(debug.StageProfile(_pto.profile_stages(
                    spec.program, spec.schedule_json(), spec.target, list(arrays), 0.1)))
        for label, t in spec.trace.taps:
            debug.show(label, t, outs[t] if t in outs else arrays[spec.arg_names.index(t)])
        text = spec.schedule_json()
        if debug.plain() and not spec.trace.taps and text in spec.compiled:
            key = _fast_key(args)
            if None not in key:
                names = spec.program.outputs()
                self._fast = (key, spec, text, spec.compiled[text],
                              tuple(names.index(n) for n in spec.user_outputs))
        res = tuple(outs[n] for n in spec.user_outputs)
        return res[0] if len(res) == 1 else res

    @property
    def cache_info(self) -> dict[str, int]:
        """How many signatures were traced and kernels compiled (for checking caching)."""
        return {"signatures": len(self._specs), "traces": self.trace_count,
                "compiled": sum(len(s.compiled) for s in self._specs.values()),
                "static_variants": sum(len(v) for v in self._static_variants.values())}

    # ---- exploration ---------------------------------------------------------------
    def program(self, *args: Any) -> Any:
        return self._spec(args).program

    def stages(self, *args: Any) -> list[str]:
        return [s["name"] for s in self._spec(args).program.stages()]

    def schedule(self, *args: Any) -> Schedule:
        """The live schedule of this signature: edit it and the next call compiles it."""
        return self._spec(args).schedule

    def set_schedule(self, schedule: Schedule | str | dict, *args: Any) -> None:
        spec = self._spec(args)
        s = schedule if isinstance(schedule, Schedule) else Schedule.from_json(schedule)
        _pto.validate(spec.program, s.to_json(), spec.target)
        spec.schedule = s.copy()

    def reset_schedule(self, *args: Any) -> Schedule:
        spec = self._spec(args)
        spec.schedule = Schedule.from_json(_pto.default_schedule(spec.program, spec.target))
        return spec.schedule

    def explain(self, *args: Any, schedule: Schedule | None = None) -> Text:
        spec = self._spec(args)
        return Text(_pto.explain(spec.program, (schedule or spec.schedule).to_json(), spec.target))

    def time(self, *args: Any, schedule: Schedule | None = None, min_reps: int = 5,
             min_seconds: float = 0.2, warmup: int = 1) -> Timing:
        arrays = self._arrays(args)
        spec = self.specialize(*arrays)
        t = spec.kernel(schedule).time(arrays, warmup, min_reps, min_seconds, 1000)
        return Timing(t["median_ms"], t["min_ms"], t["max_ms"], t["reps"], spec.program.flops(spec.sizes(arrays)))

    def flops(self, *args: Any) -> float:
        arrays = self._arrays(args)
        spec = self.specialize(*arrays)
        return spec.program.flops(spec.sizes(arrays))

    def io_bytes(self, *args: Any) -> float:
        arrays = self._arrays(args)
        spec = self.specialize(*arrays)
        return spec.program.io_bytes(spec.sizes(arrays))

    def bisect(self, *args: Any, schedule: Schedule | None = None, tolerance: float = 0.0) -> Any:
        """Finds what in this signature's schedule makes its output differ from the float64
        reference on these arrays (`pto bisect`): the first stage whose schedule entry, enabled on
        top of the plain loops in execution order, takes the error past `tolerance` (0: 1e-4, or
        1e-2 for programs with bf16/f16 stages), then the fields of that entry (tile, vectorize,
        precision, fast_math, ...) whose removal brings it back or that break it alone.
        Returns a BisectResult (`.stage`, `.culprits`, `.fields`; printed as a table)."""
        from .debug import BisectResult
        arrays = self._arrays(args)
        spec = self.specialize(*arrays)
        s = schedule or spec.schedule
        return BisectResult(_pto.bisect(spec.program, s.to_json(), spec.target, arrays, tolerance))

    def profile_stages(self, *args: Any, schedule: Schedule | None = None, min_seconds: float = 0.2) -> Any:
        """This signature's kernel run on these arrays with its stages traced (`pto run --profile`):
        each root stage's wall time (the stages fused into it included), where every stage runs
        (root, inside which stage, inlined), its productions per run and its largest buffer, and
        the run's heap peak. Returns a StageProfile (`.stages` records, `.report`, a table in
        notebooks; `pypto.plots.stage_profile` draws it)."""
        from .debug import StageProfile
        arrays = self._arrays(args)
        spec = self.specialize(*arrays)
        s = schedule or spec.schedule
        return StageProfile(_pto.profile_stages(spec.program, s.to_json(), spec.target, arrays, min_seconds))

    def stage_times(self, *args: Any, min_seconds: float = 0.05) -> dict[str, Timing]:
        """Each stage timed alone: a one-stage program over random inputs of the right shapes.

        Stages the schedule inlines or computes inside a consumer cost differently in the
        fused kernel; this is a per-stage breakdown, not a decomposition of the total.
        """
        from .profiling import stage_times
        arrays = self._arrays(args)
        return stage_times(self.specialize(*arrays), arrays, min_seconds)

    def tune(self, *args: Any, trials: int = 20, max_rel_error: float = 0.0, seed: int = 0,
             progress: bool = True, min_seconds: float = 0.05, db: str = "",
             strategy: str = "model") -> Any:
        """Runs the C++ autotuner (`pto tune`) on these arrays' static shapes; installs the best
        schedule and returns a TuneResult.

        Every trial is recorded in the tuning database `db` ($PTO_TUNING_DB or
        ~/.cache/pto/tuning.db when empty), so a rerun resumes. `max_rel_error` is the
        accuracy budget (0: exact f32; see pypto.tune.tune); `strategy` one of the C++
        tuner's (random, evolutionary, model).
        """
        from .tune import tune
        return tune(self, self._arrays(args), trials=trials, max_rel_error=max_rel_error, seed=seed,
                    progress=progress, min_seconds=min_seconds, db=db, strategy=strategy)

    def export(self, *args: Any, target: str = "host", path: str = ".", name: str | None = None,
               check_numerics: bool = False) -> Any:
        """Generates a static library + C headers for this signature (sizes stay symbolic where they
        are). `check_numerics`: its _run returns <name>_NONFINITE with a message on NaN/Inf outputs."""
        from .export import export
        return export(self._spec(args), target=target, path=path, name=name or self.name,
                      check_numerics=check_numerics)

    def __repr__(self) -> str:
        return f"<pypto.kernel {self.name} target={self.target} signatures={len(self._specs)}>"


def _fast_key(args: Sequence[Any]) -> tuple:
    """Per argument (dtype, shape) for a contiguous numpy array, else None: a
    call's key on the fast path, which passes its arrays as they are."""
    return tuple([(a.dtype, a.shape) if type(a) is np.ndarray and a.flags.c_contiguous else None
                  for a in args])


def _dense_innermost(a: np.ndarray) -> bool:
    """Is the last axis longer than 1 dense? The conservative form of the run-time
    check in backends/Jit.cpp (which raises): a symbolic innermost dim of size 1
    here is copied too, where the kernel would take it."""
    for n, st in zip(reversed(a.shape), reversed(a.strides)):
        if n > 1:
            return st == a.itemsize
    return True


def kernel(fn: Callable[..., Any] | None = None, *, target: str = "host", dynamic: bool = True,
           name: str | None = None, schedule: Callable[[Any, Schedule], Schedule | None] | None = None,
           static_variants: bool = True, opt_level: int | None = None) -> Any:
    """Decorator: `@pypto.kernel` or `@pypto.kernel(target="host", dynamic=False)`.

    `static_variants=False`: a dynamic kernel runs every size on its one symbolic
    kernel, guarded loops included (module doc). `opt_level`: 0 plain loops (the
    reference), 1 vectorize and parallelize only, 2 the schedule (default), 3 the
    schedule with fast-math (docs/TROUBLESHOOTING.md)."""
    def wrap(f: Callable[..., Any]) -> KernelFunction:
        return KernelFunction(f, target=target, dynamic=dynamic, name=name, schedule=schedule,
                              static_variants=static_variants, opt_level=opt_level)
    return wrap(fn) if fn is not None else wrap
