#!/usr/bin/env bash
# Issue 17's WFBP-on-the-GPU benchmark: GPT-2 124M, bf16 GEMM operands, B=16, T=1024, on one
# GPU whose bucket queue (a one-rank NCCL communicator) emulates a cluster's slow link on its
# stream (comm.emulate with ranks: 8, so each bucket costs what rank 0 of 8 would send).
# For dense buckets on a 100 Gbit/s link and lbs (1%, 4 bits, error feedback) on a 1 Gbit/s
# one, the median step over the steps after the first 3, with the buckets exchanged as they
# are ready (WFBP, comm.overlap: true) and all after backward (the baseline, overlap: false),
# measured in the same run: step time, communication busy and exposed time, and the hidden
# fraction (the share of the buckets' transfer time spent while backward still ran on the
# GPU). Run by scripts/gpu_check.sh.
#
#   bench/gpu_wfbp.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=${1:?build directory}
out=${2:?output directory}
cd "$(dirname "$0")/.."
mkdir -p "$out"
# name compressor gbit_per_s
cases=("dense none 100" "lbs lbs 1")
for c in "${cases[@]}"; do
  read -r name compressor gbit <<<"$c"
  for overlap in true false; do
    tag=${name}_overlap_$overlap
    if ! "$build/apps/train" --config configs/bench/gpt2_124m_gpu.yaml \
        --set compress.name="$compressor" --set comm.overlap=$overlap \
        --set comm.emulate.gbit_per_s="$gbit" --set comm.emulate.ranks=8 \
        --set train.steps=12 --set log.metrics="$out/wfbp_$tag.jsonl" \
        >"$out/wfbp_$tag.log" 2>&1; then
      echo "gpu_wfbp: the $tag run failed (tail of $out/wfbp_$tag.log):"
      tail -5 "$out/wfbp_$tag.log"
      exit 1
    fi
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def median_row(tag):
    rows = [json.loads(l) for l in open(f"{out}/wfbp_{tag}.jsonl")]
    rows = [r for r in rows if r.get("event") == "step" and r.get("step", 0) > 3]
    med = lambda k: statistics.median(r[k] for r in rows)
    return {k: med(k) for k in ("step_ms", "comm_busy_ms", "exposed_comm_ms", "hidden_fraction",
                                "bytes_sent", "bytes_received")}, len(rows)
print("gpu_wfbp: GPT-2 124M, bf16 GEMM operands, B=16 T=1024, one GPU, an emulated 8-rank "
      "link on the NCCL stream; medians")
print(f"  {'case':<28}{'step ms':>9}{'comm busy':>11}{'exposed':>9}{'hidden':>8}"
      f"{'MB sent':>9}{'MB recv':>9}")
for name, link in (("dense", "100 Gbit/s"), ("lbs", "1 Gbit/s")):
    r = {}
    for overlap in ("true", "false"):
        row, n = median_row(f"{name}_overlap_{overlap}")
        r[overlap] = row
        label = f"{name} @ {link}, " + ("WFBP" if overlap == "true" else "after backward")
        print(f"  {label:<28}{row['step_ms']:>9.1f}{row['comm_busy_ms']:>11.1f}"
              f"{row['exposed_comm_ms']:>9.1f}{100 * row['hidden_fraction']:>7.0f}%"
              f"{row['bytes_sent'] / 1e6:>9.1f}{row['bytes_received'] / 1e6:>9.1f}")
    print(f"  {name}: WFBP step / after-backward step = "
          f"{r['true']['step_ms'] / r['false']['step_ms']:.2f}, communication hidden "
          f"{100 * r['true']['hidden_fraction']:.0f}% (after backward: "
          f"{100 * r['false']['hidden_fraction']:.0f}%)")
PY
