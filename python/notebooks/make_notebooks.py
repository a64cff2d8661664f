# Regenerates the notebooks in this folder from code (run with the venv python; outputs are not stored).
import os
import nbformat as nbf
HERE = os.path.dirname(os.path.abspath(__file__))
from nbformat.v4 import new_notebook, new_markdown_cell as md, new_code_cell as code

def save(cells, path):
    for i, c in enumerate(cells):
        c.id = f"cell-{i}"  # stable ids: regenerating changes only what the code changes
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nbf.write(nb, path)

save([
md("""# Exploring a matmul schedule by hand, then tuning it

A PTO kernel is a decorated Python function; the *schedule* (how loops are tiled, ordered,
vectorized and parallelized) is separate, editable data. This notebook writes `C = A @ B`,
looks at the loop nest of its default schedule, improves it by hand, lets the tuner search,
and puts the results on a roofline of this machine.

Every result is checked against numpy in float64 (`CHECK` lines are read by the test suite)."""),
code("""import os
os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")  # OpenBLAS's AVX-512 kernels on Zen 5
import numpy as np
import pypto

M = N = K = 256
rng = np.random.default_rng(0)
A = rng.random((M, K), dtype=np.float32)
B = rng.random((K, N), dtype=np.float32)
want = A.astype(np.float64) @ B.astype(np.float64)
# f32 accumulation of K products in [0, 1): relative error <= K * 2^-24 ~ 1.5e-5 (worst case).
TOL = K * 2**-24

def rel_err(got):
    return float(np.abs(got - want).max() / np.abs(want).max())"""),
code("""@pypto.kernel(dynamic=False)   # fixed sizes: the best code for one shape
def matmul(A: pypto.Tensor, B: pypto.Tensor):
    return A @ B

C = matmul(A, B)
print("CHECK default_rel_err", rel_err(C))
assert rel_err(C) <= TOL
print(matmul.explain())"""),
md("""The default schedule for a bare matmul is PTO's register-blocked micro-kernel (6 rows x 4
vectors of accumulators, a packed panel of `B`; see the loop nest above). Time it, then clear
the stage's schedule and write one by hand: tile `i` and `j` of the *update* (the reduction),
put `k` between the tile loops and the register tile, vectorize the contiguous `j_i`, unroll
the rows and run row tiles in parallel."""),
code("""t_default = matmul.time(A, B)
print("default:", t_default)

s = matmul.schedule()            # live: the next call compiles the edited schedule
del s["matmul"]                  # start from the plain loop nest
s["matmul"].vectorize("j", 16).parallel("i")
s["matmul"].update.tile(i=8, j=32).order("i_o", "j_o", "k", "i_i", "j_i") \\
    .vectorize("j_i", 16).unroll("i_i").parallel("i_o")
print(matmul.explain())
C = matmul(A, B)
print("CHECK hand_rel_err", rel_err(C))
assert rel_err(C) <= TOL
t_hand = matmul.time(A, B)
print("by hand:", t_hand)
print(f"CHECK hand_speedup {t_default.median_ms / t_hand.median_ms:.2f}")"""),
md("""## Tuning

`tune` runs the C++ autotuner (the search of `pto tune`) on these shapes: its first trial is
PTO's default schedule, then the evolutionary search proposes candidates; each is compiled and
run in a worker process, checked against the float64 plain schedule and timed. Every trial goes
to the tuning database (a rerun resumes). The fastest few correct ones and the default are then
timed again side by side, and the fastest of those replaces the hand-written schedule. The progress bar is driven by the tuner, one step per trial."""),
code("""result = matmul.tune(A, B, trials=10, seed=1, min_seconds=0.05)
print(result)
C = matmul(A, B)
print("CHECK tuned_rel_err", rel_err(C))
assert rel_err(C) <= TOL
ok = [r["median_ms"] for r in result.records if r["status"] == "ok"]
# The installed schedule is the tuner's pick: the fastest of its best trials and the default, timed again side by side.
print("CHECK tuned_is_confirmed_best", result.best_ms in ok and matmul.schedule() == result.best_schedule
      and (result.confirmed_ms is None or result.confirmed_ms <= result.confirmed_default_ms))
print(f"tuned vs by hand: {t_hand.median_ms / matmul.time(A, B).median_ms:.2f}x")
pypto.plots.tuning_curve(result);"""),
md("""## Against OpenBLAS and on the roofline

numpy's `A @ B` (OpenBLAS, same process, same inputs) is the competitor. The roofline's roofs
are this machine's *measured* attainable peaks (`pypto.machine`: a 1024³ sgemm and a 256 MiB
copy), not data-sheet numbers."""),
code("""import time
def median_ms(f, reps=20):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts)), min(ts), max(ts)

blas = median_ms(lambda: A @ B)  # note: OpenBLAS and Halide thread pools share 2 busy cores
tuned = matmul.time(A, B)
flops = matmul.flops(A, B)
print(f"{'impl':<10} {'median ms':>10} {'min':>8} {'max':>8} {'GFLOP/s':>8}")
for name, (med, lo, hi) in [("pto", (tuned.median_ms, tuned.min_ms, tuned.max_ms)), ("openblas", blas)]:
    print(f"{name:<10} {med:>10.4f} {lo:>8.4f} {hi:>8.4f} {flops / med / 1e6:>8.1f}")
pts = [("pto default", flops, matmul.io_bytes(A, B), t_default.median_ms),
       ("pto tuned", flops, matmul.io_bytes(A, B), tuned.median_ms),
       ("openblas", flops, matmul.io_bytes(A, B), blas[0])]
pypto.plots.roofline(pts);
print("CHECK peaks_positive", pypto.machine.peak_gflops() > 0 and pypto.machine.peak_gbs() > 0)"""),
md("""## Deploy

The tuned schedule becomes a static library with a plain C header; here it is loaded back
through ctypes (no Halide, no PTO in the call) and checked once more."""),
code("""import tempfile
lib = matmul.export(A, B, path=tempfile.mkdtemp(), name="matmul256")
print(lib.library, lib.header)
C = lib.load()(A, B)
print("CHECK exported_rel_err", rel_err(C))
assert rel_err(C) <= TOL"""),
], os.path.join(HERE, "matmul_schedule.ipynb"))

