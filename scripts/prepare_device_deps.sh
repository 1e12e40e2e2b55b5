#!/usr/bin/env bash
# Prepares what scripts/gpu_check.sh needs on a GPU machine that has CUDA, CMake, ninja, g++
# and Python but no Debian -dev packages and no network: the header-only and library
# dependencies as Debian 12 packages, downloaded here and unpacked (dpkg -x) into
# .device-deps/root, an ignored folder of the checkout (about 17 MiB). Carry that folder to
# the GPU machine with the working tree (the device tool's `carry: [".device-deps"]`).
#
#   scripts/prepare_device_deps.sh     # idempotent; needs apt-get (no root needed)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  libeigen3-dev libcli11-dev
  libfmt-dev libfmt9 libspdlog-dev libspdlog1.10 libyaml-cpp-dev libyaml-cpp0.7
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
)
dest=.device-deps
mkdir -p "$dest/debs" "$dest/root"
(cd "$dest/debs" && apt-get download "${packages[@]}" 2>&1 | grep -v "unsandboxed" || true)
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest/root"; done
echo "prepare_device_deps.sh: ${#packages[@]} packages unpacked into $dest/root ($(du -sh "$dest/root" | cut -f1))"
