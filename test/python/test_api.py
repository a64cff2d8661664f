"""The report's API: mixed_precision, profile, check_numerics, debug_print, custom_op, pipeline, .to()."""
import math
import time

import ml_dtypes
import numpy as np
import pytest

import pypto


def test_mixed_precision_sets_directives_and_stays_accurate(rng):
    @pypto.kernel(dynamic=False)
    @pypto.mixed_precision(precision="bf16", keep={"softmax": "f32"})
    def block(x, w):
        return pypto.ops.softmax(x @ w, axis=-1)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 32)) / 8).astype(np.float32)
    got = block(x, w)
    s = block.schedule().to_dict()["stages"]
    mm = next(n for n in s if n.startswith("matmul"))
    assert s[mm]["precision"] == {"storage": "bf16", "compute": "bf16", "accumulate": "f32"}
    ops = {st["name"]: st["op"] for st in block.program().stages()}
    kept = [n for n, op in ops.items() if op == "softmax"]
    assert kept and all(s[n]["precision"]["compute"] == "f32" for n in kept)  # softmax kept wide
    logits = x.astype(np.float64) @ w
    e = np.exp(logits - logits.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    # bf16 operands (8-bit mantissa, rel 2^-8 each) over 64 products, f32 accumulation: logits
    # err <= ~2 * 2^-8 * sum|x*w| ~ 0.05; softmax outputs <= 1 move by about that much.
    np.testing.assert_allclose(got, want, atol=0.05)
    assert np.abs(got - want).max() > 1e-6  # and bf16 really was used


def test_mixed_precision_report_spelling_and_bad_args():
    pol = pypto.mixed_precision(precision="fp16", keep_layer_norm="fp32")
    f = pol(lambda x: x)
    assert f.__pypto_precision__.keep == {"layer_norm": "f32"}
    assert f.__pypto_precision__.precision == "f16"
    with pytest.raises(TypeError, match="unknown argument 'kep'"):
        pypto.mixed_precision(kep="f32")


def test_bf16_arrays_in_and_out(rng):
    k = pypto.kernel(lambda a, b: a @ b)
    a = rng.random((8, 16)).astype(ml_dtypes.bfloat16)
    b = rng.random((16, 4)).astype(ml_dtypes.bfloat16)
    got = k(a, b)
    assert got.dtype == np.dtype(ml_dtypes.bfloat16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    # result rounded to bf16 (rel 2^-8) after 16 products accumulated in bf16 storage steps.
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=16 * 2**-8)


def test_profile_records_calls(rng):
    k = pypto.kernel(lambda x: x * 2.0, name="twice")
    x = rng.random((4, 48)).astype(np.float32)  # rows of whole vectors: the symbolic kernel runs
    with pypto.profile() as prof:
        k(x)
        k(x)
    k(x)  # outside: not recorded
    assert [c.kernel for c in prof.calls] == ["twice", "twice"]
    assert all(c.ms > 0 for c in prof.calls)
    assert prof.calls[0].compile_ms > 0 and prof.calls[1].compile_ms == 0  # compiled once
    assert "twice" in prof.report() and "f32[x_0, x_1]" in prof.report()


def test_check_numerics_reports_nan_and_inf(rng):
    k = pypto.kernel(lambda x: pypto.log(x))
    x = np.array([[1.0, 0.0], [2.0, 3.0]], np.float32)  # log(0) = -inf
    assert np.isinf(k(x)).any()  # without the check: silently Inf
    # The stage that produced it, where, and what it read there (debug/CheckNumerics.h).
    with pytest.raises(RuntimeError, match=r"check_numerics: stage 'log' \(log, elementwise\) produced -inf at "
                                           r"\[0, 1\]; it read x\(0, 1\) = 0") as e:
        with pypto.check_numerics():
            k(x)
    assert isinstance(e.value, pypto.KernelError)
    h = pypto.kernel(lambda x: pypto.log(x))
    with pytest.raises(pypto.KernelError, match="NaN"):
        with pypto.check_numerics():
            h(np.array([-1.0], np.float16))  # f16: checked on the Python side

    @pypto.check_numerics()
    def run():
        return k(np.ones((2, 2), np.float32))
    np.testing.assert_allclose(run(), 0.0)


def test_debug_print_shows_intermediate_values(capsys):
    @pypto.kernel
    def f(x):
        h = pypto.debug_print(x * 2.0, "doubled")
        return h + 1.0
    out = f(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_allclose(out, [3, 5, 7])
    printed = capsys.readouterr().out
    assert "doubled" in printed and "min 2 max 6 mean 4" in printed
    outside = pypto.Tensor(f.program().tensor("x"), f._last.trace)  # a tensor of a finished trace
    with pytest.raises(ValueError, match="inside the @pypto.kernel"):
        pypto.debug_print(outside)


def test_debug_print_keeps_the_default_schedule(capsys, rng):
    # Printing a matmul followed by an operation failed to schedule: the printed
    # stage became an output, computed at root, where the default fuses it.
    a = rng.standard_normal((24, 24)).astype(np.float32)

    @pypto.kernel(dynamic=False)
    def f(a):
        return pypto.ops.relu(pypto.debug_print(a @ a, "product"))
    np.testing.assert_allclose(f(a), np.maximum(a.astype(np.float64) @ a, 0), rtol=1e-4, atol=1e-4)
    assert "product" in capsys.readouterr().out


def test_custom_op_uses_impl_on_arrays_and_description_in_kernels(rng):
    calls = []

    def gelu_fast(x):  # "hand-written" implementation
        calls.append(1)
        return (0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))).astype(x.dtype)

    @pypto.custom_op(impl=gelu_fast)
    def gelu(x):
        return 0.5 * x * (1.0 + pypto.erf(x * (1 / math.sqrt(2))))

    x = rng.standard_normal(64).astype(np.float32)
    gelu(x)
    assert calls == [1]
    # tanh approximation vs exact erf gelu: |diff| < 1e-3 over this range (known approximation error).
    assert gelu.check(x, rtol=0, atol=1e-3) < 1e-3
    with pytest.raises(AssertionError, match="differs"):
        gelu.check(x, rtol=0, atol=1e-9)

    @pypto.kernel
    def block(x):
        return gelu(x) * 2.0
    want = 0.5 * x.astype(np.float64) * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) * 2
    np.testing.assert_allclose(block(x), want, rtol=1e-5, atol=1e-6)  # a few f32 roundings + erf


