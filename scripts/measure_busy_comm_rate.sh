#!/usr/bin/env bash
# Measures the simulator's --busy-comm-rate on the emulated cluster (docs/simulate.md,
# "Communication under compute"): bench_comm's allreduce of one size, through sparq's engine
# path, one rank per node, first with the cores idle and then with one busy process (`yes`)
# per rank standing in for backward's compute, in alternating rounds. The rate is the median
# idle time over the median busy time (the ratio of their bandwidths; the times are printed
# to 0.1 us where bench_comm prints GB/s to three decimals, too coarse on a slow link).
#
#   scripts/measure_busy_comm_rate.sh N LINK [--mib 16] [--iters 6] [--rounds 3]
#       [--bench build/bench/bench_comm]
#
# Needs root and a cluster of at least N nodes with links of LINK
# (scripts/cluster.sh up N --rate LINK); LINK only labels the output. Prints every round's line
# and then "N=<n> link=<LINK> idle_us=<median> busy_us=<median> rate=<R>".
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "measure_busy_comm_rate.sh: $*" >&2; exit 1; }

[[ $# -ge 2 ]] || die "usage: $0 N LINK [--mib 16] [--iters 6] [--rounds 3] [--bench PATH]"
world="$1"; link="$2"; shift 2
mib=16; iters=6; rounds=3; bench="$HERE/../build/bench/bench_comm"  # scripts/build.sh's tree
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mib) mib="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --bench) bench="$2"; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[[ "$world" =~ ^[0-9]+$ && "$world" -ge 2 ]] || die "N must be an integer >= 2, got '$world'"
[[ -x "$bench" ]] || die "$bench not found or not executable (cmake --build build --target bench_comm, or pass --bench)"
MPI_ARGS="${MPI_ARGS:---mca btl_tcp_flags send,inplace,need-ack,need-csum}"

busy_pids=()
stop_busy() { [[ ${#busy_pids[@]} -gt 0 ]] && kill "${busy_pids[@]}" 2>/dev/null; busy_pids=(); }
trap stop_busy EXIT

# One allreduce line of bench_comm; the sparq path's time per call (us) is field 4. One round
# of bench_comm's own (its default is 5 interleaved rounds since 2026-12-06): this script
# alternates the idle and busy rounds itself.
one_round() {
  # shellcheck disable=SC2086  # MPI_ARGS is a list of words
  "$HERE/cluster.sh" mpirun "$world" $MPI_ARGS -- "$bench" "$mib" --min-mib "$mib" \
    --ops allreduce --iters "$iters" --rounds 1 | awk '$1 == "allreduce" {print $4}'
}

idle=(); busy=()
for ((r = 1; r <= rounds; ++r)); do
  us="$(one_round)"; [[ -n "$us" ]] || die "bench_comm printed no allreduce line"
  idle+=("$us"); echo "N=$world link=$link round=$r busy=0 allreduce_${mib}MiB_us=$us"
  for ((k = 0; k < world; ++k)); do yes >/dev/null & busy_pids+=($!); done
  us="$(one_round)"; stop_busy; [[ -n "$us" ]] || die "bench_comm printed no allreduce line"
  busy+=("$us"); echo "N=$world link=$link round=$r busy=$world allreduce_${mib}MiB_us=$us"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mi="$(median "${idle[@]}")"; mb="$(median "${busy[@]}")"
echo "N=$world link=$link idle_us=$mi busy_us=$mb rate=$(awk -v i="$mi" -v b="$mb" 'BEGIN{printf "%.2f", i / b}')"
