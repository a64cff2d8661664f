"""`mixed_precision`: per-stage precision directives from one decorator.

    @pypto.kernel
    @pypto.mixed_precision(precision="bf16", keep={"softmax": "f32"})
    def block(x, w): ...

Contractions and convolutions (the bandwidth- and FLOP-heavy stages) compute in
`precision` and accumulate in `accumulate` (f32 by default: the critical
accumulations stay wide); their intermediate storage narrows too (outputs keep
their interface dtype). Stages matched by `keep` (an operator name such as
"softmax", an operator kind such as "normalization", or a stage name) get the
given type for storage, compute and accumulation. The report's spelling
`keep_batch_norm="fp32"` works too: `keep_<name>=<type>`. The result is plain
schedule data: `k.schedule()` shows it and it can be edited further.
"""
from __future__ import annotations

from typing import Any, Callable

from ._ext import _pto

_ALIASES = {"fp16": "f16", "half": "f16", "fp32": "f32", "float": "f32", "fp64": "f64", "bfloat16": "bf16"}


def _dt(name: str) -> str:
    return _pto.parse_dtype(_ALIASES.get(name, name))


class PrecisionPolicy:
    def __init__(self, precision: str, accumulate: str, keep: dict[str, str]):
        self.precision = _dt(precision)
        self.accumulate = _dt(accumulate)
        self.keep = {k: _dt(v) for k, v in keep.items()}

    def apply(self, program: Any, schedule: Any) -> None:
        outputs = set(program.outputs())
        for st in program.stages():
            if not st["dtype"].startswith(("f", "bf")):
                continue
            kept = next((self.keep[k] for k in (st["name"], st["op"], st["kind"]) if k in self.keep), None)
            if kept is not None:
                ss = schedule[st["name"]]
                if st["name"] in outputs:
                    ss.precision(compute=kept, accumulate=kept if st["reduce"] else None)
                else:
                    ss.precision(storage=kept, compute=kept, accumulate=kept if st["reduce"] else None)
            elif st["kind"] in ("contraction", "convolution"):
                ss = schedule[st["name"]]
                ss.precision(compute=self.precision, accumulate=self.accumulate if st["reduce"] else None)
                if st["name"] not in outputs:
                    ss.precision(storage=self.precision)

    def __repr__(self) -> str:
        return f"mixed_precision(precision={self.precision!r}, accumulate={self.accumulate!r}, keep={self.keep!r})"


def mixed_precision(precision: str = "bf16", keep: dict[str, str] | None = None, accumulate: str = "f32",
                    **keep_kwargs: str) -> Callable[[Any], Any]:
    keep = dict(keep or {})
    for k, v in keep_kwargs.items():
        if not k.startswith("keep_"):
            raise TypeError(f"mixed_precision: unknown argument '{k}' (use keep={{...}} or keep_<op>=<dtype>)")
        keep[k[len("keep_"):]] = v
    policy = PrecisionPolicy(precision, accumulate, keep)

    def wrap(f: Any) -> Any:
        from .kernel import KernelFunction
        if isinstance(f, KernelFunction):
            f.precision = policy
            f._specs.clear()
        else:
            f.__pypto_precision__ = policy
        return f
    return wrap
