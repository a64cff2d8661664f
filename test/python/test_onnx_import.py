"""pypto.onnx: models built with onnx.helper, imported and run, checked against
onnx's reference evaluator in float64; constant folding; symbolic dims; and
untrusted files: truncated, mistyped, cyclic or absurd-size models give a
ModelImportError naming the node or tensor, never a crash or a huge allocation.
"""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import pypto  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _reference(model, feeds):
    return pypto.onnx.reference(model, feeds)


def test_an_mlp_with_initializers_matches_float64(rng):
    w1 = rng.standard_normal((64, 32)).astype(np.float32) / 8
    w2 = rng.standard_normal((10, 64)).astype(np.float32) / 8
    b1 = rng.standard_normal(64).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2"], ["z"], transB=1, alpha=0.5),
             helper.make_node("Softmax", ["z"], ["y"], axis=-1)]
    m = _model(nodes, [_f32("x", [8, 32])], [_f32("y", [8, 10])],
               [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b1, "b1")])
    x = rng.standard_normal((8, 32)).astype(np.float32)
    (got,) = pypto.onnx.load(m)(x)
    (want,) = _reference(m, {"x": x})
    # f32 sums of 32 and 64 products of O(1) values, then a softmax: 1e-5 absolute on [0, 1].
    assert got.dtype == np.float32 and got.shape == (8, 10)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shape_arithmetic_and_constant_of_shape_fold_at_import(rng):
    # Reshape to [batch, -1] with the batch taken from Shape -> Gather ->
    # Unsqueeze -> Concat, plus a weight built by ConstantOfShape: folded.
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["flat"]),
             helper.make_node("ConstantOfShape", ["wshape"], ["w"],
                              value=numpy_helper.from_array(np.array([0.25], np.float32))),
             helper.make_node("MatMul", ["flat", "w"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             numpy_helper.from_array(np.array([12, 5], np.int64), "wshape")]
    m = _model(nodes, [_f32("x", [2, 3, 4])], [_f32("y", [2, 5])], inits, opset=13)
    model = pypto.onnx.load(m)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (got,) = model(x)
    np.testing.assert_allclose(got, x.reshape(2, 12) @ np.full((12, 5), 0.25), rtol=1e-5, atol=1e-6)
    text = str(model.program(x))
    assert "Shape" not in text and "gather" not in text  # the shape arithmetic is gone
    assert "ConstantOfShape" not in text


def test_a_symbolic_batch_takes_each_calls_size(rng):
    m = _model([helper.make_node("Mul", ["x", "x"], ["y"])], [_f32("x", ["N", 3])], [_f32("y", ["N", 3])])
    model = pypto.onnx.load(m)
    for n in (1, 5):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(model(x)[0], x * x)


def _error(m_or_bytes, *fragments):
    with pytest.raises(pypto.ModelImportError) as e:
        model = pypto.onnx.load(m_or_bytes) if not isinstance(m_or_bytes, bytes) else None
        if model is None:
            import _pto
            _pto.onnx_import(m_or_bytes, {})
        else:
            model(np.zeros((2, 3), np.float32))
    for f in fragments:
        assert f in str(e.value), str(e.value)
    return str(e.value)


def test_bad_models_give_errors_naming_the_node():
    x, y = _f32("x", [2, 3]), _f32("y", [2, 3])
    good = _model([helper.make_node("Relu", ["x"], ["y"], name="act")], [x], [y])
    data = good.SerializeToString()
    _error(data[: len(data) // 2], "does not parse")
    _error(b"\x00\x01garbage" * 7, "does not parse")
    _error(_model([helper.make_node("FancyOp", ["x"], ["y"], name="mystery")], [x], [y]),
           "node 'mystery' (FancyOp)", "not supported")
    _error(_model([helper.make_node("Relu", ["t"], ["y"], name="late"), helper.make_node("Relu", ["x"], ["t"])], [x], [y]),
           "node 'late' (Relu)", "reads 't'", "topological order")
    _error(_model([helper.make_node("Relu", ["y"], ["y"], name="loop")], [x], [y]), "node 'loop' (Relu)", "reads 'y'")
    _error(_model([helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha_typo=0.3)], [x], [y]),
           "node 'lr' (LeakyRelu)", "attribute 'alpha_typo' is not supported", "alpha")
    s = helper.make_tensor_value_info("x", TensorProto.STRING, [2, 3])
    _error(_model([helper.make_node("Identity", ["x"], ["y"])], [s], [y]), "graph input 'x'", "STRING")


def test_absurd_sizes_are_refused_before_allocating():
    x, y = _f32("x", [2, 3]), _f32("y", [2, 3])
    # An initializer claiming 2^40 elements with no data: refused by the size limit, not allocated.
    huge = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20])
    _error(_model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [huge]), "'w'", "elements")
    # Data shorter than the dims: truncated.
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2, 3], float_data=[1.0, 2.0])
    _error(_model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [y], [short]), "'w'", "truncated")
    # ConstantOfShape asked for 2^62 elements.
    big = numpy_helper.from_array(np.array([1 << 31, 1 << 31], np.int64), "s")
    _error(_model([helper.make_node("ConstantOfShape", ["s"], ["c"], name="cos"), helper.make_node("Add", ["x", "c"], ["y"])],
                  [x], [y], [big]), "node 'cos' (ConstantOfShape)", "2^31")


def test_the_backend_interface_runs_a_model():
    m = _model([helper.make_node("Add", ["a", "b"], ["y"])], [_f32("a", [4]), _f32("b", [4])], [_f32("y", [4])])
    rep = pypto.onnx.Backend.prepare(m, "CPU")
    (out,) = rep.run([np.arange(4, dtype=np.float32), np.ones(4, np.float32)])
    np.testing.assert_array_equal(out, np.arange(4) + 1)
    assert pypto.onnx.Backend.supports_device("CPU") and not pypto.onnx.Backend.supports_device("CUDA")
    assert len(pypto.onnx.supported_operators()) >= 100
