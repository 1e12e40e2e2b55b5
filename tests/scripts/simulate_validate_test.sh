#!/usr/bin/env bash
# scripts/simulate_validate.py and the simulate options it drives, on hand-made records:
#  - simulate --compute-ms F,B,O replaces the profile's optimizer time, and F,B keeps it;
#  - --busy-comm-rate, --compute-ms and --cell-set refuse bad values with a message naming them;
#  - --cell-set passes a --set to one cell's simulations;
#  - a cell measured in two runs gets both errors and their median, and the counts;
#  - a cell measured twice in one run counts once, by its latest record (cluster_report.py's rule);
#  - a cell's repetitions (rep, bench_cluster.sh's REPS) count together: the median over those that
#    measured, a failed one left out, with their count and IQR in the table; records without rep
#    get no such columns;
#  - missing inputs, a failing simulate and bad CSV values are one-line errors, no traceback
#    (simulate_validate.py and plot_scaling.py);
#  - a record without a key the script reads is a one-line error naming file, line, run and
#    cell; records of a model the script does not know are skipped and said, model by model.
#   simulate_validate_test.sh <source dir> <simulate binary>
set -euo pipefail
src=$1
sim=$2
if ! command -v python3 >/dev/null 2>&1; then
  echo "SKIP: no python3"
  exit 77  # ctest: skipped (SKIP_RETURN_CODE, tests/scripts/CMakeLists.txt)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src"
fail() { echo "FAIL: $*" >&2; exit 1; }

common=(--config configs/bench/gpt2_tiny.yaml --set train.micro_batch=8 --set data.seq_len=128
        --profile profiles/this_machine_gpt2-tiny.yaml --network 1gbit --world 2 --cells lbs_allgather)
"$sim" "${common[@]}" --compute-ms 300,30,123.5 > "$work/three.txt"
grep -q "optimizer 123.50 ms" "$work/three.txt" || fail "--compute-ms F,B,O did not set the optimizer: $(grep optimizer "$work/three.txt")"
"$sim" "${common[@]}" --compute-ms 300,30 > "$work/two.txt"
grep -q "optimizer 123.50 ms" "$work/two.txt" && fail "--compute-ms F,B changed the optimizer"
# Bad arguments exit 2 (Note [App exit codes]), naming the option; they exited 1 after the
# profile and config were read (review, 2026-12-06).
for bad in "300" "300,,30" "300,x" "1,2,3,4" "12abc,5" "300,5xyz" "1e400,5"; do
  rc=0
  "$sim" "${common[@]}" --compute-ms "$bad" > "$work/bad.txt" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "--compute-ms '$bad' exited $rc, want 2"
  grep -q -- "--compute-ms" "$work/bad.txt" || fail "the error for --compute-ms '$bad' does not name it"
done
for bad in "--cells bogus" "--allreduce fastest" "--gather tree" "--world 0"; do
  rc=0
  # shellcheck disable=SC2086  # the option and its value, split on purpose
  "$sim" --config configs/bench/gpt2_tiny.yaml --profile profiles/this_machine_gpt2-tiny.yaml \
      --network 1gbit $bad > "$work/bad.txt" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "$bad exited $rc, want 2: $(cat "$work/bad.txt")"
  grep -q -- "${bad%% *}" "$work/bad.txt" || fail "the error for $bad does not name it: $(cat "$work/bad.txt")"
done
# --buckets P printed nothing when P was not one of the --world sizes (review).
rc=0
"$sim" "${common[@]}" --buckets 3 > "$work/bad.txt" 2>&1 || rc=$?
[[ $rc -eq 2 ]] || fail "--buckets 3 with --world 2 exited $rc, want 2"
grep -q -- "--buckets 3: not one of the --world sizes (2)" "$work/bad.txt" || fail "no message for --buckets 3: $(cat "$work/bad.txt")"
# A config with comm.plan: auto prices each cell's fixed plan and, beside each compressed
# cell, its automatic plan (simulate_auto_plan_test.sh has the details); the dense cell
# refused the automatic plan and ended the run (review, 2026-12-06).
"$sim" --config configs/gpt2_wikitext_tiny.yaml --profile profiles/h100_node.yaml --network 10gbit \
    --world 2 --set comm.plan=auto --set comm.plan_profile=profiles/h100_node.yaml \
    --set comm.plan_network=10gbit > "$work/auto.txt" 2>&1 || fail "comm.plan: auto: $(cat "$work/auto.txt")"
