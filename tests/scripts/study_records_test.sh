#!/usr/bin/env bash
# scripts/study.py, part two (study_test.sh runs it after its own checks, with the same python):
# which study.json belongs to a run (the metrics fingerprint, not mtimes), a stop signal to
# study.py (the trainer stops as on its own signal and is recorded), runs without step_ms,
# which edits of the study file count as other settings, names and values the study file
# refuses, the summary table's escaping and its time-to-target steps; and scripts/plot_scaling.py
# (repeated rows, a network that is no file name). Review of 2026-12-07. Then (review of
# 2026-12-08): printing keys edited in the base config, quoted '#' in it, an --out with ' #',
# a missing base, an empty creates path, YAML merge keys and keys that are no text, the bytes
# pairing, and --report-only's cells not compared.
#   study_records_test.sh PYTHON STUDY_PY TRAIN_BINARY
set -uo pipefail
PY=$1
STUDY_PY=$2
TRAIN=$(realpath "$3")
SCRIPTS=$(dirname "$STUDY_PY")

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
OUT=$T/out

# expect, check, count.
source "$(dirname "${BASH_SOURCE[0]}")/study_checks.sh"
json_set() {  # json_set FILE KEY VALUE_AS_JSON: one key of study.json (null: removed)
  "$PY" - "$@" <<'PYEOF'
import json, sys
path, key, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
r = json.load(open(path))
r.pop(key, None) if value is None else r.__setitem__(key, value)
json.dump(r, open(path, "w"))
PYEOF
}
summary_check() {  # summary_check NAME SUMMARY_JSON PYTHON: asserts on `cells` (name -> row)
  check "$1" "$PY" -c "
import json, sys
cells = {c['name']: c for c in json.load(open(sys.argv[1]))['cells']}
$3" "$2"
}

cat >"$T/tiny.yaml" <<EOF
name: tiny
base: configs/default.yaml
world_size: 1
launcher:
common: [train.steps=12, train.eval_interval=6, train.eval_batches=2, optim.warmup_steps=2,
         log.progress_interval=6]
seeds: [1, 2]
reference: dense
metric: loss
target: 5.3
cells:
  dense: {set: [compress.name=none], label: dense f32}
  lbs: [compress.name=lbs]
EOF
expect "the study runs" 0 "summary:" -- "$T/tiny.yaml" --out "$OUT"

# A copy of the study (cp -r writes study.json before metrics.jsonl, so it is the older)
# keeps its runs as they were: mtimes alone made them runs by hand, timed by step_ms.
cp -r "$OUT" "$T/copy"
touch -d '1 minute ago' "$T"/copy/*/seed*/study.json
expect "a copied study is reported" 0 "summary:" -- "$T/tiny.yaml" --out "$T/copy" --report-only
summary_check "a copied study keeps its study.json" "$T/copy/summary.json" "
assert all(c['wall_source'] == 'measured' and c['seeds_finished'] == [1, 2] for c in cells.values()), cells"
# A touch of metrics.jsonl makes no failed run finished, and a rerun's settings stay compared.
json_set "$T/copy/dense/seed1/study.json" returncode 1
touch -d '1 minute ago' "$T/copy/dense/seed1/study.json"
touch "$T/copy/dense/seed1/metrics.jsonl"
expect "a touch is listed" 0 "dense " -- "$T/tiny.yaml" --out "$T/copy" --list
check "a touch revives no failed run" grep -q "seed1: failed (exit status 1), last step 12, after its end record" <<<"$last"
# A study.json from before the fingerprint is judged by time, as it was: one a minute older
# than metrics.jsonl is of an earlier attempt (ignored), one as old is the run's.
json_set "$T/copy/dense/seed1/study.json" metrics_fingerprint null
json_set "$T/copy/dense/seed2/study.json" metrics_fingerprint null
touch -d '1 minute ago' "$T/copy/dense/seed1/study.json"
touch "$T/copy/dense/seed2/metrics.jsonl" "$T/copy/dense/seed2/study.json"
expect "older study.json files" 0 "dense " -- "$T/tiny.yaml" --out "$T/copy" --list
check "an old study.json older than its metrics is ignored" grep -q "seed1: finished$" <<<"$last"
json_set "$T/copy/dense/seed2/study.json" returncode 1
expect "older study.json files again" 0 "dense " -- "$T/tiny.yaml" --out "$T/copy" --list
check "an old study.json as old as its metrics counts" grep -q "seed2: failed (exit status 1)" <<<"$last"

