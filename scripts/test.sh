#!/usr/bin/env bash
# The whole test suite: set-up (idempotent), configure, build, ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/build.sh
export PATH="$root/.venv/bin:$PATH"
cd "${PTO_BUILD_DIR:-build}"
ctest --output-on-failure -j "${PTO_TEST_JOBS:-2}" --timeout 900