grep -q "comm.plan: auto: each compressed cell also gets a row <cell>+auto" "$work/auto.txt" ||
  fail "no note for comm.plan: auto: $(cat "$work/auto.txt")"
grep -q " dense_f32 " "$work/auto.txt" || fail "no dense_f32 row with comm.plan: auto"
# The tables come before a CSV written to standard output (it came first through a pipe).
"$sim" "${common[@]}" --csv /dev/stdout 2>/dev/null | cat > "$work/piped.txt"
first=$(head -1 "$work/piped.txt")
[[ $first != model,* ]] || fail "the CSV came before the tables: $first"
# The CSV's model column tells configs of one preset apart: it held the preset, so models of
# other sizes shared a label and plot_scaling.py drew them as one curve (review, 2026-12-06).
"$sim" --config configs/bench/gpt2_tiny.yaml --set model.n_layer=1 --profile profiles/h100_node.yaml \
    --network 10gbit --world 2 --cells dense_f32 --csv "$work/one_layer.csv" > /dev/null ||
  fail "simulate with model.n_layer=1"
model=$(sed -n 2p "$work/one_layer.csv" | cut -d, -f1)
[[ $model == "gpt2-tiny "*"n_layer=1"* ]] || fail "the CSV's model column is '$model'"
# A local clip scope holds every bucket until backward ends only when it clips (or on a GPU),
# as the trainer does (train::holds_buckets_for_local_norm); the sweep priced update mode
# without clipping as held (review, 2026-12-07).
exposed() {  # exposed EXTRA...: dense_f32's exposed ms at P=4
  "$sim" --config configs/gpt2_wikitext_tiny.yaml --profile profiles/this_machine_gpt2-tiny.yaml \
    --network 1gbit --world 4 --cells dense_f32 --set optim.communicate=update \
    --set model.n_ctx=128 --set data.seq_len=128 "$@" 2>/dev/null | awk '$2 == "dense_f32" {print $4}'
}
[[ "$(exposed --set optim.clip_norm=0)" != "$(exposed --set optim.clip_norm=0 --set comm.overlap=false)" ]] ||
  fail "update mode without clipping was priced without overlap"
[[ "$(exposed --set optim.clip_norm=1)" == "$(exposed --set optim.clip_norm=1 --set comm.overlap=false)" ]] ||
  fail "update mode with local clipping was priced with overlap"
[[ -n "$(exposed --set optim.clip_norm=1)" ]] || fail "no dense_f32 row to compare"
# NaN passed CLI11's range check and ended in the step model's fatal check (review).
for bad in nan 0 1.5 -1; do
  rc=0
  "$sim" "${common[@]}" --busy-comm-rate "$bad" > "$work/bad.txt" 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "--busy-comm-rate $bad exited $rc, want 2: $(cat "$work/bad.txt")"
  grep -q -- "--busy-comm-rate must be in (0, 1]" "$work/bad.txt" || fail "no message for --busy-comm-rate $bad: $(cat "$work/bad.txt")"
done

# Two runs of one lbs cell on gpt2-tiny, N=2 over 1 Gbit/s; the second 10% slower.
python3 - "$work/results.jsonl" <<'EOF'
import json, sys
base = {"model": "gpt2-tiny", "world": 2, "link": "1gbit", "cell": "sparq_lbs", "status": "ok",
        "forward_ms": 310.0, "backward_ms": 30.0, "optimizer_ms": 18.0, "exposed_comm_ms": 10.0,
        "sparq_bytes_sent": 140000.0}
with open(sys.argv[1], "w") as f:
    for run, step in (("A", 370.0), ("B", 407.0)):
        f.write(json.dumps(dict(base, run=run, step_ms=step)) + "\n")
    f.write(json.dumps(dict(base, run="C", step_ms=1.0, status="failed")) + "\n")