# What counts as other settings: the overrides as a mapping (order aside), and not the keys
# that only change what is printed; a real change still does.
sed -e 's/^common: .*/common: [train.eval_interval=6, train.steps=12, optim.warmup_steps=2, train.eval_batches=2,/' \
    -e 's/^         log.progress_interval=6\]/         log.progress_interval=0, log.per_rank_timing=true]/' \
    "$T/tiny.yaml" >"$T/reordered.yaml"
check "the reordered study differs" test "$(grep -c 'train.eval_interval=6, train.steps' "$T/reordered.yaml")" -eq 1
expect "reordered common and printing keys" 0 "dense " -- "$T/reordered.yaml" --out "$OUT" --list
check "they change no run" test "$(count 'seed[12]: finished$')" -eq 4
sed 's/optim.warmup_steps=2/optim.warmup_steps=3/' "$T/reordered.yaml" >"$T/warmup.yaml"
expect "a trained key still counts" 0 "seed1: finished with other settings \(now optim.warmup_steps=3; was optim.warmup_steps=2\)" -- "$T/warmup.yaml" --out "$OUT" --list
check "a section after its key is another run than before it" "$PY" -c "
import sys
sys.path.insert(0, sys.argv[1])
from study.settings import run_definition
a = ['t', '--config', 'c.yaml', '--set', 'train.steps=6', '--set', 'train={steps: 3}']
b = ['t', '--config', 'c.yaml', '--set', 'train={steps: 3}', '--set', 'train.steps=6']
assert run_definition(a) != run_definition(b) and run_definition(a) == run_definition(a[:3] + a[5:])
" "$SCRIPTS"

# Ctrl-C, SIGTERM or SIGHUP to study.py stops the trainer as its own signal would, waits for
# it, records its exit status and ends with 128 + the signal. SIGTERM and SIGHUP left the
# trainer running; Ctrl-C SIGKILLed it 0.25 s later, before its end record.
printf '#!/bin/sh\necho $$ >"%s/trainer.pid"\nexec "$@"\n' "$T" >"$T/pid.sh"
chmod +x "$T/pid.sh"
sed -e "s|^launcher:.*|launcher: $T/pid.sh|" -e 's/train.steps=12/train.steps=5000/' \
  "$T/tiny.yaml" >"$T/long.yaml"
cat >"$T/stop.py" <<'PYEOF'
import os, signal, subprocess, sys, time
py, study_py, study, out, binary, name = sys.argv[1:7]
# Started with SIGINT at its default: a background job of a script ignores it.
p = subprocess.Popen([py, study_py, study, "--out", out, "--only", "dense", "--seeds", "1",
                      "--binary", binary], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), text=True)
metrics = os.path.join(out, "dense", "seed1", "metrics.jsonl")
for _ in range(1200):  # until the trainer has written a step
    if os.path.exists(metrics) and os.path.getsize(metrics) > 0:
        break
    time.sleep(0.05)
p.send_signal(getattr(signal, name))
try:
    output = p.communicate(timeout=120)[0]
except subprocess.TimeoutExpired:
    p.kill()
    output = p.communicate()[0]
print(output)
sys.exit(p.returncode)
PYEOF
for sig in TERM:143:143 INT:130:130 HUP:129:143; do
  IFS=: read -r name want_rc want_run_rc <<<"$sig"
  rm -f "$T/trainer.pid"
  last=$("$PY" "$T/stop.py" "$PY" "$STUDY_PY" "$T/long.yaml" "$T/out_$name" "$TRAIN" "SIG$name" 2>&1)
  rc=$?
  check "SIG$name ends study.py with $want_rc" test "$rc" -eq "$want_rc"
  pid=$(cat "$T/trainer.pid" 2>/dev/null)
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    echo "FAIL SIG$name left the trainer running"; failures=$((failures + 1))
    kill "$pid"  # the test's own trainer
  else
    echo "ok   SIG$name leaves no trainer"
  fi
  check "SIG$name: the trainer stopped cleanly" grep -q '"stopped_early":true,"stop_signal":"SIG' "$T/out_$name/dense/seed1/metrics.jsonl"
  check "SIG$name: its exit status recorded" grep -q "\"returncode\": $want_run_rc," "$T/out_$name/dense/seed1/study.json"
done

# Step records without step_ms (an older trainer's), in runs made by hand: their wall time
# and time to target are unknown, not 0 (the fastest).
cp -r "$OUT" "$T/nostepms"
rm "$T"/nostepms/*/seed*/study.json
for f in "$T"/nostepms/dense/seed*/metrics.jsonl; do
  sed -i 's/"step_ms":[0-9.e+-]*,//' "$f"
