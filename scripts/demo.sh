#!/usr/bin/env bash
# The main job: set-up (idempotent), build, then run relu(A @ B + bias)
# through every PTO layer and compare it with OpenBLAS in the same process.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh >/dev/null
build="${PTO_BUILD_DIR:-build}"
echo "== pto explain (the default schedule's loop nest) =="
"$build/bin/pto" explain matmul_bias_relu --set M=1024 --set N=1024 --set K=1024
echo
echo "== JIT run, float64 check, timing next to OpenBLAS =="
"$build/bin/demo_matmul" --n "${PTO_DEMO_N:-1024}"
echo
echo "== the same kernel as a static library, linked by a plain C program without Halide =="
"$build/bin/deploy_matmul"
