"""The troubleshooting tools from Python: opt levels and bisection (docs/TROUBLESHOOTING.md)."""
import numpy as np
import pytest

import pypto


def _mlp(x, w, v):
    h = pypto.ops.relu(x @ w)
    return (h * v).sum(axis=1)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_every_opt_level_matches_float64(level, rng):
    x = rng.standard_normal((20, 33)).astype(np.float32)
    w = rng.standard_normal((33, 50)).astype(np.float32)
    v = rng.standard_normal(50).astype(np.float32)
    k = pypto.kernel(_mlp, opt_level=level, name=f"mlp_O{level}")
    want = (np.maximum(x.astype(np.float64) @ w, 0) * v).sum(axis=1)
    np.testing.assert_allclose(k(x, w, v), want, rtol=1e-4, atol=1e-4)
    text = str(k.explain(x, w, v))
    assert f"opt_level {level}" in text
    assert ("vectorized" in text) == (level > 0)
    assert ("fast-math" in text) == (level == 3)


def test_opt_level_is_checked():
    with pytest.raises(ValueError, match="valid levels are 0"):
        pypto.kernel(_mlp, opt_level=5)


def test_bisect_finds_a_planted_f16_accumulator(rng):
    x = rng.random((16, 4096)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def f(x):
        return pypto.exp(x * 0.5).sum(axis=1) * 2.0
    stages = f.stages(x)
    reduction = next(s for s in stages if f.program(x).stage(s)["reduce"])
    f.schedule(x)[reduction].precision(accumulate="f16")
    r = f.bisect(x)
    assert r.stage == reduction, str(r)
    assert r.culprits == ["precision"], str(r)
    assert r.error_given > r.tolerance >= r.error_plain
    assert "<- culprit" in str(r)


def test_bisect_finds_fast_math_where_nans_are_removed():
    m = np.linspace(-1, 1, 200, dtype=np.float32)
    m[::3] = np.nan

    @pypto.kernel(dynamic=False)
    def f(m):
        return pypto.exp(pypto.where(m == m, m, 0.0)) * 3.0
    f.schedule(m)[f.stages(m)[0]].fast_math()
    r = f.bisect(m)
    assert r.stage == f.stages(m)[0], str(r)
    assert r.culprits == ["fast_math"], str(r)
    assert np.isinf(r.error_given)


def test_bisect_says_when_there_is_nothing_to_find(rng):
    x = rng.random((8, 64)).astype(np.float32)
    k = pypto.kernel(lambda x: pypto.exp(x).sum(axis=1), dynamic=False, name="nothing")
    r = k.bisect(x)
    assert r.stage == "" and "no difference" in r.verdict


def test_check_numerics_names_the_stage_that_made_the_nan():
    x = np.linspace(0.1, 1.0, 40, dtype=np.float32).reshape(4, 10)

    @pypto.kernel(dynamic=False)
    def f(x):
        return pypto.ops.relu(pypto.log(x - 0.5)) * 2.0
    f(x)  # outside the context: NaN out, no error
    with pypto.check_numerics():
        with pytest.raises(pypto.KernelError,
                           match=r"stage '\w+' \(log, elementwise\) produced NaN at \[0, 0\]; it read \w+\(0, 0\) = -0\.4"):
            f(x)
    with pypto.check_numerics():  # a finite call passes
        f(x + 1.0)


def test_check_numerics_names_an_input_that_holds_inf():
    x = np.ones((3, 5), np.float32)
    x[2, 1] = np.inf

    @pypto.kernel(dynamic=False)
    def g(x):
        return x * 2.0
    with pypto.check_numerics(), pytest.raises(pypto.KernelError, match=r"input '\w+' holds inf at \[2, 1\]"):
        g(x)


def test_memory_error_reports_the_bytes_live_when_refused(rng):
    x = rng.random((64, 256)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def f(x):
        a = pypto.ops.softmax(x, axis=-1)          # two 64 KB intermediates, both live
        b = pypto.ops.softmax(x * 2.0, axis=-1)    # when the matmul reads them
        return (a @ b.T).sum(axis=1)
    with pypto.profile() as prof:
        f(x)
    assert prof.peak_bytes == 2 * 64 * 256 * 4
    with pytest.raises(pypto.DeviceMemoryError,
                       match=r"DEVICE_MEMORY_EXHAUSTED: .*stage.* asked for 65536 bytes with 65536 live and a "
                             r"limit of 131071 bytes; compute it inside its consumer's loop"):
        with pypto.memory_limit(prof.peak_bytes - 1):
            f(x)


def test_memory_error_names_the_stage(rng):
    x = rng.random((128, 512)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def f(x):
        return pypto.ops.relu(x @ x.T).sum(axis=1)
    del f.schedule(x)["matmul"]  # the matmul alone at root: a 64 KiB intermediate
    with pytest.raises(pypto.DeviceMemoryError, match=r"stage 'matmul' asked for 65536 bytes"):
        with pypto.memory_limit(32 * 1024):
            f(x)
    with pytest.raises(ValueError, match="nbytes must be positive"):
        with pypto.memory_limit(0):
            pass


def test_sharding_runs_a_program_ten_times_over_its_memory_limit(rng):
    # A two-layer MLP over 512 rows: its hidden activations (512 x 1024 floats, 2 MiB)
    # are ten times the limit; sharded along the rows, each shard fits.
    x = rng.standard_normal((512, 64)).astype(np.float32)
    w1 = (rng.standard_normal((64, 1024)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((1024, 32)) / 32).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def mlp(x, w1, w2):
        return pypto.ops.softmax(pypto.ops.relu(x @ w1) @ w2, axis=-1)
    with pypto.profile() as prof:
        mlp(x, w1, w2)
    limit = prof.peak_bytes // 10
    assert prof.peak_bytes >= 512 * 1024 * 4
    with pytest.raises(pypto.DeviceMemoryError, match="shard"):
        with pypto.memory_limit(limit):
            mlp(x, w1, w2)
    with pypto.profile() as prof, pypto.memory_limit(limit, shard=True) as m:
        got = mlp(x, w1, w2)
    h = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
    want = np.exp(h - h.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    # f32 sums of 64 and 1024 products of O(1) terms: ~1e-6 relative; 1e-5 absolute on probabilities.
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert m.shards >= 10 and 0 < m.peak_bytes <= limit
    assert prof.calls[-1].shards == m.shards and "shards" in prof.report()


def test_sharding_an_unsplittable_program_says_why(rng):
    x = rng.random((256, 256)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def total_softmax(x):
        e = pypto.ops.exp(x)
        return e / e.sum()   # every element reads the total of all of them
    del total_softmax.schedule(x)["exp"]
    with pytest.raises(pypto.DeviceMemoryError, match="sharding cannot split it"):
        with pypto.memory_limit(64 * 1024, shard=True):
            total_softmax(x)


def test_profile_stages_gives_per_stage_records_and_a_plot(rng):
    import matplotlib
    matplotlib.use("Agg")
    import pypto.plots
    x = rng.random((96, 128)).astype(np.float32)
    w = rng.random((128, 256)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def block(x, w):
        return pypto.ops.softmax(pypto.ops.relu(x @ w), axis=-1)
    prof = block.profile_stages(x, w, min_seconds=0.02)
    names = [s.stage for s in prof.stages]
    assert set(names) == set(block.stages(x, w))  # every stage has a row
    assert prof.roots and all(r.ms > 0 and 0 < r.share <= 1 for r in prof.roots)
    assert sum(r.ms for r in prof.roots) <= prof.run_ms * 1.001
    assert prof.runs >= 3 and "placement" in str(prof)
    matmul = next(s for s in prof.stages if s.op == "matmul")
    if matmul.placement == "root":  # its whole buffer at once
        assert matmul.buffer_bytes == 96 * 256 * 4
    ax = pypto.plots.stage_profile(prof)
    assert len(ax.patches) == len(prof.roots)
    with pypto.profile(stages=True) as p:
        block(x, w)
    assert len(p.stage_profiles) == 1 and p.stage_profiles[0].program == prof.program
    assert "placement" in p.report()


def test_generated_library_memory_limit_shards_and_checks_numerics(rng, tmp_path):
    # The rows are a size parameter of the library: over the limit, the _run wrapper
    # calls its kernel on row ranges (pointer offsets), as many as fit.
    @pypto.kernel
    def mlp_lib(x: pypto.Tensor["rows", 64], w1: pypto.Tensor[64, 1024], w2: pypto.Tensor[1024, 32]):
        return pypto.ops.softmax(pypto.ops.relu(x @ w1) @ w2, axis=-1)
    x = rng.standard_normal((512, 64)).astype(np.float32)
    w1 = (rng.standard_normal((64, 1024)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((1024, 32)) / 32).astype(np.float32)
    lib = mlp_lib.export(x, w1, w2, path=str(tmp_path)).load()
    header = open(lib.meta.header).read()
    assert "splits the rows of 'rows'" in header
    want = lib(x, w1, w2)
    h = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
    ref = np.exp(h - h.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-5)  # f32 sums of 64 and 1024 terms
    with pypto.profile() as prof:
        mlp_lib(x, w1, w2)
    limit = max(prof.peak_bytes // 10, 1)
    lib.set_memory_limit(limit)
    with pytest.raises(pypto.DeviceMemoryError, match=r"DEVICE_MEMORY_EXHAUSTED: .* a limit of %d bytes; shard along 'rows'" % limit):
        lib(x, w1, w2)
    lib.set_memory_limit(limit, shard=True)
    np.testing.assert_allclose(lib(x, w1, w2), want, rtol=1e-6, atol=1e-7)
    assert lib.last_shards >= 2
    lib.set_memory_limit(0)
    assert lib(x, w1, w2) is not None and lib.last_shards == 1

    @pypto.kernel(dynamic=False)
    def log_lib(x):
        return pypto.log(x - 0.5) * 2.0
    xs = rng.random((8, 16)).astype(np.float32)
    checked = log_lib.export(xs, path=str(tmp_path / "chk"), check_numerics=True).load()
    with pytest.raises(pypto.KernelError, match=r"returned -4: log_lib: check_numerics: output '.*' has NaN at flat index"):
        checked(xs)
    finite = xs + np.float32(1.0)
    # log of values in [0.5, 1.5) in f32: a few ulps of 1 absolute.
    np.testing.assert_allclose(checked(finite), np.log(finite.astype(np.float64) - 0.5) * 2, atol=1e-6)
