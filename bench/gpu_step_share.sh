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
# run NAME: one training run; false (with its log's tail) when it fails.
run() {
  "$build/apps/train" --config configs/bench/gpt2_124m_gpu.yaml \
    --set compress.name=$1 --set log.metrics="$out/step_share_$1.jsonl" \
    >"$out/step_share_$1.log" 2>&1 && return 0
  echo "gpu_step_share: the $1 run failed (tail of $out/step_share_$1.log):"
  tail -5 "$out/step_share_$1.log"
  return 1
}
# median_ms NAME...: prints, per run, the median step time over the steps after the first 5.
median_ms() {
  python3 - "$out" "$@" <<'PY'
import json, statistics, sys
out = sys.argv[1]
for name in sys.argv[2:]:
    ms = [row["step_ms"] for row in map(json.loads, open(f"{out}/step_share_{name}.jsonl"))
          if row.get("event") == "step" and row.get("step", 0) > 5]
    print(f"{statistics.median(ms):.3f} {len(ms)}")
PY
}
# The target first (dense and lbs), printed before powersgd runs, so that a failure or a
# timeout there cannot take it with it.
run none && run lbs || exit 1
read -r d nd < <(median_ms none) && read -r c nc < <(median_ms lbs) || exit 1
tok=$((16 * 1024))
python3 - "$d" "$nd" "$c" "$nc" "$tok" <<'PY'
import sys
d, nd, c, nc, tok = float(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
print("gpu_step_share: GPT-2 124M, bf16 GEMM operands, B=16 T=1024, one GPU, median of "
      f"{nd} and {nc} steps")
print(f"  dense step {d:.1f} ms ({tok / d * 1e3:.0f} tokens/s)")
print(f"  lbs 1% 4-bit + EF step {c:.1f} ms ({tok / c * 1e3:.0f} tokens/s)")
print(f"  compression's share of the step: {100 * (c - d) / c:.1f}% (target <= 5%)")
PY
run powersgd || exit 1
read -r p _ < <(median_ms powersgd) || exit 1
python3 -c "import sys; d, p = float(sys.argv[1]), float(sys.argv[2]); print(f'  powersgd r=4 + EF step {p:.1f} ms: its share {100 * (p - d) / p:.1f}% (no target)')" "$d" "$p"
