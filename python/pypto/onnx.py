"""ONNX models in PTO: import, run, and the ONNX backend interface.

    model = pypto.onnx.load("resnet50.onnx")       # a path, bytes or an onnx.ModelProto
    (y,) = model(x)                                  # numpy in, numpy out (one array per graph output)
    model.program(x)                                 # the imported Program (pto's DSL)

The import is PTO's C++ importer (frontends/onnx/Import.h): every node becomes
operators of the library, nodes computable from constants are folded at
import, initializers become program inputs bound to their data. A model is
imported and compiled once per input shape it is called with (a model's
symbolic dims, such as batch, take the call's sizes), with the default
schedules of the target.

`Backend` implements `onnx.backend.base.Backend`, so the ONNX backend test
suite runs against PTO (test/python/test_onnx_backend.py).
"""
from __future__ import annotations

import os
import re
from typing import Any, Sequence

import numpy as np

from ._ext import _pto

__all__ = ["load", "Model", "Backend", "BackendRep", "supported_operators", "reference"]


def supported_operators() -> list[str]:
    """The ONNX operator types the importer converts."""
    return list(_pto.onnx_operators())


def _model_bytes(model: Any) -> bytes:
    if isinstance(model, (bytes, bytearray)):
        return bytes(model)
    if isinstance(model, (str, os.PathLike)):
        with open(model, "rb") as f:
            return f.read()
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString()
    raise TypeError(f"pypto.onnx.load: expected a path, bytes or an onnx.ModelProto, got {type(model).__name__}")


class _Compiled:
    """One input shape's import: the program, its kernel and its bound weights."""

    def __init__(self, model_bytes: bytes, shapes: dict[str, list[int]], values: dict[str, np.ndarray], target: str):
        fixed = {n: (_pto_dtype(a.dtype), [int(d) for d in a.shape], a.astype(np.float64).ravel().tolist())
                 for n, a in values.items()}
        d = _pto.onnx_import(model_bytes, shapes, fixed)
        self.program = d["program"]
        self.input_names = list(d["input_names"])
        self.output_names = list(d["output_names"])
        self.outputs = list(d["outputs"])
        self.folded_nodes = int(d["folded_nodes"])
        weights = {name: a.astype(_np_dtype(dt)) for name, dt, a in d["weights"]}
        self._program_input = dict(zip(d["input_names"], d["inputs"]))  # model input -> program input
        self._weights = weights
        # A large model compiles in parts, cut where the default schedule
        # stores every crossing tensor anyway (schedules/Partition.h).
        # Weights bound to the program are constants of the partition.
        schedule = _pto.default_schedule(self.program, target)
        parts = [_Part(d, target) for d in _pto.partition(self.program, schedule, target, constants=set(weights))]
        # Weight pre-packing: what is computed from the weights alone (the
        # blocked layouts the kernels read) runs once, now, and replaces them.
        if parts and parts[0].at_load:
            load = parts.pop(0)
            outs, _ = load.kernel.run([np.require(weights[n], requirements="C") for n in load.inputs])
            weights.update(zip(load.outputs, outs))
            still = {n for p in parts for n in p.inputs} | set(self.outputs)
            weights = {n: a for n, a in weights.items() if n in still}
            self._weights = weights
        self.parts = parts
        # Intermediates are dropped after the last part that reads them.
        last_read: dict[str, int] = {}
        for k, part in enumerate(self.parts):
            for n in part.inputs:
                last_read[n] = k
        keep = set(self.outputs)
        self._drop = [[n for n in part.inputs if last_read[n] == k and n not in keep and n not in weights]
                      for k, part in enumerate(self.parts)]

    def __call__(self, named: dict[str, np.ndarray]) -> list[np.ndarray]:
        env = {self._program_input[n]: a for n, a in named.items() if n in self._program_input}
        env.update(self._weights)
        for part, drop in zip(self.parts, self._drop):
            args = [np.require(env[n], requirements="C") for n in part.inputs]  # 0-d stays 0-d
            outs, _ = part.kernel.run(args)
            env.update(zip(part.outputs, outs))
            for n in drop:
                env.pop(n, None)
        return [env[n] for n in self.outputs]


class _Part:
    """One kernel of a partitioned model: its inputs and outputs in the order
    the kernel takes and returns them (names in the whole program)."""

    def __init__(self, d: dict, target: str):
        self.program = d["program"]
        self.kernel = _pto.Kernel(self.program, d["schedule"], target)
        self.inputs = [t[0] for t in self.program.inputs()]
        self.outputs = list(self.program.outputs())
        self.at_load = bool(d["at_load"])


_DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16,
           "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
           "u64": np.uint64, "bool": np.bool_}


def _pto_dtype(dt: np.dtype) -> str:
    for name, t in _DTYPES.items():
        if np.dtype(t) == dt:
            return name
    raise TypeError(f"pypto.onnx: arrays of {dt} are not supported")


def _np_dtype(name: str) -> Any:
    if name == "bf16":
        raise TypeError("pypto.onnx: bfloat16 weights need a bfloat16 numpy type (not supported yet)")
    return _DTYPES[name]


# Integer inputs of rank <= 1 up to this many elements are taken as shape arguments.
_SHAPE_ARGUMENT_SIZE = 16


