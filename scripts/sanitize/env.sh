# Sanitizer run-time options for binaries of build-asan/, sourced by scripts/sanitize/run.sh;
# source it to run one sanitized binary by hand the way the suite does:
#   source scripts/sanitize/env.sh && build-asan/tests/core/test_core
sparq_sanitize_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# ASan: stop at the first error and abort, so the test fails with the report and a non-zero
# status under ctest and under mpirun alike.
#  detect_leaks=1           LeakSanitizer at exit, with the suppressions of lsan.supp.
#  strict_init_order, check_initialization_order: static initialisers that read another
#                           file's globals are reported (the order across files is unspecified).
asan=(halt_on_error=1 abort_on_error=1 print_stacktrace=1 detect_leaks=1
      strict_init_order=1 check_initialization_order=1)
# For MPI ranks, run.sh adds fast_unwind_on_malloc=0: Open MPI is built without frame pointers
# and dlcloses its components, so the fast unwinder stops one frame into an unnamed module and
# lsan.supp cannot match Open MPI's leaks by library name; the DWARF unwinder sees the whole
# stack down to libmpi. It makes every allocation ~5x slower, hence MPI tests only.
SPARQ_ASAN_MPI_OPTIONS=fast_unwind_on_malloc=0
ubsan=(halt_on_error=1 abort_on_error=1 print_stacktrace=1
       "suppressions=$sparq_sanitize_dir/ubsan.supp")
lsan=("suppressions=$sparq_sanitize_dir/lsan.supp" print_suppressions=0)
ASAN_OPTIONS="$(IFS=:; echo "${asan[*]}")"
UBSAN_OPTIONS="$(IFS=:; echo "${ubsan[*]}")"
LSAN_OPTIONS="$(IFS=:; echo "${lsan[*]}")"
export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
unset sparq_sanitize_dir asan ubsan lsan