save([
md("""# A BERT attention block: build, check, profile, mixed precision, tune

Multi-head self-attention followed by the residual and LayerNorm, as in a BERT encoder layer
(`S` tokens, hidden size `D`, `H` heads), written numpy-style in one `@pypto.kernel`.
Each result is checked against a float64 numpy implementation (`CHECK` lines are read by the tests)."""),
code("""import math, os
os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
import numpy as np
import pypto

S, D, H = 64, 128, 4
Dh = D // H
rng = np.random.default_rng(0)
X = rng.standard_normal((S, D)).astype(np.float32)
Wq, Wk, Wv, Wo = ((rng.standard_normal((D, D)) / math.sqrt(D)).astype(np.float32) for _ in range(4))
gamma = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
beta = (0.1 * rng.standard_normal(D)).astype(np.float32)
args = (X, Wq, Wk, Wv, Wo, gamma, beta)"""),
code("""def heads(t):                       # [S, D] -> [H, S, Dh]
    return t.reshape(S, H, Dh).transpose(1, 0, 2)

@pypto.kernel(dynamic=False)
def attention(X, Wq, Wk, Wv, Wo, gamma, beta):
    q, k, v = heads(X @ Wq), heads(X @ Wk), heads(X @ Wv)
    scores = (q @ k.transpose(0, 2, 1)) * (1.0 / math.sqrt(Dh))
    p = pypto.ops.softmax(scores, axis=-1)
    ctx = (p @ v).transpose(1, 0, 2).reshape(S, D)
    return pypto.ops.layer_norm(ctx @ Wo + X, gamma, beta, eps=1e-5)

def reference(X, Wq, Wk, Wv, Wo, gamma, beta):
    X, Wq, Wk, Wv, Wo, gamma, beta = (a.astype(np.float64) for a in (X, Wq, Wk, Wv, Wo, gamma, beta))
    hd = lambda t: t.reshape(S, H, Dh).transpose(1, 0, 2)
    q, k, v = hd(X @ Wq), hd(X @ Wk), hd(X @ Wv)
    s = q @ k.transpose(0, 2, 1) / math.sqrt(Dh)
    e = np.exp(s - s.max(-1, keepdims=True)); p = e / e.sum(-1, keepdims=True)
    y = (p @ v).transpose(1, 0, 2).reshape(S, D) @ Wo + X
    mu, var = y.mean(-1, keepdims=True), y.var(-1, keepdims=True)
    return (y - mu) / np.sqrt(var + 1e-5) * gamma + beta

want = reference(*args)
out = attention(*args)
err = float(np.abs(out - want).max())
# f32 throughout: contractions over D=128 terms of O(1) values, then LayerNorm rescaling to O(1):
# a few 1e-6 expected; 1e-4 leaves margin and still catches any indexing error (O(1)).
print("CHECK f32_max_abs_err", err)
assert err < 1e-4
print(len(attention.stages()), "stages:", ", ".join(attention.stages()))"""),
md("""## Where the time goes

`stage_times` compiles every stage alone (with its schedule) and times it; `profile()` records
whole calls (time, compile time, peak intermediate memory)."""),
code("""times = attention.stage_times(*args, min_seconds=0.02)
pypto.plots.stage_bars(times);
with pypto.profile() as prof:
    attention(*args)
print(prof.report())
t_f32 = attention.time(*args)
print("f32 default schedule:", t_f32)"""),
md("""## Mixed precision

The report's decorator: contractions in bf16 with f32 accumulation, softmax and LayerNorm kept
in f32. The result is plain schedule data: it shows in `attention_bf16.schedule()`.

Honest note: Halide 21 emulates bf16 arithmetic on this target (it prints a warning), so here
bf16 halves the bytes of the narrowed intermediates but is not faster; the check is accuracy."""),
code("""attention_bf16 = pypto.kernel(
    pypto.mixed_precision(precision="bf16", keep={"softmax": "f32", "layer_norm": "f32"})(attention.fn),
    dynamic=False, name="attention_bf16")
out16 = attention_bf16(*args)
err16 = float(np.abs(out16 - want).max())
# bf16 operands carry 8 significant bits (rel 2^-8 = 0.4%); after LayerNorm (unit scale) errors of
# a few 1e-2 are expected; 0.15 bounds it while an indexing or precision bug gives O(1).
print("CHECK bf16_max_abs_err", err16)
assert err16 < 0.15
print(attention_bf16.time(*args))
print([n for n, st in attention_bf16.schedule().to_dict()["stages"].items() if "precision" in st][:6])"""),
md("""## Tuning the block

Eight trials of the C++ autotuner, exact f32 (no precision budget); every candidate is checked
against the float64 plain schedule in a worker process; the fastest few and the default are timed
again side by side, and the fastest of those is installed."""),
code("""result = attention.tune(*args, trials=8, seed=2, min_seconds=0.03)
print(result)
out = attention(*args)
err_tuned = float(np.abs(out - want).max())
print("CHECK tuned_max_abs_err", err_tuned)
assert err_tuned < 1e-4
ok = [r["median_ms"] for r in result.records if r["status"] == "ok"]
# The installed schedule is the tuner's pick: the fastest of its best trials and the default, timed again side by side.
print("CHECK tuned_is_confirmed_best", result.best_ms in ok and attention.schedule() == result.best_schedule
      and (result.confirmed_ms is None or result.confirmed_ms <= result.confirmed_default_ms))
pypto.plots.tuning_curve(result);"""),
md("""## Pipelining pre-processing with the block

A `pipeline()` overlaps a numpy pre-processing stage (token embedding lookup, sinusoidal
position encoding, normalization) with the kernel, in two threads; the kernel releases the GIL
while it runs. There is no accelerator here: the "accelerator" stage is the kernel on one CPU
core (its schedule made serial), the pre-processing gets the other core. The overlap speedup
is the sum of the stages' busy times over the wall time (at most 2 with two stages)."""),
code("""vocab = rng.standard_normal((30000, D)).astype(np.float32)
pos = np.arange(S)[:, None] / 10000 ** (np.arange(D)[None, :] / D)
def embed(ids):
    e = vocab[ids] * math.sqrt(D) + np.where(np.arange(D) % 2 == 0, np.sin(pos), np.cos(pos))
    return (e / np.linalg.norm(e, axis=-1, keepdims=True)).astype(np.float32)

one_core = pypto.kernel(attention.fn, dynamic=False, name="attention_1core")
one_core.set_schedule(attention.schedule().serial(), *args)
def block(x):
    return one_core(x, Wq, Wk, Wv, Wo, gamma, beta)

batches = [rng.integers(0, 30000, S) for _ in range(32)]
block(embed(batches[0]))   # compiled before timing
with pypto.pipeline(depth=4) as pipe:
    pipe.stage(embed, device="cpu")
    pipe.stage(block, device="accelerator")
    outs = pipe.run(batches)
print(pipe.stats)
seq = pipe.run_sequential(batches)
print("CHECK pipeline_matches", all(np.array_equal(a, b) for a, b in zip(outs, seq)))"""),
], os.path.join(HERE, "bert_attention.ipynb"))

