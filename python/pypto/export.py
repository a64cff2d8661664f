"""`k.export(...)`: a static library + C headers, and loading it back through ctypes.

`export` calls the C++ generator (`generate_library`): `<name>.a` with the
Halide runtime inside, Halide's `<name>.h` and PTO's plain C `<name>_pto.h`
(`<name>_run(sizes..., inputs..., outputs...)`, error code + message). A C or
C++ application links the `.a` alone. `ExportedLibrary.load()` is for checking
from Python: it links the `.a` into a shared object with a two-function C shim
(the `_run` wrapper in the header is `static inline`) and calls it with ctypes
on numpy arrays, without Halide or PTO in the call path.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._ext import _pto
from .errors import KernelError, TargetError

_NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16, "i32": np.int32,
       "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_}


def _np_dtype(dt: str) -> Any:
    if dt == "bf16":
        from ml_dtypes import bfloat16
        return np.dtype(bfloat16)
    return np.dtype(_NP[dt])


@dataclass
class ExportedLibrary:
    name: str
    library: str
    header: str
    halide_header: str
    symbols: list[str]                       # size parameters, in call order
    inputs: list[tuple[str, list, str]]      # (name, shape, dtype)
    outputs: list[tuple[str, list, str]]

    def load(self, cc: str | None = None) -> "LoadedLibrary":
        cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if not cc:
            raise TargetError("no C compiler (cc/gcc) found to link the exported library for ctypes")
        d = os.path.dirname(self.library)
        shim = os.path.join(d, f"{self.name}_ctypes.c")
        params = [f"int64_t {s}" for s in self.symbols] + [f"const void* {n}" for n, _, _ in self.inputs] + \
                 [f"void* {n}" for n, _, _ in self.outputs]
        # The header's wrapper takes typed pointers; casting through void* keeps the shim type-agnostic.
        call_args = self.symbols + [f"({_c_type(dt, True)}){n}" for n, _, dt in self.inputs] + \
                    [f"({_c_type(dt, False)}){n}" for n, _, dt in self.outputs]
        with open(shim, "w") as f:
            f.write(f'#include "{self.name}_pto.h"\n'
                    f"int {self.name}_ctypes_run({', '.join(params)}) {{\n"
                    f"  return {self.name}_run({', '.join(call_args)});\n}}\n"
                    f"const char* {self.name}_ctypes_error(void) {{ return {self.name}_last_error(); }}\n"
                    f"void {self.name}_ctypes_set_memory_limit(size_t bytes, int shard) "
                    f"{{ {self.name}_set_memory_limit(bytes, shard); }}\n"
                    f"int {self.name}_ctypes_last_shards(void) {{ return {self.name}_last_shards(); }}\n")
        so = os.path.join(d, f"lib{self.name}.so")
        cmd = [cc, "-shared", "-fPIC", "-O1", "-I", d, "-o", so, shim, self.library, "-lpthread", "-ldl", "-lm"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise KernelError(f"linking {so} failed: {' '.join(cmd)}\n{r.stderr}")
        return LoadedLibrary(self, ctypes.CDLL(so))


def _c_type(dt: str, const: bool) -> str:
    base = {"f32": "float", "f64": "double", "f16": "uint16_t", "bf16": "uint16_t", "bool": "bool",
            "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "u8": "uint8_t",
            "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t"}[dt]
    return ("const " if const else "") + base + "*"


class LoadedLibrary:
    """An exported kernel called through ctypes: `lib(*arrays)` -> outputs (numpy)."""

    def __init__(self, meta: ExportedLibrary, dll: ctypes.CDLL):
        self.meta = meta
        self.dll = dll
        self._run = getattr(dll, f"{meta.name}_ctypes_run")
        n = len(meta.symbols)
        self._run.argtypes = [ctypes.c_int64] * n + [ctypes.c_void_p] * (len(meta.inputs) + len(meta.outputs))
        self._run.restype = ctypes.c_int
        self._err = getattr(dll, f"{meta.name}_ctypes_error")
        self._err.restype = ctypes.c_char_p
        self._limit = getattr(dll, f"{meta.name}_ctypes_set_memory_limit")
        self._limit.argtypes = [ctypes.c_size_t, ctypes.c_int]
        self._shards = getattr(dll, f"{meta.name}_ctypes_last_shards")
        self._shards.restype = ctypes.c_int

    def set_memory_limit(self, nbytes: int, shard: bool = False) -> None:
        """`<name>_set_memory_limit`: cap the intermediates (bytes, 0: none); with `shard`, a call
        over it runs in shards along the kernel's symbolic batch axis (where it has one)."""
        self._limit(int(nbytes), int(bool(shard)))

    @property
    def last_shards(self) -> int:
        """Into how many shards the last call was split (1: not split)."""
        return int(self._shards())

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        m = self.meta
        if len(arrays) != len(m.inputs):
            raise TypeError(f"{m.name} takes {len(m.inputs)} arrays, got {len(arrays)}")
        sizes: dict[str, int] = {}
        ins = []
        for a, (n, shape, dt) in zip(arrays, m.inputs):
            a = np.ascontiguousarray(a, dtype=_np_dtype(dt))
            if a.ndim != len(shape):
                raise ValueError(f"{m.name}: input '{n}' must have rank {len(shape)}")
            for d, v in zip(shape, a.shape):
                if isinstance(d, str):
                    if sizes.setdefault(d, int(v)) != v:
                        raise ValueError(f"{m.name}: input '{n}' binds '{d}' to {v}, earlier {sizes[d]}")
                elif d != v:
                    raise ValueError(f"{m.name}: input '{n}' has shape {list(a.shape)}, expected {shape}")
            ins.append(a)
        outs = [np.empty([sizes[d] if isinstance(d, str) else d for d in shape], dtype=_np_dtype(dt))
                for _, shape, dt in m.outputs]
        rc = self._run(*[sizes[s] for s in m.symbols], *[a.ctypes.data for a in ins], *[o.ctypes.data for o in outs])
        if rc:
            from .errors import DeviceMemoryError
            err = self._err().decode(errors="replace")
            raise (DeviceMemoryError if rc == -3 else KernelError)(f"{m.name}_run returned {rc}: {err}")
        return outs[0] if len(outs) == 1 else tuple(outs)


def export(spec: Any, target: str, path: str, name: str, check_numerics: bool = False) -> ExportedLibrary:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"export: library name '{name}' must be a C identifier")
    p = spec.program
    schedule = spec.schedule.copy()
    if check_numerics:  # the _run wrapper scans the float outputs: an error code and message on NaN/Inf
        schedule.set_options(check_numerics=True)
    g = _pto.generate_library(p, schedule.to_json(), target, os.path.abspath(path), name)
    ins = [(n, list(s), dt) for n, s, dt in p.inputs()]
    outs = [(o, list(p.tensor(o).shape), p.tensor(o).dtype) for o in p.outputs()]
    return ExportedLibrary(name, g["library"], g["header"], g["halide_header"], sorted(p.symbols()), ins, outs)
