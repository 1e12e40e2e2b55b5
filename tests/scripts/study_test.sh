#!/usr/bin/env bash
# scripts/study.py end to end with the train app as one process (world size 1, no launcher):
# a tiny study of 2 cells x 2 seeds runs, reports (summary.md/.json, 4 PNGs), resumes without
# rerunning finished runs, reruns an unfinished one (unless it looks busy), regenerates the
# report with --report-only, and carries on past a failing cell with a nonzero exit status.
# Also: what counts as finished (a complete metrics file at the study's horizon), the run
# lock, the .prev folders, report failures, quoting in prepare lines, base-config edits.
#   study_test.sh STUDY_PY TRAIN_BINARY
set -uo pipefail
STUDY_PY=$1
# study.py resolves --binary (so {bin_dir} is absolute); the expected texts below do too.
TRAIN=$(realpath "$2")

# Debian's python3 has python3-yaml and python3-matplotlib; a python3 earlier in PATH may not.
PY=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c "import yaml, matplotlib" 2>/dev/null; then
    PY=$candidate
    break
  fi
done
if [[ -z "$PY" ]]; then
  echo "SKIP: no python3 with yaml and matplotlib (scripts/install_deps.sh installs them)"
  exit 77  # ctest: skipped (SKIP_RETURN_CODE, tests/scripts/CMakeLists.txt)
fi

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
OUT=$T/out

