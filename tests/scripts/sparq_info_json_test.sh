#!/usr/bin/env bash
# sparq_info --json: one JSON object with the build's features, its types, and every
# compressor the registry knows (the names `compress.name` accepts).
#   sparq_info_json_test.sh <sparq_info binary>
set -euo pipefail
info=$1
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: no python3 to parse the JSON"
  exit 0
fi
"$info" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
want = {"version": str, "cuda": bool, "cuda_device_visible": bool, "nccl": bool, "cudnn": bool,
        "mpi": bool, "gemm_backend": str, "gemm_library": str, "openmp_threads": int,
        "compressors": list}
assert set(d) == set(want), f"keys {sorted(d)}"
for key, kind in want.items():
    assert isinstance(d[key], kind), f"{key}: {d[key]!r} is not {kind.__name__}"
assert d["gemm_backend"] in ("eigen", "openblas", "blis"), d["gemm_backend"]
assert d["openmp_threads"] >= 1
for name in ("none", "topk", "lbs", "powersgd", "dgc"):
    assert name in d["compressors"], f"{name} missing from {d['compressors']}"
assert not d["cuda_device_visible"] or d["cuda"], "a visible device in a build without CUDA"
print("sparq_info --json OK:", len(d["compressors"]), "compressors, gemm", d["gemm_backend"])
'
