#!/usr/bin/env bash
# Runs every side-by-side benchmark and writes tables (stdout + docs/perf/*.json)
# and one PNG plot per workload family to docs/perf/.
#   scripts/bench.sh            # full: BERT seq 128/384 (f32 and bf16 weights) and batch 8,
#                               # all ResNet-50 layers (fp32, bf16), matmul, and the
#                               # 42-workload suite vs ONNX Runtime / numpy (apps/suite)
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
"$build/bin/bench_bert" "${bert_args[@]}" "${sched[@]}" --bf16 --json "$out/bert.json"
"$py" apps/plot_bench.py "$out/bert.json" "$out/bert.png" --title "BERT-base encoder layer (fp32, bf16 weights, mixed bf16; batch 1)"
if [ -z "${PTO_BENCH_QUICK:-}" ]; then
  "$build/bin/bench_bert" --batch 8 --seq 128 --json "$out/bert_b8.json"
  "$py" apps/plot_bench.py "$out/bert_b8.json" "$out/bert_b8.png" --title "BERT-base encoder layer (fp32, batch 8)"
fi
"$build/bin/bench_resnet50" "${conv_args[@]}" "${sched[@]}" --rounds 3 --min-time 0.1 --json "$out/resnet50.json"
"$py" apps/plot_bench.py "$out/resnet50.json" "$out/resnet50.png" --title "ResNet-50 conv + bias + ReLU (fp32, batch 1)"
if [ -z "${PTO_BENCH_QUICK:-}" ]; then
  "$build/bin/bench_resnet50" --no-ort --bf16 --rounds 3 --min-time 0.1 --json "$out/resnet50_bf16.json"
  "$py" apps/plot_bench.py "$out/resnet50_bf16.json" "$out/resnet50_bf16.png" --title "ResNet-50 conv + bias + ReLU (bf16, batch 1)"
fi
if [ -x "$build/bin/bench_matmul" ]; then
  "$build/bin/bench_matmul" --json "$out/matmul.json"
  "$py" apps/plot_bench.py "$out/matmul.json" "$out/matmul.png" --title "matmul fp32"
fi
suite_args=()
[ -n "${PTO_BENCH_QUICK:-}" ] && suite_args=(--rounds 1 --min-seconds 0.1)
bash scripts/bench_suite.sh "${suite_args[@]}" --json "$out/suite.json" --plot "$out/suite.png"
echo "wrote $out/*.json and $out/*.png"
