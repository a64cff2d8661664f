"""Traced tensors: numpy-style code that builds a PTO Program.

Inside a `@pypto.kernel` function the arguments are `pypto.Tensor`s: symbolic
placeholders, not arrays. Every operator applied to them adds stages to the
kernel's Program instead of computing values, so the function runs once per
shape/dtype signature and the Program is then scheduled and compiled.

Where each operator goes:
  * tensor-tensor `+ - * /`, `@`, the reductions (`.sum/.mean/.max/.min/.prod/
    .var/.std/.argmax/.argmin`), `.T`/`.transpose`, `.reshape`, slicing and
    integer indexing, `.take`, relu, softmax, ... are the C++ operator library,
    reached by name through `_pto.ops_call` (the one generic binding; see
    `pypto.ops`);
  * arithmetic with Python scalars, comparisons, `**`, `%`, unary math
    (`pypto.exp`, ...) and `.astype` are element definitions written here with
    the DSL's expressions (`Program.define`): one-line formulas over numpy
    broadcasting and numpy's type rules, not library operators.
Where an operator needs the value of a symbolic size (a slice of a symbolic
axis, a reshape that splits one), C++ raises SymbolicSizeError and the kernel
retraces that signature with static sizes.
"""
from __future__ import annotations

import json
import numbers
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ._ext import _pto
from .errors import DTypeError, ShapeError, SymbolicSizeError

# Larger than any extent: an open slice end that the C++ slice clamps into range.
_OPEN = 1 << 62


# numpy dtype -> PTO name: every kernel call names its arguments' dtypes, and
# numpy's dtype.name costs microseconds.
_DTYPE_NAMES: dict[np.dtype, str] = {}


def dtype_name(dt: Any) -> str:
    """PTO's name of a dtype given as a PTO name, numpy dtype or type ('f32', np.float32, ...)."""
    if isinstance(dt, str):
        return _pto.parse_dtype(dt)
    if isinstance(dt, np.dtype) and dt in _DTYPE_NAMES:
        return _DTYPE_NAMES[dt]
    try:
        d = np.dtype(dt)
    except TypeError as e:
        raise DTypeError(f"not a dtype: {dt!r}") from e
    name = _pto.parse_dtype(d.name)
    _DTYPE_NAMES[d] = name
    return name


class _Trace:
    """The Program one traced call builds, plus what its schedule needs to know."""

    def __init__(self, name: str):
        self.program = _pto.Program(name)
        self.devices: dict[str, str] = {}     # stage -> device, from Tensor.to()
        self.taps: list[tuple[str, str]] = []  # (label, tensor) from debug_print()


_state = threading.local()


def _push(trace: _Trace) -> None:
    _state.__dict__.setdefault("stack", []).append(trace)


def _pop() -> None:
    _state.stack.pop()


def current_trace() -> _Trace | None:
    stack = getattr(_state, "stack", [])
    return stack[-1] if stack else None


class TensorSpec:
    """An annotation: `pypto.Tensor["M", "K"]`, `pypto.Tensor["M", 64, "bf16"]`.

    str dims are symbolic sizes shared by name across arguments; int dims are fixed.
    A trailing dtype name (f32, bf16, ...) fixes the element type.
    """

    def __init__(self, shape: Sequence[int | str] | None, dtype: str | None):
        self.shape = None if shape is None else tuple(shape)
        self.dtype = None if dtype is None else dtype_name(dtype)

    def __repr__(self) -> str:
        return f"Tensor[{', '.join(map(str, self.shape or ()))}{', ' + self.dtype if self.dtype else ''}]"


def _is_scalar(x: Any) -> bool:
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, complex)


