"""matplotlib plots for notebooks: tuning curve, per-stage time bars, roofline.

Each function draws on `ax` (a new figure when None) and returns the Axes, so
notebooks can compose them; nothing is shown or saved here.
"""
from __future__ import annotations

from typing import Any, Sequence


def _ax(ax: Any) -> Any:
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(6, 3.5))
    return ax


def tuning_curve(result: Any, ax: Any = None) -> Any:
    """Best median time so far against trial number, with every valid trial as a dot."""
    ax = _ax(ax)
    pts = [(t.index, t.ms) for t in result.trials if t.ms is not None]
    if pts:
        ax.scatter(*zip(*pts), s=12, color="0.6", label="trial")
    curve = result.curve
    if curve:
        ax.step(*zip(*curve), where="post", color="C0", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("median time (ms)")
    ax.set_title("tuning curve")
    ax.legend()
    return ax


def stage_bars(times: dict[str, Any], ax: Any = None) -> Any:
    """Horizontal bars of per-stage median time (ms) with min-max whiskers."""
    ax = _ax(ax)
    names = list(times)
    med = [times[n].median_ms for n in names]
    lo = [times[n].median_ms - times[n].min_ms for n in names]
    hi = [times[n].max_ms - times[n].median_ms for n in names]
    ax.barh(names, med, xerr=[lo, hi], color="C1")
    ax.invert_yaxis()
    ax.set_xlabel("median time (ms), each stage alone")
    ax.set_title("per-stage time")
    return ax


def stage_profile(profile: Any, ax: Any = None) -> Any:
    """Horizontal bars of a StageProfile's root stages (`k.profile_stages(...)`): wall time per
    run, each labelled with its share of the run and the stages fused into it."""
    ax = _ax(ax)
    roots = profile.roots
    fused = {r.stage: [s.stage for s in profile.stages if s.placement == f"inside {r.stage}"] for r in roots}
    labels = [r.stage + (f" (+{len(fused[r.stage])} fused)" if fused[r.stage] else "") for r in roots]
    ms = [r.ms for r in roots]
    bars = ax.barh(labels, ms, color="C2")
    for b, r in zip(bars, roots):
        ax.text(b.get_width(), b.get_y() + b.get_height() / 2, f" {100 * r.share:.0f}%", va="center")
    ax.invert_yaxis()
    ax.set_xlabel(f"ms per run (traced; run {profile.run_ms:.3g} ms, heap peak {profile.peak_bytes / 2**20:.2f} MiB)")
    ax.set_title(f"{profile.program}: per-stage time")
    return ax


def roofline(points: Sequence[tuple[str, float, float, float]], peak_gflops: float | None = None,
             peak_gbs: float | None = None, ax: Any = None) -> Any:
    """Kernels as (label, flops, bytes, median_ms) against this machine's roofs (log-log).

    x = arithmetic intensity (FLOP per byte of compulsory traffic: inputs + outputs once),
    y = achieved GFLOP/s. Roofs: measured peaks from pypto.machine unless given.
    """
    import numpy as np
    from . import machine
    ax = _ax(ax)
    pf = peak_gflops if peak_gflops is not None else machine.peak_gflops()
    bw = peak_gbs if peak_gbs is not None else machine.peak_gbs()
    xs = [f / b for _, f, b, _ in points if b > 0]
    lo, hi = min(xs + [pf / bw]) / 4, max(xs + [pf / bw]) * 4
    x = np.logspace(np.log10(lo), np.log10(hi), 100)
    ax.loglog(x, np.minimum(pf, bw * x), color="k", label=f"roof: {pf:.0f} GFLOP/s, {bw:.0f} GB/s")
    for label, f, b, ms in points:
        ax.scatter([f / b], [f / (ms * 1e6)], zorder=3)
        ax.annotate(label, (f / b, f / (ms * 1e6)), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofline")
    ax.legend(fontsize=8)
    return ax
