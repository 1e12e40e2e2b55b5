#!/usr/bin/env bash
# sparq_info --json: one JSON object with the build's features, its types, and every
# compressor the registry knows (the names `compress.name` accepts) with its declared keys,
# the aggregation strategies and the model presets. The text report names every feature its
# header promises (NCCL and cuDNN were missing), the names a config may use, and the GEMM
# backend it self-checks.
#   sparq_info_json_test.sh <sparq_info binary>
set -euo pipefail
info=$1
text=$("$info" --width 8)
# And what a config may name: only --json listed it (review, 2026-12-08).
for line in "  CUDA: " "  NCCL: " "  cuDNN: " "  MPI: " "  GEMM: " "  OpenMP threads: " \
    "  compressors: none, .*lbs" "  aggregations: allreduce, " "  models: .*gpt2-124M"; do
  grep -q "^$line" <<<"$text" || { echo "FAIL: no '$line' line in sparq_info's report: $text"; exit 1; }
done
backend=$(sed -n 's/^  GEMM: \([a-z0-9]*\) .*/\1/p' <<<"$text")
grep -q "^GEMM self-check ($backend) .*: OK$" <<<"$text" ||
  { echo "FAIL: the self-check line does not name the backend '$backend': $text"; exit 1; }
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: no python3 to parse the JSON"
  exit 77  # ctest: skipped (SKIP_RETURN_CODE, tests/scripts/CMakeLists.txt)
fi
"$info" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
want = {"version": str, "cuda": bool, "cuda_device_visible": bool, "nccl": bool, "cudnn": bool,
        "mpi": bool, "gemm_backend": str, "gemm_library": str, "openmp_threads": int,
        "compressors": list, "compressor_keys": dict, "aggregations": list, "models": list}
assert set(d) == set(want), f"keys {sorted(d)}"
for key, kind in want.items():
    assert isinstance(d[key], kind), f"{key}: {d[key]!r} is not {kind.__name__}"
assert d["gemm_backend"] in ("eigen", "openblas", "blis", "avx512"), d["gemm_backend"]
assert d["openmp_threads"] >= 1
for name in ("none", "topk", "lbs", "powersgd", "dgc"):
    assert name in d["compressors"], f"{name} missing from " + str(d["compressors"])
assert list(d["compressor_keys"]) == d["compressors"], "compressor_keys and compressors differ"
assert d["compressor_keys"]["topk"] == ["density"], d["compressor_keys"]["topk"]
assert d["compressor_keys"]["none"] == [], d["compressor_keys"]["none"]
assert d["aggregations"][:4] == ["allreduce", "allgather", "two_phase", "tree"], d["aggregations"]
for name in ("gpt2-124M", "bert-base", "vgg16"):
    assert name in d["models"], f"{name} missing from " + str(d["models"])
assert not d["cuda_device_visible"] or d["cuda"], "a visible device in a build without CUDA"
print("sparq_info --json OK:", len(d["compressors"]), "compressors, gemm", d["gemm_backend"])
'
# --json runs no demo network: a --width beside it is refused, exit 2 (it was ignored:
# review, 2026-12-07).
rc=0
"$info" --json --width 8 >/dev/null 2>&1 || rc=$?
[[ $rc -eq 2 ]] || { echo "sparq_info --json --width 8 exited $rc, want 2"; exit 1; }