def test_pipeline_keeps_order_and_matches_sequential(rng):
    @pypto.kernel
    def model(x):
        return (x @ x.T).sum(axis=1)

    def preprocess(raw):
        return ((raw - raw.mean()) / (raw.std() + 1e-6)).astype(np.float32)

    batches = [rng.random((32, 64)) for _ in range(6)]
    with pypto.pipeline(depth=2) as pipe:
        pipe.stage(preprocess, device="cpu")
        pipe.stage(model, device="accelerator")
        out = pipe.run(batches)
    seq = pipe.run_sequential(batches)
    assert len(out) == 6
    for o, s, b in zip(out, seq, batches):
        np.testing.assert_array_equal(o, s)  # same kernel, same inputs, same order: bit-identical
        x = preprocess(b).astype(np.float64)
        # f32 sums of 32 * 64 products: error <= terms * 2^-24 * sum of their magnitudes.
        bound = 32 * 64 * 2.0**-24 * (np.abs(x) @ np.abs(x).T).sum(axis=1)
        np.testing.assert_allclose(o, (x @ x.T).sum(axis=1), rtol=0, atol=bound.max())
    assert pipe.stats.items == 6 and set(pipe.stats.busy_s) == {"preprocess", "model"}
    with pytest.raises(ValueError, match="no stages"):
        pypto.pipeline().run([1])

    def boom(x):
        raise KeyError("bad item")
    with pytest.raises(KeyError):
        pypto.pipeline().stage(boom).run([1, 2])


def test_pipeline_stages_overlap_in_time():
    # Stages that wait (sleep releases the GIL, as a kernel call does) rather than compute, so
    # that the overlap does not depend on free cores: while stage b works on item i, stage a
    # must already work on item i + 1. Each interval is 50 ms; a thread hand-over takes far less.
    spans = {"a": {}, "b": {}}

    def timed(name):
        def f(i):
            t0 = time.perf_counter()
            time.sleep(0.05)
            spans[name][i] = (t0, time.perf_counter())
            return i
        f.__name__ = name
        return f
    with pypto.pipeline(depth=2) as pipe:
        pipe.stage(timed("a")).stage(timed("b"))
        assert pipe.run(range(5)) == list(range(5))
    for i in range(5):
        assert spans["a"][i][1] <= spans["b"][i][0]  # an item goes through the stages in order
    overlapping = [i for i in range(4) if spans["a"][i + 1][0] < spans["b"][i][1]]
    assert len(overlapping) >= 3, (overlapping, spans)
    assert pipe.stats.wall_s < 0.8 * pipe.stats.sequential_s  # 5 x 2 x 50 ms sequential; ~300 ms overlapped


def test_to_device(rng):
    @pypto.kernel
    def on_cpu(x):
        return (x * 2.0).to("cpu") + 1.0
    x = rng.random(5).astype(np.float32)
    np.testing.assert_allclose(on_cpu(x), x.astype(np.float64) * 2 + 1, rtol=2.5e-7)

    @pypto.kernel
    def on_gpu(x):
        return (x * 2.0).to("cuda")
    with pytest.raises(pypto.PtoError, match="cuda"):
        on_gpu(x)  # the host target has no CUDA device: a typed error, not a crash
