"""Every numpy-style operator on traced tensors against numpy in float64.

Inputs are float32 in [0.5, 1.5) (positive, so log/sqrt/pow are defined); the
kernel computes in f32 and numpy in float64 on the same f32 values. Tolerance:
rtol 1e-5 covers a handful of f32 roundings (2^-24 each) in the elementwise
formulas and f32 accumulation over the <= 24 terms reduced here (24 * 2^-24 ~ 1.4e-6);
atol 1e-6 covers results near zero (differences, sin/cos).
"""
import numpy as np
import pytest

import pypto

RTOL, ATOL = 1e-5, 1e-6

# (id, pypto function of (x, y, v), numpy function of (x, y, v)); x, y: [4, 6], v: [6]
CASES = [
    ("add", lambda x, y, v: x + y, None),
    ("add_broadcast", lambda x, y, v: x + v, None),
    ("sub", lambda x, y, v: x - y, None),
    ("mul", lambda x, y, v: x * y, None),
    ("div", lambda x, y, v: x / y, None),
    ("radd_scalar", lambda x, y, v: 2 + x, None),
    ("rsub_scalar", lambda x, y, v: 1.5 - x, None),
    ("mul_scalar", lambda x, y, v: x * 3.0, None),
    ("rtruediv_scalar", lambda x, y, v: 1.0 / x, None),
    ("pow_scalar", lambda x, y, v: x ** 2.0, None),
    ("pow_tensor", lambda x, y, v: x ** y, None),
    ("mod_scalar", lambda x, y, v: (x * 10) % 3.0, None),
    ("floordiv", lambda x, y, v: (x * 10) // y, None),
    ("neg", lambda x, y, v: -x, None),
    ("abs", lambda x, y, v: abs(x - 1.0), None),
    ("matmul", lambda x, y, v: x @ y.T, None),
    ("matmul_vec", lambda x, y, v: x @ v, None),
    ("sum_all", lambda x, y, v: x.sum(), None),
    ("sum_axis0", lambda x, y, v: x.sum(axis=0), None),
    ("sum_axis1_keepdims", lambda x, y, v: x.sum(axis=1, keepdims=True), None),
    ("mean", lambda x, y, v: x.mean(axis=-1), None),
    ("max", lambda x, y, v: x.max(axis=0), None),
    ("min", lambda x, y, v: x.min(axis=0), None),
    ("prod", lambda x, y, v: x.prod(axis=1, keepdims=True), None),
    ("var", lambda x, y, v: x.var(axis=1), None),
    ("std_ddof1", lambda x, y, v: x.std(axis=0, ddof=1), None),
    ("argmax", lambda x, y, v: x.argmax(axis=1), None),
    ("argmin_keepdims", lambda x, y, v: x.argmin(axis=0, keepdims=True), None),
    ("argmax_flat", lambda x, y, v: x.argmax(), None),
    ("concatenate", lambda x, y, v: pypto.concatenate([x, y], axis=1), lambda x, y, v: np.concatenate([x, y], axis=1)),
    ("T", lambda x, y, v: x.T, None),
    ("transpose_axes", lambda x, y, v: x.reshape(2, 2, 6).transpose(2, 0, 1), None),
    ("reshape", lambda x, y, v: x.reshape(3, 8), None),
    ("reshape_infer", lambda x, y, v: x.reshape(-1, 12), None),
    ("flatten", lambda x, y, v: x.flatten(), None),
    ("reshape_unit_dims", lambda x, y, v: x[None].reshape(x.shape[0], 1, x.shape[1]), None),
    ("index_int", lambda x, y, v: x[1], None),
    ("index_negative", lambda x, y, v: x[-1, 2:], None),
    ("slice_step", lambda x, y, v: x[::2, 1:5:2], None),
    ("slice_reversed", lambda x, y, v: x[::-1, -2::-2], None),
    ("slice_open_negative", lambda x, y, v: x[-3:, :-1], None),
    ("newaxis_ellipsis", lambda x, y, v: x[None, ..., 3], None),
    ("gt_where", lambda x, y, v: pypto.where(x > y, x, y), lambda x, y, v: np.where(x > y, x, y)),
    ("le_where_scalar", lambda x, y, v: pypto.where(x <= 1.0, x, 0.0), lambda x, y, v: np.where(x <= 1.0, x, 0.0)),
    ("eq_astype", lambda x, y, v: (x == x).astype("f32"), lambda x, y, v: (x == x).astype(np.float32)),
    ("exp", lambda x, y, v: pypto.exp(x), lambda x, y, v: np.exp(x)),
    ("log", lambda x, y, v: pypto.log(x), lambda x, y, v: np.log(x)),
    ("sqrt", lambda x, y, v: pypto.sqrt(x), lambda x, y, v: np.sqrt(x)),
    ("tanh", lambda x, y, v: pypto.tanh(x), lambda x, y, v: np.tanh(x)),
    ("sin", lambda x, y, v: pypto.sin(x), lambda x, y, v: np.sin(x)),
    ("sigmoid", lambda x, y, v: pypto.sigmoid(x), lambda x, y, v: 1 / (1 + np.exp(-x))),
    ("maximum", lambda x, y, v: pypto.maximum(x, y), lambda x, y, v: np.maximum(x, y)),
    ("minimum_scalar", lambda x, y, v: pypto.minimum(x, 1.0), lambda x, y, v: np.minimum(x, 1.0)),
    ("astype_f64", lambda x, y, v: x.astype(np.float64) * 2, lambda x, y, v: x * 2),
    ("chain", lambda x, y, v: ((x @ y.T) * 0.5 + 1).sum(axis=1) - 2, None),
]


@pytest.mark.parametrize("dynamic", [True, False], ids=["symbolic", "static"])
@pytest.mark.parametrize("name,f,ref", CASES, ids=[c[0] for c in CASES])
def test_operator_matches_numpy(name, f, ref, dynamic, rng):
    x = (rng.random((4, 6)) + 0.5).astype(np.float32)
    y = (rng.random((4, 6)) + 0.5).astype(np.float32)
    v = (rng.random(6) + 0.5).astype(np.float32)
    k = pypto.kernel(f, dynamic=dynamic, name=f"op_{name}")
    got = k(x, y, v)
    x64, y64, v64 = (a.astype(np.float64) for a in (x, y, v))
    want = (ref or f)(x64, y64, v64)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL, atol=ATOL)


