#!/usr/bin/env bash
# The CPU kernels built for an x86-64 machine without AVX-512 and their tests run there:
# test_layers and test_models (the float64 goldens) from a -march=x86-64-v3 (AVX2) build.
# The suite's -march=native build on an AVX-512 machine (CI's, most developers') never runs
# the narrower paths: flash attention's 32-byte vectors and 4 x 2 blocks (layers/
# attention_tile.h), which did not even compile until 2026-12-06. test_portable_kernels
# compiles them in the main suite; this runs them. A CI step (.ci/run); about a minute.
#   scripts/test_portable.sh [BUILD_DIR]     (default build-avx2)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-avx2}
if [[ $(uname -m) != x86_64 ]] || ! grep -qw avx2 /proc/cpuinfo; then
  echo "test_portable.sh: this CPU cannot run AVX2 code; nothing to test"
  exit 0
fi
# -Wno-psabi: GCC notes that 64-byte vector arguments change the ABI without AVX-512; the
# kernels are internal and inline, so nothing crosses an ABI boundary.
mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPARQ_CUDA=OFF -DSPARQ_MPI=OFF \
  -DSPARQ_NATIVE=OFF -DSPARQ_BUILD_LONG_TESTS=OFF -DCMAKE_CXX_FLAGS="-march=x86-64-v3 -Wno-psabi" \
  >"$build/configure.log" 2>&1 || { tail -30 "$build/configure.log"; exit 1; }
cmake --build "$build" --target test_layers test_models
for t in layers/test_layers models/test_models; do
  echo "test_portable.sh: $t (x86-64-v3)"
  (cd "$build" && OMP_NUM_THREADS=2 "tests/$t" --gtest_brief=1)
done
echo "test_portable.sh: the AVX2 build's layer and model tests passed"
