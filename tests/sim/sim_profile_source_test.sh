#!/usr/bin/env bash
# sim_profile's generated source line follows what was measured: a run that measures compute
# or codecs without --source rewrites it (it was written only into a file that had none, so
# it went on describing the first run: review, 2026-12-06), keeping the other part of a line
# it generated itself; --source is written as given; a hand-written line is replaced.
#   sim_profile_source_test.sh SIM_PROFILE_BINARY
set -uo pipefail
PROFILE_BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
codecs() { "$PROFILE_BIN" --only codecs --codecs topk --repeats 1 --codec-floats "$1" --out "$T/p.yaml" \
             "${@:2}" >"$T/run.txt" 2>&1 || fail "codecs run ($*): $(cat "$T/run.txt")"; }
source_line() { grep '^source:' "$T/p.yaml"; }

codecs 4096
source_line | grep -qF 'codecs: 4096 floats' || fail "first run: $(source_line)"
codecs 7
source_line | grep -qF 'codecs: 7 floats' || fail "the second run's line: $(source_line)"
source_line | grep -qF '4096' && fail "the first run's figure stayed: $(source_line)"

# Compute measured next: its part added, the codecs' part (not measured now) kept.
"$PROFILE_BIN" --only compute --model "gpt2-tiny n_layer=1" --micro-batch 1 --seq-len 8 \
  --repeats 1 --out "$T/p.yaml" >"$T/run.txt" 2>&1 || fail "compute run: $(cat "$T/run.txt")"
source_line | grep -qF 'compute: gpt2-tiny n_layer=1, median of 1 runs' ||
  fail "compute run: $(source_line)"
source_line | grep -qF 'codecs: 7 floats' || fail "compute run lost the codecs' part: $(source_line)"
codecs 9
source_line | grep -qF 'compute: gpt2-tiny n_layer=1' || fail "codecs run lost the compute part: $(source_line)"
source_line | grep -qF 'codecs: 9 floats' || fail "codecs run after compute: $(source_line)"

codecs 11 --source "hand-written, 11 floats"
[[ $(source_line) == 'source: "hand-written, 11 floats"' ]] || fail "--source: $(source_line)"
codecs 13
source_line | grep -qF 'codecs: 13 floats' || fail "a hand-written line was kept: $(source_line)"
source_line | grep -qF 'hand-written' && fail "a hand-written line stayed: $(source_line)"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "sim_profile_source_test: all checks passed"
