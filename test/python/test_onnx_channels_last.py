"""The ONNX importer's channels-last layout (frontends/onnx/ChannelsLast.h):
a channels-first model's dense convolutions run channels-last and the values
between them stay so through elementwise operators (broadcast constants
permuted alike), batch norm (folded to a per-channel affine), pooling, Concat
and global pooling; NCHW tensors are made only where an operator that needs
them reads the value. Each model is checked against onnx's reference evaluator
in float64, and the imported program's transposes are counted.
"""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import pypto  # noqa: E402


class _Graph:
    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def name(self, p):
        self.n += 1
        return f"{p}{self.n}"

    def const(self, a, p="w"):
        n = self.name(p)
        self.inits.append(numpy_helper.from_array(np.asarray(a), n))
        return n

    def op(self, kind, inputs, outputs=1, **attrs):
        outs = [self.name(kind.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(kind, inputs, outs, **attrs))
        return outs[0] if outputs == 1 else outs

    def conv(self, x, cin, cout, k, stride=1, pads=None, group=1, bias=True):
        w = self.const((self.rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(cin * k * k / group)).astype(np.float32))
        ins = [x, w] + ([self.const(self.rng.standard_normal(cout).astype(np.float32) / 4)] if bias else [])
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=pads if pads is not None else [k // 2] * 4, group=group)

    def bn(self, x, c):
        r = self.rng
        ps = [(r.random(c) + 0.5).astype(np.float32), r.standard_normal(c).astype(np.float32) / 4,
              r.standard_normal(c).astype(np.float32) / 4, (r.random(c) + 0.5).astype(np.float32)]
        return self.op("BatchNormalization", [x] + [self.const(p, "bn") for p in ps], epsilon=1e-5)

    def model(self, inputs, outputs):
        g = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _run(m, feeds):
    got = pypto.onnx.load(m)(**feeds)
    want = pypto.onnx.reference(m, feeds)
    return got, want


def _transposes(m, feeds):
    """The imported program's layout transposes (NCHW <-> channels-last)."""
    p = pypto.onnx.load(m).program(**feeds)
    return [s["name"] for s in p.stages()
            if s["op"] == "transpose" and s["name"].endswith(("_nhwc_in", "_nhwc", "_nchw"))]


def _check(got, want, scale=1.0):
    # f32 convolutions of a few hundred products of O(1) terms, a few layers
    # deep: 1e-4 of the output's magnitude.
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * scale * max(1.0, float(np.abs(w).max())))


def test_a_residual_network_stays_channels_last_between_its_convolutions(rng):
    g = _Graph(rng)
    x = g.conv("x", 3, 32, 3, stride=2)                      # stem: transposes the input once
    x = g.op("Relu", [g.bn(x, 32)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for cin, mid, cout in [(32, 16, 32), (32, 16, 64)]:      # bottlenecks, the second with a projection
        h = g.op("Relu", [g.bn(g.conv(x, cin, mid, 1, bias=False), mid)])
        h = g.op("Relu", [g.bn(g.conv(h, mid, mid, 3, pads=[0, 0, 2, 2]), mid)])  # asymmetric pads
        h = g.bn(g.conv(h, mid, cout, 1), cout)
        s = x if cin == cout else g.bn(g.conv(x, cin, cout, 1), cout)
        x = g.op("Relu", [g.op("Add", [h, s])])
    a = g.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    c = g.op("Concat", [a, g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])], axis=1)
    f = g.op("Flatten", [g.op("GlobalAveragePool", [c])])
    y = g.op("Gemm", [f, g.const(rng.standard_normal((10, 128)).astype(np.float32) / 8)], transB=1)
    m = g.model([_f32("x", [1, 3, 32, 32])], [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)])
    feeds = {"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
    got, want = _run(m, feeds)
    _check(got, want)
    # The input into channels-last, the pooled [1, 1, 1, 128] back for Flatten: no other transposes.
    assert len(_transposes(m, feeds)) == 2, _transposes(m, feeds)


def test_broadcast_constants_and_tensors_are_permuted_alike(rng):
    g = _Graph(rng)
    x = g.conv("x", 8, 16, 3)
    x = g.op("Add", [x, g.const(rng.standard_normal((16, 1, 1)).astype(np.float32))])    # per channel
    x = g.op("Mul", [x, g.const(rng.standard_normal(12).astype(np.float32))])            # per column
    x = g.op("PRelu", [x, g.const((rng.random((16, 1, 1)) / 2).astype(np.float32))])
    x = g.op("Clip", [x, g.const(np.float32(-1.5)), g.const(np.float32(2.0))])
    x = g.op("Sub", [x, "z"])                                                             # an NCHW input
    x = g.op("Div", [x, g.const(np.full((1, 1, 1, 1), 3.0, np.float32))])                 # a [1,1,1,1] scalar
    y = g.conv(x, 16, 16, 3)
    m = g.model([_f32("x", [2, 8, 10, 12]), _f32("z", [2, 16, 10, 12])],
                [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)])
    feeds = {"x": rng.standard_normal((2, 8, 10, 12)).astype(np.float32),
             "z": rng.standard_normal((2, 16, 10, 12)).astype(np.float32)}
    got, want = _run(m, feeds)
    _check(got, want)


def test_operators_that_need_nchw_read_a_transposed_value(rng):
    # A depthwise convolution, a 12-channel one (not whole vectors), a
    # Transpose, a Reshape and a channels-first graph output all read the
    # channels-last value as NCHW; batch norm with parameters given at run
    # time stays the library's operator.
    g = _Graph(rng)
    x = g.conv("x", 4, 32, 3)
    d = g.conv(x, 32, 32, 3, group=32)
    n = g.conv(x, 32, 12, 1)
    b = g.op("BatchNormalization", [x, "gamma", "beta", "mean", "var"])
    t = g.op("Transpose", [x], perm=[0, 2, 3, 1])
    r = g.op("Reshape", [x, g.const(np.array([2, 32, -1], np.int64), "shape")])
    outs = [d, n, b, t, r, x]
    m = g.model([_f32("x", [2, 4, 9, 9])] + [_f32(p, [32]) for p in ("gamma", "beta", "mean", "var")],
                [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs])
    feeds = {"x": rng.standard_normal((2, 4, 9, 9)).astype(np.float32),
             "gamma": rng.random(32).astype(np.float32) + 0.5, "beta": rng.standard_normal(32).astype(np.float32),
             "mean": rng.standard_normal(32).astype(np.float32) / 4, "var": rng.random(32).astype(np.float32) + 0.5}
    got, want = _run(m, feeds)
    assert len(got) == len(outs)
    _check(got, want)