EOF
validate=(python3 scripts/simulate_validate.py --results "$work/results.jsonl" --simulate "$sim")
"${validate[@]}" --run A,B --out "$work/v" --busy-comm-rate 2:1gbit=0.78 2> "$work/log.txt"
python3 - "$work/v.csv" "$work/v.md" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [r["run"] for r in rows] == ["A", "B"], [r["run"] for r in rows]
assert all(r["busy_comm_rate"] == "0.78" for r in rows), rows
errors = [float(r["error"]) for r in rows]
pred = [float(r["predicted_step_ms"]) for r in rows]
assert abs(pred[0] - pred[1]) < 1e-6, f"same inputs, different predictions {pred}"
assert abs(errors[0] - (pred[0] - 370) / 370) < 1e-9 and abs(errors[1] - (pred[1] - 407) / 407) < 1e-9, errors
md = open(sys.argv[2]).read()
median = 100 * statistics.median(errors)
assert "Cells measured again (B)" in md, md
assert f"| {median:+.1f}%" in md, (median, md)
assert "cells within 15% of the measured step time in run A" in md, md
assert "Taking each repeated cell's median error" in md, md
print("simulate_validate.py OK: errors", [f"{100 * e:+.1f}%" for e in errors])
EOF
for bad in "2:1gbit=1.5" "2=0.5" "x:1gbit=0.5"; do
  if "${validate[@]}" --out "$work/w" --busy-comm-rate "$bad" > "$work/bad.txt" 2>&1; then
    fail "--busy-comm-rate '$bad' was accepted"
  fi
  grep -q "busy-comm-rate entry '$bad'" "$work/bad.txt" || fail "no message naming '$bad': $(cat "$work/bad.txt")"
done
# --cell-set prices one cell as its records ran where a default has changed since (run
# issue21_r3's PowerSGD split the tied table; review, 2026-12-08): here lbs with the split
# sends the lookup's rows too, so more bytes; the setting is named in the table's header.
"${validate[@]}" --run A --out "$work/split" --cell-set sparq_lbs=comm.split_tied_embedding=always 2>/dev/null
python3 - "$work/v.csv" "$work/split.csv" "$work/split.md" <<'EOF2'
import csv, sys
plain, split = (float(next(csv.DictReader(open(p)))["predicted_mb"]) for p in sys.argv[1:3])
assert split > 2 * plain, (plain, split)
assert "for sparq_lbs, `--set comm.split_tied_embedding=always`" in open(sys.argv[3]).read()
print(f"simulate_validate.py OK: --cell-set: {plain:.3f} -> {split:.3f} MB")
EOF2
for bad in "sparq_lbs" "sparq_lbs=x" "bogus=a=b" "sparq_lbs==1"; do
  if "${validate[@]}" --run A --out "$work/w" --cell-set "$bad" > "$work/bad.txt" 2>&1; then
    fail "--cell-set '$bad' was accepted"
  fi
  grep -q -- "--cell-set '$bad': expected CELL=KEY=VALUE" "$work/bad.txt" ||
    fail "no message naming '$bad': $(cat "$work/bad.txt")"
done
# Run D measures the cell twice (the older record far off, as a rerun in bench_cluster.sh leaves
# it), run E once: D's latest record alone counts, and every count is over the one cell.
python3 - "$work/rerun.jsonl" <<'EOF'
import json, sys
base = {"model": "gpt2-tiny", "world": 2, "link": "1gbit", "cell": "sparq_lbs", "status": "ok",
        "forward_ms": 310.0, "backward_ms": 30.0, "optimizer_ms": 18.0, "exposed_comm_ms": 10.0}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(dict(base, run="D", step_ms=2000.0, sparq_bytes_sent=81.88e6)) + "\n")
    f.write(json.dumps(dict(base, run="D", step_ms=370.0, sparq_bytes_sent=140000.0)) + "\n")
    f.write(json.dumps(dict(base, run="E", step_ms=407.0, sparq_bytes_sent=140000.0)) + "\n")
EOF
rerun=(python3 scripts/simulate_validate.py --results "$work/rerun.jsonl" --simulate "$sim"
       --busy-comm-rate 2:1gbit=0.78)
