"""`pto gen model.onnx`: an imported model as a static library of its parts,
its weights in a side file and a C driver (backends/ModelLibrary.h), run by a
plain C program built here with the system compiler: a small residual network
checked against onnx's float64 reference evaluator, and the ONNX test suite's
ResNet-50 against ONNX Runtime.
"""
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import pypto  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "apps", "models"))
import bench_models  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PTO = os.path.join(os.environ.get("PTO_BUILD_DIR", os.path.join(_ROOT, "build")), "bin", "pto")

# A C program for one input and one output: reads the input's bytes from a file,
# runs the model, writes the output's bytes.
_MAIN = r"""
#include <stdio.h>
#include "NAME_model.h"
int main(int argc, char** argv) {
  static float x[IN_N], y[OUT_N];
  FILE* f = fopen(argv[2], "rb");
  if (!f || fread(x, sizeof x, 1, f) != 1) return 3;
  fclose(f);
  NAME_model* m;
  if (NAME_model_load(argv[1], &m) != 0) { fprintf(stderr, "%s\n", NAME_model_last_error()); return 1; }
  if (NAME_model_run(m, x, y) != 0) { fprintf(stderr, "%s\n", NAME_model_last_error()); return 2; }
  NAME_model_free(m);
  f = fopen(argv[3], "wb");
  if (!f || fwrite(y, sizeof y, 1, f) != 1) return 4;
  fclose(f);
  return 0;
}
"""


def _build_and_run(tmp_path, model_path, name, x, out_shape):
    if not os.path.exists(_PTO):
        pytest.skip(f"{_PTO} is not built")
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    out = tmp_path / "lib"
    out.mkdir()
    subprocess.run([_PTO, "gen", str(model_path), "-o", str(out), "--name", name], check=True)
    n_out = int(np.prod(out_shape))
    src = out / "main.c"
    src.write_text(_MAIN.replace("NAME", name).replace("IN_N", str(x.size)).replace("OUT_N", str(n_out)))
    exe = out / "main"
    subprocess.run([cc, "-O2", "-std=c11", str(src), str(out / f"{name}.a"), "-I", str(out), "-o", str(exe),
                    "-lpthread", "-ldl", "-lm"], check=True)
    (tmp_path / "x.bin").write_bytes(np.ascontiguousarray(x, np.float32).tobytes())
    r = subprocess.run([str(exe), str(out / f"{name}.weights"), str(tmp_path / "x.bin"), str(tmp_path / "y.bin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return np.frombuffer((tmp_path / "y.bin").read_bytes(), np.float32).reshape(out_shape)


def test_a_generated_residual_network_matches_float64(tmp_path, rng):
    # Conv + BN + ReLU, max pool, a bottleneck with a projection shortcut,
    # global pooling and a classifier: channels-last parts, weights pre-packed at load.
    inits, nodes = [], []

    def w(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    def conv(x, y, cin, cout, k, stride=1):
        nodes.append(helper.make_node("Conv", [x, w(y + "_w", rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)),
                                               w(y + "_b", rng.standard_normal(cout) / 4)], [y],
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4))
        return y

    def bn(x, y, c):
        nodes.append(helper.make_node("BatchNormalization", [x, w(y + "_s", rng.random(c) + 0.5), w(y + "_b", rng.standard_normal(c) / 4),
                                                             w(y + "_m", rng.standard_normal(c) / 4), w(y + "_v", rng.random(c) + 0.5)], [y]))
        return y

    def relu(x, y):
        nodes.append(helper.make_node("Relu", [x], [y]))
        return y

    h = relu(bn(conv("x", "c1", 3, 32, 3, 2), "b1", 32), "r1")
    nodes.append(helper.make_node("MaxPool", [h], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    a = relu(bn(conv("p", "c2", 32, 16, 1), "b2", 16), "r2")
    a = relu(bn(conv(a, "c3", 16, 16, 3), "b3", 16), "r3")
    a = bn(conv(a, "c4", 16, 64, 1), "b4", 64)
    s = bn(conv("p", "c5", 32, 64, 1), "b5", 64)
    nodes.append(helper.make_node("Add", [a, s], ["sum"]))
    relu("sum", "r6")
    nodes.append(helper.make_node("GlobalAveragePool", ["r6"], ["g"]))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"]))
    nodes.append(helper.make_node("Gemm", ["f", w("fc_w", rng.standard_normal((10, 64)) / 8), w("fc_b", np.zeros(10))],
                                  ["y"], transB=1))
    g = helper.make_graph(nodes, "resnetish", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "resnetish.onnx"
    onnx.save(m, str(path))
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    got = _build_and_run(tmp_path, path, "resnetish", x, (1, 10))
    (want,) = pypto.onnx.reference(m, {"x": x})
    # f32 sums of at most 288 products of O(1) terms, five layers deep.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_the_generated_resnet50_library_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    found = glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_resnet50.onnx"))
    if not found:
        pytest.skip("the onnx wheel has no light ResNet-50")
    rng = np.random.default_rng(7)
    m = bench_models.with_random_weights(onnx.load(found[0]), rng)
    path = tmp_path / "resnet50.onnx"
    onnx.save(m, str(path))
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    got = _build_and_run(tmp_path, path, "resnet50", x, (1, 1000))
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (want,) = s.run(None, {s.get_inputs()[0].name: x})
    assert want.std() > 1e-3 * np.abs(want).max()  # the classes' scores differ: a check that can fail
    # 1000 logits after 53 f32 convolutions (reductions of up to 4608 terms) in
    # both, summed in different orders: 1e-4 of the largest.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