# expect, check, count.
source "$(dirname "${BASH_SOURCE[0]}")/study_checks.sh"
set_rc() {  # set_rc STUDY_JSON RC: what study.py recorded as the run's exit status
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1])); r["returncode"] = int(sys.argv[2]); json.dump(r, open(sys.argv[1], "w"))
PYEOF
}
refingerprint() {  # refingerprint RUN_DIR: study.json as if written after the metrics as they are
  "$PY" - "$1" <<'PYEOF'
import hashlib, json, sys
data = open(sys.argv[1] + "/metrics.jsonl", "rb").read()
r = json.load(open(sys.argv[1] + "/study.json"))
r["metrics_fingerprint"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
json.dump(r, open(sys.argv[1] + "/study.json", "w"))
PYEOF
}
truncate_run() {  # truncate_run METRICS STEP: the run as if it had trained STEP steps
  "$PY" - "$1" "$2" <<'PYEOF'
import json, sys
path, step = sys.argv[1], int(sys.argv[2])
records = [json.loads(l) for l in open(path) if l.strip()]
end = dict(records[-1], step=step)
kept = [r for r in records if r["event"] != "end" and r["step"] <= step] + [end]
open(path, "w").write("".join(json.dumps(r) + "\n" for r in kept))
PYEOF
}

# $T is expanded here; {bin_dir} and {world_size} are study.py's placeholders.
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
prepare:
  - creates: $T/prepared.txt
    run: echo "{bin_dir} {world_size}" >>"$T/prepared.txt"
cells:
  dense: {set: [compress.name=none], label: dense f32}
  lbs: [compress.name=lbs, compress.lbs.density=0.01, compress.lbs.bits=4]
EOF
# The same cells plus one the trainer refuses (a misspelt key), seed 1 only.
sed -e 's/^seeds: .*/seeds: [1]/' "$T/tiny.yaml" >"$T/bad.yaml"
echo "  typo: [compress.lbs.densty=0.01]" >>"$T/bad.yaml"

expect "dry run prints commands" 0 "would run" -- "$T/tiny.yaml" --out "$OUT" --dry-run
check "dry run runs nothing" test ! -e "$OUT"
# A missing binary is exit 2 in a dry run too, as in a real run and --check: the commands it
# would print could not run.
SAVED_TRAIN=$TRAIN
TRAIN=$T/nonexistent/train
expect "dry run needs the binary" 2 "binary $T/nonexistent/train not found" -- "$T/tiny.yaml" --out "$OUT" --dry-run
check "no command printed without it" test "$(count 'would run')" -eq 0
expect "--check needs the binary" 2 "binary $T/nonexistent/train not found" -- "$T/tiny.yaml" --out "$OUT" --check
TRAIN=$SAVED_TRAIN
check "nothing made without it" test ! -e "$OUT"
expect "--seeds picks seeds" 0 "\[2/2\] lbs seed2: would run" -- "$T/tiny.yaml" --out "$OUT" --dry-run --seeds 2
check "--seeds runs only those" test "$(count 'seed[0-9]+: would run')" -eq 2
expect "unknown --seeds seed" 2 "--seeds: '3' names no seed" -- "$T/tiny.yaml" --out "$OUT" --seeds 3
expect "list" 0 "seed2: missing" -- "$T/tiny.yaml" --out "$OUT" --list
# launcher: "" is "run the binary directly", as documented, like none and null (refused
# before: review, 2026-12-07).
sed 's/^launcher:$/launcher: ""/' "$T/tiny.yaml" >"$T/quoted_empty.yaml"
expect "an empty launcher string" 0 "seed2: missing" -- "$T/quoted_empty.yaml" --out "$OUT" --list
expect "check" 0 "lbs: ok" -- "$T/tiny.yaml" --out "$OUT" --check
expect "check refuses a bad key" 1 "typo: REFUSED.*densty" -- "$T/bad.yaml" --out "$OUT" --check
# --check runs each cell under the study's launcher: a check that depends on the number of
# ranks was made for one process (review, 2026-12-05). The launcher here records its call.
printf '#!/bin/sh\necho "$1" >>"%s/launched.txt"\nshift\nexec "$@"\n' "$T" >"$T/launch.sh"
chmod +x "$T/launch.sh"
sed -e 's/^world_size: 1/world_size: 2/' -e "s|^launcher:.*|launcher: $T/launch.sh {world_size}|" \
  "$T/tiny.yaml" >"$T/launched.yaml"
expect "check under the launcher" 0 "lbs: ok" -- "$T/launched.yaml" --out "$T/out_launched" --check
check "check used the launcher" test "$(cat "$T/launched.txt")" == "$(printf '2\n2')"

expect "first run" 0 "summary:" -- "$T/tiny.yaml" --out "$OUT"
check "prepare ran once" test "$(cat "$T/prepared.txt")" == "$(dirname "$TRAIN") 1"
check "four runs done" test "$(count '  done in')" -eq 4
for f in summary.md summary.json eval_vs_step.png eval_vs_bytes.png eval_vs_time.png train_loss.png; do
  check "$f written" test -s "$OUT/$f"
done
for run in dense/seed1 dense/seed2 lbs/seed1 lbs/seed2; do
  check "$run layout" test -s "$OUT/$run/metrics.jsonl" -a -s "$OUT/$run/train.log" -a -s "$OUT/$run/study.json"
done
check "table has both cells" grep -q "^| dense | dense f32 | 2/2 |" "$OUT/summary.md"
check "table has lbs" grep -q "^| lbs | lbs | 2/2 |" "$OUT/summary.md"
check "summary.json numbers" "$PY" -c "
import json, sys
s = json.load(open(sys.argv[1]))
cells = {c['name']: c for c in s['cells']}
assert list(cells) == ['dense', 'lbs'], cells.keys()
for c in cells.values():
    assert c['seeds_finished'] == [1, 2], c
    assert c['final_metric']['n'] == 2 and c['final_metric']['std'] is not None, c
    assert c['wall_source'] == 'measured', c
assert cells['dense']['vs_reference_pct'] == 0.0
" "$OUT/summary.json"

# A finished run whose final metric is null (not finite) is said, and the means stay paired.
cp -r "$OUT" "$T/out_null"
"$PY" - "$T/out_null/lbs/seed2/metrics.jsonl" <<'PYEOF'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
last = max(i for i, l in enumerate(lines) if json.loads(l).get("event") == "eval")
record = json.loads(lines[last]); record["loss"] = None; lines[last] = json.dumps(record)
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PYEOF
refingerprint "$T/out_null/lbs/seed2"  # the trainer wrote that null
expect "null final metric reported" 0 "summary" -- "$T/tiny.yaml" --out "$T/out_null" --report-only
check "null final metric listed" grep -q "lbs\` seed 2: finished without a final loss" "$T/out_null/summary.md"
check "vs dense paired over seed 1" "$PY" -c "
import json, sys
cells = {c['name']: c for c in json.load(open(sys.argv[1]))['cells']}
assert cells['lbs']['vs_reference_seeds'] == [1], cells['lbs']['vs_reference_seeds']
" "$T/out_null/summary.json"
# The mean over the one seed with a final value says so, not passing for both (review, 12-07);
# a null step is a gap in the smoothed training loss, not a window-wide blank.
check "mean over fewer seeds says its n" grep -q "| lbs | .* | 2/2 | [0-9.]* (n=1) |" "$T/out_null/summary.md"
check "moving average skips a null step" "$PY" -c "
import sys, math; sys.path.insert(0, sys.argv[1]); from study.plots import _moving_average
y = _moving_average([1, 1, None, 3, 3, 3], 2)
assert math.isnan(y[2]) and list(y[[0, 1, 3, 4]]) == [1, 1, 3, 3], y
" "$(dirname "$STUDY_PY")"

sums=$(md5sum "$OUT"/*/seed*/metrics.jsonl)
expect "second run skips finished runs" 0 "skip \(finished\)" -- "$T/tiny.yaml" --out "$OUT"
check "all four skipped" test "$(count 'skip \(finished\)')" -eq 4
check "prepare skipped" test "$(count 'prepare 1/1: skip')" -eq 1
check "nothing rerun" test "$(count 'running')" -eq 0
check "metrics unchanged" test "$sums" == "$(md5sum "$OUT"/*/seed*/metrics.jsonl)"

# A run redone by hand after a failed study attempt counts: its study.json, of other metrics
# than those on disk (its fingerprint), describes the attempt, not the run (review,
# 2026-12-06). A touch of the file is no redo (study_records_test.sh).
cp -rp "$OUT" "$T/out_h"
set_rc "$T/out_h/dense/seed1/study.json" 1
"$PY" - "$T/out_h/dense/seed1/metrics.jsonl" <<'PYEOF'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in records))  # other bytes
PYEOF
expect "a run redone by hand is listed" 0 "dense " -- "$T/tiny.yaml" --out "$T/out_h" --list
check "a run redone by hand counts" test "$(count 'seed[12]: finished$')" -eq 4
# A run made by hand at another horizon is not this study's run: a 6-step run in a cell of
# 12-step runs would enter its mean and its "vs" (review).
rm "$T/out_h/dense/seed2/study.json"
truncate_run "$T/out_h/dense/seed2/metrics.jsonl" 6
expect "another horizon reported" 0 "summary" -- "$T/tiny.yaml" --out "$T/out_h" --report-only
check "another horizon left out" "$PY" -c "
import json, sys
cells = {c['name']: c for c in json.load(open(sys.argv[1]))['cells']}
assert cells['dense']['seeds_finished'] == [1], cells['dense']
" "$T/out_h/summary.json"
check "another horizon said" grep -q "dense\` seed 2: finished with other settings (it ended at step 6; this study's runs train 12 steps" "$T/out_h/summary.md"
# Finished means complete: a cut-off final eval line, or none, would make step 6's eval final.
sed -i 's/^\({"event":"eval","step":12,"loss":[0-9]\).*/\1/' "$T/out_h/lbs/seed1/metrics.jsonl"
sed -i '/^{"event":"eval","step":12,/d' "$T/out_h/lbs/seed2/metrics.jsonl"
expect "a cut-off final eval is unfinished" 0 "seed1: unfinished, .*1 unreadable line" -- "$T/tiny.yaml" --out "$T/out_h" --list
check "a missing final eval is unfinished" grep -qE "seed2: unfinished, last step 12, but no eval record at its end step 12 \(last eval: step 6\)" <<<"$last"
# Where the study does not say its horizon, a cell whose seeds end at different steps is
# flagged and compared with nothing.
grep -v '^  steps:' "$(dirname "$STUDY_PY")/../configs/default.yaml" >"$T/nosteps_base.yaml"
sed -e "s|^base: .*|base: $T/nosteps_base.yaml|" -e 's/train.steps=12, //' "$T/tiny.yaml" >"$T/nosteps.yaml"
cp -rp "$OUT" "$T/out_m"
rm "$T"/out_m/*/seed*/study.json
truncate_run "$T/out_m/dense/seed2/metrics.jsonl" 6
expect "mixed horizons reported" 0 "dense: its finished seeds end at different steps" -- "$T/nosteps.yaml" --out "$T/out_m" --report-only
check "mixed horizons not compared" "$PY" -c "
import json, sys
cells = {c['name']: c for c in json.load(open(sys.argv[1]))['cells']}
assert cells['dense']['end_steps'] == [6, 12], cells['dense']
assert cells['lbs']['vs_reference_pct'] is None and cells['lbs']['vs_reference_refused'], cells['lbs']
" "$T/out_m/summary.json"
check "mixed horizons said in summary.md" grep -q "^## Cells not compared" "$T/out_m/summary.md"
# A cell that ends at another step than the reference (all its seeds alike) is not compared
# either: its "vs" mixed horizons without a word (review, 2026-12-07).
cp -rp "$OUT" "$T/out_o"
rm "$T"/out_o/*/seed*/study.json
truncate_run "$T/out_o/lbs/seed1/metrics.jsonl" 6
truncate_run "$T/out_o/lbs/seed2/metrics.jsonl" 6
expect "another horizon than the reference reported" 0 "summary" -- "$T/nosteps.yaml" --out "$T/out_o" --report-only
check "another horizon than the reference not compared" "$PY" -c "
import json, sys
cells = {c['name']: c for c in json.load(open(sys.argv[1]))['cells']}
assert cells['lbs']['end_steps'] == [6], cells['lbs']
assert cells['lbs']['vs_reference_pct'] is None, cells['lbs']
assert 'the reference dense at step 12' in cells['lbs']['vs_reference_refused'], cells['lbs']
" "$T/out_o/summary.json"
check "another horizon than the reference said" grep -q "lbs\` *: it ends at step 6, the reference dense at step 12: compared with no cell" "$T/out_o/summary.md"

