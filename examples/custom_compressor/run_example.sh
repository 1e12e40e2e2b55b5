#!/usr/bin/env bash
# Runs custom_train (built from this folder against an installed sparq) the way the ctest
# test_install_package does: 20 steps of configs/default.yaml with compress.name: block_randomk
# under mpirun -np 2, then a misspelt key, which must fail naming it.
#   PREFIX=/opt/sparq [MPIEXEC=mpirun MPIRUN_FLAGS=--oversubscribe] bash run_example.sh
# Run it in the example's build folder; without MPIEXEC it trains in one process.
set -euo pipefail
: "${PREFIX:?set PREFIX to the installed sparq}"
config=$PREFIX/share/sparq/configs/default.yaml
launch=()
if [[ -n ${MPIEXEC:-} ]]; then
  read -r -a flags <<<"${MPIRUN_FLAGS:-}"
  launch=("$MPIEXEC" -n 2 "${flags[@]}")
fi

"${launch[@]}" ./custom_train --config "$config" --set compress.name=block_randomk \
  --set train.steps=20 --set optim.warmup_steps=5 --set train.eval_interval=0 \
  --set log.metrics= --set log.progress_interval=5 >run.log 2>&1 || { cat run.log; exit 1; }
cat run.log
grep -c "block_randomk/allreduce+ef" run.log >/dev/null ||
  { echo "run_example.sh: the buckets do not use block_randomk" >&2; exit 1; }
summary=$(grep -E "^trained 20 steps" run.log) ||
  { echo "run_example.sh: no 'trained 20 steps' line" >&2; exit 1; }
# It learned: the evaluation loss is below the uniform guess ln(256) = 5.545 by a margin.
loss=$(sed -E 's/.*final eval loss ([0-9.]+).*/\1/' <<<"$summary")
awk -v l="$loss" 'BEGIN { exit !(l < 5.35) }' ||
  { echo "run_example.sh: final eval loss $loss is not below 5.35" >&2; exit 1; }

# The registered keys are validated like a built-in compressor's.
if ./custom_train --config "$config" --set compress.name=block_randomk \
     --set compress.block_randomk.blok=4 >bad.log 2>&1; then
  echo "run_example.sh: a misspelt key was accepted" >&2
  exit 1
fi
cat bad.log
grep -c -F "compress.block_randomk.blok: unknown key (known keys: block, density, residual_decay)" \
  bad.log >/dev/null || { echo "run_example.sh: unexpected error for a misspelt key" >&2; exit 1; }
echo "run_example.sh: custom_compressor passed"
