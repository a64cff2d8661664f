#!/usr/bin/env bash
# PTO's default schedules on 42 real-model workloads next to ONNX Runtime and
# numpy (apps/suite/bench_suite.py; arguments pass through: --json FILE,
# --plot FILE.png, --only a,b, --rounds N, --min-seconds S, --list).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh >/dev/null
build="${PTO_BUILD_DIR:-build}"
PYTHONPATH="$root/python:$root/$build/python" exec .venv/bin/python apps/suite/bench_suite.py "$@"
