#!/usr/bin/env python3
"""Note [Kernels that round as written] (cmake/SparqTargets.cmake): every CUDA source of the
codecs (src/compress/cuda) and the optimizers (src/optim/cuda) compiles with --fmad=false, so
that nvcc contracts no multiply-add the host does not. Reads the build's
compile_commands.json; a CPU-only build has no such entry and the test says so.
  round_as_written_test.py BUILD_DIR SOURCE_DIR"""
import json
import sys

build, source = sys.argv[1], sys.argv[2]
with open(f"{build}/compile_commands.json") as f:
    entries = json.load(f)
kernels = [e for e in entries
           if e["file"].endswith(".cu") and
           any(f"{source}/src/{d}/cuda/" in e["file"] for d in ("compress", "optim"))]
if not kernels:
    print("no codec or optimizer kernels in this build (built without CUDA): nothing to check")
    sys.exit(0)
missing = [e["file"] for e in kernels
           if "--fmad=false" not in e.get("command", " ".join(e.get("arguments", [])))]
for path in missing:
    print(f"FAIL {path} compiles without --fmad=false")
print(f"{len(kernels) - len(missing)} of {len(kernels)} kernels round as written")
sys.exit(1 if missing else 0)
