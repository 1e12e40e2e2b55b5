#!/usr/bin/env bash
# The test command of the README and of CI: installs dependencies, builds, runs ctest.
# Tests that need ../shared/data skip with a message when it is absent; GPU tests skip
# without a device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 900
