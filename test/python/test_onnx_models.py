"""The ONNX backend suite's light real models (AlexNet, ResNet-50, SqueezeNet, ...:
real architectures at 224x224, in the onnx wheel) through pypto.onnx.Backend,
against the outputs the suite ships (onnx's reference evaluator, float32),
within the suite's tolerances. Each model imports into one program, takes
the default schedules and compiles in parts (schedules/Partition.h: one
Halide pipeline per model does not scale; DenseNet-121 has 1,700 nodes).
"""
import re
import unittest
import warnings

import pytest

onnx_backend_test = pytest.importorskip("onnx.backend.test")

import pypto  # noqa: E402

# All nine light models of the suite.
PASSING = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet",
           "vgg19", "zfnet512"]


def _model_test(name: str) -> unittest.TestCase:
    warnings.filterwarnings("ignore")
    bt = onnx_backend_test.BackendTest(pypto.onnx.Backend, __name__)
    for t in unittest.defaultTestLoader.loadTestsFromTestCase(bt.test_cases["OnnxBackendRealModelTest"]):
        if re.search(rf"test_{name}_cpu$", t.id()):
            return t
    raise LookupError(name)


@pytest.mark.parametrize("name", PASSING)
def test_light_model_matches_the_suites_outputs(name):
    res = unittest.TextTestRunner(verbosity=0, stream=open("/dev/null", "w")).run(unittest.TestSuite([_model_test(name)]))
    problems = res.errors + res.failures
    assert not res.skipped and not problems, problems[0][1][-2000:] if problems else "skipped"