class Model:
    """An imported ONNX model: call it on numpy arrays (positionally, in the
    graph's input order, or by input name)."""

    def __init__(self, model: Any, target: str = "host"):
        self._bytes = _model_bytes(model)
        self.target = target
        self._by_shape: dict[tuple, _Compiled] = {}
        self._needed: set[str] = set()  # graph inputs the importer needs the values of
        # Names and declared shapes, from a first look at the graph.
        import onnx  # the onnx package reads the declarations; PTO's importer does the rest

        m = onnx.load_from_string(self._bytes)
        init = {t.name for t in m.graph.initializer}
        self.input_names = [i.name for i in m.graph.input if i.name not in init]
        self.output_names = [o.name for o in m.graph.output]

    def _compiled(self, arrays: Sequence[np.ndarray]) -> _Compiled:
        # Small integer inputs are shape arguments in practice (axes, pads, a
        # target shape), and so is any input a node needs at import (Resize's
        # scales, Range's bounds: the importer says which, and the import is
        # retried with it fixed). Their values are fixed for the import; each
        # new value imports anew.
        named = dict(zip(self.input_names, arrays))
        fixed = {n for n, a in named.items()
                 if (a.dtype.kind in "iu" and a.ndim <= 1 and a.size <= _SHAPE_ARGUMENT_SIZE)} | self._needed
        key = self._key(named, fixed)
        c = self._by_shape.get(key)
        if c is None:
            shapes = {n: [int(d) for d in a.shape] for n, a in named.items()}
            while True:
                try:
                    c = _Compiled(self._bytes, shapes, {n: named[n] for n in fixed}, self.target)
                    break
                except _pto.ModelImportError as e:
                    m = re.search(r"input \d+ \('([^']*)',[^)]*\) must be known at import", str(e))
                    if not m or m.group(1) not in named or m.group(1) in fixed:
                        raise
                    self._needed.add(m.group(1))
                    fixed.add(m.group(1))
            self._by_shape[self._key(named, fixed)] = c
        return c

    @staticmethod
    def _key(named: dict[str, np.ndarray], fixed: set[str]) -> tuple:
        return tuple((a.dtype.str, a.shape, a.tobytes() if n in fixed else None) for n, a in named.items())

    def _arrays(self, args: Sequence[Any], kwargs: dict[str, Any]) -> list[np.ndarray]:
        if kwargs:
            missing = [n for n in self.input_names[len(args):] if n not in kwargs]
            if missing:
                raise TypeError(f"pypto.onnx model: missing inputs {missing} (inputs: {self.input_names})")
            args = list(args) + [kwargs[n] for n in self.input_names[len(args):]]
        if len(args) != len(self.input_names):
            raise TypeError(f"pypto.onnx model takes {len(self.input_names)} inputs ({', '.join(self.input_names)}), "
                            f"got {len(args)}")
        return [np.asarray(a) for a in args]

    def __call__(self, *args: Any, **kwargs: Any) -> list[np.ndarray]:
        arrays = self._arrays(args, kwargs)
        return self._compiled(arrays)(dict(zip(self.input_names, arrays)))

    def program(self, *args: Any, **kwargs: Any) -> Any:
        """The imported Program for these inputs' shapes."""
        return self._compiled(self._arrays(args, kwargs)).program


def load(model: Any, target: str = "host") -> Model:
    """Imports an ONNX model (a path, bytes or an onnx.ModelProto)."""
    return Model(model, target)


def reference(model: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnx's reference evaluator on a float64 copy of the model (float32 inputs, initializers,
    graph constants and casts widened): the outputs to check an imported model against."""
    import onnx
    from onnx import TensorProto, numpy_helper
    from onnx.reference import ReferenceEvaluator

    m = onnx.load_from_string(_model_bytes(model))
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for vi in list(m.graph.input) + list(m.graph.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for node in m.graph.node:  # constants made in the graph
        for a in node.attribute:
            if a.name in ("value", "to") and node.op_type in ("Constant", "ConstantOfShape", "Cast"):
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                    a.t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
                elif a.type == onnx.AttributeProto.INT and a.i == TensorProto.FLOAT:
                    a.i = TensorProto.DOUBLE
    wide = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    return ReferenceEvaluator(m, new_ops=[_InferenceBatchNormalization()]).run(None, wide)


def _InferenceBatchNormalization() -> type:
    """onnx's reference BatchNormalization of opsets 9-13 takes the schema's default momentum as
    a request for training mode and normalizes with the batch's statistics; a node with one output
    is inference (the spec, ONNX Runtime): the running statistics."""
    from onnx.reference.op_run import OpRun

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None,
                 spatial=None):  # noqa: ARG002
            if training_mode:
                raise NotImplementedError("pypto.onnx.reference: BatchNormalization training_mode = 1")
            shape = (1, -1) + (1,) * (x.ndim - 2)
            eps = 1e-5 if epsilon is None else epsilon
            y = scale.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) + \
                bias.reshape(shape)
            return (y.astype(x.dtype),)

    return BatchNormalization


# ---- onnx.backend ---------------------------------------------------------------

try:
    from onnx.backend.base import Backend as _OnnxBackend, BackendRep as _OnnxBackendRep
except ImportError:  # onnx is in requirements.txt; without it only load() fails
    _OnnxBackend, _OnnxBackendRep = object, object


class BackendRep(_OnnxBackendRep):  # type: ignore[misc, valid-type]
    def __init__(self, model: Model):
        self.model = model

    def run(self, inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        if isinstance(inputs, dict):
            return tuple(self.model(**inputs))
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        return tuple(self.model(*inputs))


class Backend(_OnnxBackend):  # type: ignore[misc, valid-type]
    """PTO as an ONNX backend (CPU): `prepare` imports the model; a node test's
    inputs fix its shapes when it runs."""

    @classmethod
    def is_compatible(cls, model: Any, device: str = "CPU", **kwargs: Any) -> bool:
        return device.upper().startswith("CPU")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper().startswith("CPU")

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> BackendRep:
        m = Model(model)
        return BackendRep(m)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[Any, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)