# An interrupted run: no end record. Freshly written, it may belong to a live run: left alone.
sed -i '$d' "$OUT/lbs/seed2/metrics.jsonl"
expect "recent unfinished run is busy" 3 "lbs seed2: skip: .*another process" -- "$T/tiny.yaml" --out "$OUT"
touch -d '10 minutes ago' "$OUT/lbs/seed2/metrics.jsonl"
expect "old unfinished run is rerun" 0 "lbs seed2: running \(unfinished run moved" -- "$T/tiny.yaml" --out "$OUT"
check "only that run reran" test "$(count '  done in')" -eq 1
check "old files moved aside" test -s "$OUT/lbs/seed2.prev/metrics.jsonl"
check "rerun finished" grep -q '"stopped_early":false' "$OUT/lbs/seed2/metrics.jsonl"

# A run that ended (its study.json, of these metrics, says how) is not busy: rerun at once.
sed -i '$d' "$OUT/lbs/seed2/metrics.jsonl"
touch -d '1 minute ago' "$OUT/lbs/seed2/metrics.jsonl"
set_rc "$OUT/lbs/seed2/study.json" 1
refingerprint "$OUT/lbs/seed2"
expect "an ended run is not busy" 0 "lbs seed2: running \(unfinished run moved" -- "$T/tiny.yaml" --out "$OUT"

