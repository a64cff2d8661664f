"""Plots bench_tune's tuning curves: best-so-far time against trial, per workload.

    python apps/tune/plot_curves.py bench_tune.json curves.png

One panel per workload, one line per tuner (PTO, TVM MetaSchedule), times
relative to PTO's default schedule (trial 1 of PTO's search) so that panels
share a scale: below 1 is faster than the default.
"""
import argparse
import json
import math

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"pto": ("PTO", "tab:blue"), "tvm-metaschedule": ("TVM MetaSchedule", "tab:orange")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("png")
    args = ap.parse_args()
    tuning = json.load(open(args.json))["tuning"]
    workloads = list(dict.fromkeys(t["workload"] for t in tuning))
    cols = min(5, len(workloads))
    rows = math.ceil(len(workloads) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False)
    for ax, w in zip(axes.flat, workloads):
        runs = {t["tuner"]: t for t in tuning if t["workload"] == w}
        base = next((c for c in runs.get("pto", {}).get("curve", []) if c is not None), None)
        for tuner, t in runs.items():
            label, color = STYLE.get(tuner, (tuner, None))
            ys = [c / base if (c is not None and base) else math.nan for c in t["curve"]]
            ax.step(range(1, len(ys) + 1), ys, where="post", color=color,
                    label=f"{label} ({t['tuning_s']:.0f} s)")
        ax.set_title(w, fontsize=9)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.3g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.2g"))
        ax.axhline(1.0, color="grey", lw=0.5, ls="--")
        ax.set_xlabel("trial", fontsize=8)
        ax.legend(fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(workloads):]:
        ax.axis("off")
    axes[0][0].set_ylabel("best so far / PTO default", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
