#!/bin/bash
# One rank of a fault-injection trial (tests/train/fault_injection.sh): runs the command and
# records how this rank ended in STATUS_DIR/rank-<R>: its exit status (128 + N for signal N)
# and the time it ended ($EPOCHREALTIME, a builtin: a `date` child could itself be hit by the
# launcher's signal), so that the trial can check that every rank ended non-zero and measure
# how long the job took to end after its first rank did.
#
#   mpirun -np 3 bash fault_rank.sh STATUS_DIR command args...
#
# FAULT_SET_RANK=R FAULT_SET=key=value: rank R alone appends `--set key=value` (a rank whose
# config differs). The record starts as "started": mpirun ends a failed job's other ranks
# with SIGTERM and, after odls_base_sigkill_timeout (1 s), SIGKILL, which can reach this
# wrapper before it records; "started" then means "killed by the launcher" (not zero).
set -u
dir=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}}
echo started > "$dir/rank-$rank"
extra=()
if [[ -n "${FAULT_SET_RANK:-}" && "$rank" == "$FAULT_SET_RANK" ]]; then
  extra=(--set "$FAULT_SET")
fi
"$@" "${extra[@]}" &
child=$!
# Pass mpirun's SIGTERM on to the rank, and keep waiting for its real status (wait returns
# early when a trapped signal arrives).
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
wait "$child"
rc=$?
while kill -0 "$child" 2>/dev/null; do
  wait "$child"
  rc=$?
done
echo "$rc $EPOCHREALTIME" > "$dir/rank-$rank"
exit "$rc"
