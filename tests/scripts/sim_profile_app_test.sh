#!/usr/bin/env bash
# apps/sim_profile as a user runs it: a codecs-only profile updated by a second codecs-only
# run (the first has no compute section yet), an --out that cannot be written refused before
# anything is measured, and bad arguments exiting 2 (Note [App exit codes], core/cli_args.h).
# With a launcher, a 2-rank link run whose writer cannot read its --out ends on both ranks.
#   sim_profile_app_test.sh SIM_PROFILE_BINARY [MPIEXEC [MPIRUN_FLAGS...]]
set -uo pipefail
PROFILE_BIN=$1
shift
MPIRUN=("$@")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
quick=(--only codecs --codec-floats 4096 --repeats 1)

"$PROFILE_BIN" "${quick[@]}" --codecs topk --out "$T/p.yaml" >"$T/one.txt" 2>&1 || fail "first run: $(cat "$T/one.txt")"
"$PROFILE_BIN" "${quick[@]}" --codecs lbs --out "$T/p.yaml" >"$T/two.txt" 2>&1 || fail "second run on a codecs-only profile: $(cat "$T/two.txt")"
grep -q "topk:" "$T/p.yaml" && grep -q "lbs:" "$T/p.yaml" || fail "the update lost a codec: $(cat "$T/p.yaml")"

# Timings are shortened to 4 digits, free text is not (review: "v2.0.123456" lost digits).
"$PROFILE_BIN" "${quick[@]}" --codecs topk --source 'commit v2.0.123456 on host 10.0.0.12345' \
  --out "$T/s.yaml" >"$T/source.txt" 2>&1 || fail "--source run: $(cat "$T/source.txt")"
grep -qF 'source: "commit v2.0.123456 on host 10.0.0.12345"' "$T/s.yaml" ||
  fail "the source text was changed: $(grep source: "$T/s.yaml")"
# %.4g never writes 8 digits after the point (0.0001234 at most; smaller is in e-notation),
# while an unshortened double has up to 17.
grep -qE '[0-9]\.[0-9]{8,}' <(grep -v 'source:' "$T/s.yaml") &&
  fail "a timing was not shortened: $(cat "$T/s.yaml")"

# A name with decimals stays as given (a regex shortening timings made a --link-name
# 1gbit-0.100000ms into 1gbit-0.1ms: review, 2026-12-06).
"$PROFILE_BIN" "${quick[@]}" --codecs topk --name box-0.100000 --out "$T/n.yaml" >"$T/name.txt" 2>&1 ||
  fail "--name run: $(cat "$T/name.txt")"
grep -q "^name: box-0.100000$" "$T/n.yaml" || fail "the name was changed: $(grep name: "$T/n.yaml")"

touch "$T/afile"
"$PROFILE_BIN" "${quick[@]}" --codecs topk --out "$T/afile/p.yaml" >"$T/bad.txt" 2>&1
rc=$?
[[ $rc -eq 1 ]] || fail "an unwritable --out exited $rc, want 1"
grep -q -- "--out $T/afile/p.yaml: cannot create" "$T/bad.txt" || fail "no message naming --out: $(cat "$T/bad.txt")"
grep -q "codec topk" "$T/bad.txt" && fail "measured before refusing the --out"

# An --out that is not a profile is refused naming it (a scalar document threw out of
# yaml-cpp: review); an empty one is an empty profile, as a missing one is.
printf 'hello\n' > "$T/scalar.yaml"
printf 'compute: 5\n' > "$T/scalar_compute.yaml"
for f in scalar scalar_compute; do
  "$PROFILE_BIN" "${quick[@]}" --codecs topk --out "$T/$f.yaml" >"$T/bad.txt" 2>&1
  rc=$?
  [[ $rc -eq 1 ]] || fail "--out $f.yaml exited $rc, want 1: $(cat "$T/bad.txt")"
  grep -q "$T/$f.yaml: .*expected a" "$T/bad.txt" || fail "no message naming $f.yaml: $(cat "$T/bad.txt")"
done
: > "$T/empty.yaml"
"$PROFILE_BIN" "${quick[@]}" --codecs topk --out "$T/empty.yaml" >"$T/empty.txt" 2>&1 || fail "an empty --out: $(cat "$T/empty.txt")"
grep -q "topk:" "$T/empty.yaml" || fail "nothing written to the empty --out: $(cat "$T/empty.yaml")"