def _scalar(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    return float(x)


def broadcast_shapes(op: str, shapes: Sequence[Sequence[int | str]]) -> list[int | str]:
    """numpy broadcasting over static and symbolic dims (a symbol only matches itself or 1)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int | str] = []
    for k in range(rank, 0, -1):
        dims = [s[len(s) - k] for s in shapes if len(s) >= k]
        non1 = [d for d in dims if d != 1]
        if any(d != non1[0] for d in non1):
            raise ShapeError(f"{op}: shapes {[list(s) for s in shapes]} do not broadcast "
                             f"(axis {rank - k} of the result: {dims})")
        out.append(non1[0] if non1 else 1)
    return out


class Tensor:
    """A symbolic tensor of the Program being traced (see module doc)."""

    __array_ufunc__ = None       # numpy scalars and arrays defer to our reflected operators
    __array_priority__ = 1000

    def __init__(self, handle: Any, trace: _Trace):
        self._h = handle
        self._trace = trace

    def __class_getitem__(cls, item: Any) -> TensorSpec:
        items = list(item) if isinstance(item, tuple) else [item]
        dtype = None
        if items and isinstance(items[-1], str) and items[-1] in _DTYPE_WORDS:
            dtype = items.pop()
        elif items and not isinstance(items[-1], (str, int)):
            dtype = items.pop()  # np.float32, ml_dtypes.bfloat16
        return TensorSpec(items, dtype)

    # ---- properties ----------------------------------------------------------
    @property
    def name(self) -> str:
        return self._h.name

    @property
    def shape(self) -> tuple[int | str, ...]:
        return tuple(self._h.shape)

    @property
    def dtype(self) -> str:
        return self._h.dtype

    @property
    def ndim(self) -> int:
        return self._h.rank

    @property
    def program(self) -> Any:
        return self._trace.program

    def __repr__(self) -> str:
        return f"pypto.Tensor({self.name}: {self.dtype}[{', '.join(map(str, self.shape))}])"

    def __bool__(self) -> bool:
        raise TypeError(f"the truth value of traced tensor '{self.name}' is unknown while tracing; "
                        "use pypto.where(cond, a, b) instead of `if`")

    def __iter__(self):
        raise TypeError(f"cannot iterate over traced tensor '{self.name}'; index it or use a reduction")

    def __array__(self, *args: Any, **kwargs: Any):
        raise TypeError(f"traced tensor '{self.name}' has no values yet: numpy functions cannot be applied "
                        "inside a pypto.kernel (use its operators, pypto.* functions or pypto.ops.*)")

    # ---- arithmetic ------------------------------------------------------------
    def _binary(self, other: Any, op: str, lib: str | None, reverse: bool = False) -> "Tensor":
        if isinstance(other, Tensor):
            a, b = (other, self) if reverse else (self, other)
            if lib is not None and a.dtype == b.dtype:
                return call(lib, a, b)
            return elementwise(op, [a, b], lambda x, y: _pto.binary(op, x, y))
        if _is_scalar(other):
            c = _scalar(other)
            f = (lambda x: _pto.binary(op, c, x)) if reverse else (lambda x: _pto.binary(op, x, c))
            return elementwise(op, [self], f)
        return NotImplemented

    def __add__(self, o): return self._binary(o, "add", "add")
    def __radd__(self, o): return self._binary(o, "add", "add", True)
    def __sub__(self, o): return self._binary(o, "sub", "sub")
    def __rsub__(self, o): return self._binary(o, "sub", "sub", True)
    def __mul__(self, o): return self._binary(o, "mul", "mul")
    def __rmul__(self, o): return self._binary(o, "mul", "mul", True)
    def __truediv__(self, o): return self._true()._binary(_true(o), "div", "div")
    def __rtruediv__(self, o): return self._true()._binary(_true(o), "div", "div", True)

    def _true(self) -> "Tensor":
        # numpy's true division of integers is float64 division.
        return self if _is_float(self.dtype) else self.astype("f64")
    def __mod__(self, o):
        if _int32ish(self, o):  # numpy: the remainder has the sign of the divisor
            return self - (self // o) * o
        return self._binary(o, "mod", None)

    def __rmod__(self, o):
        if _int32ish(self, o):
            return o - (o // self) * self
        return self._binary(o, "mod", None, True)
    def __pow__(self, o): return self._binary(o, "pow", None)
    def __rpow__(self, o): return self._binary(o, "pow", None, True)
    def __lt__(self, o): return self._binary(o, "lt", None)
    def __le__(self, o): return self._binary(o, "le", None)
    def __gt__(self, o): return self._binary(o, "gt", None)
    def __ge__(self, o): return self._binary(o, "ge", None)
    def __eq__(self, o): return self._binary(o, "eq", None)  # type: ignore[override]
    def __ne__(self, o): return self._binary(o, "ne", None)  # type: ignore[override]
    def __and__(self, o): return self._binary(o, "and", None)
    def __or__(self, o): return self._binary(o, "or", None)
    __hash__ = object.__hash__

    def __floordiv__(self, o):
        if not (isinstance(o, Tensor) or _is_scalar(o)):
            return NotImplemented
        if _is_float(self.dtype):
            return floor(self / o)
        if _int32ish(self, o):
            # numpy floors the quotient; Halide's integer division is Euclidean (they differ
            # for negative divisors). Through f64 it is exact for 32-bit integers.
            return floor(self.astype("f64") / o).astype(self.dtype if not isinstance(o, Tensor) else
                                                      _pto.promote(self.dtype, o.dtype))
        return self._binary(o, "div", None)  # 64-bit integers: Euclidean division

    def __rfloordiv__(self, o):
        if not _is_scalar(o):
            return NotImplemented
        if _is_float(self.dtype):
            return floor(o / self)
        return floor(o / self.astype("f64")).astype(self.dtype) if _int32ish(self, o) else \
            self._binary(o, "div", None, True)

    def __neg__(self): return elementwise("neg", [self], lambda x: -x)
    def __pos__(self): return self
    def __abs__(self): return elementwise("abs", [self], lambda x: _pto.unary("abs", x))
    def __invert__(self): return elementwise("not", [self], lambda x: ~x)

    def __matmul__(self, o):
        return call("matmul", self, o) if isinstance(o, Tensor) else NotImplemented

    def __rmatmul__(self, o):
        return call("matmul", o, self) if isinstance(o, Tensor) else NotImplemented

    # ---- reductions --------------------------------------------------------------
    def _reduce(self, lib: str, axis: Any, keepdims: bool, out: Any = None, **attrs: Any) -> "Tensor":
        if out is not None:
            raise TypeError("out= is not supported on traced tensors (kernels return new arrays)")
        axes = [] if axis is None else ([int(axis)] if isinstance(axis, (int, np.integer)) else [int(a) for a in axis])
        return call(lib, self, axes=axes, keepdims=bool(keepdims), **attrs)

    def sum(self, axis=None, keepdims=False, out=None): return self._reduce("reduce_sum", axis, keepdims, out)
    def mean(self, axis=None, keepdims=False, out=None): return self._reduce("reduce_mean", axis, keepdims, out)
    def max(self, axis=None, keepdims=False, out=None): return self._reduce("reduce_max", axis, keepdims, out)
    def min(self, axis=None, keepdims=False, out=None): return self._reduce("reduce_min", axis, keepdims, out)
    def prod(self, axis=None, keepdims=False, out=None): return self._reduce("reduce_prod", axis, keepdims, out)

    def var(self, axis=None, ddof=0, keepdims=False, out=None):
        return self._reduce("reduce_var", axis, keepdims, out, ddof=int(ddof))

    def std(self, axis=None, ddof=0, keepdims=False, out=None):
        return self._reduce("reduce_std", axis, keepdims, out, ddof=int(ddof))

    def argmax(self, axis=None, keepdims=False): return self._arg("argmax", axis, keepdims)
    def argmin(self, axis=None, keepdims=False): return self._arg("argmin", axis, keepdims)

    def _arg(self, lib: str, axis: Any, keepdims: bool) -> "Tensor":
        # numpy: axis=None means the flattened array; the library op takes one axis.
        if axis is None:
            flat = call(lib, self.reshape(-1), axis=0)
            return flat.reshape([1] * self.ndim) if keepdims else flat
        return call(lib, self, axis=int(axis), keepdims=bool(keepdims))

    # ---- data movement -------------------------------------------------------------
    @property
    def T(self) -> "Tensor":
        return self.transpose()

    def transpose(self, *axes: int) -> "Tensor":
        axes = tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        return call("transpose", self, perm=[int(a) for a in axes])  # empty: reversed, as numpy

    def reshape(self, *shape: Any) -> "Tensor":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return reshape(self, shape)

    def flatten(self) -> "Tensor":
        return reshape(self, (-1,))

    def __getitem__(self, key: Any) -> "Tensor":
        return _getitem(self, key)

    def take(self, indices: "Tensor", axis: int | None = None) -> "Tensor":
        """numpy take: elements along `axis` (the flattened array when None) at integer `indices`.

        Indices are wrapped once when negative and then clamped (the C++ gather), where numpy
        would raise for an out-of-range index.
        """
        if not isinstance(indices, Tensor):
            raise TypeError(f"take: indices must be a pypto.Tensor of integers, got {type(indices).__name__}")
        if axis is None:
            return call("gather", self.reshape(-1), indices, axis=0)
        return call("gather", self, indices, axis=int(axis))

    def astype(self, dtype: Any) -> "Tensor":
        dt = dtype_name(dtype)
        return elementwise("cast", [self], lambda x: _pto.cast(dt, x))

    def to(self, device: str) -> "Tensor":
        """Places the stage producing this tensor on `device` (the schedule's `device`).

        Inputs get a copy stage on that device. The target decides whether the
        device exists: on a CPU-only target a non-cpu device is a ScheduleError
        when the kernel is compiled.
        """
        t = self
        if self.name in {n for n, _, _ in self.program.inputs()}:
            t = elementwise(f"to_{device}", [self], lambda x: x)
        self._trace.devices[t.name] = device
        return t


_DTYPE_WORDS = set(_pto.dtype_names()) | {"float32", "float64", "float16", "bfloat16", "int32", "int64",
                                          "int8", "int16", "uint8", "fp16", "fp32"}


def _int32ish(a: Any, b: Any) -> bool:
    """Both operands integers of at most 32 bits (Python ints count)."""
    def ok(x: Any) -> bool:
        if isinstance(x, Tensor):
            return x.dtype in ("i8", "i16", "i32", "u8", "u16")
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool)
    return ok(a) and ok(b)


def _true(o: Any) -> Any:
    return o._true() if isinstance(o, Tensor) else o


def _is_float(dt: str) -> bool:
    return dt in ("f16", "bf16", "f32", "f64")


def _trace_of(args: Sequence[Any]) -> _Trace:
    traces = {id(a._trace): a._trace for a in args if isinstance(a, Tensor)}
    if not traces:
        raise TypeError("expected at least one pypto.Tensor argument")
    if len(traces) > 1:
        raise ValueError("tensors of different kernels (traces) cannot be combined")
    return next(iter(traces.values()))


def call(op: str, *inputs: Tensor, name: str = "", **attrs: Any) -> Tensor:
    """Calls library operator `op` by name (the one generic binding, ops::call)."""
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: input {i} must be a pypto.Tensor, got {type(t).__name__}")
    trace = _trace_of(inputs)
    # A SymbolicSizeError (the op needs the value of a symbolic dim) propagates:
    # the kernel then specializes this signature per shape instead of failing.
    return Tensor(_pto.ops_call(op, [t._h for t in inputs], json.dumps(attrs), name), trace)


def elementwise(op: str, inputs: Sequence[Tensor], f: Callable[..., Any], dtype: str | None = None) -> Tensor:
    """out[idx] = f(in_0[idx_0], ...) over numpy-broadcast inputs, as one element definition."""
    trace = _trace_of(inputs)
    shape = broadcast_shapes(op, [t.shape for t in inputs])
    vars = [f"i{k}" for k in range(len(shape))]
    args = []
    for t in inputs:
        off = len(shape) - t.ndim
        idx = [0 if (d == 1 and shape[off + k] != 1) else _pto.var(vars[off + k]) for k, d in enumerate(t.shape)]
        args.append(t._h(*idx))
    value = f(*args)
    if dtype is not None:
        value = _pto.cast(dtype, value)
    # Stage names may equal C library functions (`tanh`): the lowering renames
    # those in the generated code (backends/Lower.cpp), so any name is fine here.
    p = trace.program
    return Tensor(p.define(p.unique_name(op), vars, list(shape), value, "elementwise", op), trace)


def reshape(x: Tensor, shape: Sequence[int | str]) -> Tensor:
    """numpy reshape (row-major) through the C++ `reshape`; -1 infers one size.

    Symbolic dims are kept where they stay in place (C++ copies leading ones) or
    where only size-1 dims are added or removed (squeeze + unsqueeze); merging or
    splitting a symbolic dim raises SymbolicSizeError (the kernel goes static).
    """
    shape = [int(d) if isinstance(d, (int, np.integer)) else d for d in shape]
    if list(shape) == list(x.shape):
        return x
    if any(isinstance(d, int) and (d == 0 or d < -1) for d in shape):
        raise ShapeError(f"reshape: bad shape {list(shape)} for '{x.name}' of shape {list(x.shape)} "
                         "(sizes are > 0, or -1 to infer one; empty tensors are not supported)")
    if any(isinstance(d, str) for d in x.shape) and [d for d in shape if d != 1] == [d for d in x.shape if d != 1]:
        y = x
        units = [k for k, d in enumerate(x.shape) if d == 1]
        if units:
            y = call("squeeze", y, axes=units)
        new = [k for k, d in enumerate(shape) if d == 1]
        return call("unsqueeze", y, axes=new) if new else y
    target = []
    for k, d in enumerate(shape):
        if isinstance(d, str):
            if k >= x.ndim or x.shape[k] != d:
                raise SymbolicSizeError(f"reshape of '{x.name}' {list(x.shape)} to {list(shape)} moves symbolic "
                                        f"'{d}' to axis {k}")
            d = 0  # the C++ reshape's "copy this input dim"
        target.append(d)
    return call("reshape", x, shape=target)


def _getitem(x: Tensor, key: Any) -> Tensor:
    """numpy basic indexing as C++ ops: `slice` (ints are one-element slices), `squeeze`
    (the int-indexed axes), `unsqueeze` (the `None`s); a lone Tensor index is `gather`."""
    key = key if isinstance(key, tuple) else (key,)
    at = [a for a, k in enumerate(key) if isinstance(k, Tensor)]
    if at:
        if len(at) == 1 and all(isinstance(k, Tensor) or k == slice(None) for k in key):
            return x.take(key[at[0]], axis=at[0])
        raise NotImplementedError("indexing with a pypto.Tensor is supported alone or among full slices "
                                  "(x[i], x[:, i]: gather); use x.take(i, axis) and slice separately")
    if any(isinstance(k, (list, np.ndarray)) for k in key):
        raise NotImplementedError("indexing with a list or array constant: pass the indices to the kernel as an "
                                  "integer argument (a pypto.Tensor) and index with it (gather)")
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > x.ndim:
        raise IndexError(f"too many indices for '{x.name}' of shape {list(x.shape)}: {n_real}")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - n_real) + key[i + 1:]
    key = key + (slice(None),) * (x.ndim - sum(1 for k in key if k is not None))
    starts, ends, axes, steps = [], [], [], []
    drop: list[int] = []   # axes of x an integer removes
    new: list[int] = []    # axes of the result a None inserts
    axis = pos = 0
    for k in key:
        if k is None:
            new.append(pos)
            pos += 1
            continue
        d = x.shape[axis]
        if isinstance(k, (int, np.integer)):
            k = int(k)
            if isinstance(d, int):
                if not -d <= k < d:
                    raise IndexError(f"index {k} is out of bounds for axis {axis} of '{x.name}' (size {d})")
                k %= d
            starts.append(k)
            ends.append(k + 1 if k != -1 else _OPEN)
            axes.append(axis)
            steps.append(1)
            drop.append(axis)
        elif isinstance(k, slice):
            if k != slice(None):
                step = 1 if k.step is None else int(k.step)
                starts.append((0 if step > 0 else -1) if k.start is None else int(k.start))
                ends.append((_OPEN if step > 0 else -_OPEN) if k.stop is None else int(k.stop))
                axes.append(axis)
                steps.append(step)
            pos += 1
        else:
            raise IndexError(f"unsupported index {k!r} for '{x.name}'")
        axis += 1
    y = call("slice", x, starts=starts, ends=ends, axes=axes, steps=steps) if starts else x
    if drop:
        y = call("squeeze", y, axes=drop)
    return call("unsqueeze", y, axes=new) if new else y


# ---- functions ------------------------------------------------------------------
def _unary(name: str) -> Callable[[Tensor], Tensor]:
    def f(x: Tensor) -> Tensor:
        return elementwise(name, [x], lambda e: _pto.unary(name, e))
    f.__name__ = name
    f.__doc__ = f"Elementwise {name}(x)."
    return f


exp, log, sqrt, tanh, sin, cos, erf, floor, ceil = (_unary(n) for n in
                                                    ("exp", "log", "sqrt", "tanh", "sin", "cos", "erf", "floor",
                                                     "ceil"))


def sigmoid(x: Tensor) -> Tensor:
    return elementwise("sigmoid", [x], lambda e: 1.0 / (1.0 + _pto.unary("exp", -e)))


def where(cond: Tensor, a: Tensor | float, b: Tensor | float) -> Tensor:
    ts = [t for t in (cond, a, b) if isinstance(t, Tensor)]
    pos = {id(t): i for i, t in enumerate(ts)}

    def f(*args):
        pick = lambda v: args[pos[id(v)]] if isinstance(v, Tensor) else _scalar(v)  # noqa: E731
        return _pto.select(pick(cond), pick(a), pick(b))
    return elementwise("where", ts, f)


def maximum(a: Tensor, b: Any) -> Tensor:
    return call("maximum", a, b) if isinstance(b, Tensor) and a.dtype == b.dtype else a._binary(b, "max", None)


def minimum(a: Tensor, b: Any) -> Tensor:
    return call("minimum", a, b) if isinstance(b, Tensor) and a.dtype == b.dtype else a._binary(b, "min", None)


def matmul(a: Tensor, b: Tensor) -> Tensor:
    return call("matmul", a, b)


def transpose(x: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    return x.transpose(*(axes or ()))


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """numpy concatenate through the C++ `concat` (the joined axis must be static)."""
    return call("concat", *tensors, axis=int(axis))


def take(x: Tensor, indices: Tensor, axis: int | None = None) -> Tensor:
    return x.take(indices, axis)
