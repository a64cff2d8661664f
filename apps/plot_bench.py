"""Plots benchmark records (the bench_* `--json` contract) as grouped bars.

    python apps/plot_bench.py results.json out.png [--title T]

One group of bars per workload, one bar per implementation (median ms, with
min-max whiskers), log scale when times span more than 30x.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    args = ap.parse_args()
    recs = json.load(open(args.json))
    if isinstance(recs, dict):  # bench_tune: {"records": [...], "tuning": [...]}
        recs = recs["records"]
    workloads = list(dict.fromkeys(r["workload"] for r in recs))
    impls = list(dict.fromkeys(r["impl"] for r in recs))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(workloads) * len(impls) / 2), 4.5))
    width = 0.8 / len(impls)
    x = np.arange(len(workloads))
    lo, hi = np.inf, 0
    for k, impl in enumerate(impls):
        med, err_lo, err_hi = [], [], []
        for w in workloads:
            r = next((r for r in recs if r["workload"] == w and r["impl"] == impl), None)
            m = r["median_ms"] if r else np.nan
            med.append(m)
            err_lo.append(m - r["min_ms"] if r else 0)
            err_hi.append(r["max_ms"] - m if r else 0)
            if r:
                lo, hi = min(lo, m), max(hi, m)
        ax.bar(x + (k - (len(impls) - 1) / 2) * width, med, width, yerr=[err_lo, err_hi], capsize=2, label=impl)
    if hi / max(lo, 1e-9) > 30:
        ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(workloads, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("time (ms, median; whiskers min-max)")
    ax.set_title(args.title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
