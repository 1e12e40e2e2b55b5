#!/usr/bin/env bash
# Configures and builds sparq in build/ (Release). CUDA code is compiled whenever nvcc is
# found (/usr/local/cuda or PATH), for compute capabilities 80 and 90 unless
# CMAKE_CUDA_ARCHITECTURES is set in the environment. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-S . -B build -DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null 2>&1 && args+=(-G Ninja)
[[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ]] && args+=("-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}")
if [[ -f build/CMakeCache.txt ]]; then
  # Keep the existing generator; an architecture set in the environment still applies.
  again=()
  [[ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ]] && again+=("-DCMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES}")
  cmake build "${again[@]}" "$@" >/dev/null
else
  cmake "${args[@]}" "$@"
fi
cmake --build build -j"$(nproc)"
