#!/usr/bin/env bash
# Runs every side-by-side benchmark and writes tables (stdout + docs/perf/*.json)
# and one PNG plot per workload family to docs/perf/.
#   scripts/bench.sh            # full: BERT seq 128/384, all ResNet-50 layers, matmul
#   PTO_BENCH_QUICK=1 scripts/bench.sh   # a few minutes: seq 128, three conv layers
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh >/dev/null
build="${PTO_BUILD_DIR:-build}"
out=docs/perf
mkdir -p "$out"
py=.venv/bin/python
if [ -n "${PTO_BENCH_QUICK:-}" ]; then
  bert_args=(--seq 128); conv_args=(--layers 1,2,10)
else
  bert_args=(--seq 128 --seq 384); conv_args=()
fi
sched=()
db="${PTO_TUNING_DB:-.pto/tuning.db}"
[ -f "$db" ] && sched=(--db "$db")
"$build/bin/bench_bert" "${bert_args[@]}" "${sched[@]}" --json "$out/bert.json"
"$py" apps/plot_bench.py "$out/bert.json" "$out/bert.png" --title "BERT-base encoder layer (fp32, batch 1)"
"$build/bin/bench_resnet50" "${conv_args[@]}" "${sched[@]}" --json "$out/resnet50.json"
"$py" apps/plot_bench.py "$out/resnet50.json" "$out/resnet50.png" --title "ResNet-50 conv + bias + ReLU (fp32, batch 1)"
if [ -x "$build/bin/bench_matmul" ]; then
  "$build/bin/bench_matmul" --json "$out/matmul.json"
  "$py" apps/plot_bench.py "$out/matmul.json" "$out/matmul.png" --title "matmul fp32"
fi
echo "wrote $out/*.json and $out/*.png"