done
expect "runs without step_ms reported" 0 "summary:" -- "$T/tiny.yaml" --out "$T/nostepms" --report-only
summary_check "their time is unknown" "$T/nostepms/summary.json" "
d = cells['dense']
assert d['wall_s']['mean'] is None and d['wall_source'] == 'unknown', d
assert d['time_to_target']['seeds_reached'] and d['time_to_target']['seconds'] is None, d
assert cells['lbs']['wall_source'] == 'step_ms' and cells['lbs']['wall_s']['mean'] > 0, cells['lbs']"
check "unknown time shown as such" grep -q "^| dense | .* | – (no step_ms) | – @ step" "$T/nostepms/summary.md"
check "an unknown time is no point of eval_vs_time.png" "$PY" -c "
import math, sys
sys.path.insert(0, sys.argv[1])
from study.plots import _aligned
x, y, _ = _aligned([[1.0, 2.0], [None, 3.0]], lambda r: [6, 12], lambda r: [5, 4], lambda r: r)
assert math.isnan(x[0]) and x[1] == 2.5, x
" "$SCRIPTS"

# Seeds reaching the target at different evals: the steps, not their mean (no eval step).
cp -r "$OUT" "$T/steps"
sed -i 's/^\({"event":"eval","step":6,"loss":\)[0-9.]*/\19.9/' "$T/steps/dense/seed2/metrics.jsonl"
expect "the target at two steps" 0 "summary:" -- "$T/tiny.yaml" --out "$T/steps" --report-only
check "the steps' range" grep -q "^| dense | .* s @ steps 6-12 |" "$T/steps/summary.md"
summary_check "the steps listed" "$T/steps/summary.json" "
assert cells['dense']['time_to_target']['steps'] == [6, 12], cells['dense']['time_to_target']"

# A label with '|' or a line break stays one cell of the table.
sed 's/label: dense f32}/label: "dense | f32\\nsecond line"}/' "$T/tiny.yaml" >"$T/pipe.yaml"
expect "a label with | reported" 0 "summary:" -- "$T/pipe.yaml" --out "$OUT" --report-only
check "its row has the header's cells" "$PY" -c "
import re, sys
rows = [l for l in open(sys.argv[1]) if l.startswith('| ')]
cells = lambda l: len(re.split(r'(?<!\\\\)\|', l))
assert cells(rows[1]) == cells(rows[0]) and 'dense \\\\| f32 second line' in rows[1], rows[:2]
" "$OUT/summary.md"

# Names and values the study file refuses.
sed 's/^  lbs: /  summary.md: /' "$T/tiny.yaml" >"$T/report_name.yaml"
expect "a cell named as a report" 2 "cells.summary.md: 'summary.md' is the name of a report" -- "$T/report_name.yaml" --out "$T/out_names" --dry-run
sed 's/^  lbs: /  curves.png: /' "$T/tiny.yaml" >"$T/png_name.yaml"
expect "a cell named as a plot" 2 "cells.curves.png: 'curves.png' is the name of a report" -- "$T/png_name.yaml" --out "$T/out_names" --dry-run
for bad in .inf .nan; do
  sed "s/^target: .*/target: $bad/" "$T/tiny.yaml" >"$T/target.yaml"
  expect "target $bad refused" 2 "target: must be a finite number" -- "$T/target.yaml" --out "$T/out_names" --dry-run
done

# plot_scaling.py: a row repeated in two CSVs would be drawn as one zigzag line; a network
# that is no file name stays in OUT_DIR.
printf 'model,network,world,cell,efficiency\ngpt2,1g,2,dense,0.5\ngpt2,1g,4,dense,0.4\n' >"$T/a.csv"
printf 'model,network,world,cell,efficiency\ngpt2,1g,2,dense,0.6\n' >"$T/b.csv"
last=$("$PY" "$SCRIPTS/plot_scaling.py" "$T/plots" "$T/a.csv" "$T/b.csv" 2>&1)
check "a repeated row is refused" test $? -ne 0
check "naming both files" grep -q "$T/b.csv, line 2: .*world 2 is also in $T/a.csv, line 2" <<<"$last"
sed 's|,1g,|,../x,|' "$T/a.csv" >"$T/slash.csv"
last=$("$PY" "$SCRIPTS/plot_scaling.py" "$T/plots" "$T/slash.csv" 2>&1)
check "a network with a slash is plotted" test $? -eq 0
check "into OUT_DIR" test -s "$T/plots/gpt2_.._x.png"

# Review of 2026-12-08. An edit of a printing key in the base config reruns nothing (the
# study command already left them out; the base-config comparison did not).
cp "$SCRIPTS/../configs/default.yaml" "$T/pbase.yaml"
sed -e "s|^base: .*|base: $T/pbase.yaml|" -e '/^common:/,/\]/c common: [train.steps=12, train.eval_interval=6, train.eval_batches=2, optim.warmup_steps=2]' \
  "$T/tiny.yaml" >"$T/pstudy.yaml"