"${rerun[@]}" --run D --out "$work/d" 2> "$work/log_d.txt"
grep -q "1 record(s) replaced" "$work/log_d.txt" || fail "the replaced record is not reported: $(cat "$work/log_d.txt")"
"${rerun[@]}" --run D,E --out "$work/de" 2> "$work/log_de.txt"
python3 - "$work/d.csv" "$work/d.md" "$work/de.csv" "$work/de.md" <<'EOF'
import csv, sys
d, de = list(csv.DictReader(open(sys.argv[1]))), list(csv.DictReader(open(sys.argv[3])))
d_md, de_md = open(sys.argv[2]).read(), open(sys.argv[4]).read()
assert [(r["run"], r["measured_step_ms"]) for r in d] == [("D", "370.0")], d
assert abs(float(d[0]["measured_mb"]) - 0.14) < 1e-9, d
assert "1 of 1 cells within 15% of the measured step time in run D" in d_md, d_md
assert "Cells measured again" not in d_md, d_md
assert [(r["run"], r["measured_step_ms"]) for r in de] == [("D", "370.0"), ("E", "407.0")], de
assert "1 of 1 cells within 15% of the measured step time in run D" in de_md, de_md
assert "Cells measured again (E)" in de_md, de_md
assert "| 370, 407 |" in de_md, de_md
assert "median error: 1 of 1 cells of run D within 15%" in de_md, de_md
print("simulate_validate.py OK: a cell measured twice in run D counts once, by its latest record")
EOF
# Run R measures the cell in 3 repetitions (bench_cluster.sh's REPS), the second failed, the first
# rerun (its older record far off); run S holds one record (no rep) of the medians of R's two ok
# repetitions. R's cell is the median over repetitions 1 and 3, so R and S predict alike; its rep
# count and IQR are shown. The old-style tables above have no such columns.
python3 - "$work/reps.jsonl" <<'EOF'
import json, sys
base = {"model": "gpt2-tiny", "world": 2, "link": "1gbit", "cell": "sparq_lbs", "status": "ok",
        "backward_ms": 30.0, "exposed_comm_ms": 10.0, "sparq_bytes_sent": 140000.0}
with open(sys.argv[1], "w") as f:
    for rec in (dict(base, rep=1, step_ms=2000.0, forward_ms=900.0, optimizer_ms=90.0),
                dict(base, rep=1, step_ms=370.0, forward_ms=300.0, optimizer_ms=16.0),
                {k: v for k, v in dict(base, rep=2, status="failed").items() if k != "backward_ms"},
                dict(base, rep=3, step_ms=410.0, forward_ms=320.0, optimizer_ms=20.0,
                     exposed_comm_ms=30.0, sparq_bytes_sent=160000.0)):
        f.write(json.dumps(dict(rec, run="R")) + "\n")
    f.write(json.dumps(dict(base, run="S", step_ms=390.0, forward_ms=310.0, optimizer_ms=18.0,
                            exposed_comm_ms=20.0, sparq_bytes_sent=150000.0)) + "\n")
EOF
reps=(python3 scripts/simulate_validate.py --results "$work/reps.jsonl" --simulate "$sim"
      --busy-comm-rate 2:1gbit=0.78)
"${reps[@]}" --run R --out "$work/r" 2> "$work/log_r.txt" || fail "run R: $(cat "$work/log_r.txt")"
grep -q "1 record(s) replaced by a later record of the same cell and repetition" "$work/log_r.txt" ||
  fail "the rerun repetition is not reported: $(cat "$work/log_r.txt")"
grep -q "2 of 3 rep(s), step IQR 20 ms" "$work/log_r.txt" || fail "no repetitions on standard error: $(cat "$work/log_r.txt")"
"${reps[@]}" --run S --out "$work/s" 2> "$work/log_s.txt" || fail "run S: $(cat "$work/log_s.txt")"
"${reps[@]}" --run R,S --out "$work/rs" 2> "$work/log_rs.txt" || fail "runs R,S: $(cat "$work/log_rs.txt")"
python3 - "$work" <<'EOF'
import csv, sys
w = sys.argv[1]
r, s = list(csv.DictReader(open(f"{w}/r.csv"))), list(csv.DictReader(open(f"{w}/s.csv")))
r_md, s_md, rs_md = (open(f"{w}/{n}.md").read() for n in ("r", "s", "rs"))
assert len(r) == 1 and len(s) == 1, (r, s)
r, s = r[0], s[0]
# The median of the two ok repetitions (370, 410), not the last (410) nor the replaced 2000.
assert float(r["measured_step_ms"]) == 390.0, r
assert abs(float(r["measured_exposed_ms"]) - 20.0) < 1e-9 and abs(float(r["measured_mb"]) - 0.15) < 1e-9, r
# The simulator got the medians of forward and optimizer time (310, 18), as run S's record has them.
for k in ("predicted_step_ms", "predicted_exposed_ms", "profile_only_step_ms", "error"):
    assert r[k] == s[k], (k, r[k], s[k])