save([
md("""# Debugging a kernel: NaNs, a precision culprit, per-stage time, memory

The report's troubleshooting steps (docs/TROUBLESHOOTING.md) on small programs: locate the
stage where a NaN first appears, let `bisect` find a planted precision culprit, look at
per-stage time, and cap a kernel's memory. `CHECK` lines are read by the test suite."""),
code("""import numpy as np
import pypto

rng = np.random.default_rng(0)
x = rng.random((64, 256), dtype=np.float32)"""),
md("""## 1. Where does the NaN come from?

`log(x - 0.5)` is NaN wherever `x < 0.5`; the stages after it only carry the NaN on.
`check_numerics` names the first stage in execution order that produced it, where, and what
it read there (an instrumented build: every stage materialized, plain loops, the schedule's
types)."""),
code("""@pypto.kernel(dynamic=False)
def features(x):
    h = pypto.log(x - 0.5)
    return pypto.ops.relu(h * 2.0).sum(axis=1)

print("NaNs in the output:", int(np.isnan(features(x)).sum()))
try:
    with pypto.check_numerics():
        features(x)
except pypto.KernelError as e:
    message = str(e)
print(message)
print("CHECK located_stage", "(log, elementwise) produced NaN" in message)"""),
md("""## 2. Which schedule decision changed the result?

Plant a culprit: accumulate a long row sum in f16. `bisect` enables the schedule stage by
stage on top of the plain loops, finds the first stage that breaks the tolerance, then the
field of its entry that does it."""),
code("""@pypto.kernel(dynamic=False)
def row_energy(x):
    return (pypto.exp(x) * x).sum(axis=1) * 0.5

sums = [s for s in row_energy.stages(x) if row_energy.program(x).stage(s)["reduce"]]
row_energy.schedule(x)[sums[0]].precision(accumulate="f16")
result = row_energy.bisect(x)
print(result)
print("CHECK bisect_stage", result.stage == sums[0])
print("CHECK bisect_field", result.culprits == ["precision"])"""),
code("""# The opt levels: 0 plain loops, 1 vectorize + parallelize only, 2 the schedule, 3 fast-math.
want = ((np.exp(x.astype(np.float64)) * x).sum(axis=1) * 0.5)
for level in range(4):
    k = pypto.kernel(lambda x: (pypto.exp(x) * x).sum(axis=1) * 0.5, dynamic=False, opt_level=level,
                     name=f"energy_O{level}")
    err = float(np.abs(k(x) - want).max() / np.abs(want).max())
    print(f"opt level {level}: rel err {err:.1e}, {k.time(x).median_ms:.4f} ms")"""),
md("""## 3. Where does the time go?

`profile_stages` runs the kernel with its stages traced: each stage with loops at root is timed
by the wall clock over repeated runs (the stages fused into its loops included), and every
stage is listed with where it runs (root, inside which stage, inlined), how often it is
produced and its largest buffer. The same table is `pto run PROGRAM --profile`."""),
code("""@pypto.kernel(dynamic=False)
def block(x, w):
    return pypto.ops.softmax(pypto.ops.relu(x @ w), axis=-1)

w = rng.random((256, 512), dtype=np.float32)
prof = block.profile_stages(x, w)
print(prof)
pypto.plots.stage_profile(prof)
print("CHECK stages_profiled", len(prof.roots) >= 2 and all(r.ms > 0 for r in prof.roots))"""),
md("""## 4. Memory: the stage that does not fit, and sharding

`memory_limit` caps each call's intermediate allocations: over it, a `DeviceMemoryError`
(`DEVICE_MEMORY_EXHAUSTED`) naming the stage, instead of an abort. With `shard=True` the call
is split along the program's batch axis (here the rows: each output row depends on its own
input row and the whole weight matrix) into as many shards as needed for each shard's
intermediates to fit."""),
code("""xs = rng.standard_normal((512, 64)).astype(np.float32)
w1 = (rng.standard_normal((64, 1024)) / 8).astype(np.float32)
w2 = (rng.standard_normal((1024, 32)) / 32).astype(np.float32)

@pypto.kernel(dynamic=False)
def mlp(x, w1, w2):
    return pypto.ops.softmax(pypto.ops.relu(x @ w1) @ w2, axis=-1)   # hidden: 512 x 1024 floats

with pypto.profile() as prof:
    want = mlp(xs, w1, w2)
limit = prof.peak_bytes // 10
print(f"intermediates: {prof.peak_bytes} bytes; limit {limit} bytes")
try:
    with pypto.memory_limit(limit):
        mlp(xs, w1, w2)
except pypto.DeviceMemoryError as e:
    print(type(e).__name__, str(e)[:240])
    print("CHECK memory_error", "stage" in str(e))
with pypto.memory_limit(limit, shard=True) as m:
    got = mlp(xs, w1, w2)
print(f"sharded into {m.shards} shards, largest shard peak {m.peak_bytes} bytes (limit {limit})")
print("CHECK sharded", m.shards >= 10 and m.peak_bytes <= limit and np.allclose(got, want, rtol=1e-5, atol=1e-6))"""),
], os.path.join(HERE, "debugging.ipynb"))
