"""`pypto.ops.<name>(*tensors, name="", **attrs)`: the whole C++ operator library.

Functions are made on first use from the C++ registry (`_pto.ops_registry()`),
all through the one generic binding `ops::call(name, inputs, attrs_json)`: when
an operator is added in C++ it appears here without any Python change.
Attributes are passed as keyword arguments and travel as JSON; unknown names
raise DefinitionError listing the valid ones.
"""
from __future__ import annotations

from typing import Any, Callable

from ._ext import _pto
from .tensor import Tensor, call


def registry() -> list[tuple[str, str, str]]:
    """[(name, kind, summary)] of every operator type, sorted by name."""
    return [tuple(r) for r in _pto.ops_registry()]


def names() -> list[str]:
    return [n for n, _, _ in _pto.ops_registry()]


def _make(op: str, kind: str, summary: str) -> Callable[..., Tensor]:
    def f(*inputs: Tensor, name: str = "", **attrs: Any) -> Tensor:
        return call(op, *inputs, name=name, **attrs)
    f.__name__ = op
    f.__qualname__ = op
    f.__doc__ = f"{summary} ({kind}). Calls the C++ operator '{op}' through ops::call."
    return f


def __getattr__(op: str) -> Callable[..., Tensor]:
    for n, kind, summary in _pto.ops_registry():
        if n == op:
            f = _make(n, kind, summary)
            globals()[op] = f  # cache
            return f
    raise AttributeError(f"pypto.ops has no operator '{op}'; operators: {', '.join(names())}")


def __dir__() -> list[str]:
    return sorted(set(names()) | {"registry", "names"})
