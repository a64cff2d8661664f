"""The ONNX backend node tests (onnx.backend.test, the suite every ONNX backend
reports against) run on pypto.onnx.Backend, CPU.

Every node test not in onnx_backend_excludes.py must pass (its outputs within
the test's own tolerances of the reference, same dtype); an excluded test that
passes fails too, so the exclude list only shrinks; and the pass count may not
drop below PASS_FLOOR. The counts per reason are printed (pytest -s).
"""
import re
import unittest
import warnings

import pytest

onnx_backend_test = pytest.importorskip("onnx.backend.test")

import pypto  # noqa: E402
from onnx_backend_excludes import EXCLUDES  # noqa: E402

# Node tests passing on CPU when the list was last updated (of 1884).
PASS_FLOOR = 1338


def _run(names: set[str] | None = None) -> tuple[unittest.TestResult, list[str]]:
    warnings.filterwarnings("ignore")
    bt = onnx_backend_test.BackendTest(pypto.onnx.Backend, __name__)
    tests = unittest.defaultTestLoader.loadTestsFromTestCase(bt.test_cases["OnnxBackendNodeModelTest"])
    suite = unittest.TestSuite()
    ran = []
    for t in tests:
        m = re.match(r"test_(.*)_cpu$", t.id().split(".")[-1])
        if not m or (names is not None and m.group(1) not in names):
            continue
        suite.addTest(t)
        ran.append(m.group(1))
    res = unittest.TextTestRunner(verbosity=0, stream=open("/dev/null", "w")).run(suite)
    return res, ran


def _name(test: unittest.TestCase) -> str:
    return re.match(r"test_(.*)_cpu$", test.id().split(".")[-1]).group(1)


def test_onnx_node_tests_pass_except_the_listed_ones():
    excluded = {n for names in EXCLUDES.values() for n in names}
    res, ran = _run()
    failed = {_name(t): err.strip().splitlines()[-1] for t, err in res.failures + res.errors}
    passed = [n for n in ran if n not in failed]
    print(f"\nONNX node tests on CPU: {len(passed)} of {len(ran)} pass; excluded by reason:")
    for reason, names in sorted(EXCLUDES.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(names):4d}  {reason}")
    unexpected = {n: e for n, e in failed.items() if n not in excluded}
    assert not unexpected, "node tests failing that are not excluded:\n" + "\n".join(
        f"  {n}: {e[:200]}" for n, e in sorted(unexpected.items()))
    now_passing = sorted(excluded & set(passed))
    assert not now_passing, f"excluded tests that pass now (take them out of onnx_backend_excludes.py): {now_passing}"
    assert len(passed) >= PASS_FLOOR, f"{len(passed)} node tests pass, fewer than the {PASS_FLOOR} before"
