#!/usr/bin/env bash
# The scaling curves of docs/simulate.md: GPT-2 124M and BERT-base on the hand-written H100
# node profile, 10gbit and 100gbit networks, P = 2..1024, every cell; CSV and PNG into
# docs/simulate/. Runs in seconds (the simulator lays each model out, offsets only, in well under
# a second; the plots take longest).
#   scripts/simulate_curves.sh            # needs build/apps/simulate (cmake --build build --target simulate)
# Environment: PROFILE (default profiles/h100_node.yaml), ALLREDUCE (simulate --allreduce;
# default best for the GPU node profiles h100*/h200*, whose runs allreduce with NCCL, which
# best approximates, else config; those profiles' runs are also priced with
# --set train.device=cuda, whatever ALLREDUCE), OUT (default docs/simulate),
# SIMULATE (default build/apps/simulate), PYTHON (a python3 with matplotlib), MODELS (default
# "gpt2_124M bert_base": the curves to regenerate, so a fix that moves one model's leaves the
# other's files untouched).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-profiles/h100_node.yaml}
OUT=${OUT:-docs/simulate}
SIMULATE=${SIMULATE:-build/apps/simulate}
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  # pyenv shims may hide the system python that has python3-matplotlib
  "$PYTHON" -c "import matplotlib" 2>/dev/null || PYTHON=/usr/bin/python3
fi
[[ -x "$SIMULATE" ]] || { echo "$SIMULATE not built: cmake --build build --target simulate" >&2; exit 1; }
[[ -f "$PROFILE" ]] || { echo "profile $PROFILE not found" >&2; exit 1; }
# A device: cuda run allreduces with ncclAllReduce, which comm.allreduce does not steer; the
# config's auto priced sparq's CPU/MPI ring from a threshold measured on a 2-core box
# (review, 2026-12-07). The configs say device cpu, so the GPU profiles' curves also set
# train.device=cuda: resolve_tied_split() splits GPT-2's tied table (at P = 2) on the CPU
# device only, and without it the curves priced that split for an H100 run, which never makes
# it (review, 2026-12-07). The simulator only prices: no GPU is needed.
sets=()
case "$(basename "$PROFILE")" in
  h100*|h200*) default_allreduce=best; sets=(--set train.device=cuda) ;;
  *) default_allreduce=config ;;
esac
ALLREDUCE=${ALLREDUCE:-$default_allreduce}
mkdir -p "$OUT"
WORLD=2,4,8,16,32,64,128,256,512,1024
declare -A CONFIGS=([gpt2_124M]=configs/gpt2_wikitext.yaml [bert_base]=configs/bert_wikitext.yaml)
csvs=()
for name in ${MODELS:-gpt2_124M bert_base}; do
  config=${CONFIGS[$name]:-}
  [[ -n $config ]] || { echo "MODELS: unknown '$name' (${!CONFIGS[*]})" >&2; exit 1; }
  "$SIMULATE" --config "$config" --profile "$PROFILE" --network 10gbit --network 100gbit \
      --world "$WORLD" --allreduce "$ALLREDUCE" ${sets[@]+"${sets[@]}"} --csv "$OUT/$name.csv" | grep -v "\[info\]" > "$OUT/$name.txt"
  echo "wrote $OUT/$name.csv and $OUT/$name.txt"
  csvs+=("$OUT/$name.csv")
done
"$PYTHON" scripts/plot_scaling.py "$OUT" "${csvs[@]}"
