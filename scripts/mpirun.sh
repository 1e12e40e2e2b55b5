#!/usr/bin/env bash
# mpirun for local runs of sparq: adds --oversubscribe (more ranks than cores is fine for
# smoke runs), --allow-run-as-root only when running as root (containers), and, unless the
# caller set them, one share of the cores per rank as OpenMP threads and
# mpi_yield_when_idle so that waiting ranks do not spin on cores others need.
#   scripts/mpirun.sh -np 2 build/apps/train --config configs/default.yaml
set -euo pipefail
# The rank count, under any of mpirun's spellings (-np, --np, -n, --n, -c); a missing or
# non-numeric value is left to mpirun's own error. The scan stops at the program (the first
# word that is an executable), so that the program's own -c or -n is not taken for it.
ranks=1
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  [[ ${args[$i]} != -* && -f ${args[$i]} && -x ${args[$i]} ]] && break
  case "${args[$i]}" in
    -np | --np | -n | --n | -c)
      [[ "${args[$((i + 1))]}" =~ ^[1-9][0-9]*$ ]] && ranks="${args[$((i + 1))]}"
      ;;
  esac
done
flags=(--oversubscribe)
[[ "$(id -u)" == "0" ]] && flags+=(--allow-run-as-root)
threads="${OMP_NUM_THREADS:-$(( $(nproc) / ranks > 0 ? $(nproc) / ranks : 1 ))}"
exec mpirun "${flags[@]}" -x OMP_NUM_THREADS="$threads" \
  -x OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}" "$@"
