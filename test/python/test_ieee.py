"""IEEE semantics: NaN, Inf and signed zeros through every elementwise and
reduction operator, against numpy on the same float32 values.

Halide compiles float code as if no value were NaN or Inf (its simplifier
folds x * 0 and x == x; min/max drop a NaN; its log and erf polynomials give
garbage for NaN and Inf); the lowering keeps numpy's answers unless a stage
asks for `fast_math` (backends/Ieee.h). Finite results are compared with the
operators' usual float32 tolerance (rtol 1e-5, atol 1e-6: a few f32
roundings); NaN must be NaN where numpy's is, Inf the same Inf, and a zero
the same sign as numpy's.
"""
import math

import numpy as np
import pytest

import pypto

RTOL, ATOL = 1e-5, 1e-6
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e30, -1e-30, 7.0,
                     -0.75, 100.0, -100.0], np.float32)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _f64(f):
    """numpy in float64, rounded to float32 (functions numpy has no float32 kernel for)."""
    return lambda *a: f(*(x.astype(np.float64) for x in a)).astype(np.float32)


def _sig(x):
    return np.float32(1) / (np.float32(1) + np.exp(-x))


# name -> numpy reference on float32 arrays (every one-input elementwise
# operator of the registry without required attributes; UNARY_NOT_HERE lists the rest).
UNARY = {
    "abs": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "ceil": np.ceil, "cos": np.cos, "cosh": np.cosh,
    "erf": _f64(_erf), "exp": np.exp, "expm1": np.expm1, "floor": np.floor, "log": np.log, "log10": np.log10,
    "log1p": np.log1p, "log2": np.log2, "neg": np.negative, "reciprocal": lambda x: np.float32(1) / x,
    "relu": lambda x: np.maximum(x, np.float32(0)), "relu6": lambda x: np.minimum(np.maximum(x, 0), 6).astype(np.float32),
    "round": np.round, "rsqrt": lambda x: np.float32(1) / np.sqrt(x), "sigmoid": _sig, "sign": np.sign,
    "silu": lambda x: x * _sig(x), "sin": np.sin, "sinh": np.sinh, "softplus": lambda x: np.logaddexp(np.float32(0), x),
    "softsign": lambda x: x / (np.float32(1) + np.abs(x)), "sqrt": np.sqrt, "square": np.square, "tan": np.tan,
    "tanh": np.tanh, "trunc": np.trunc, "isnan": np.isnan, "isinf": np.isinf, "logical_not": np.logical_not,
    "gelu": _f64(lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    "gelu_tanh": _f64(lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "leaky_relu": lambda x: np.where(x >= 0, x, np.float32(0.01) * x),
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": _f64(lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))),
    "celu": lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x)),
    "mish": _f64(lambda x: x * np.tanh(np.logaddexp(0, x))),
    "hard_sigmoid": lambda x: np.clip(np.float32(0.2) * x + np.float32(0.5), 0, 1).astype(np.float32),
    "hard_swish": lambda x: x * np.clip(x / np.float32(6) + np.float32(0.5), 0, 1).astype(np.float32),
    "shrink": lambda x: np.where(x < -0.5, x, np.where(x > 0.5, x, np.float32(0))),
    "soft_shrink": lambda x: np.where(x > 0.5, x - np.float32(0.5), np.where(x < -0.5, x + np.float32(0.5), np.float32(0))),
    "hard_shrink": lambda x: np.where(np.abs(x) > 0.5, x, np.float32(0)),
    "tanh_shrink": lambda x: x - np.tanh(x),
    "thresholded_relu": lambda x: np.where(x > 1, x, np.float32(0)),
    "log_sigmoid": lambda x: -np.logaddexp(np.float32(0), -x),
    "swish": lambda x: x * _sig(x),
    "quick_gelu": lambda x: x * _sig(np.float32(1.702) * x),
    "exp2": np.exp2, "cbrt": np.cbrt, "erfc": _f64(np.vectorize(math.erfc, otypes=[np.float64])),
    "logit": lambda x: np.log(x / (np.float32(1) - x)),
    "sinc": _f64(np.sinc), "deg2rad": np.deg2rad, "rad2deg": np.rad2deg,
    "nan_to_num": np.nan_to_num, "signbit": np.signbit, "isfinite": np.isfinite,
}
# Operators with more inputs or required attributes (tested in BINARY or below).
# bitwise_not: integers; lerp, swiglu, rotary_embedding, quantization: more inputs; glu: halves.
UNARY_NOT_HERE = {"cast", "clip", "prelu", "where", "bitwise_not", "lerp", "glu", "swiglu", "rotary_embedding",
                  "quantize_linear", "dequantize_linear"}

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "pow": np.power, "atan2": np.arctan2, "mod": np.mod, "fmod": np.fmod,
    "floor_divide": np.floor_divide, "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "squared_difference": lambda a, b: (a - b) ** 2, "copysign": np.copysign,
    "hypot": np.hypot, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2, "fmax": np.fmax, "fmin": np.fmin,
    "heaviside": np.heaviside,
    "xlogy": lambda x, y: np.where((x == 0) & ~np.isnan(y), np.float32(0), x * np.log(y)),
}


