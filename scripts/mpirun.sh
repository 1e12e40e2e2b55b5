#!/usr/bin/env bash
# mpirun for local runs of sparq: adds --oversubscribe (more ranks than cores is fine for
# smoke runs), --allow-run-as-root only when running as root (containers), and, unless the
# caller set them, one share of the cores per rank as OpenMP threads and
# mpi_yield_when_idle so that waiting ranks do not spin on cores others need.
#   scripts/mpirun.sh -np 2 build/apps/train --config configs/default.yaml
set -euo pipefail
ranks=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [[ "${args[$i]}" == "-np" || "${args[$i]}" == "-n" ]]; then ranks="${args[$((i + 1))]}"; fi
done
flags=(--oversubscribe)
[[ "$(id -u)" == "0" ]] && flags+=(--allow-run-as-root)
threads="${OMP_NUM_THREADS:-$(( $(nproc) / ranks > 0 ? $(nproc) / ranks : 1 ))}"
exec mpirun "${flags[@]}" -x OMP_NUM_THREADS="$threads" \
  -x OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}" "$@"
