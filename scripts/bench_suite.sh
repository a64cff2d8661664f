#!/usr/bin/env bash
# PTO's default schedules on 43 real-model workloads next to ONNX Runtime,
# numpy and oneDNN (apps/suite/bench_suite.py; arguments pass through: --json FILE,
# --plot FILE.png, --only a,b, --rounds N, --min-seconds S, --list).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh >/dev/null
build="${PTO_BUILD_DIR:-build}"
# numpy's OpenBLAS at its best: a CPU kind here sets OPENBLAS_CORETYPE=Haswell (AVX2
# kernels; sgemm 1024 10.2 ms against 5.5 with its own detection on the Zen 5), and
# the numpy peer must not be slowed by the machine's settings.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
PYTHONPATH="$root/python:$root/$build/python" exec .venv/bin/python apps/suite/bench_suite.py "$@"