def assert_ieee_equal(got, want, name, inputs):
    got = np.asarray(got).astype(np.float64).ravel()
    want = np.asarray(want).astype(np.float64).ravel()
    assert got.shape == want.shape
    bad = np.isnan(got) != np.isnan(want)
    fin = ~np.isnan(want)
    with np.errstate(invalid="ignore"):
        close = (got[fin] == want[fin]) | (np.abs(got[fin] - want[fin]) <= RTOL * np.abs(want[fin]) + ATOL)
    bad[fin] |= ~close
    z = fin & (want == 0) & (got == 0)
    bad[z] |= np.signbit(got[z]) != np.signbit(want[z])
    if bad.any():
        rows = [f"{tuple(a[i] for a in inputs)} -> {got[i]!r} (numpy {want[i]!r})" for i in np.flatnonzero(bad)[:8]]
        pytest.fail(f"{name}: {int(bad.sum())} of {bad.size} differ from numpy:\n  " + "\n  ".join(rows))


def _kernel(f, n):
    if n == 1:
        def one(x):
            return f(x)
        return pypto.kernel(one, dynamic=False)

    def two(x, y):
        return f(x, y)
    return pypto.kernel(two, dynamic=False)


def test_every_unary_operator_is_covered():
    unary = {n for n, kind, _ in pypto.ops.registry() if kind == "elementwise"} - set(BINARY)
    # Bool or integer operands: no special values.
    unary -= {"logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
              "right_shift"}
    missing = unary - set(UNARY) - UNARY_NOT_HERE
    assert not missing, f"elementwise operators without a special-value test: {sorted(missing)}"


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values_match_numpy(name):
    with np.errstate(all="ignore"):
        want = UNARY[name](SPECIALS)
    got = _kernel(getattr(pypto.ops, name), 1)(SPECIALS)
    assert_ieee_equal(got, want, name, [SPECIALS])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_values_match_numpy(name):
    s = SPECIALS[:10]
    a, b = np.repeat(s, len(s)), np.tile(s, len(s))
    with np.errstate(all="ignore"):
        want = BINARY[name](a, b)
    got = _kernel(getattr(pypto.ops, name), 2)(a, b)
    assert_ieee_equal(got, want, name, [a, b])


def test_clip_and_where_keep_nan():
    x = SPECIALS

    @pypto.kernel(dynamic=False)
    def f(x):
        return pypto.ops.clip(x, min=-1.0, max=2.0), pypto.where(x > 0, x, -x)
    c, w = f(x)
    with np.errstate(all="ignore"):
        assert_ieee_equal(c, np.clip(x, -1, 2), "clip", [x])
        assert_ieee_equal(w, np.where(x > 0, x, -x), "where", [x])


def test_the_simplifier_does_not_fold_nan_away():
    # Halide folds x * 0 to 0 and m == m to true unless the lowering keeps them.
    x = np.linspace(0, 1, 1000, dtype=np.float32)
    m = x.copy()
    m[::2] = np.nan

    @pypto.kernel(dynamic=False)
    def f(x, m):
        return pypto.log(x - 0.5) * 0 + x, pypto.where(m == m, m, 7.0), (m != m).astype("f32")
    a, w, ne = f(x, m)
    with np.errstate(all="ignore"):
        assert int(np.isnan(a).sum()) == int(np.isnan(np.log(x - np.float32(0.5)) * 0 + x).sum()) == 500
    assert int(np.isnan(w).sum()) == 0 and np.all(w[::2] == 7)
    assert np.array_equal(ne, np.isnan(m).astype(np.float32))


def test_the_simplifier_keeps_the_sign_of_zero():
    # Halide folds x + 0 to x and 0 - x to -x; numpy's -0 + 0 and 0 - 0 are +0.
    x = np.array([-0.0, 0.0, 1.0, -1.0, np.nan, -np.inf], np.float32)

    @pypto.kernel(dynamic=False)
    def f(x):
        return x + 0.0, 0.0 - x, x * 0.5, -(x * x), x - 0.0
    want = (x + np.float32(0), np.float32(0) - x, x * np.float32(0.5), -(x * x), x - np.float32(0))
    for i, (g, w) in enumerate(zip(f(x), want)):
        assert_ieee_equal(g, w, f"composition {i}", [x])


