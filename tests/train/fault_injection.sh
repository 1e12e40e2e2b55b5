#!/bin/bash
# Fault-injection trials of apps/train under mpirun (docs/reliability.md, "Fault injection"):
# each trial runs a tiny compressed training job on 3 ranks with one fault, under `timeout`,
# and checks that the job ended within the bound (no hang), that every rank ended non-zero
# and that the output names the cause. Prints the table; exits 1 when any trial failed a check.
#
#   fault_injection.sh --train build/apps/train --mpirun mpirun [--trials 20] [--seed 1]
#                      [--source-dir .] [--flags "--oversubscribe"] [--bound 90]
#
# Kinds of fault (rank, step and bucket drawn at random per trial):
#   exit-exchange  a rank exits (_exit, no MPI_Finalize) at the start of a compressed bucket's
#                  exchange, while its peers are inside that bucket's collectives
#   exit-payload   a rank exits at the MPI call that carries a compressed bucket's payload,
#                  after the bucket's size allgather (comm.collective, hit counted)
#   stall          a rank stalls at the start of a compressed bucket's exchange; the others
#                  must end after comm.timeout_s
#   config         one rank runs with a different --set; every rank must refuse at start-up
#   none           no fault (a baseline; it must succeed and shows the job's normal time)
set -u

train="" mpirun="mpirun" trials=20 seed=1 source_dir="." flags="--oversubscribe" bound=90
while [[ $# -gt 0 ]]; do
  case "$1" in
    --train) train=$2; shift 2 ;;
    --mpirun) mpirun=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --source-dir) source_dir=$2; shift 2 ;;
    --flags) flags=$2; shift 2 ;;
    --bound) bound=$2; shift 2 ;;
    *) echo "fault_injection.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ ! -x "$train" ]]; then
  echo "fault_injection.sh: --train '$train' is not an executable" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
cd "$source_dir" || exit 2
RANDOM=$seed
ranks=3 steps=12 timeout_s=3
work=$(mktemp -d "${TMPDIR:-/tmp}/sparq_fault_XXXXXX")
trap 'rm -rf "$work"' EXIT

# The tiny job: 1-layer GPT-2 on the Markov source, lbs (2 compressed buckets exchanged by
# allgather: a size allgather, then the payload allgatherv) and 1 dense bucket per step.
job=(--config configs/default.yaml --set train.steps=$steps --set model.n_layer=1
     --set optim.warmup_steps=2 --set train.eval_interval=0 --set train.eval_batches=1
     --set log.progress_interval=0 --set log.metrics= --set comm.timeout_s=$timeout_s
     --set data.markov.train_tokens=65536 --set data.markov.eval_tokens=8192)
# MPI calls of one rank before step 0's first one (the config agreement, the config check's 3,
# the start-up agreements with the export path's, opening the metrics, making the checkpoint
# folder), and per step: the stop-signal agreement (Note [Stopping on a signal]), bucket 0
# (sizes, payload), bucket 2 (dense allreduce), bucket 1 (sizes, payload), then the non-finite
# agreement (Note [Non-finite local gradients], gradient_exchange.h) in bucket 1's task.
# Measured with action=stall, which names the task (2026-12-06: hit 11 stalls 'agree: making
# train.checkpoint_dir', hit 12 'agree: stop signals' of step 0, hit 14 'bucket 0', hit 17
# 'bucket 1', hit 19 step 1's 'agree: stop signals').
calls_before=11 calls_per_step=7 payload_offsets=(2 5)

