#!/usr/bin/env bash
# scripts/test.sh --sanitize: builds sparq with AddressSanitizer + UndefinedBehaviorSanitizer
# in build-asan/ (CPU only, no benchmarks) and runs the unit and MPI tests there, except the
# long end-to-end runs (ctest label "long"), which the plain scripts/test.sh still runs.
# Any sanitizer report fails its test. docs/reliability.md, "Sanitizers", says why each
# option below is set. Extra arguments go to ctest (-R test_core, -V, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."

scripts/install_deps.sh
# The long tests do not run here, so their binaries are not built (SPARQ_BUILD_LONG_TESTS).
args=(-S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DSPARQ_SANITIZE=address,undefined
      -DSPARQ_CUDA=OFF -DSPARQ_BUILD_BENCH=OFF -DSPARQ_BUILD_LONG_TESTS=OFF)
command -v ninja >/dev/null 2>&1 && args+=(-G Ninja)
if [[ -f build-asan/CMakeCache.txt ]]; then
  cmake build-asan -DSPARQ_BUILD_LONG_TESTS=OFF >/dev/null   # keep the existing generator
else
  cmake "${args[@]}"
fi
cmake --build build-asan -j"$(nproc)"

source scripts/sanitize/env.sh   # ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS

cd build-asan
# Two passes, since the MPI tests need another ASAN_OPTIONS (env.sh); each pass runs all of its
# tests even when one fails, and the script fails if either did.
status=0
ctest --output-on-failure -j"$(nproc)" --timeout 900 -LE 'long|mpi' "$@" || status=1
ASAN_OPTIONS="$ASAN_OPTIONS:$SPARQ_ASAN_MPI_OPTIONS" \
  ctest --output-on-failure -j"$(nproc)" --timeout 900 -L mpi -LE long "$@" || status=1
exit $status
