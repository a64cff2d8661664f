"""`custom_op(impl=...)`: hand-written code behind a framework-described operator.

    def gelu_fast(x):                     # hand-optimized: numpy, or C through ctypes
        ...
    @pypto.custom_op(impl=gelu_fast)
    def gelu(x):                          # the description, in pypto
        return 0.5 * x * (1 + pypto.erf(x * 0.7071067811865476))

    gelu(np_array)          -> runs impl (the hand-written code)
    gelu(traced_tensor)     -> expands the description into the enclosing kernel
    gelu.check(np_array)    -> compares impl with the compiled description

The description is the operator's meaning (schedulable, exportable); `impl` is
used where the op is called on arrays. Splicing `impl` into a generated kernel
needs extern stages in the C++ core (Halide define_extern), which PTO does not
have yet: inside a kernel the description is what runs.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from .kernel import KernelFunction
from .tensor import Tensor


class CustomOp:
    def __init__(self, fn: Callable[..., Any], impl: Callable[..., Any] | None, name: str | None):
        functools.update_wrapper(self, fn)
        self.description = fn
        self.impl = impl
        self.name = name or fn.__name__
        self.reference = KernelFunction(fn, name=self.name)

    def __call__(self, *args: Any) -> Any:
        if any(isinstance(a, Tensor) for a in args):
            return self.description(*args)
        if self.impl is None:
            return self.reference(*args)
        return self.impl(*args)

    def check(self, *arrays: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> float:
        """Max |impl - description| over the outputs; raises AssertionError beyond rtol/atol."""
        if self.impl is None:
            raise ValueError(f"custom_op '{self.name}' has no impl to check")
        want = self.reference(*arrays)
        got = self.impl(*arrays)
        want_t = want if isinstance(want, tuple) else (want,)
        got_t = got if isinstance(got, tuple) else (got,)
        worst = 0.0
        for w, g in zip(want_t, got_t):
            w64, g64 = np.asarray(w, np.float64), np.asarray(g, np.float64)
            if w64.shape != g64.shape:
                raise AssertionError(f"custom_op '{self.name}': impl returned shape {g64.shape}, "
                                     f"the description {w64.shape}")
            err = np.abs(g64 - w64)
            worst = max(worst, float(err.max(initial=0.0)))
            if np.any(err > atol + rtol * np.abs(w64)):
                raise AssertionError(f"custom_op '{self.name}': impl differs from the description by up to "
                                     f"{worst:.3g} (rtol {rtol}, atol {atol})")
        return worst


def custom_op(fn: Callable[..., Any] | None = None, *, impl: Callable[..., Any] | None = None,
              name: str | None = None) -> Any:
    def wrap(f: Callable[..., Any]) -> CustomOp:
        return CustomOp(f, impl, name)
    return wrap(fn) if fn is not None else wrap
