"""Decorator caching, schedule exploration (edit -> run -> same result), tuning, export + ctypes."""
import numpy as np
import pytest

import pypto


def mbr_ref(a, b, bias):
    return np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0.0)


def f32_matmul_tol(k):
    # f32 accumulation of k products of values in [0, 1): error <= k * 2^-24 * sum|a*b| <= k^2 * 6e-8;
    # as relative error of results ~k/4, k * 2.4e-7 bounds it with margin.
    return dict(rtol=k * 2.4e-7 + 1e-6, atol=1e-6)


@pytest.fixture
def mats(rng):
    a = rng.random((40, 24), dtype=np.float32)
    b = rng.random((24, 72), dtype=np.float32)
    bias = rng.random(72, dtype=np.float32)
    return a, b, bias


def test_compiles_once_per_signature_and_not_per_size(rng):
    @pypto.kernel(static_variants=False)
    def mm(A: pypto.Tensor, B: pypto.Tensor):
        return A @ B
    for m, k, n in [(8, 5, 3), (9, 5, 3), (17, 11, 13), (1, 4, 6)]:
        a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
        np.testing.assert_allclose(mm(a, b), a.astype(np.float64) @ b, **f32_matmul_tol(k))
    # (8,5,3), (9,5,3), (17,11,13) share one symbolic signature; (1,4,6) has a unit dim.
    assert mm.cache_info == {"signatures": 2, "traces": 2, "compiled": 2, "static_variants": 0}
    a = rng.random((6, 6), dtype=np.float32)
    mm(a, a)  # M == K == N: a different pattern of equal sizes -> new signature
    mm(a.astype(np.float64), a.astype(np.float64))  # new dtype -> new signature
    assert mm.cache_info["signatures"] == 4


def test_dynamic_matmul_is_specialized_and_exact_at_odd_sizes(rng):
    # The default (dynamic) kernel compiles once; its register tile has a version
    # specialized for sizes that hold a tile and a guarded one below: size 1, a
    # prime below one vector, square and rectangular primes, and 1000 (not a
    # multiple of the 6 x 64 tile) all go through the same kernel.
    @pypto.kernel(static_variants=False)
    def mm(A, B):
        return A @ B
    shapes = [(1, 1, 1), (7, 7, 7), (5, 3, 70), (257, 257, 257), (129, 700, 333), (1000, 1000, 1000)]
    for m, k, n in shapes:
        a = rng.random((m, k), dtype=np.float32)
        b = rng.random((k, n), dtype=np.float32)
        np.testing.assert_allclose(mm(a, b), a.astype(np.float64) @ b.astype(np.float64), **f32_matmul_tol(k))
    assert '"specialize": true' in mm.schedule(a, b).to_json()
    # Kernels: size 1 (dims of 1 stay static), every square shape, every rectangular one.
    assert mm.cache_info["compiled"] == 3


def test_sizes_below_the_tiles_run_static_variants(rng):
    # The symbolic kernel serves sizes that hold its tiles; a symbol below its
    # full-speed extent (17 columns under a 64-column tile) runs a static
    # kernel for that shape, compiled once; an edited schedule always runs.
    @pypto.kernel
    def mm(A, B):
        return A @ B
    for m, k, n in [(300, 200, 100), (301, 203, 107), (300, 200, 17), (300, 200, 17), (40, 30, 5)]:
        a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
        np.testing.assert_allclose(mm(a, b), a.astype(np.float64) @ b, **f32_matmul_tol(k))
    info = mm.cache_info
    assert info["static_variants"] == 2 and info["compiled"] == 3, info
    spec = mm.specialize(rng.random((300, 200), dtype=np.float32), rng.random((200, 100), dtype=np.float32))
    need = spec.full_speed_extents()
    assert need and all(v > 1 for v in need.values())
    small = [rng.random((300, 200), dtype=np.float32), rng.random((200, 17), dtype=np.float32)]
    assert mm.specialize(*small).key != spec.key
    # Edit the symbolic schedule: every size now runs it.
    s = spec.schedule
    s["matmul"].parallel()  # serial
    assert mm.specialize(*small).key == spec.key
    np.testing.assert_allclose(mm(*small), small[0].astype(np.float64) @ small[1], **f32_matmul_tol(200))


def test_static_variants_are_capped(rng, monkeypatch):
    import sys
    monkeypatch.setattr(sys.modules["pypto.kernel"], "MAX_STATIC_VARIANTS", 2)
    f = pypto.kernel(lambda x: x * 2.0)
    for n in (3, 5, 7, 9):
        x = rng.random((50, n), dtype=np.float32)
        np.testing.assert_allclose(f(x), x * 2.0)
    assert f.cache_info["static_variants"] <= 2


