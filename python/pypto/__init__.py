"""pypto: PTO from Python and Jupyter.

    import numpy as np, pypto

    @pypto.kernel
    def matmul(A: pypto.Tensor, B: pypto.Tensor):
        return A @ B

    C = matmul(np.ones((64, 32), np.float32), np.ones((32, 16), np.float32))
    print(matmul.explain())                 # the loop nest of its schedule
    s = matmul.schedule()                   # editable; the next call compiles it
    result = matmul.tune(a, b, trials=20)   # the C++ autotuner; best schedule installed
    lib = matmul.export(a, b, path="out")   # static library + C header

See docs/ARCHITECTURE.md (python/) and python/notebooks/.
"""
from . import ops, plots, machine, onnx
from ._ext import _pto
from .custom import CustomOp, custom_op
from .debug import Profile, check_numerics, debug_print, memory_limit, profile
from .errors import (CompileError, DefinitionError, DeviceMemoryError, DTypeError, KernelError, ModelImportError,
                     PtoError, ScheduleError, ShapeError, SymbolicSizeError, TargetError)
from .export import ExportedLibrary, LoadedLibrary
from .kernel import KernelFunction, Timing, kernel
from .pipeline import Pipeline, pipeline
from .precision import mixed_precision
from .schedule import Schedule, StageSchedule
from .tensor import (Tensor, TensorSpec, broadcast_shapes, ceil, concatenate, cos, erf, exp, floor, log, matmul,
                     maximum, minimum, sigmoid, sin, sqrt, take, tanh, transpose, where)
from .tune import TuneResult

__version__ = "0.1.0"


def targets() -> list[str]:
    return list(_pto.known_targets())


def target_info(name: str = "host") -> dict:
    return dict(_pto.target(name))


def relu(x: Tensor) -> Tensor:
    return ops.relu(x)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    return ops.softmax(x, axis=axis)


__all__ = [
    "kernel", "KernelFunction", "Tensor", "TensorSpec", "Schedule", "StageSchedule", "Timing", "TuneResult",
    "ops", "plots", "machine", "onnx", "mixed_precision", "profile", "Profile", "check_numerics", "debug_print",
    "memory_limit", "custom_op", "CustomOp", "pipeline", "Pipeline", "ExportedLibrary", "LoadedLibrary",
    "PtoError", "ShapeError", "SymbolicSizeError", "DTypeError", "DefinitionError", "ScheduleError",
    "TargetError", "ModelImportError", "CompileError", "KernelError", "DeviceMemoryError", "broadcast_shapes", "exp", "log", "sqrt", "tanh",
    "sin", "cos", "erf", "floor", "ceil", "sigmoid", "where", "maximum", "minimum", "matmul", "transpose",
    "concatenate", "take", "relu", "softmax", "targets", "target_info",
]