def test_library_ops_through_the_registry(rng):
    x = rng.standard_normal((4, 10)).astype(np.float32)
    g = (rng.random(10) + 0.5).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)

    @pypto.kernel
    def f(x, g, b):
        return (pypto.ops.softmax(x, axis=-1), pypto.ops.layer_norm(x, g, b, eps=1e-5), pypto.ops.gelu(x),
                pypto.ops.relu(x))
    sm, ln, ge, re = f(x, g, b)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(axis=-1, keepdims=True), rtol=RTOL, atol=ATOL)
    mu, var = x64.mean(-1, keepdims=True), x64.var(-1, keepdims=True)
    # layer_norm divides by sqrt(var + eps) with var ~ 1 over 10 terms: a few f32 roundings.
    np.testing.assert_allclose(ln, (x64 - mu) / np.sqrt(var + 1e-5) * g + b, rtol=1e-4, atol=1e-5)
    from math import erf
    np.testing.assert_allclose(ge, 0.5 * x64 * (1 + np.vectorize(erf)(x64 / np.sqrt(2))), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(re, np.maximum(x64, 0), rtol=0, atol=0)


def test_every_registry_operator_is_reachable():
    names = pypto.ops.names()
    assert len(names) >= 10 and "matmul" in names
    for n in names:
        f = getattr(pypto.ops, n)
        assert f.__name__ == n and n in f.__doc__
    with pytest.raises(AttributeError, match="no operator 'nosuch'"):
        pypto.ops.nosuch


def test_integer_tensor_indexing_is_gather(rng):
    x = rng.random((4, 5)).astype(np.float32)
    i = np.array([3, 0, -1, 2, 2], np.int32)  # negatives wrap once, as numpy
    cases = [(lambda x, i: x[i], lambda x, i: x[i]), (lambda x, i: x[:, i], lambda x, i: x[:, i]),
             (lambda x, i: x.take(i), lambda x, i: x.take(i)), (lambda x, i: pypto.take(x, i, 1), np.take)]
    for f, ref in cases:
        want = ref(x, i, 1) if ref is np.take else ref(x, i)
        np.testing.assert_array_equal(pypto.kernel(f)(x, i), want)  # a gather moves values unchanged
    with pytest.raises(NotImplementedError, match="list or array constant"):
        pypto.kernel(lambda x: x[[0, 1]])(x)
    with pytest.raises(NotImplementedError, match="alone or among full slices"):
        pypto.kernel(lambda x, i: x[1:, i])(x, i)


def test_symbolic_sizes_kept_where_the_cpp_ops_allow(rng):
    # A reshape that keeps the leading symbolic dim (the C++ reshape copies it) and one that
    # only adds a unit dim (unsqueeze) serve every size from one trace.
    @pypto.kernel
    def split_rows(x: pypto.Tensor["n", 6]):
        return x.reshape(x.shape[0], 2, 3) * 2.0, x.reshape(1, x.shape[0], 6)
    for n in (3, 5):
        x = rng.random((n, 6)).astype(np.float32)
        a, b = split_rows(x)
        np.testing.assert_array_equal(a, x.reshape(n, 2, 3) * 2)  # * 2 is exact
        np.testing.assert_array_equal(b, x.reshape(1, n, 6))
    assert split_rows.cache_info["signatures"] == 1
    # An annotated symbolic dim stays symbolic: an op that needs its value raises the typed error
    # (the one a kernel catches to specialize unannotated dims per shape).
    @pypto.kernel
    def tail(x: pypto.Tensor["n"]):
        return x[1:]
    with pytest.raises(pypto.SymbolicSizeError, match="symbolic 'n'") as e:
        tail(np.ones(3, np.float32))
    assert isinstance(e.value, pypto.ShapeError) and isinstance(e.value, ValueError)


def test_symbolic_slicing_falls_back_to_static_shapes(rng):
    k = pypto.kernel(lambda x: x[1:] * 2.0, name="tail")
    for n in (5, 7):
        x = rng.random((n, 3)).astype(np.float32)
        np.testing.assert_allclose(k(x), x[1:].astype(np.float64) * 2, rtol=RTOL)
    assert k.cache_info["signatures"] == 2  # one per shape, since the slice needs static sizes


def test_tensor_misuse_is_reported():
    with pytest.raises(TypeError, match="truth value"):
        pypto.kernel(lambda x: x if x else x)(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="no values yet"):
        pypto.kernel(lambda x: np.asarray(x) + 1)(np.ones(2, np.float32))
    # numpy's functions that defer to methods work on traced tensors.
    np.testing.assert_allclose(pypto.kernel(lambda x: np.sum(x, axis=0))(np.ones((3, 2), np.float32)), [3, 3])
    with pytest.raises(ValueError, match="transpose: perm repeats axis 0"):
        pypto.kernel(lambda x: x.transpose(0, 0))(np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="reshape"):
        pypto.kernel(lambda x: x.reshape(3, 3), dynamic=False)(np.ones((2, 2), np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        pypto.kernel(lambda x: x[5], dynamic=False)(np.ones((2, 2), np.float32))


def test_conv2d_nhwc_through_the_registry(rng):
    # Channels-last convolution, HWIO weights, stride 2 and padding 1, vs a float64 numpy loop.
    x = rng.standard_normal((1, 9, 8, 5)).astype(np.float32)
    w = rng.standard_normal((3, 3, 5, 16)).astype(np.float32)
    b = rng.standard_normal(16).astype(np.float32)

    @pypto.kernel
    def f(x, w, b):
        return pypto.ops.conv2d_nhwc(x, w, b, stride=[2, 2], padding=[1, 1])
    got = f(x, w, b)
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    oh, ow = (9 + 2 - 3) // 2 + 1, (8 + 2 - 3) // 2 + 1
    want = np.zeros((1, oh, ow, 16)) + b
    for ky in range(3):
        for kx in range(3):
            want += xp[:, ky:ky + 2 * oh - 1:2, kx:kx + 2 * ow - 1:2, :] @ w[ky, kx].astype(np.float64)
    # f32 sums of 45 products of standard normals: 1e-4 relative + absolute.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
