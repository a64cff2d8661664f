#!/usr/bin/env bash
# The fuzzers under AddressSanitizer + UndefinedBehaviorSanitizer.
#
# Builds just the pto library and the fuzz_schedule and fuzz_onnx_import
# executables with -DPTO_SANITIZE=ON into build-asan/ (incremental after the
# first time), then runs 10,000 mutated schedules through parse, round trip,
# validate and explain, and 10,000 mutated ONNX models through the importer.
# No JIT runs here, so the unsanitized libHalide is not in the way.
# The seed changes per run (printed, for reproduction: PTO_FUZZ_SEED=<seed>).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export PATH="$root/.venv/bin:$PATH"
build="${PTO_ASAN_BUILD_DIR:-build-asan}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTO_SANITIZE=ON -DPTO_BUILD_APPS=OFF >/dev/null
fi
cmake --build "$build" -j "${PTO_JOBS:-$(nproc)}" --target fuzz_schedule fuzz_onnx_import
seed="${PTO_FUZZ_SEED:-$(date +%s)}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp"
"$build/bin/fuzz_schedule" "${PTO_FUZZ_CASES:-10000}" "$seed"
"$build/bin/fuzz_onnx_import" "${PTO_FUZZ_CASES:-10000}" "$seed"