# An end record does not make a run finished when the job exited nonzero (another rank, the
# export after training).
set_rc "$OUT/lbs/seed1/study.json" 1
expect "nonzero exit is not finished" 0 "seed1: failed \(exit status 1\), last step [0-9]+, after its end record" -- "$T/tiny.yaml" --out "$OUT" --list
set_rc "$OUT/lbs/seed1/study.json" 0

rm -f "$OUT"/summary.md "$OUT"/summary.json "$OUT"/*.png
mv "$OUT/dense/seed2" "$T/dense-seed2"
expect "report only" 0 "dense seed2: missing" -- "$T/tiny.yaml" --out "$OUT" --report-only
check "report only ran nothing" test ! -e "$OUT/dense/seed2"
for f in summary.md summary.json eval_vs_step.png eval_vs_bytes.png eval_vs_time.png train_loss.png; do
  check "$f rewritten" test -s "$OUT/$f"
done
check "missing run listed" grep -q "dense\` seed 2: missing" "$OUT/summary.md"
check "one dense seed counted" grep -q "^| dense | dense f32 | 1/2 |" "$OUT/summary.md"
check "vs dense over the shared seed" "$PY" -c "
import json, sys
s = json.load(open(sys.argv[1]))
cells = {c['name']: c for c in s['cells']}
assert cells['lbs']['seeds_finished'] == [1, 2], cells['lbs']
assert cells['lbs']['vs_reference_seeds'] == [1], cells['lbs']
" "$OUT/summary.json"
check "shared seed named in the table" grep -q "^| lbs | lbs | 2/2 | [^|]* | [-+][0-9.]* (seeds 1) |" "$OUT/summary.md"
mv "$T/dense-seed2" "$OUT/dense/seed2"

# A failing cell is reported with its log and the study goes on; the exit status says so.
expect "failing cell" 1 "FAILED runs \(1\): typo seed1" -- "$T/bad.yaml" --out "$OUT"
check "its log tail is shown" grep -q "| train: error: .*densty" <<<"$last"
check "failure in summary" grep -q "typo\` seed 1: failed (exit status 1)" "$OUT/summary.md"

# A report problem loses nothing: summary.md/summary.json are written before the plots, a
# plotting failure is a warning, and the FAILED line and exit status stay (review).
mkdir -p "$T/nompl/matplotlib"
echo 'raise ImportError("matplotlib broken for the test")' >"$T/nompl/matplotlib/__init__.py"
rm -f "$OUT/summary.md" "$OUT/summary.json"
PYTHONPATH="$T/nompl" expect "plots fail, runs still listed" 1 "FAILED runs \(1\): typo seed1" -- "$T/bad.yaml" --out "$OUT"
check "a plot failure is a warning" grep -q "warning: plots not written (ImportError" <<<"$last"
check "summary written without plots" grep -q "typo\` seed 1: failed (exit status 1)" "$OUT/summary.md"
rm -f "$OUT/summary.md"
mkdir "$OUT/summary.md"  # cannot be written
expect "a summary failure has its exit status" 4 "REPORT FAILED: summary.md/summary.json not written" -- "$T/tiny.yaml" --out "$OUT"
check "no traceback" test "$(count Traceback)" -eq 0
rmdir "$OUT/summary.md"

# {bin_dir} is quoted for where it stands in a prepare line: a folder with spaces and shell
# characters is one word, unquoted and inside '...' or "...", and none of it runs (review).
ODD="$T/bin dir;touch $T/injected;echo 'q' \"\$HOME\" #"
mkdir -p "$ODD"
printf '#!/bin/sh\nexit 9\n' >"$ODD/train"
chmod +x "$ODD/train"
cat >"$T/odd.yaml" <<YAML
name: odd
base: configs/default.yaml
launcher:
prepare:
  - creates: $T/never-made
    run: printf '%s\n' {bin_dir} "{bin_dir}" '{bin_dir}' >"$T/odd.txt"; exit 3
cells:
  dense: [compress.name=none]
YAML
SAVED_TRAIN=$TRAIN
TRAIN=$ODD/train
expect "odd binary folder" 1 "prepare 1/1: FAILED \(exit status 3\)" -- "$T/odd.yaml" --out "$T/out_odd"
TRAIN=$SAVED_TRAIN
check "odd folder passed as it is" test "$(cat "$T/odd.txt" 2>/dev/null)" == "$(printf '%s\n' "$ODD" "$ODD" "$ODD")"
check "nothing of it ran" test ! -e "$T/injected"

sed -e "s|creates: .*|creates: $T/never-made|" -e 's|run: .*|run: exit 3|' "$T/tiny.yaml" >"$T/noprep.yaml"
expect "failing prepare stops the study" 1 "prepare 1/1: FAILED \(exit status 3\); no cell was run" \
  -- "$T/noprep.yaml" --out "$T/out3"
check "no cell ran after it" test ! -e "$T/out3/dense"

# A cell whose settings changed in the study file since its runs finished: reported, then rerun.
sed 's/compress.lbs.density=0.01/compress.lbs.density=0.02/' "$T/tiny.yaml" >"$T/changed.yaml"
expect "changed settings listed" 0 "seed1: finished with other settings \(now compress.lbs.density=0.02; was compress.lbs.density=0.01\)" -- "$T/changed.yaml" --out "$OUT" --list
expect "changed settings rerun" 0 "lbs seed1: running \(its settings changed since it ran" -- "$T/changed.yaml" --out "$OUT" --only lbs --seeds 1
check "the rerun used the new setting" grep -q "compress.lbs.density=0.02" "$OUT/lbs/seed1/study.json"
expect "unchanged cells still skipped" 0 "dense seed1: skip \(finished\)" -- "$T/changed.yaml" --out "$OUT" --only dense --seeds 1
# A finished run moved aside (its settings changed) survives the next failed or interrupted
# rerun: the unfinished one goes to seed1.prev2 instead of replacing it (review).
sed -i '$d' "$OUT/lbs/seed1/metrics.jsonl"
touch -d '10 minutes ago' "$OUT/lbs/seed1/metrics.jsonl"
expect "a finished .prev is kept" 0 "lbs seed1: running \(unfinished run moved to seed1.prev2; seed1.prev kept \(finished\)\)" -- "$T/changed.yaml" --out "$OUT" --only lbs --seeds 1
check "the finished .prev is intact" grep -q "compress.lbs.density=0.01" "$OUT/lbs/seed1.prev/study.json"
check "the finished .prev still ends" grep -q '"stopped_early":false' "$OUT/lbs/seed1.prev/metrics.jsonl"
check "the unfinished run is in .prev2" test -s "$OUT/lbs/seed1.prev2/metrics.jsonl"

# seed_keys: a seed can set the compressor's seed too; a cell may then not set it itself.
sed 's/^seeds: \[1, 2\]$/seeds: [1, 2]\nseed_keys: [train.seed, compress.seed]/' "$T/tiny.yaml" >"$T/seedkeys.yaml"
expect "seed_keys set per seed" 0 "train.seed=2 --set compress.seed=2" -- "$T/seedkeys.yaml" --out "$T/out_seedkeys" --dry-run
echo "  own_seed: [compress.seed=5]" >>"$T/seedkeys.yaml"
expect "a cell may not set a seed key" 2 "compress.seed is a seed key" -- "$T/seedkeys.yaml" --out "$T/out_seedkeys" --dry-run

# Another launcher (another world size: its -np) is another run; it was taken as finished.
sed 's/^launcher:$/launcher: env STUDY_WORLD={world_size}/' "$T/tiny.yaml" >"$T/launched.yaml"
expect "another launcher listed" 0 "seed1: finished with other settings \(now env STUDY_WORLD=1\)" -- "$T/launched.yaml" --out "$OUT" --list

# An edit to the base config reruns the cells that ran before it; a comment edit does not.
cp "$(dirname "$STUDY_PY")/../configs/default.yaml" "$T/base.yaml"
sed "s|^base: .*|base: $T/base.yaml|" "$T/tiny.yaml" >"$T/own_base.yaml"
expect "own base runs" 0 "dense seed1: running" -- "$T/own_base.yaml" --out "$T/out4" --only dense --seeds 1
echo "# a comment only" >>"$T/base.yaml"
expect "comment edit skipped" 0 "dense seed1: skip \(finished\)" -- "$T/own_base.yaml" --out "$T/out4" --only dense --seeds 1
sed -i 's/^\(\s*lr:\).*/\1 0.002/' "$T/base.yaml"
check "the base config has an lr to edit" grep -q "lr: 0.002" "$T/base.yaml"
expect "base edit listed" 0 "seed1: finished with other settings \(.*base.yaml edited since it ran: optim.lr 0.003 -> 0.002\)" -- "$T/own_base.yaml" --out "$T/out4" --only dense --seeds 1 --list
expect "base edit rerun" 0 "dense seed1: running \(its settings changed since it ran: .*base.yaml edited" -- "$T/own_base.yaml" --out "$T/out4" --only dense --seeds 1
expect "the rerun is then finished" 0 "dense seed1: skip \(finished\)" -- "$T/own_base.yaml" --out "$T/out4" --only dense --seeds 1
# What counts is the config the trainer resolves (study.json keeps it): an edit of a key
# that the study's common overrides (train.steps) reruns nothing (review).
sed -i 's/^\(\s*steps:\).*/\1 77/' "$T/base.yaml"
check "the base config has steps to edit" grep -q "steps: 77" "$T/base.yaml"
expect "an overridden key's edit reruns nothing" 0 "dense seed1: skip \(finished\)" -- "$T/own_base.yaml" --out "$T/out4" --only dense --seeds 1
# A model key added to the base config appears in only the new resolved config (it lists
# the model's keys only when set): it was taken as no change (review, 2026-12-07).
sed -i 's/^\(\s*\)n_ctx: 64/\1n_ctx: 64\n\1n_layer: 1/' "$T/base.yaml"
check "the base config has an n_layer added" grep -q "n_layer: 1" "$T/base.yaml"
# Which one-sided keys count: a model key and a compressor's own setting, not a compress
# key the resolved config always lists (a newer trainer's; review, 2026-12-07).
check "one-sided keys that count" "$PY" -c "
import sys
sys.path.insert(0, sys.argv[1])
from study.settings import config_differences as d
base = 'compress:\n  name: lbs\n  lbs:\n    bits: 4\n'
assert d(base, base + '  density_warmup_steps: 0\n') == [], d(base, base + '  density_warmup_steps: 0\n')
assert d(base, base + '    density: 0.05\n') == ['compress.lbs.density (none) -> 0.05']
" "$(dirname "$STUDY_PY")"
# The horizon of a cell that sets the train section whole: its steps, or unknown (the section
# is replaced); it was the base config's, and every finished cell was rerun (review, 2026-12-07).
check "train.steps from a section override" "$PY" -c "
import sys
sys.path.insert(0, sys.argv[1])
from study.settings import study_steps
class Study: common = []
class Cell: overrides = []
base = 'train: {steps: 300}\n'
assert study_steps(Study, Cell, base) == 300
Cell.overrides = ['train={steps: 12, micro_batch: 4}']
assert study_steps(Study, Cell, base) == 12
Cell.overrides = ['train={micro_batch: 4}']
assert study_steps(Study, Cell, base) is None
Cell.overrides = ['train.steps=40']
assert study_steps(Study, Cell, base) == 40
" "$(dirname "$STUDY_PY")"
expect "an added model key is a change" 0 "seed1: finished with other settings \(.*base.yaml edited since it ran: model.n_layer \(none\) -> 1\)" -- "$T/own_base.yaml" --out "$T/out4" --only dense --seeds 1 --list

