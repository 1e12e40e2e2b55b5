#!/usr/bin/env bash
# The test command of the README and of CI: installs dependencies, builds, runs ctest.
# Tests that need ../shared/data skip with a message when it is absent; GPU tests skip
# without a device.
#   scripts/test.sh              the whole suite, Release build in build/
#   scripts/test.sh --sanitize   ASan + UBSan build in build-asan/, the unit and MPI tests
#                                (not those labelled long); docs/reliability.md, "Sanitizers"
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--sanitize" ]]; then
  shift
  exec scripts/sanitize/run.sh "$@"   # extra arguments go to ctest: --sanitize -R test_core
fi
if [[ $# -gt 0 ]]; then
  echo "test.sh: unknown argument '$1' (expected none, or --sanitize [ctest arguments])" >&2
  exit 2
fi

scripts/install_deps.sh
scripts/build.sh
cd build
# 300 s for a test that sets no TIMEOUT of its own (the longest such takes about 10 s here;
# the end-to-end ones set theirs): a deadlocked test fails by name within CI's 30 minutes.
# --no-tests=error: a build configured without tests (SPARQ_BUILD_TESTS=OFF kept in
# build/CMakeCache.txt) ran nothing and passed.
ctest --output-on-failure -j"$(nproc)" --timeout 300 --no-tests=error