"$PROFILE_BIN" --bogus --out "$T/q.yaml" >/dev/null 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "an unknown flag exited $rc, want 2"
"$PROFILE_BIN" "${quick[@]}" --codec-floats 12abc --out "$T/q.yaml" >/dev/null 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--codec-floats 12abc exited $rc, want 2"
# These exited 1 (review, 2026-12-06).
"$PROFILE_BIN" --only bogus --out "$T/q.yaml" >"$T/bad.txt" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--only bogus exited $rc, want 2"
grep -q -- "--only: unknown part 'bogus'" "$T/bad.txt" || fail "no message for --only: $(cat "$T/bad.txt")"
"$PROFILE_BIN" --only compute --out "$T/q.yaml" >"$T/bad.txt" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--only compute without --model exited $rc, want 2"
grep -q -- "--model: needed to measure compute" "$T/bad.txt" || fail "no message for --model: $(cat "$T/bad.txt")"

# Names are checked before anything is measured (an unknown codec failed after the compute
# timings, an unknown model exited 1, an empty list measured nothing and exited 0: review,
# 2026-12-06).
"$PROFILE_BIN" --only codecs --codecs topk,nosuch --out "$T/q.yaml" >"$T/bad.txt" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--codecs topk,nosuch exited $rc, want 2"
grep -q -- "--codecs: .*nosuch" "$T/bad.txt" || fail "no message naming the codec: $(cat "$T/bad.txt")"
grep -q "codec topk" "$T/bad.txt" && fail "measured topk before refusing --codecs"
"$PROFILE_BIN" --only codecs --codecs , --out "$T/q.yaml" >"$T/bad.txt" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--codecs , exited $rc, want 2"
"$PROFILE_BIN" --model nosuch --codecs topk --out "$T/q.yaml" >"$T/bad.txt" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--model nosuch exited $rc, want 2"
grep -q -- "--model: .*nosuch" "$T/bad.txt" || fail "no message naming the model: $(cat "$T/bad.txt")"
[[ -e "$T/q.yaml" ]] && fail "a refused run wrote its --out"

# A flag of a part not measured, a --seq-len past the model's n_ctx and a --codec-floats no
# buffer could hold exit 2 before any work (ignored, exit 1 after preparing the profiles, and
# an uncaught bad_alloc: review, 2026-12-07).
for args in "--only codecs --codecs topk --model gpt2-tiny" \
            "--only codecs --codecs topk --link-name x" \
            "--only compute --model gpt2-tiny --seq-len 999" \
            "--only codecs --codecs fp16 --codec-floats 100000000000000"; do
  read -r -a words <<<"$args"
  "$PROFILE_BIN" "${words[@]}" --out "$T/r.yaml" >"$T/bad.txt" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "$args exited $rc, want 2: $(cat "$T/bad.txt")"
  [[ -e "$T/r.yaml" ]] && fail "$args wrote its --out"
done
"$PROFILE_BIN" --only compute --model gpt2-tiny --seq-len 999 --out "$T/r.yaml" >"$T/bad.txt" 2>&1
grep -q -- "--seq-len 999: gpt2-tiny takes 1 to" "$T/bad.txt" ||
  fail "no message naming --seq-len: $(cat "$T/bad.txt")"
# Integer ranges read as integers: "--micro-batch 0" printed DBL_MAX's 300 digits as its
# bound (review, 2026-12-07).
for args in "--micro-batch 0" "--micro-batch 12abc" "--seq-len -1"; do
  read -r -a words <<<"$args"
  "$PROFILE_BIN" --only compute --model gpt2-tiny "${words[@]}" --out "$T/r.yaml" >"$T/bad.txt" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "$args exited $rc, want 2: $(cat "$T/bad.txt")"
  grep -q -- "${words[0]}" "$T/bad.txt" || fail "$args: no message naming ${words[0]}: $(cat "$T/bad.txt")"
  grep -q "179769" "$T/bad.txt" && fail "$args: the bound is DBL_MAX's digits: $(cat "$T/bad.txt")"
done

# Only the writer (rank 0) reads the profiles, and its peer hears of a failure before the
# link's ping-pong: it waited there forever (review, 2026-12-06).
if [[ ${#MPIRUN[@]} -gt 0 ]]; then
  printf 'a: [\n' > "$T/broken.yaml"
  OMP_NUM_THREADS=1 timeout 60 "${MPIRUN[@]}" -np 1 "$PROFILE_BIN" --only link --out "$T/broken.yaml" \
    : -np 1 "$PROFILE_BIN" --only link --out "$T/other.yaml" >"$T/mpi.txt" 2>&1
  rc=$?
  [[ $rc -eq 124 ]] && fail "a 2-rank run whose writer cannot read --out hung: $(cat "$T/mpi.txt")"
  [[ $rc -ne 0 ]] || fail "a 2-rank run whose writer cannot read --out exited 0"
  grep -q "$T/broken.yaml" "$T/mpi.txt" || fail "no message naming broken.yaml: $(cat "$T/mpi.txt")"
else
  echo "no MPI launcher given: the 2-rank --out check is not run"
fi

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "sim_profile_app_test: all checks passed"
