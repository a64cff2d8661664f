"""Every bench_suite workload (apps/suite/workloads.py: real-model shapes of every
stage class) computed by PTO's default schedules, static and symbolic, and by the
peers the benchmark times (ONNX Runtime graphs, numpy, oneDNN primitives),
checked against the float64 reference.

This is the correctness half of the benchmark, run in CI so that a default rule
that breaks a real shape fails here, not in a benchmark run.
"""
import os
import sys

import numpy as np
import pytest

_suite = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "apps", "suite")
sys.path.insert(0, _suite)
import bench_suite  # noqa: E402
from workloads import HELDOUT, WORKLOADS, random_workloads  # noqa: E402

import pypto  # noqa: E402


# A fixed draw of random shapes too (`bench_suite.py --random N --seed S` draws fresh ones).
@pytest.mark.parametrize("w", WORKLOADS + HELDOUT + random_workloads(12, seed=2026), ids=lambda w: w.name)
def test_workload_matches_float64(w):
    arrays = bench_suite.inputs_for(w, np.random.default_rng(1))
    ref = w.reference(*[a.astype(np.float64) for a in arrays])
    for dynamic in (False, True):
        got = pypto.kernel(w.pto, dynamic=dynamic, name=w.name)(*arrays)
        err = bench_suite.rel_error(got, ref)
        assert err <= bench_suite.TOL, f"{w.name} (dynamic={dynamic}): max rel error {err:.3g}"
    if w.onnx is not None:
        got = bench_suite.ort_session(w, arrays, ref.shape, 1)()
        assert bench_suite.rel_error(got, ref) <= bench_suite.TOL, f"{w.name}: the ONNX Runtime graph is wrong"
    if w.ref is not None:
        assert bench_suite.rel_error(w.ref(*arrays), ref) <= bench_suite.TOL
    if w.onednn is not None:
        got = w.onednn(bench_suite.onednn_module(1), *arrays).run()
        assert bench_suite.rel_error(got, ref) <= bench_suite.TOL, f"{w.name}: the oneDNN primitives are wrong"


def test_every_workload_has_a_onednn_peer():
    # oneDNN has a primitive (or a composition of them) for every suite class.
    ws = WORKLOADS + HELDOUT + random_workloads(20, seed=3)
    assert all(w.onednn is not None for w in ws), [w.name for w in ws if w.onednn is None]


def test_onednn_peer_rejects_what_it_cannot_run():
    d = bench_suite.onednn_module(1)
    x = np.ones((4, 5), np.float32)
    with pytest.raises(ValueError, match="reduce op 'prod'.*sum, max, mean"):
        d.reduce(x, "prod", [0])
    with pytest.raises(ValueError, match="matmul A has rank 1"):
        d.matmul(np.ones(5, np.float32), x)


def test_suite_spans_the_classes():
    classes = {w.cls for w in WORKLOADS}
    assert len(WORKLOADS) >= 30
    for c in ("contraction", "reduction (outer axis)", "reduction (inner axis)", "row-wise", "depthwise conv",
              "grouped conv", "pooling", "attention", "elementwise", "data movement"):
        assert c in classes, c


def test_rel_error_fails_on_a_wrong_answer():
    ref = np.linspace(-1, 1, 100)
    assert bench_suite.rel_error(ref.astype(np.float32), ref) < 1e-6
    bad = ref.copy()
    bad[7] += 1e-3
    assert bench_suite.rel_error(bad, ref) > bench_suite.TOL
    assert bench_suite.rel_error(ref[:50], ref) == float("inf")


def test_random_draws_are_reproducible_and_varied():
    a, b = random_workloads(20, seed=5), random_workloads(20, seed=5)
    assert [w.name for w in a] == [w.name for w in b]
    assert len({w.name for w in a}) == 20
    assert len({w.cls for w in a}) >= 4
    assert [w.name for w in random_workloads(20, seed=6)] != [w.name for w in a]