assert (r["reps"], r["reps_total"], float(r["measured_step_iqr_ms"])) == ("2", "3", 20.0), r
assert "reps" not in s and "measured_step_iqr_ms" not in s, s  # records without rep: as before
assert "| measured step ms | reps | measured step IQR ms | predicted step ms |" in r_md, r_md
assert "| gpt2-tiny | 2 | 1gbit | sparq_lbs | 390 | 2 of 3 | 20 | " in r_md, r_md
assert "medians over its repetitions" in r_md, r_md
assert "1 of 1 cells within 15% of the measured step time in run R" in r_md, r_md
assert "| reps |" not in s_md and "repetitions" not in s_md, s_md
assert "| 390, 390 | 2 of 3, 1 |" in rs_md, rs_md  # S beside R: one repetition, no spread
for old in ("v", "d", "de"):
    md = open(f"{w}/{old}.md").read()
    assert "| reps |" not in md and "IQR" not in md, (old, md)
    assert "reps" not in open(f"{w}/{old}.csv").readline(), old
print("simulate_validate.py OK: 3 repetitions, one failed: the median of the other two, '2 of 3' shown")
EOF
if "${validate[@]}" --run A,Z --out "$work/w" > "$work/bad.txt" 2>&1; then fail "a missing run was accepted"; fi
grep -q "run Z" "$work/bad.txt" || fail "the missing run is not named: $(cat "$work/bad.txt")"
# A missing results file or simulate binary, and a failing simulate, are said in one line
# naming them; they ended in a traceback (review, 2026-12-07). So is plot_scaling.py's.
no_trace() {  # no_trace WHAT TEXT CMD...: fails unless CMD exits non-zero, saying TEXT, no traceback
  local what=$1 text=$2
  shift 2
  if "$@" > "$work/bad.txt" 2>&1; then fail "$what was accepted"; fi
  grep -q "Traceback" "$work/bad.txt" && fail "$what: a traceback: $(cat "$work/bad.txt")"
  grep -q -- "$text" "$work/bad.txt" || fail "$what: no '$text': $(cat "$work/bad.txt")"
}
no_trace "a missing --results" "cannot read $work/none.jsonl (--results)" \
  python3 scripts/simulate_validate.py --results "$work/none.jsonl" --simulate "$sim" --out "$work/w"
no_trace "a missing --simulate" "cannot run $work/none (--simulate)" \
  python3 scripts/simulate_validate.py --results "$work/results.jsonl" --simulate "$work/none" --run A --out "$work/w"
no_trace "a failing simulate" "$(command -v false) failed (exit 1) on the record A gpt2-tiny" \
  python3 scripts/simulate_validate.py --results "$work/results.jsonl" --simulate "$(command -v false)" --run A --out "$work/w"
# A record without forward_ms, sparq_bytes_sent or link ended in a bare KeyError naming no
# record; one of a model not in MODELS (gpt2-124M) was dropped without a word, and the script
# then said "no sparq cell records" (review, 2026-12-07).
python3 - "$work/keys.jsonl" "$work/models.jsonl" <<'EOF'
import json, sys
base = {"run": "K", "model": "gpt2-tiny", "world": 2, "link": "1gbit", "cell": "sparq_lbs", "status": "ok",
        "forward_ms": 310.0, "backward_ms": 30.0, "optimizer_ms": 18.0, "exposed_comm_ms": 10.0,
        "sparq_bytes_sent": 140000.0, "step_ms": 370.0}