# A run being started by another study.py (no metrics.jsonl yet: its launcher waits) is
# busy: that process holds the run's lock, so a second one neither moves nor reruns it.
printf '#!/bin/sh\nshift\nfor i in $(seq 300); do [ -e "%s/go" ] && break; sleep 0.1; done\nexec "$@"\n' "$T" >"$T/wait.sh"
chmod +x "$T/wait.sh"
sed "s|^launcher:.*|launcher: $T/wait.sh {world_size}|" "$T/tiny.yaml" >"$T/waiting.yaml"
"$PY" "$STUDY_PY" "$T/waiting.yaml" --out "$T/out_lock" --only dense --seeds 1 --binary "$TRAIN" >"$T/first.txt" 2>&1 &
first=$!
for i in $(seq 100); do [[ -e "$T/out_lock/dense/seed1/train.log" ]] && break; sleep 0.1; done
expect "a starting run is listed as running" 0 "seed1: being run by another study.py process" -- "$T/waiting.yaml" --out "$T/out_lock" --list
expect "a starting run is busy" 3 "dense seed1: skip: another study.py process is running it" -- "$T/waiting.yaml" --out "$T/out_lock" --only dense --seeds 1
touch "$T/go"
wait $first
check "the first process finished its run" grep -q "done in" "$T/first.txt"
check "nothing was moved aside" test ! -e "$T/out_lock/dense/seed1.prev"
rm -rf "$T/out_lock/dense/seed1"
expect "a lock file alone is no run" 0 "seed1: missing" -- "$T/waiting.yaml" --out "$T/out_lock" --list

# More: the fingerprint of a run's metrics, stop signals, runs without step_ms, what counts
# as other settings, refused names and targets, the table's escaping, plot_scaling.py.
if bash "$(dirname "${BASH_SOURCE[0]}")/study_records_test.sh" "$PY" "$STUDY_PY" "$TRAIN"; then
  echo "ok   study_records_test.sh"
else
  echo "FAIL study_records_test.sh"
  failures=$((failures + 1))
fi

expect "bad study file" 2 "cells.lbs.labl: unknown key" -- <(sed 's/label: dense f32/label: x/; s/  lbs: \[.*\]/  lbs: {labl: y}/' "$T/tiny.yaml")
expect "unknown --only cell" 2 "--only: unknown cell" -- "$T/tiny.yaml" --out "$OUT" --only nope

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"
