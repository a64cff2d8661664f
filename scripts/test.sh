#!/usr/bin/env bash
# The whole test suite: set-up (idempotent), configure, build, ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# The layering check first: it takes a moment, the build takes minutes (ctest runs it too).
bash scripts/check_layers.sh
bash scripts/build.sh
export PATH="$root/.venv/bin:$PATH"
(cd "${PTO_BUILD_DIR:-build}" && ctest --output-on-failure -j "${PTO_TEST_JOBS:-2}" --timeout 900)
# The schedule fuzzer in an ASan + UBSan build (skipped when this run is
# itself a sanitizer build, or with PTO_SKIP_SANITIZED_FUZZ=1).
case "${PTO_CMAKE_ARGS:-}" in *PTO_SANITIZE=ON*) exit 0 ;; esac
[ "${PTO_SKIP_SANITIZED_FUZZ:-0}" = 1 ] || bash scripts/fuzz_sanitized.sh