drop = lambda *keys: {k: v for k, v in base.items() if k not in keys}
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(base) + "\n")
    f.write(json.dumps(dict(drop("forward_ms", "sparq_bytes_sent"), cell="sparq_lbs_2p")) + "\n")
    f.write(json.dumps(dict(drop("link"), cell="sparq_none")) + "\n")
    f.write(json.dumps(dict(base, cell="sparq_bf16", step_ms=None)) + "\n")  # cluster_report.py's null
    # A failed record has no measurements: not an error (the cell is out).
    f.write(json.dumps(dict(drop("forward_ms", "backward_ms", "step_ms"), cell="sparq_powersgd",
                            status="failed")) + "\n")
with open(sys.argv[2], "w") as f:
    for run, model in (("M", "gpt2-124M"), ("M", "gpt2-124M"), ("M", "llama-7b"), ("N", "gpt2-124M")):
        f.write(json.dumps(dict(base, run=run, model=model)) + "\n")
    f.write(json.dumps(dict(base, run="N")) + "\n")
    f.write(json.dumps(dict(base, run="N", model="gpt2-124M", cell="ddp_dense")) + "\n")  # not a sparq cell
EOF
rm -f "$work/w.csv"
no_trace "records without forward_ms, sparq_bytes_sent and link" \
  "$work/keys.jsonl, line 2 (run K, gpt2-tiny N=2 1gbit sparq_lbs_2p): missing forward_ms, sparq_bytes_sent" \
  python3 scripts/simulate_validate.py --results "$work/keys.jsonl" --simulate "$sim" --out "$work/w"
grep -q -- "$work/keys.jsonl, line 3 (run K, gpt2-tiny N=2 ? sparq_none): missing link" "$work/bad.txt" ||
  fail "the record without link is not named: $(cat "$work/bad.txt")"
grep -q -- "$work/keys.jsonl, line 4 (run K, gpt2-tiny N=2 1gbit sparq_bf16): missing step_ms" "$work/bad.txt" ||
  fail "the record with a null step_ms is not named: $(cat "$work/bad.txt")"
[[ $(grep -c "simulate_validate.py: " "$work/bad.txt") -eq 3 ]] ||
  fail "want one line for each of the 3 bad records (not the good or the failed one): $(cat "$work/bad.txt")"
[[ -e "$work/w.csv" ]] && fail "a table was written despite bad records"
no_trace "records of unknown models only" \
  "no sparq cell records of gpt2-tiny or gpt2-30m with status ok in $work/models.jsonl for run M" \
  python3 scripts/simulate_validate.py --results "$work/models.jsonl" --run M --simulate "$sim" --out "$work/w"
grep -q "skipped the sparq cell records of models this script does not know: gpt2-124M (2 records), llama-7b (1 record)" \
  "$work/bad.txt" || fail "the unknown models of run M are not listed: $(cat "$work/bad.txt")"
# Beside a known model they are skipped, said on standard error, and the known model's cell counts.
python3 scripts/simulate_validate.py --results "$work/models.jsonl" --run N --simulate "$sim" \
    --out "$work/n" 2> "$work/log_n.txt" || fail "run N with an unknown model beside: $(cat "$work/log_n.txt")"
grep -q "does not know: gpt2-124M (1 record); it knows gpt2-tiny, gpt2-30m" "$work/log_n.txt" ||
  fail "the skipped gpt2-124M record of run N is not said: $(cat "$work/log_n.txt")"
[[ $(tail -n +2 "$work/n.csv" | cut -d, -f1,2) == "N,gpt2-tiny" ]] || fail "run N's table: $(cat "$work/n.csv")"
if python3 -c "import matplotlib" 2>/dev/null; then
  no_trace "a missing CSV" "plot_scaling.py: cannot read $work/none.csv" \
    python3 scripts/plot_scaling.py "$work/plots" "$work/none.csv"
  printf 'model,network,world,cell,efficiency\ngpt2,1g,x,dense,0.5\n' > "$work/bad.csv"
  no_trace "a CSV with a bad world" "plot_scaling.py: $work/bad.csv, line 2: world 'x'" \
    python3 scripts/plot_scaling.py "$work/plots" "$work/bad.csv"
else
  no_trace "plot_scaling.py without matplotlib" "needs matplotlib" \
    python3 scripts/plot_scaling.py "$work/plots" "$work/none.csv"
fi
echo "simulate_validate_test OK"