check "pstudy leaves progress_interval to the base" bash -c "! grep -q progress_interval '$T/pstudy.yaml'"
expect "own base runs" 0 "dense seed1: running" -- "$T/pstudy.yaml" --out "$T/out_print" --only dense --seeds 1
sed -i 's/^\(\s*progress_interval:\).*/\1 50/' "$T/pbase.yaml"
check "the base config has progress_interval to edit" grep -q "progress_interval: 50" "$T/pbase.yaml"
expect "a printing key's edit in the base reruns nothing" 0 "seed1: finished$" -- "$T/pstudy.yaml" --out "$T/out_print" --only dense --seeds 1 --list
# A quoted value edited after ' #' is an edit (comment stripping by pattern missed it).
check "an edit inside a quoted '#' counts" "$PY" -c "
import sys; sys.path.insert(0, sys.argv[1])
from study.settings import config_lines
assert config_lines('a: \"x #1\"\n') != config_lines('a: \"x #2\"\n')
assert config_lines('a: 1  # one\n') == config_lines('a: 1  # two\n')" "$SCRIPTS"
# An --out with ' #' and ': ' in it: log.metrics goes to the trainer quoted.
expect "an --out with ' #' runs" 0 "done in" -- "$T/tiny.yaml" --out "$T/run #1: a" --only dense --seeds 1
check "its metrics are where they belong" test -s "$T/run #1: a/dense/seed1/metrics.jsonl"
# A base config that is not there is a bad study file, before any prepare step or run.
sed "s|^base: .*|base: configs/nope.yaml|" "$T/tiny.yaml" >"$T/nobase.yaml"
expect "a missing base is refused" 2 "base: configs/nope.yaml not found" -- "$T/nobase.yaml" --out "$T/out_nobase" --dry-run
# An empty creates path (the repository root, always there) skipped its step for good.
printf 'prepare:\n  - {run: "echo hi", creates: ""}\n' | cat "$T/tiny.yaml" - >"$T/emptycreates.yaml"
expect "an empty creates path is refused" 2 "prepare\[0\].creates: an empty path" -- "$T/emptycreates.yaml" --out "$T/out_names" --dry-run
# YAML merge keys are YAML; a key that is no text is an error, not a traceback.
sed '/^cells:/,$d' "$T/tiny.yaml" >"$T/merge.yaml"
printf 'cells:\n  dense: &d {set: [compress.name=none], label: dense f32}\n  lbs: {<<: *d, set: [compress.name=lbs]}\n' >>"$T/merge.yaml"
expect "a merge key is read" 0 "would run" -- "$T/merge.yaml" --out "$T/out_merge" --dry-run
printf '  ? [a]\n  : [compress.name=lbs]\n' | cat "$T/merge.yaml" - >"$T/listkey.yaml"
expect "a list as a key is refused" 2 "a key that is not text" -- "$T/listkey.yaml" --out "$T/out_names" --dry-run
# The bytes x figure pairs the seeds of the vs figure: a seed with a null final metric paired
# the bytes over other seeds.
check "bytes are paired over the vs seeds" "$PY" -c "
import sys; sys.path.insert(0, sys.argv[1])
from types import SimpleNamespace as R
from study.report import paired_means
cell = R(runs=[R(seed=1, final_metric=1.0, bytes_per_step=10), R(seed=2, final_metric=None, bytes_per_step=30)])
ref = R(runs=[R(seed=1, final_metric=2.0, bytes_per_step=100), R(seed=2, final_metric=2.0, bytes_per_step=300)])
_, _, shared = paired_means(cell, ref, 'final_metric')
assert shared == [1], shared
assert paired_means(cell, ref, 'bytes_per_step', shared)[:2] == (10, 100)
assert paired_means(cell, ref, 'bytes_per_step', [])[:2] == (None, None)" "$SCRIPTS"
# --report-only says which cells are not compared, as summary.md does.
sed -e 's/^  lbs: \[compress.name=lbs\]/  lbs: [compress.name=lbs, train.steps=8]/' "$T/tiny.yaml" >"$T/horizon.yaml"
check "horizon.yaml sets lbs's steps" grep -q "train.steps=8]" "$T/horizon.yaml"
expect "two horizons run" 0 "summary:" -- "$T/horizon.yaml" --out "$T/out_horizon" --seeds 1
expect "--report-only names the cell at another horizon" 0 "lbs: it ends at step 8, the reference dense at step 12: compared with no cell" -- "$T/horizon.yaml" --out "$T/out_horizon" --report-only

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