def test_static_kernels_compile_per_shape(rng):
    k = pypto.kernel(lambda x: x * 2.0, dynamic=False)
    for n in (3, 4, 3):
        k(rng.random(n).astype(np.float32))
    assert k.cache_info == {"signatures": 2, "traces": 2, "compiled": 2, "static_variants": 0}


def test_repeated_calls_take_the_fast_path_and_see_every_change(rng):
    # The fast path repeats the last call's kernel; anything that would change
    # what runs (shape, dtype, layout, schedule, a debug context) must not use it.
    k = pypto.kernel(lambda a, b: (a @ b, a + 1.0), dynamic=False)
    a = rng.random((20, 24), dtype=np.float32)
    b = rng.random((24, 40), dtype=np.float32)
    ref = a.astype(np.float64) @ b
    for _ in range(3):
        mm, plus = k(a, b)
        np.testing.assert_allclose(mm, ref, **f32_matmul_tol(24))
        np.testing.assert_array_equal(plus, a + np.float32(1))
    assert k._fast is not None
    compiled = k.cache_info["compiled"]
    k.schedule(a, b)["matmul"].tile(i=4, j=16)  # an edit compiles, and the next call runs it
    np.testing.assert_allclose(k(a, b)[0], ref, **f32_matmul_tol(24))
    assert k.cache_info["compiled"] == compiled + 1
    assert k.schedule()["matmul"].to_dict()["tile"] == {"i": [4], "j": [16]}
    wide = rng.random((24, 80), dtype=np.float32)[:, ::2]  # a strided view: copied, not misread
    np.testing.assert_allclose(k(a, wide)[0], a.astype(np.float64) @ wide, **f32_matmul_tol(24))
    a2 = rng.random((7, 24), dtype=np.float32)  # another shape
    np.testing.assert_allclose(k(a2, b)[0], a2.astype(np.float64) @ b, **f32_matmul_tol(24))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)  # another dtype
    assert k(a64, b64)[0].dtype == np.float64
    k(a, b)
    with pypto.profile() as prof:  # a debug context after a fast call still sees the call
        k(a, b)
    assert len(prof.calls) == 1
    with pytest.raises(pypto.KernelError, match="check_numerics"):
        with pypto.check_numerics():
            k(np.full_like(a, np.inf), b)


def test_schedule_edit_run_same_result(mats):
    a, b, bias = mats

    @pypto.kernel(dynamic=False)
    def mbr(A, B, bias):
        return pypto.relu(pypto.ops.matmul(A, B, name="mm") + bias)
    want = mbr_ref(a, b, bias)
    np.testing.assert_allclose(mbr(a, b, bias), want, **f32_matmul_tol(24))
    s = mbr.schedule()
    assert "mm" in s.stages and "loop" in mbr.explain()
    out = mbr.stages()[-1]
    s.set_options(threads=1)
    del s["mm"]
    s[out].clear().compute_root()
    s["mm"].update.tile(i=8, j=16).order("i_o", "j_o", "k", "i_i", "j_i").vectorize("j_i", 16).parallel("i_o")
    s["mm"].vectorize("j", 8)
    s["add"].compute_inline()
    s[out].tile(i0=8, i1=32).vectorize("i1_i", 16).parallel("i0_o")
    text = mbr.explain()
    assert "vectorized" in text or "vectorize" in text
    np.testing.assert_allclose(mbr(a, b, bias), want, **f32_matmul_tol(24))
    assert mbr.cache_info["compiled"] == 2
    # The same schedule through JSON, and opt_level 0 (the debugging baseline) agree too.
    mbr.set_schedule(pypto.Schedule.from_json(s.to_json()))
    np.testing.assert_allclose(mbr(a, b, bias), want, **f32_matmul_tol(24))
    n = mbr.cache_info["compiled"]
    # An edit in place after calls (a call caches the schedule's JSON) still compiles, once.
    mbr.schedule().set_options(opt_level=0)
    np.testing.assert_allclose(mbr(a, b, bias), want, **f32_matmul_tol(24))
    np.testing.assert_allclose(mbr(a, b, bias), want, **f32_matmul_tol(24))
    assert mbr.cache_info["compiled"] == n + 1


