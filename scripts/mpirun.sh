#!/usr/bin/env bash
# mpirun for local runs of sparq: adds --oversubscribe (more ranks than cores is fine for
# smoke runs), --allow-run-as-root only when running as root (containers), and, unless the
# caller set them, one share of the cores per rank as OpenMP threads and
# mpi_yield_when_idle so that waiting ranks do not spin on cores others need.
#   scripts/mpirun.sh -np 2 build/apps/train --config configs/default.yaml
set -euo pipefail
# The rank count, under any of mpirun's spellings (-np, --np, -n, --n, -c); a missing or
# non-numeric value is left to mpirun's own error. The scan stops at the program, the first
# word that is no option and no option's value (so the program's own -c or -n is not taken
# for it), skipping the values of mpirun's options that take some.
ranks=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    -np | --np | -n | --n | -c)
      [[ "${args[$((i + 1))]:-}" =~ ^[1-9][0-9]*$ ]] && ranks="${args[$((i + 1))]}"
      i=$((i + 1))
      ;;
    --mca | -mca | --gmca | -gmca) i=$((i + 2)) ;;
    -x | -H | --host | -host | --hostfile | -hostfile | --machinefile | -machinefile | \
      --map-by | -map-by | --bind-to | -bind-to | --rank-by | -rank-by | --prefix | -wdir | \
      --wdir | -wd | --npernode | -npernode | --npersocket | --output-filename | --tag-output-file)
      i=$((i + 1))
      ;;
    -*) ;;
    *) break ;;
  esac
done
flags=(--oversubscribe)
[[ "$(id -u)" == "0" ]] && flags+=(--allow-run-as-root)
threads="${OMP_NUM_THREADS:-$(( $(nproc) / ranks > 0 ? $(nproc) / ranks : 1 ))}"
exec mpirun "${flags[@]}" -x OMP_NUM_THREADS="$threads" \
  -x OMPI_MCA_mpi_yield_when_idle="${OMPI_MCA_mpi_yield_when_idle:-1}" "$@"
