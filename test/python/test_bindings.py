"""The low-level `_pto` bindings: Programs with element definitions and reductions built from
Python expressions, checked against the float64 interpreter and numpy; JSON round trips."""
import json

import numpy as np
import pytest

import pypto
from pypto._ext import _pto


def test_define_and_define_reduce_from_python_expressions(rng):
    p = _pto.Program("rowdot")
    a = p.input("A", ["M", "K"], "f32")
    b = p.input("B", ["K"], "f32")
    i, k = _pto.var("i"), _pto.var("k")
    scaled = p.define("scaled", ["i", "k"], ["M", "K"], a(i, k) * 2.0 + 1, "elementwise", "affine")
    dot = p.define_reduce("dot", ["i"], ["M"], "sum", [("k", "K")], scaled(i, k) * b(k))
    top = p.define_reduce("top", ["i"], ["M"], "max", [("k", "K")], _pto.select(a(i, k) > 0.5, a(i, k), 0.0))
    p.output(dot)
    p.output(top)
    assert "A(i, k)" in str(a(i, k) * 2.0 + 1) and (a(i, k) * 2.0).dtype == "f32"
    assert p.symbols() == {"K": ("A", 1), "M": ("A", 0)}
    A = rng.random((7, 5)).astype(np.float32)
    B = rng.random(5).astype(np.float32)
    k_ = _pto.Kernel(p, _pto.default_schedule(p, "host"), "host")
    (got_dot, got_top), stats = k_.run([A, B])
    ref = _pto.interpret(p, {"A": A, "B": B})
    A64, B64 = A.astype(np.float64), B.astype(np.float64)
    # f32: one rounding in 2a+1, K=5 products accumulated: <= 6 roundings of values < 15.
    np.testing.assert_allclose(got_dot, ((2 * A64 + 1) * B64).sum(1), rtol=1e-6)
    np.testing.assert_allclose(ref["dot"], ((2 * A64 + 1) * B64).sum(1), rtol=1e-12)  # f64 oracle
    np.testing.assert_allclose(got_top, np.where(A > 0.5, A, 0).max(1), rtol=0)
    # JSON round trip keeps the program (same fingerprint) and runs the same.
    q = _pto.Program.from_json(p.to_json())
    assert q.fingerprint() == p.fingerprint()
    assert p.flops({"M": 7, "K": 5}) > 0


def test_expression_errors_are_typed():
    p = _pto.Program("bad")
    a = p.input("A", [4], "f32")
    i = _pto.var("i")
    with pytest.raises(ValueError, match="stage 'x': variable 'j' is not bound"):
        p.define("x", ["i"], [4], a(i) + _pto.var("j"))  # unbound variable j
    with pytest.raises(TypeError):
        _pto.binary("add", a(i), object())
    with pytest.raises(ValueError, match="truth value|symbolic"):
        bool(a(i) > 0)
    with pytest.raises(pypto.ShapeError, match="int or str"):
        p.input("B", [1.5], "f32")
    with pytest.raises(pypto.DTypeError):
        p.input("C", [2], "complex64")


def test_library_attribute_errors_through_pypto_ops():
    k = pypto.kernel(lambda x: pypto.ops.softmax(x, axiss=0))
    with pytest.raises(ValueError, match="softmax: unknown attribute 'axiss'; valid: axis"):
        k(np.ones((2, 2), np.float32))


def test_schedule_objects_round_trip_through_cpp():
    s = pypto.Schedule()
    s["C"].tile(i=[64, 8], j=32).order("i_o", "j_o", "i_m", "i_i", "j_i").vectorize("j_i", 16).parallel("i_o")
    s["C"].update.unroll("i", k=4)
    s["P"].compute_at("C", "i_o").precision(storage="bf16", compute="f32").pipeline(ring_buffer=2)
    s.set_options(opt_level=1, check_numerics=True)
    back = pypto.Schedule.from_json(s.to_json())  # C++ parses strictly and fills defaults
    assert pypto.Schedule.from_json(back.to_json()) == back  # a fixed point
    want = s.to_dict()
    want["stages"]["C"]["compute"] = "root"
    assert back.to_dict() == want
    assert json.loads(back.to_json())["stages"]["C"]["tile"] == {"i": [64, 8], "j": [32]}
    assert "C" in back and back.serial().to_dict()["stages"]["C"].get("parallel") is None


def test_error_classes_keep_the_cpp_hierarchy_and_the_builtins():
    # (class, its PTO parent, the builtin it also is): python/src/Errors.cpp's table.
    table = [(pypto.ShapeError, pypto.PtoError, ValueError), (pypto.SymbolicSizeError, pypto.ShapeError, ValueError),
             (pypto.DTypeError, pypto.PtoError, TypeError), (pypto.DefinitionError, pypto.PtoError, ValueError),
             (pypto.ScheduleError, pypto.PtoError, ValueError), (pypto.TargetError, pypto.PtoError, ValueError),
             (pypto.CompileError, pypto.PtoError, RuntimeError), (pypto.KernelError, pypto.PtoError, RuntimeError),
             (pypto.DeviceMemoryError, pypto.KernelError, MemoryError)]
    for cls, parent, builtin in table:
        assert issubclass(cls, parent) and issubclass(cls, builtin) and cls.__doc__, cls
    assert not issubclass(pypto.ShapeError, pypto.SymbolicSizeError)
    # C++ throws the most derived type; the translator picks the matching class.
    with pytest.raises(pypto.SymbolicSizeError, match="symbolic 'n'"):
        p = _pto.Program("s")
        _pto.ops_call("slice", [p.input("x", ["n"], "f32")], json.dumps({"starts": [1], "ends": [2]}), "")
    with pytest.raises(pypto.ShapeError) as e:
        p = _pto.Program("t")
        _pto.ops_call("reshape", [p.input("x", [4], "f32")], json.dumps({"shape": [3]}), "")
    assert type(e.value) is pypto.ShapeError
