#!/usr/bin/env bash
# The main job: set-up (idempotent), build, then
#   1. tune the BERT-base encoder layer's parts on this machine (a small budget;
#      the tuning database .pto/tuning.db is reused and extended on every run),
#   2. generate a static library of the layer with the best schedules and run
#      it from a plain C++ program (apps/bert/run_bert_layer.cpp),
#   3. run the layer and its parts, checked against float64, next to an
#      OpenBLAS baseline and ONNX Runtime (and PTO in mixed bf16), with the
#      report's before/after table.
# PTO_DEMO_TRIALS (default 10) sets the trial budget of each part; the whole
# layer (large, slow to compile) gets PTO_DEMO_LAYER_TRIALS (default 4). Each
# workload also stops starting trials after PTO_DEMO_SECONDS (default 60).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh >/dev/null
build="${PTO_BUILD_DIR:-build}"
pto="$build/bin/pto"
export PATH="$root/.venv/bin:$PATH"  # cmake >= 3.28 from the venv
db="${PTO_TUNING_DB:-.pto/tuning.db}"
trials="${PTO_DEMO_TRIALS:-10}"
layer_trials="${PTO_DEMO_LAYER_TRIALS:-4}"
limits=(--time-budget "${PTO_DEMO_SECONDS:-60}" --compile-timeout 20 --no-compare --seed 1)
mkdir -p "$(dirname "$db")"
size=(--set B=1 --set S=128)

echo "== 1. tune (budget $trials trials per workload; database $db) =="
for w in bert_attention bert_ffn bert_layernorm; do
  "$pto" tune "$w" "${size[@]}" --trials "$trials" --db "$db" "${limits[@]}"
done
"$pto" tune bert_layer "${size[@]}" --trials "$layer_trials" --db "$db" "${limits[@]}"

echo
echo "== 2. generate libbert (apps/bert/bert_generator.cpp) for the default target with the tuned schedules, and run it =="
# The build regenerates the library from the database's best records
# (apps/bert/CMakeLists.txt) and relinks the plain C++ program that runs it.
cmake -S . -B "$build" -DPTO_TUNING_DB="$(realpath -m "$db")" >/dev/null
cmake --build "$build" --target run_bert_layer
"$build/bin/run_bert_layer"

echo
echo "== 3. run, check and compare (PTO default vs tuned vs OpenBLAS baseline vs ONNX Runtime) =="
"$build/bin/bench_bert" --seq 128 --db "$db" --bf16 --min-time 0.2
