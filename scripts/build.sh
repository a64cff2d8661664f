#!/usr/bin/env bash
# Configure and build PTO into build/ (or $PTO_BUILD_DIR) after setup.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh
export PATH="$root/.venv/bin:$PATH"
build="${PTO_BUILD_DIR:-build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${PTO_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "${PTO_JOBS:-$(nproc)}"