def test_compares_with_an_infinite_literal_match_numpy():
    # LLVM's no-infs flag folds x == inf to false; such compares go by bits.
    x = np.array([1.0, np.inf, -np.inf, np.nan, -0.0, 3e38], np.float32)

    @pypto.kernel(dynamic=False)
    def f(x):
        inf = float("inf")
        return (x == inf), (x < inf), (x <= -inf), (x > -inf), (x != inf), (x >= inf)
    want = (x == np.inf, x < np.inf, x <= -np.inf, x > -np.inf, x != np.inf, x >= np.inf)
    for i, (g, w) in enumerate(zip(f(x), want)):
        assert np.array_equal(np.asarray(g), w), (i, g, w)


def test_fast_math_is_the_explicit_way_to_drop_the_guards():
    m = np.linspace(0, 1, 64, dtype=np.float32)
    m[::2] = np.nan

    @pypto.kernel(dynamic=False)
    def f(m):
        return pypto.where(m == m, m, 7.0)
    assert int(np.isnan(f(m)).sum()) == 0
    for stage in f.stages(m):
        f.schedule(m)[stage].fast_math()
    assert "fast-math" in str(f.explain(m))
    assert int(np.isnan(f(m)).sum()) == 32  # m == m folded to true: the NaNs pass through


R = np.array([[1, 2, np.nan, 4], [1, np.inf, -np.inf, 0], [-0.0, -0.0, -0.0, -0.0], [np.inf, 1, 2, 3],
              [-np.inf, -1, 5, np.nan], [3, 1, 4, 1]], np.float32)
REDUCTIONS = {
    "reduce_sum": np.sum, "reduce_prod": np.prod, "reduce_mean": np.mean,
    "reduce_l1": lambda a, axis, keepdims: np.sum(np.abs(a), axis=axis, keepdims=keepdims),
    "reduce_sum_square": lambda a, axis, keepdims: np.sum(a * a, axis=axis, keepdims=keepdims),
    "reduce_logsumexp": lambda a, axis, keepdims: np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims)),
    "reduce_max": np.max, "reduce_min": np.min,
}
@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_special_values_match_numpy(name, axis):
    f = getattr(pypto.ops, name)
    got = _kernel(lambda x: f(x, axes=[axis]), 1)(R)
    with np.errstate(all="ignore"):
        want = REDUCTIONS[name](R, axis=axis, keepdims=True)
    assert_ieee_equal(got, want, name, [np.arange(want.size)])


@pytest.mark.parametrize("name", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize("shape,axis", [((6, 3000), 1), ((3000, 6), 0), ((1 << 16,), 0)])
def test_min_max_keep_nan_in_long_vectorized_reductions(name, shape, axis):
    # Long enough for the defaults' vectorized partials (rfactor), rows or
    # chunks across cores: a NaN in any lane, chunk or the last step wins.
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[[5, flat.size - 1, flat.size // 2]] = [np.nan, -np.nan, np.inf]
    flat[flat.size // 3] = -np.inf
    got = _kernel(lambda t: getattr(pypto.ops, name)(t, axes=[axis]), 1)(x)
    want = REDUCTIONS[name](x, axis=axis, keepdims=True)
    assert_ieee_equal(got, want, name, [np.arange(want.size)])


def test_max_pool_keeps_nan_and_inf():
    x = np.random.default_rng(8).standard_normal((1, 3, 17, 17)).astype(np.float32)
    x[0, 0, 4, 4], x[0, 1, 0, 0], x[0, 2, 16, 16], x[0, 2, 8, 8] = np.nan, -np.nan, np.inf, -np.inf
    got = _kernel(lambda t: pypto.ops.max_pool2d(t, kernel=[3, 3], stride=[2, 2], padding=[1, 1]), 1)(x)
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    want = win.max(axis=(-1, -2))
    assert want.shape == np.asarray(got).shape and np.isnan(want).sum() == 2  # each NaN in one window (even index, stride 2)
    assert_ieee_equal(got, want, "max_pool2d", [np.arange(want.size)])


def test_softmax_rows_with_nan_or_inf_are_nan_as_numpy_gives():
    x = np.random.default_rng(9).standard_normal((4, 768)).astype(np.float32)
    x[0, 3], x[1, 700], x[2, 10] = np.nan, np.inf, -np.inf
    got = _kernel(lambda t: pypto.ops.softmax(t, axis=-1), 1)(x)
    with np.errstate(all="ignore"):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    assert_ieee_equal(got, want, "softmax", [np.arange(want.size)])


@pytest.mark.parametrize("name,ref", [("argmax", np.argmax), ("argmin", np.argmin)])
def test_arg_reductions_take_the_first_nan_as_numpy_does(name, ref):
    got = _kernel(lambda x: getattr(pypto.ops, name)(x, axis=1), 1)(R)
    assert np.array_equal(np.asarray(got).ravel(), ref(R, axis=1))
