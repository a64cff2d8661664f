"""numpy interop (dtypes, zero copy, strides) and typed errors naming the argument."""
import ml_dtypes
import numpy as np
import pytest

import pypto
from pypto._ext import _pto


@pypto.kernel
def axpy(x, y):
    return x * 2 + y


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.int64,
                                   np.int16, np.uint8])
def test_dtypes_round_trip(dtype, rng):
    x = (rng.random((5, 7)) * 10).astype(dtype)
    y = (rng.random((5, 7)) * 10).astype(dtype)
    got = axpy(x, y)
    assert got.dtype == np.dtype(dtype)
    want = x.astype(np.float64) * 2 + y.astype(np.float64)
    # Exact for the integer types (no overflow at these magnitudes) and f64; for the narrow
    # floats one rounding of the product and one of the sum: 2 ulps of the result.
    ulp = {np.float32: 2**-23, np.float16: 2**-10, ml_dtypes.bfloat16: 2**-7}.get(dtype, 0.0)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.dtype(dtype)).astype(np.float64),
                               rtol=2 * ulp, atol=0)


def test_inputs_are_not_copied_and_strides_are_honoured(rng):
    base = rng.random((8, 10)).astype(np.float32)
    view = base[::2, 1:7]  # rows strided, last axis dense: read in place through its strides
    k = axpy.specialize(view, view)
    out = np.empty(view.shape, np.float32)
    (res,), _ = k.kernel().run([view, view], [out], 0)
    assert np.shares_memory(res, out)  # the kernel wrote into the array we gave it
    # x*2 + x in f32: two roundings, each <= 2^-24 relative.
    np.testing.assert_allclose(out, view.astype(np.float64) * 3, rtol=2**-22)
    # A strided last axis is copied (the kernel vectorizes along it) and still correct.
    odd = base[:, ::3]
    np.testing.assert_allclose(axpy(odd, odd), odd.astype(np.float64) * 3, rtol=2**-22)


def test_column_vectors_are_dense_along_their_rows(rng):
    # A [K, 1] column's K axis is its innermost one past the unit axis: the kernel
    # loads vectors along it, so a strided column is copied and a dense one is read
    # in place (Lower's constrain); both give A @ x.
    @pypto.kernel(dynamic=False)
    def mv(a, x):
        return a @ x
    a = rng.random((37, 50)).astype(np.float32)
    base = rng.random((100, 5)).astype(np.float32)
    for x in [base[:50, 2:3], base[::2, 1:2], np.ascontiguousarray(base[:50, :1])]:
        # Sums of 50 products in f32: relative 50 * 2^-24 of the sum of |terms| (all positive).
        np.testing.assert_allclose(mv(a, x), a.astype(np.float64) @ x.astype(np.float64), rtol=50 * 2**-24)
    # Passed below the copying wrapper, a strided column is a typed error, not garbage.
    k = mv.specialize(a, base[::2, 1:2])
    with pytest.raises(pypto.ShapeError, match="buffer for 'x' must be dense along axis 0"):
        k.kernel().run([a, base[::2, 1:2]], [np.empty((37, 1), np.float32)], 0)


def test_unsupported_dtype_names_the_argument():
    x = np.ones((2, 2), np.complex64)
    with pytest.raises(TypeError, match="argument 'x'") as e:
        axpy(x, x)
    assert isinstance(e.value, pypto.DTypeError) and isinstance(e.value, pypto.PtoError)


def test_non_array_argument_is_a_type_error():
    with pytest.raises(TypeError, match="argument 'y'"):
        axpy(np.ones(3, np.float32), object())


def test_mixed_dtypes_promote_like_numpy(rng):
    @pypto.kernel
    def add(a, b):
        return a + b
    a, b = rng.random(3).astype(np.float32), rng.random(3)
    got = add(a, b)
    assert got.dtype == (a + b).dtype == np.float64
    np.testing.assert_allclose(got, a.astype(np.float64) + b, rtol=1e-15)  # one f64 rounding


