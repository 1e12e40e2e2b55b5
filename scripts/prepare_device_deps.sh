#!/usr/bin/env bash
# Prepares what scripts/gpu_check.sh needs on a GPU machine that has CUDA, CMake, ninja, g++
# and Python but no Debian -dev packages and no network: the header-only and library
# dependencies as Debian 12 packages, downloaded here and unpacked (dpkg -x) into
# .device-deps/root, an ignored folder of the checkout (about 15 MiB). Carry that folder to
# the GPU machine with the working tree (the device tool's `carry: [".device-deps"]`, in each
# of gpu_check.sh's calls: `build`, then the stages; see its first lines and docs/gpu.md).
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
debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
# The .debs go to a temporary folder: only what they unpack travels (the carry is limited).
(cd "$debs" && apt-get download "${packages[@]}" 2>&1 | grep -v "unsandboxed") || true
for p in "${packages[@]}"; do
  ls "$debs/${p}"_*.deb >/dev/null 2>&1 || {
    echo "prepare_device_deps.sh: apt-get download of $p failed (Debian 12's package names;" \
      "on a machine without package lists run apt-get update first)" >&2
    exit 1
  }
done
rm -rf "$dest"
mkdir -p "$dest/root"
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$dest/root"; done
# The commit the deps were made at, for gpu_check.sh's report (.git may not travel).
# --dirty: uncommitted changes travel with the working tree, so the report says so.
git describe --always --dirty >"$dest/commit" 2>/dev/null || true
echo "prepare_device_deps.sh: ${#packages[@]} packages unpacked into $dest/root ($(du -sh "$dest/root" | cut -f1))"