def test_schedule_skip_padding_and_rfactor(rng):
    # A padded 3x3 channels-last convolution: skipping the padding (and reading the
    # input in place) must give the float64 answer; so must an rfactored row sum.
    x = rng.random((1, 7, 7, 16), dtype=np.float32)
    w = rng.random((3, 3, 16, 32), dtype=np.float32)

    @pypto.kernel(dynamic=False)
    def conv(X, W):
        return pypto.ops.conv2d_nhwc(X, W, padding=[1, 1], name="y")
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((1, 7, 7, 32))
    for ky in range(3):
        for kx in range(3):
            want += xp[:, ky:ky + 7, kx:kx + 7, :] @ w[ky, kx].astype(np.float64)
    tol = f32_matmul_tol(9 * 16)
    np.testing.assert_allclose(conv(x, w), want, **tol)
    conv.schedule()["y"].skip_padding("h", "w")
    assert "where" in conv.explain()
    np.testing.assert_allclose(conv(x, w), want, **tol)

    @pypto.kernel(dynamic=False)
    def rowsum(X):
        return pypto.ops.reduce_sum(X, axes=[1], name="s")
    a = rng.random((5, 96), dtype=np.float32)
    rowsum(a)
    rowsum.schedule()["s"].rfactor("r1", 16)
    assert "rfactor of r1 by 16" in rowsum.explain()
    np.testing.assert_allclose(rowsum(a), a.astype(np.float64).sum(axis=1), **f32_matmul_tol(96))
    # Chunks of a long row across cores, each with 16 lanes of partials (the last chunk guarded).
    b = rng.random((3, 1001), dtype=np.float32)
    rowsum(b)
    rowsum.schedule(b)["s"].rfactor("r1", 256, parallel=True, vector_lanes=16)
    assert rowsum.schedule(b).to_dict()["stages"]["s"]["rfactor"] == {
        "rvar": "r1", "factor": 256, "parallel": True, "vector_lanes": 16}
    np.testing.assert_allclose(rowsum(b), b.astype(np.float64).sum(axis=1), **f32_matmul_tol(1001))


def test_schedule_specialize(rng):
    # A dynamic kernel's root stage: specialized loops (tails shifted inwards) for sizes that hold
    # its vector, guarded ones below; both versions, and the guarded one alone, are exact.
    @pypto.kernel
    def relu(X):
        return pypto.ops.relu(X, name="y")
    for shape in ((3, 5), (40, 70)):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(relu(x), np.maximum(x, 0))
    assert "specialized" in relu.explain(x)
    relu.schedule(x)["y"].specialize(False)
    assert "specialized" not in relu.explain(x)
    for shape in ((3, 5), (40, 70)):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(relu(x), np.maximum(x, 0))


def test_schedule_store_in(rng):
    # Softmax rows of 1 KB and more: the default writes the exponentials into the output and scales
    # them there; stored in their own row again, the result is the same to the last bit.
    @pypto.kernel(dynamic=False)
    def sm(X):
        return pypto.ops.softmax(X, axis=-1, name="y")
    x = rng.standard_normal((37, 300)).astype(np.float32)
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    got = sm(x)
    # f32 exp (a few ulps) and a sum of 300 terms (300 * 2^-24 relative).
    np.testing.assert_allclose(got, ref, rtol=300 * 6e-8 + 4e-7, atol=1e-9)
    assert "stored in y's buffer" in sm.explain(x)
    sm.schedule(x)["y_exp"].store_in(None)
    assert "stored in y's buffer" not in sm.explain(x)
    np.testing.assert_array_equal(sm(x), got)


def test_schedule_dot_pairs(rng):
    # A channels-last conv whose weights are blocked in channel pairs,
    # W[o // 32, ky, kx, c // 2, o % 32, c % 2]: summing the pairs per lane
    # (dot_pairs) must give the float64 answer.
    x = rng.random((1, 6, 6, 16), dtype=np.float32)
    w = rng.random((3, 3, 16, 32), dtype=np.float32)  # HWIO
    b = rng.random(32, dtype=np.float32)
    wp = np.ascontiguousarray(w.reshape(3, 3, 8, 2, 1, 32).transpose(4, 0, 1, 2, 5, 3))  # [1, 3, 3, 8, 32, 2]

    @pypto.kernel(dynamic=False)
    def conv(X, W, B):
        return pypto.ops.conv2d_nhwc(X, W, B, name="y")
    want = np.zeros((1, 4, 4, 32))
    for ky in range(3):
        for kx in range(3):
            want += x[:, ky:ky + 4, kx:kx + 4, :].astype(np.float64) @ w[ky, kx].astype(np.float64)
    want += b
    tol = f32_matmul_tol(9 * 16)
    np.testing.assert_allclose(conv(x, wp, b), want, **tol)
    conv.schedule()["y_acc"].dot_pairs("c")
    assert "[dot_pairs: c = 2 c + c_2" in conv.explain()
    np.testing.assert_allclose(conv(x, wp, b), want, **tol)