def test_broadcast_mismatch_is_a_value_error_naming_the_op():
    @pypto.kernel(dynamic=False)
    def mm(a, b):
        return a @ b
    with pytest.raises(ValueError, match="matmul") as e:
        mm(np.ones((3, 4), np.float32), np.ones((5, 2), np.float32))
    assert isinstance(e.value, pypto.ShapeError)


def test_annotations_check_rank_dims_and_dtype():
    @pypto.kernel
    def f(a: pypto.Tensor["M", 4], b: pypto.Tensor["M", "f32"]):
        return a.sum(axis=1) + b
    np.testing.assert_allclose(f(np.ones((3, 4), np.float32), np.ones(3, np.float32)), 5.0)
    with pytest.raises(ValueError, match="argument 'a'.*axis 1.*requires 4"):
        f(np.ones((3, 5), np.float32), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="argument 'b' .*binds 'M' to 2"):
        f(np.ones((3, 4), np.float32), np.ones(2, np.float32))
    with pytest.raises(TypeError, match="argument 'b' .*requires f32"):
        f(np.ones((3, 4), np.float32), np.ones(3, np.float64))
    with pytest.raises(ValueError, match="argument 'b' .*rank 1"):
        f(np.ones((3, 4), np.float32), np.ones((3, 1), np.float32))


def test_wrong_argument_count():
    with pytest.raises(TypeError, match=r"takes 2 arrays \(x, y\), got 1"):
        axpy(np.ones(3, np.float32))


def test_operator_library_errors_are_typed():
    p = _pto.Program("p")
    x = p.input("x", [4, 4], "f32")
    with pytest.raises(ValueError, match="unknown operator 'nosuch'; operators: .*softmax"):
        _pto.ops_call("nosuch", [x], "{}", "")
    with pytest.raises(pypto.DefinitionError, match="softmax: unknown attribute 'axxis'; valid: axis"):
        _pto.ops_call("softmax", [x], '{"axxis": 0}', "")


def test_schedule_target_and_memory_errors(rng):
    @pypto.kernel(dynamic=False)
    def f(a, b):
        return pypto.relu(a @ b)
    a = rng.random((64, 32), dtype=np.float32)
    f(a, a.T.copy())
    s = f.schedule()
    s["relu"].vectorize("nosuchloop", 8)
    with pytest.raises(ValueError, match="relu.*nosuchloop") as e:
        f(a, a.T.copy())
    assert isinstance(e.value, pypto.ScheduleError)
    f.reset_schedule()
    with pytest.raises(pypto.ScheduleError, match="unknown key"):
        pypto.Schedule.from_json('{"schema": 1, "stages": {"relu": {"tiles": {}}}}')
    with pytest.raises(ValueError, match="unknown target 'nosuch'") as e:
        pypto.kernel(lambda x: x + 1, target="nosuch")(a)
    assert isinstance(e.value, pypto.TargetError)
    # A materialized intermediate over the cap: DEVICE_MEMORY_EXHAUSTED as a MemoryError.
    big = rng.random((256, 16), dtype=np.float32)
    f(big, big.T.copy())
    del f.schedule()["matmul"]  # matmul materialized at root: a 256 KiB intermediate
    with pypto.memory_limit(64 * 1024):
        with pytest.raises(MemoryError, match="DEVICE_MEMORY_EXHAUSTED") as e:
            f(big, big.T.copy())
    assert isinstance(e.value, pypto.DeviceMemoryError)
    with pypto.profile() as prof:
        f(big, big.T.copy())
    assert prof.peak_bytes >= 256 * 256 * 4


def test_integer_division_follows_numpy():
    k = pypto.kernel(lambda a, b: (a / b, a // b, a % b, 7 / a, a // 3, a % -3, 10 // a))
    a = np.array([7, -7, 9, 1], np.int32)
    b = np.array([2, 2, -4, 3], np.int32)
    for got, want in zip(k(a, b), (a / b, a // b, a % b, 7 / a, a // 3, a % -3, 10 // a)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-15)  # one f64 rounding at most
