#!/usr/bin/env python3
"""Note [Kernels that round as written] (cmake/SparqTargets.cmake): every source of the codecs
(src/compress) and the optimizers (src/optim) compiles without multiply-add contraction: the
CUDA ones with --fmad=false, the C++ ones with -ffp-contract=off. Reads the build's
compile_commands.json (a CPU-only build has no CUDA sources to check).
  round_as_written_test.py BUILD_DIR SOURCE_DIR"""
import json
import sys

build, source = sys.argv[1], sys.argv[2]
with open(f"{build}/compile_commands.json") as f:
    entries = json.load(f)
checked = failed = 0
for e in entries:
    path = e["file"]
    if not any(path.startswith(f"{source}/src/{d}/") for d in ("compress", "optim")):
        continue
    command = e.get("command", " ".join(e.get("arguments", [])))
    flag = "--fmad=false" if path.endswith(".cu") else "-ffp-contract=off"
    checked += 1
    if flag not in command:
        print(f"FAIL {path} compiles without {flag}")
        failed += 1
print(f"{checked - failed} of {checked} codec and optimizer sources round as written")
sys.exit(1 if failed or checked == 0 else 0)
