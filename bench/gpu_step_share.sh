#!/usr/bin/env bash
# Issue 17's step-share benchmark: GPT-2 124M on one GPU, bf16 GEMM operands, B=16, T=1024
# (configs/bench/gpt2_124m_gpu.yaml), the median step time over the steps after the first 5,
# dense next to lbs (1%, 4 bits, error feedback) measured in the same run. One rank: the dense
# exchange is NCCL's average of one (nothing moves) and the lbs one its encode, a one-message
# allgather and the decode on the device, so
#     share = (lbs step - dense step) / lbs step
# is compression's share of the step (target <= 5%). powersgd (rank 4, its low_rank exchange
# on the device, compress/device_low_rank.h) is measured alike, for the record (no target):
# its products run in the CPU's fixed summation order rather than on cuBLAS
# (Note [PowerSGD's fixed summation order]), and this shows what that costs.
# Run by scripts/gpu_check.sh.
#
#   bench/gpu_step_share.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=${1:?build directory}
out=${2:?output directory}
cd "$(dirname "$0")/.."
mkdir -p "$out"
for name in none lbs powersgd; do
  if ! "$build/apps/train" --config configs/bench/gpt2_124m_gpu.yaml \
      --set compress.name=$name --set log.metrics="$out/step_share_$name.jsonl" \
      >"$out/step_share_$name.log" 2>&1; then
    echo "gpu_step_share: the $name run failed (tail of $out/step_share_$name.log):"
    tail -5 "$out/step_share_$name.log"
    exit 1
  fi
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def steps(name):
    rows = []
    for line in open(f"{out}/step_share_{name}.jsonl"):
        row = json.loads(line)
        if row.get("event") == "step" and row.get("step", 0) > 5:
            rows.append(row)
    return rows
dense, lbs, psgd = steps("none"), steps("lbs"), steps("powersgd")
d = statistics.median(r["step_ms"] for r in dense)
c = statistics.median(r["step_ms"] for r in lbs)
tok = 16 * 1024
print("gpu_step_share: GPT-2 124M, bf16 GEMM operands, B=16 T=1024, one GPU, median of "
      f"{len(dense)} and {len(lbs)} steps")
print(f"  dense step {d:.1f} ms ({tok / d * 1e3:.0f} tokens/s)")
print(f"  lbs 1% 4-bit + EF step {c:.1f} ms ({tok / c * 1e3:.0f} tokens/s)")
print(f"  compression's share of the step: {100 * (c - d) / c:.1f}% (target <= 5%)")
p = statistics.median(r["step_ms"] for r in psgd)
print(f"  powersgd r=4 + EF step {p:.1f} ms: its share {100 * (p - d) / p:.1f}% (no target)")
PY