# One trial: run_trial KIND; sets hung, nonzero, named, seconds (launch to end), teardown
# (from the first rank's end to the job's end), killed (ranks killed before they recorded).
run_trial() {
  local kind=$1 rank=$((RANDOM % ranks)) step=$((1 + RANDOM % (steps - 2)))
  local bucket=$((1 + RANDOM % 2)) env=() expect=""
  local status="$work/status" log="$work/log"
  rm -rf "$status" && mkdir -p "$status"
  case "$kind" in
    exit-exchange)
      env=(-x "SPARQ_FAULT=exchange.compressed,rank=$rank,step=$step,hit=$bucket,action=exit")
      expect="Process name: \[\[[0-9]+,1\],$rank\].*Exit code: +3" ;;
    exit-payload)
      local hit=$((calls_before + step * calls_per_step + payload_offsets[bucket - 1] + 1))
      env=(-x "SPARQ_FAULT=comm.collective,rank=$rank,hit=$hit,action=exit")
      expect="Process name: \[\[[0-9]+,1\],$rank\].*Exit code: +3" ;;
    stall)
      env=(-x "SPARQ_FAULT=exchange.compressed,rank=$rank,step=$step,hit=$bucket,action=stall")
      expect="task 'bucket [0-9]+' \(step $step, #[0-9]+\) did not finish within $timeout_s s" ;;
    config)
      rank=$((1 + RANDOM % (ranks - 1)))
      local keys=(optim.lr=0.002 train.seed=2 compress.lbs.density=0.02 model.n_head=2)
      local set=${keys[$((RANDOM % ${#keys[@]}))]}
      env=(-x "FAULT_SET_RANK=$rank" -x "FAULT_SET=$set")
      expect="error \(on all $ranks ranks\): config differs between ranks:"
      expect+=" rank $rank has ${set%%=*}: " ;;
    none) expect="trained $steps steps" ;;
  esac
  local start end rc
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # $flags holds several mpirun flags
  timeout -k 5 "$bound" "$mpirun" -np $ranks $flags -x OMP_NUM_THREADS=1 \
    -x OMPI_MCA_mpi_yield_when_idle=1 "${env[@]}" \
    bash "$here/fault_rank.sh" "$status" "$train" "${job[@]}" > "$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  hung=0 nonzero=1 named=0 killed=0 detail="${env[*]}"
  [[ $rc -eq 124 || $rc -eq 137 ]] && hung=1
  local first_end=$end
  for ((r = 0; r < ranks; r++)); do
    local got record
    record=$(cat "$status/rank-$r" 2>/dev/null || echo missing)
    got=${record%% *}
    [[ "$got" == started ]] && killed=$((killed + 1))
    if [[ "$record" =~ ^[0-9]+\ [0-9.]+$ ]]; then
      first_end=$(awk -v a="$first_end" -v b="${record#* }" 'BEGIN { print (b < a ? b : a) }')
    fi
    # A rank that must fail ended 0, or never started: the check fails.
    if [[ "$kind" == none ]]; then
      [[ "$got" == 0 ]] || nonzero=0
    elif [[ "$got" == 0 || "$got" == missing ]]; then
      nonzero=0
    fi
  done
  teardown=$(awk -v a="$first_end" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  # mpirun's own report spans lines: match on the output with newlines folded.
  tr '\n' ' ' < "$log" | grep -Eq "$expect" && named=1
  # One line per error: the agreed config error is printed once, not once per rank.
  if [[ $kind == config && $(grep -c "config differs between ranks" "$log") -ne 1 ]]; then
    named=0
  fi
  if [[ $hung -eq 1 || $nonzero -eq 0 || $named -eq 0 ]]; then
    echo "FAILED trial $kind ($detail): exit $rc after ${seconds}s, ranks:" \
         "$(cd "$status" && grep -H . rank-* | tr '\n' ' ')" >&2
    tail -n 30 "$log" >&2
  fi
}

failed=0
# median | max of numbers, one per line.
median_max() {
  sort -g | awk '{ v[NR] = $1 }
                 END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                       printf "%.1f | %.1f", m, v[NR] }'
}

table="| kind | trials | hangs | all ranks non-zero | cause named | time to exit (s), median"
table+=" | max | after the first rank ended (s), median | max | ranks killed unrecorded |"
table+=$'\n''|---|---|---|---|---|---|---|---|---|---|'
for kind in none exit-exchange exit-payload stall config; do
  n=$trials
  [[ $kind == none ]] && n=1
  hangs=0 all_nonzero=0 causes=0 kills=0 times=() teardowns=()
  for ((t = 0; t < n; t++)); do
    run_trial "$kind"
    hangs=$((hangs + hung))
    all_nonzero=$((all_nonzero + nonzero))
    causes=$((causes + named))
    kills=$((kills + killed))
    times+=("$seconds")
    teardowns+=("$teardown")
  done
  stats="$(printf '%s\n' "${times[@]}" | median_max)"
  stats+=" | $(printf '%s\n' "${teardowns[@]}" | median_max)"
  [[ $hangs -eq 0 && $all_nonzero -eq $n && $causes -eq $n ]] || failed=1
  label=$kind
  [[ $kind == none ]] && label="none (all ranks 0)"
  table+=$'\n'"| $label | $n | $hangs | $all_nonzero | $causes | $stats | $kills |"
  echo "$kind: $n trial(s) done" >&2
done
echo "$table"
echo "($ranks ranks, $steps steps, comm.timeout_s $timeout_s, bound ${bound}s per trial," \
     "seed $seed)"
exit $failed
