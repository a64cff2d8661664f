"""Exceptions raised by pypto.

Every class derives from `PtoError` and from the builtin a Python user expects:
shape problems are `ValueError`s, dtype problems `TypeError`s, a refused
allocation (DEVICE_MEMORY_EXHAUSTED) a `MemoryError`. A `SymbolicSizeError`
(a `ShapeError`) says an operator needs the value of a symbolic size: a
`@pypto.kernel` catches it and specializes that signature to static sizes. Messages name the
argument, stage or operator at fault and what would have been valid.
"""
from ._ext import _pto

PtoError = _pto.PtoError
ShapeError = _pto.ShapeError          # ValueError
SymbolicSizeError = _pto.SymbolicSizeError  # ShapeError: an op needs a symbolic dim's value
DTypeError = _pto.DTypeError          # TypeError
DefinitionError = _pto.DefinitionError  # ValueError
ScheduleError = _pto.ScheduleError    # ValueError
TargetError = _pto.TargetError        # ValueError
ModelImportError = _pto.ModelImportError  # ValueError: a model file pypto.onnx cannot import
CompileError = _pto.CompileError      # RuntimeError
KernelError = _pto.KernelError        # RuntimeError
DeviceMemoryError = _pto.DeviceMemoryError  # KernelError, MemoryError

__all__ = ["PtoError", "ShapeError", "SymbolicSizeError", "DTypeError", "DefinitionError", "ScheduleError", "TargetError",
           "ModelImportError", "CompileError", "KernelError", "DeviceMemoryError"]
