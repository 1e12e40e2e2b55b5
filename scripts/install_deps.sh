#!/usr/bin/env bash
# Installs every Debian 12 package that sparq's build, tests and benchmarks need.
# Idempotent and non-interactive; runs apt-get directly as root, through sudo otherwise.
#   scripts/install_deps.sh            build + test dependencies
#   scripts/install_deps.sh --torch    also python3-torch (to regenerate test references, and the
#                                     PyTorch DDP peer of bench/bench_cluster.sh)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libeigen3-dev libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  python3
  curl unzip  # scripts/get_data.sh downloads and unpacks the data sets
  python3-yaml python3-matplotlib  # scripts/study.py (convergence studies) and its test
  # The default CPU GEMM backend (docs/layers.md, "GEMM backends"), loaded at run time; sparq
  # builds and runs on Eigen without it. It also becomes the system libblas.so.3.
  libopenblas0-openmp
  # The BLIS backend (SPARQ_GEMM=blis), so that its tests run instead of skipping; it does not
  # take libblas.so.3 from OpenBLAS (a lower alternatives priority).
  libblis4-openmp
  # The libFuzzer targets (scripts/fuzz.sh, the fuzz smoke of .ci/run): clang with its
  # compiler-rt runtimes, clang's OpenMP, and llvm-symbolizer for file:line in crash reports
  # (llvm-14 ships llvm-symbolizer-14; the unversioned name is the llvm package's).
  clang-14 libclang-rt-14-dev libomp-14-dev llvm-14 llvm
)
case "${1:-}" in
  "") ;;
  --torch) packages+=(python3-torch python3-numpy) ;;
  *)
    echo "install_deps.sh: unknown argument '$1' (expected none, or --torch)" >&2
    exit 2
    ;;
esac

# What is missing first: a user without root or sudo on a machine that has everything (their
# scripts/test.sh calls this script) must not be stopped (review, 2026-12-06).
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps.sh: all ${#packages[@]} packages already installed"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "install_deps.sh: not root and no sudo; install these packages by hand: ${missing[*]}" >&2
  exit 1
fi

echo "install_deps.sh: installing ${missing[*]}"
# Through env: sudo's env_reset would drop an exported DEBIAN_FRONTEND.
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${missing[@]}"
