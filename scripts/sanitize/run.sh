#!/usr/bin/env bash
# scripts/test.sh --sanitize: builds sparq with AddressSanitizer + UndefinedBehaviorSanitizer
# in build-asan/ (CPU only, no benchmarks) and runs the unit and MPI tests there, except the
# long end-to-end runs (ctest label "long"), which the plain scripts/test.sh still runs.
# Any sanitizer report fails its test. docs/reliability.md, "Sanitizers", says why each
# option below is set. Extra arguments go to ctest (-R test_core, -V, ...).
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"

scripts/install_deps.sh
args=(-S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DSPARQ_SANITIZE=address,undefined
      -DSPARQ_CUDA=OFF -DSPARQ_BUILD_BENCH=OFF)
command -v ninja >/dev/null 2>&1 && args+=(-G Ninja)
if [[ -f build-asan/CMakeCache.txt ]]; then
  cmake build-asan >/dev/null   # keep the existing generator
else
  cmake "${args[@]}"
fi
cmake --build build-asan -j"$(nproc)"

# ASan: stop at the first error and abort, so the test fails with the report and a non-zero
# status under ctest and under mpirun alike.
#  detect_leaks=1           LeakSanitizer at exit, with the suppressions of lsan.supp.
#  fast_unwind_on_malloc=0  Open MPI and libgomp are built without frame pointers, so the
#                           fast unwinder stops one frame into them and their leaks cannot be
#                           matched by library name; the DWARF unwinder sees the whole stack.
asan=(halt_on_error=1 abort_on_error=1 print_stacktrace=1 detect_leaks=1
      fast_unwind_on_malloc=0 strict_init_order=1
      check_initialization_order=1)
ubsan=(halt_on_error=1 abort_on_error=1 print_stacktrace=1
       "suppressions=$root/scripts/sanitize/ubsan.supp")
lsan=("suppressions=$root/scripts/sanitize/lsan.supp" print_suppressions=0)
ASAN_OPTIONS="$(IFS=:; echo "${asan[*]}")"
UBSAN_OPTIONS="$(IFS=:; echo "${ubsan[*]}")"
LSAN_OPTIONS="$(IFS=:; echo "${lsan[*]}")"
export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS

cd build-asan
ctest --output-on-failure -j"$(nproc)" --timeout 900 -LE long "$@"