def test_schedule_amx(rng):
    # A matmul on AMX tiles: both factors rounded to bf16, sums in f32; 20 rows (not whole
    # tiles of 16) and k = 40 (not whole steps of 32) are padded. Where the CPU has no AMX,
    # the schedule is refused by name.
    a = rng.standard_normal((20, 40)).astype(np.float32)
    b = rng.standard_normal((40, 32)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def mm(A, B):
        return A @ B
    stage = mm.schedule(a, b)["matmul"]
    assert stage.amx() is stage
    if not pypto.target_info()["amx"]:
        with pytest.raises(pypto.PtoError, match="amx needs a CPU with AMX tiles"):
            mm(a, b)
        return
    assert "tdpbf16ps" in mm.explain(a, b)
    # Each product of bf16-rounded factors errs by at most 2^-8 of |a||b|.
    bound = np.abs(a).astype(np.float64) @ np.abs(b) * 2.0 ** -8
    assert np.all(np.abs(mm(a, b) - a.astype(np.float64) @ b) <= bound + 1e-5)


def test_default_pads_few_columns(rng):
    # 12 output columns (under a 16-lane vector on AVX-512; on AVX2's 8 lanes
    # a whole vector and a part one): the float64 answer either way, and
    # where the default pads them, explain says so and the builder sets it.
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((30, 12)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def mm(A, B):
        return A @ B
    np.testing.assert_allclose(mm(a, b), a.astype(np.float64) @ b, **f32_matmul_tol(30))
    stage = mm.schedule(a, b)["matmul"]
    if "[pad_lanes: j in whole vectors" in mm.explain(a, b):
        assert stage.pad_lanes("j") is stage


def test_time_reports_median_and_spread(mats):
    k = pypto.kernel(lambda a, b: a @ b)
    t = k.time(mats[0], mats[1], min_seconds=0.01)
    assert 0 < t.min_ms <= t.median_ms <= t.max_ms and t.reps >= 5
    assert t.flops == 2 * 40 * 24 * 72 and t.gflops > 0
    assert "median" in str(t)


def test_tune_installs_the_confirmed_best_trial_and_resumes(mats, tmp_path):
    a, b, bias = mats

    @pypto.kernel  # dynamic: the C++ tuner specializes this signature to its static shapes
    def mbr(A, B, bias):
        return pypto.relu(A @ B + bias)
    db = str(tmp_path / "tune.db")
    r = mbr.tune(a, b, bias, trials=4, seed=1, progress=False, min_seconds=0.01, db=db)
    assert len(r.trials) == 4 and len(r.records) == 4 and r.db == db
    assert r.records[0]["strategy"] == "default" and r.records[0]["status"] == "ok"
    assert r.baseline_ms == r.records[0]["median_ms"]
    ok = [t for t in r.records if t["status"] == "ok"]
    # The pick: a correct trial (the fastest few and the default, timed again side by side;
    # the default unless another beats it there).
    picked = [t for t in ok if t["median_ms"] == r.best_ms]
    assert picked and r.best_schedule == pypto.Schedule.from_json(picked[0]["schedule"])
    if r.confirmed_ms is not None:
        assert r.confirmed_ms <= r.confirmed_default_ms
    # The curve is the running minimum over the trials in order (rejected ones keep the best so far).
    running, curve = None, []
    for t in r.records:
        if t["status"] == "ok" and (running is None or t["median_ms"] < running):
            running = t["median_ms"]
        curve.append(running)
    assert [t.best_ms for t in r.trials] == curve
    for t in r.trials:
        # The C++ worker checks each candidate against the f64 plain schedule within 1e-4 (exact f32).
        assert t.status != "ok" or t.rel_error <= 1e-4
    # The installed schedule is the best record's, and it computes the float64 answer.
    assert mbr.schedule(a, b, bias) == r.best_schedule
    np.testing.assert_allclose(mbr(a, b, bias), mbr_ref(a, b, bias), **f32_matmul_tol(24))
    # Same database: a rerun resumes (nothing measured again) and finds the same best.
    again = mbr.tune(a, b, bias, trials=4, seed=1, progress=False, min_seconds=0.01, db=db)
    assert again.records == r.records
    assert again.best_schedule == r.best_schedule
    with pytest.raises(pypto.PtoError, match="unknown strategy 'nosuch'"):
        mbr.tune(a, b, bias, trials=1, progress=False, strategy="nosuch", db=db)


def test_tune_progress_is_reported_by_the_cpp_tuner_per_trial(mats, tmp_path):
    from pypto._ext import _pto
    from pypto.tune import worker_executable
    a, b, _ = mats

    @pypto.kernel(dynamic=False)
    def mm(A, B):
        return A @ B
    calls = []
    r = _pto.tune(mm.program(a, b), trials=3, db=str(tmp_path / "t.db"), min_seconds=0.01,
                  worker=worker_executable(), progress=calls.append)
    # One report before the first trial, then one per trial with that trial's record (in the
    # order they finish: a batch's trials compile together, a failure reports when it is known).
    assert [c["trial"] for c in calls] == [0, 1, 2, 3] and all(c["trials"] == 3 for c in calls)
    assert calls[0]["last"] is None
    assert sorted(c["last"]["index"] for c in calls[1:]) == [t["index"] for t in r["trials"]]
    assert calls[-1]["best_ms"] == r["best"]["median_ms"]

    def boom(report):
        raise KeyError("from the progress callback")
    with pytest.raises(KeyError, match="progress callback"):
        _pto.tune(mm.program(a, b), trials=1, db=str(tmp_path / "u.db"), min_seconds=0.01,
                  worker=worker_executable(), progress=boom)
    # The bar of kernel.tune is driven by the same callback.
    r = mm.tune(a, b, trials=2, min_seconds=0.01, db=str(tmp_path / "v.db"), progress=True)
    assert len(r.records) == 2


def test_export_then_ctypes_load(mats, tmp_path):
    a, b, bias = mats

    @pypto.kernel(dynamic=False)
    def mbr_lib(A, B, bias):
        return pypto.relu(A @ B + bias)
    lib = mbr_lib.export(a, b, bias, path=str(tmp_path))
    assert (tmp_path / "mbr_lib.a").exists() and (tmp_path / "mbr_lib_pto.h").exists()
    got = lib.load()(a, b, bias)
    np.testing.assert_allclose(got, mbr_ref(a, b, bias), **f32_matmul_tol(24))


def test_export_symbolic_sizes_serve_every_size(rng, tmp_path):
    @pypto.kernel
    def scale_add(x: pypto.Tensor["n"], y: pypto.Tensor["n"]):
        return x * 3.0 + y
    x = rng.random(10).astype(np.float32)
    lib = scale_add.export(x, x, path=str(tmp_path)).load()
    assert lib.meta.symbols == ["n"]
    for n in (1, 17, 100):
        x, y = rng.random(n).astype(np.float32), rng.random(n).astype(np.float32)
        # x*3 + y in f32: two roundings of values < 4.
        np.testing.assert_allclose(lib(x, y), x.astype(np.float64) * 3 + y, rtol=2.5e-7, atol=1e-7)
    with pytest.raises(ValueError, match="binds 'n'"):
        lib(np.ones(3, np.float32), np.ones(4, np.float32))


def test_stage_times_of_a_stage_computed_in_its_consumers_tile():
    # The window convolution is computed in its bias epilogue's tile, its rows
    # and columns unrolled over that tile; alone, those unrolls would span the
    # whole image (a compile of over 12 minutes): it takes its own default.
    @pypto.kernel(dynamic=False)
    def gconv(X, W, B):
        return pypto.ops.conv2d(X, W, B, stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=4)
    rng = np.random.default_rng(3)
    x = rng.random((1, 64, 30, 30), dtype=np.float32)
    w = rng.random((64, 16, 3, 3), dtype=np.float32)
    b = rng.random(64, dtype=np.float32)
    times = gconv.stage_times(x, w, b, min_seconds=0.005)
    assert set(times) == set(gconv.stages())
    assert all(t.median_ms > 0 for t in times.values())


def test_stage_times_and_plots(mats):
    import matplotlib
    matplotlib.use("Agg")
    a, b, bias = mats

    @pypto.kernel(dynamic=False)
    def mbr(A, B, bias):
        return pypto.relu(A @ B + bias)
    times = mbr.stage_times(a, b, bias, min_seconds=0.005)
    assert set(times) == set(mbr.stages())
    assert all(t.median_ms > 0 for t in times.values())
    r = mbr.tune(a, b, bias, trials=2, progress=False, min_seconds=0.005)
    assert pypto.plots.tuning_curve(r).get_xlabel() == "trial"
    assert len(pypto.plots.stage_bars(times).patches) == len(times)
    t = mbr.time(a, b, bias, min_seconds=0.01)
    ax = pypto.plots.roofline([("mbr", mbr.flops(a, b, bias), mbr.io_bytes(a, b, bias), t.median_ms)],
                              peak_gflops=100.0, peak_gbs=20.0)
    assert ax.get_xscale() == "log"
