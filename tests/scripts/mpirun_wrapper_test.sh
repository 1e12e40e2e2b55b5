#!/usr/bin/env bash
# scripts/mpirun.sh, against a fake mpirun that prints what it was given: the rank count found
# under each of mpirun's spellings (and not in the program's own arguments), the cores shared
# out as OpenMP threads, the caller's OMP_NUM_THREADS and yield setting kept, --oversubscribe
# always, --allow-run-as-root only as root, and the arguments passed on unchanged.
#   mpirun_wrapper_test.sh <repository root>
set -euo pipefail
wrapper=$1/scripts/mpirun.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Each argument on its own line, so that the checks below can match whole arguments.
cat >"$scratch/mpirun" <<'EOF'
#!/usr/bin/env bash
printf '%s\n' "$@"
EOF
# A fixed core count, whatever machine runs the test.
printf '#!/usr/bin/env bash\necho 12\n' >"$scratch/nproc"
chmod +x "$scratch/mpirun" "$scratch/nproc"
fail() { echo "FAIL: $*"; exit 1; }

# run_wrapper ARGS...: the fake mpirun's output, with OMP_NUM_THREADS and the yield setting
# unset as a caller that set neither.
run_wrapper() {
  env -u OMP_NUM_THREADS -u OMPI_MCA_mpi_yield_when_idle PATH="$scratch:$PATH" bash "$wrapper" "$@"
}
# expect_threads WANT ARGS...: the OMP_NUM_THREADS the wrapper exports for ARGS.
expect_threads() {
  local want=$1
  shift
  local out
  out=$(run_wrapper "$@")
  grep -qx "OMP_NUM_THREADS=$want" <<<"$out" ||
    fail "'$*' exported $(grep OMP_NUM_THREADS <<<"$out" || echo nothing), want OMP_NUM_THREADS=$want"
}

# 12 cores shared among the ranks, under every spelling of the rank count.
expect_threads 6 -np 2 ./train
expect_threads 3 --np 4 ./train
expect_threads 4 -n 3 ./train
expect_threads 2 --n 6 ./train
expect_threads 1 -c 12 ./train
expect_threads 1 -np 24 ./train  # more ranks than cores: one thread each, never zero
expect_threads 12 ./train        # no count: mpirun's default, taken as one rank
# Options that take values are stepped over, their values not taken for the program.
expect_threads 4 --mca btl self,vader -x FOO=1 --map-by core -np 3 ./train
# The program's own -n (or -c) is not the rank count.
expect_threads 6 -np 2 ./train -n 5 -c 7
expect_threads 12 ./train -np 4
# A non-numeric count is left to mpirun's error, counted as one rank here.
expect_threads 12 -np two ./train

# The caller's settings win.
out=$(OMP_NUM_THREADS=5 OMPI_MCA_mpi_yield_when_idle=0 PATH="$scratch:$PATH" bash "$wrapper" -np 2 ./train)
grep -qx "OMP_NUM_THREADS=5" <<<"$out" || fail "the caller's OMP_NUM_THREADS=5 was not kept: $out"
grep -qx "OMPI_MCA_mpi_yield_when_idle=0" <<<"$out" || fail "the caller's yield setting was not kept: $out"
out=$(run_wrapper -np 2 ./train)
grep -qx "OMPI_MCA_mpi_yield_when_idle=1" <<<"$out" || fail "no yield default: $out"

# The flags, and the arguments passed on in order after them.
out=$(run_wrapper -np 2 ./train --config "a b.yaml" --set x=1)
[[ "$(head -1 <<<"$out")" == "--oversubscribe" ]] || fail "--oversubscribe does not come first: $out"
if [[ "$(id -u)" == "0" ]]; then
  grep -qx -- "--allow-run-as-root" <<<"$out" || fail "root, but no --allow-run-as-root: $out"
else
  grep -qx -- "--allow-run-as-root" <<<"$out" && fail "--allow-run-as-root for a non-root user: $out"
fi
tail -7 <<<"$out" | diff - <(printf '%s\n' -np 2 ./train --config "a b.yaml" --set x=1) >/dev/null ||
  fail "the arguments were not passed on unchanged: $out"
echo "scripts/mpirun.sh: rank counts, threads, settings and arguments as expected"
