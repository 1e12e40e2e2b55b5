#!/usr/bin/env bash
# Runs embed_trainer (built from this folder against an installed sparq) the way the ctest
# test_install_package does: 40 steps under mpirun -np 2 (one process without MPIEXEC), then
# checks that the callback saw every step and that the model learned.
#   [MPIEXEC=mpirun MPIRUN_FLAGS=--oversubscribe] bash run_example.sh
set -euo pipefail
launch=()
if [[ -n ${MPIEXEC:-} ]]; then
  read -r -a flags <<<"${MPIRUN_FLAGS:-}"
  launch=("$MPIEXEC" -n 2 "${flags[@]}")
fi
rm -f metrics.csv
"${launch[@]}" ./embed_trainer 40 metrics.csv >run.log 2>&1 || { cat run.log; exit 1; }
cat run.log
rows=$(($(wc -l <metrics.csv) - 1))
[[ $rows == 40 ]] || { echo "run_example.sh: $rows CSV rows from the callback, expected 40" >&2; exit 1; }
line=$(grep -E "^embed_trainer: 40 steps through the callback" run.log) ||
  { echo "run_example.sh: no summary line" >&2; exit 1; }
first=$(sed -E 's/.*loss ([0-9.]+) -> ([0-9.]+).*/\1/' <<<"$line")
last=$(sed -E 's/.*loss ([0-9.]+) -> ([0-9.]+).*/\2/' <<<"$line")
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 1.0) }' ||
  { echo "run_example.sh: the loss went from $first to $last only" >&2; exit 1; }
echo "run_example.sh: embed_trainer passed"
