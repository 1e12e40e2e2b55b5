#!/usr/bin/env python3
"""Validates the step simulator (docs/simulate.md, "Validation") against step times measured
on the emulated cluster (bench/bench_cluster.sh records, one JSON object per line).

For every measured sparq cell it runs build/apps/simulate with the same config and shape and
the machine profile measured here for that model (profiles/this_machine_<model>.yaml, whose
links 1gbit and 100mbit were measured on the emulated cluster), twice:
  - with the cell's own measured forward and backward totals and, where the record has it,
    optimizer time (--compute-ms): N ranks on 2 cores slow compute down, which the profile's
    single-process timings do not see, so this predicts the communication and its overlap
    given the compute;
  - from the profile alone (what the simulator predicts for a machine it has not run on).
It writes a Markdown table and a CSV. With several runs (--run A,B,C) the first is the table and
the others repeat some of its cells: each repeated cell gets its errors in every run and their
median, and the count of cells within 15% is given both ways.

Repetitions (bench_cluster.sh's REPS; the record's `rep`, 1-based; a record without one, written
before REPS, is repetition 1) are grouped as bench/cluster_report.py groups them: the latest record
of each (run, model, world, link, cell, rep) counts, so a rerun of a repetition replaces it, and
a cell's measure in a run is the median, over its repetitions with status ok, of each
repetition's medians over steps (cluster_report.py's summarise_reps(); the forward, backward and
optimizer times given to the simulator are such medians too). A cell none of whose repetitions
measured is out. Where the records carry `rep`, the table gives each cell's count of repetitions
("2 of 3" where one failed) and the interquartile range of their step times; on records without
`rep` (one repetition each) the output is what it was before repetitions.

Records of other cells (ddp_*, the floors) are left out. A sparq cell's record of a model not in
MODELS below is skipped and said on standard error, model by model. A record that lacks a key
the script reads (run, model, world, link, status; for status ok also step_ms, forward_ms,
backward_ms, sparq_bytes_sent), or holds a non-number there, ends the script (exit 1) with one
line per record naming the file, line, run and cell.

--busy-comm-rate gives, per world size and link, communication's rate while backward computes
(simulate --busy-comm-rate; docs/simulate.md, "Communication under compute"), as measured on
the same test bed by scripts/measure_busy_comm_rate.sh; a cell without an entry uses 1.

  scripts/simulate_validate.py [--results runs/bench_cluster/results.jsonl] [--run ID[,ID...]]
      [--simulate build/apps/simulate] [--out docs/simulate/validation]
      [--busy-comm-rate 2:1gbit=0.78,4:1gbit=0.34,...] [--cell-set CELL=KEY=VALUE ...]

--cell-set passes --set KEY=VALUE to every simulation of one cell, so that records made before
a default changed are priced as they ran: run issue21_r3's PowerSGD split the tied embedding
(comm.split_tied_embedding: auto priced PowerSGD as dense until 2026-12-07, commit 5e3d354), so
its validation passes --cell-set sparq_powersgd=comm.split_tied_embedding=always.
"""
import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys

# The repetitions' statistics are bench/cluster_report.py's own (standard library only).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from cluster_report import median_or_none, summarise_reps  # noqa: E402

# bench_cluster.sh's cells -> the simulator's cells (src/sim/workload.cpp).
CELLS = {"sparq_none": "dense_f32", "sparq_bf16": "dense_bf16", "sparq_lbs": "lbs_allgather",
         "sparq_lbs_2p": "lbs_two_phase", "sparq_powersgd": "powersgd"}
# bench_cluster.sh's model_config(): config, micro-batch, sequence length.
MODELS = {"gpt2-tiny": ("configs/bench/gpt2_tiny.yaml", 8, 128),
          "gpt2-30m": ("configs/bench/gpt2_30m.yaml", 4, 256)}
TARGET = 0.15  # the bound on |predicted - measured| / measured step time
# The keys read from a record: the cell's identity (every record of a sparq cell, whatever its
# status), and the measurements (the records that count, status "ok"). cluster_report.py writes
# a measurement it has no steps for as null, so null counts as missing. optimizer_ms (recorded
# since 12-03) and exposed_comm_ms are optional, and so is rep (bench_cluster.sh's REPS, since
# 12-07; missing: repetition 1, as cluster_report.py reads it).
IDENTITY_KEYS = ("run", "model", "world", "link", "status")
MEASURED_KEYS = ("step_ms", "forward_ms", "backward_ms", "sparq_bytes_sent")
OPTIONAL_KEYS = ("optimizer_ms", "exposed_comm_ms")


def parse_busy_rates(text):
    """'4:1gbit=0.36,2:100mbit=0.9' -> {(4, '1gbit'): 0.36, (2, '100mbit'): 0.9}."""
    rates = {}
    for item in filter(None, text.split(",")):
        try:
            key, value = item.split("=")
            world, link = key.split(":")
            rate = float(value)
            world = int(world)
        except ValueError:
            sys.exit(f"simulate_validate.py: --busy-comm-rate entry '{item}': use WORLD:LINK=RATE, "
                     "e.g. 4:1gbit=0.34")
        if not 0.0 < rate <= 1.0:
            sys.exit(f"simulate_validate.py: --busy-comm-rate entry '{item}': the rate must be in (0, 1]")
        rates[(world, link)] = rate
    return rates


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def where(path, line, r):
    """'results.jsonl, line 7 (run A, gpt2-tiny N=2 1gbit sparq_lbs)': a record, for messages."""
    show = lambda key: str(r[key]) if r.get(key) is not None else "?"
    return (f"{path}, line {line} (run {show('run')}, {show('model')} N={show('world')} "
            f"{show('link')} {show('cell')})")


def identity_problems(r):
    """What is wrong with the keys that place a sparq cell's record: [] if nothing."""
    problems = []
    missing = [k for k in IDENTITY_KEYS if r.get(k) is None]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    if r.get("world") is not None and (not isinstance(r["world"], int) or isinstance(r["world"], bool)
                                       or r["world"] < 1):
        problems.append(f"world {json.dumps(r['world'])} is not a positive integer")
    if "rep" in r and (not isinstance(r["rep"], int) or isinstance(r["rep"], bool) or r["rep"] < 1):
        problems.append(f"rep {json.dumps(r['rep'])} is not a positive integer")
    return problems


def measure_cell(reps):
    """A cell's repetitions in one run, {rep: its latest record}, -> the record the table
    compares with: each measurement the median over the repetitions with status ok (None if
    none measured), as bench/cluster_report.py's report takes it, with the count of those
    repetitions and the IQR of their step times. One repetition: its own record's values."""
    summary = summarise_reps({(r["run"], rep): r for rep, r in reps.items()})
    if summary["n"] == 0:
        return None
    ok = summary["records"]
    cell = {k: ok[0][k] for k in ("run", "model", "world", "link", "cell")}
    cell.update(step_ms=summary["step_ms"], exposed_comm_ms=summary["exposed_comm_ms"],
                sparq_bytes_sent=summary["sparq_bytes_sent"],
                reps=summary["n"], reps_total=summary["total"], step_iqr_ms=summary["step_iqr"])
    for k in ("forward_ms", "backward_ms", "optimizer_ms"):
        cell[k] = median_or_none(r.get(k) for r in ok)
    return cell


def reps_text(t):
    """'3', or '2 of 3' where a repetition failed (cluster_report.py's reps column)."""
    return str(t["reps"]) if t["reps"] == t["reps_total"] else f"{t['reps']} of {t['reps_total']}"


def fmt_iqr(value):
    return "-" if value is None else f"{value:.0f}"


def measurement_problems(r):
    """What is wrong with the measurements of a record that counts (status ok): [] if nothing."""
    problems = []
    missing = [k for k in MEASURED_KEYS if r.get(k) is None]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    for k in MEASURED_KEYS + OPTIONAL_KEYS:
        if r.get(k) is not None and not is_number(r[k]):
            problems.append(f"{k} {json.dumps(r[k])} is not a number")
    if is_number(r.get("step_ms")) and r["step_ms"] <= 0:
        problems.append(f"step_ms {r['step_ms']} is not above 0")
    return problems


def parse_cell_sets(items):
    """--cell-set CELL=KEY=VALUE ... -> {bench_cluster cell: [KEY=VALUE, ...]}."""
    sets = {}
    for item in items:
        cell, _, setting = item.partition("=")
        if cell not in CELLS or "=" not in setting or setting.startswith("="):
            sys.exit(f"simulate_validate.py: --cell-set {item!r}: expected CELL=KEY=VALUE with CELL "
                     f"one of {', '.join(CELLS)}")
        sets.setdefault(cell, []).append(setting)
    return sets


def simulate(binary, record, profile, measured_compute, busy_rate, cell_sets):
    cfg, b, t = MODELS[record["model"]]
    cmd = [binary, "--config", cfg, "--set", f"train.micro_batch={b}", "--set",
           f"data.seq_len={t}", "--profile", profile, "--network", record["link"],
           "--world", str(record["world"]), "--cells", CELLS[record["cell"]], "--csv", "/dev/stdout"]
    for setting in cell_sets.get(record["cell"], []):
        cmd += ["--set", setting]
    if measured_compute:
        measured = f"{record['forward_ms']},{record['backward_ms']}"
        if record.get("optimizer_ms") is not None:  # recorded by cluster_report.py since 12-03
            measured += f",{record['optimizer_ms']}"
        cmd += ["--compute-ms", measured]
    cmd += ["--busy-comm-rate", str(busy_rate)]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except OSError as e:
        sys.exit(f"simulate_validate.py: cannot run {binary} (--simulate): {e.strerror}")
    except subprocess.CalledProcessError as e:
        sys.exit(f"simulate_validate.py: {binary} failed (exit {e.returncode}) on the record "
                 f"{record.get('run')} {record['model']} P={record.get('world')} "
                 f"{record.get('link')} {record['cell']}:\n{e.stderr.strip()}")
    lines = out[out.index("model,network"):].splitlines()
    rows = [r for r in csv.DictReader(io.StringIO("\n".join(lines))) if r.get("world")]
    return rows[0]


def predict(args, busy_rates, r, with_reps):
    """One measured cell (measure_cell()) -> one row of the table; with_reps: the records carry
    rep, and the row its count of repetitions and their IQR."""
    profile = os.path.join(args.profiles, f"this_machine_{r['model']}.yaml")
    if not os.path.exists(profile):
        sys.exit(f"simulate_validate.py: {profile} missing (measure it with sim_profile)")
    busy = busy_rates.get((r["world"], r["link"]), 1.0)
    p = simulate(args.simulate, r, profile, True, busy, args.cell_sets)
    alone = simulate(args.simulate, r, profile, False, busy, args.cell_sets)
    step, step_alone = float(p["step_ms"]), float(alone["step_ms"])
    err = (step - r["step_ms"]) / r["step_ms"]
    print(f"{r['run']:16} {r['model']:9} N={r['world']} {r['link']:7} {r['cell']:14} measured "
          f"{r['step_ms']:8.0f} ms predicted {step:8.0f} ms ({100 * err:+.1f}%), profile only "
          f"{step_alone:8.0f} ms" + (f", {reps_text(r)} rep(s), step IQR {fmt_iqr(r['step_iqr_ms'])} ms"
                                      if with_reps else ""), file=sys.stderr)
    row = {"run": r["run"], "model": r["model"], "world": r["world"], "link": r["link"],
           "cell": r["cell"], "busy_comm_rate": busy,
           "measured_step_ms": r["step_ms"], "predicted_step_ms": step, "error": err,
           "measured_exposed_ms": r.get("exposed_comm_ms") or 0.0,
           "predicted_exposed_ms": float(p["exposed_comm_ms"]),
           "measured_mb": r["sparq_bytes_sent"] / 1e6, "predicted_mb": float(p["mb_sent_per_rank"]),
           "profile_only_step_ms": step_alone,
           "profile_only_error": (step_alone - r["step_ms"]) / r["step_ms"],
           "within": abs(err) <= TARGET}
    if with_reps:
        row.update(reps=r["reps"], reps_total=r["reps_total"], measured_step_iqr_ms=r["step_iqr_ms"])
    return row


def write_markdown(args, table, runs, with_reps):
    key = lambda t: (t["model"], t["world"], t["link"], t["cell"])
    main_rows = [t for t in table if t["run"] == runs[0]]
    by_cell = {}
    for t in table:
        by_cell.setdefault(key(t), []).append(t)
    with open(args.out + ".md", "w") as f:
        f.write(f"Measured: `{args.results}` run {', '.join(runs)}. Predicted: `simulate` with "
                "`profiles/this_machine_<model>.yaml`, given each run's measured forward/backward "
                "totals and optimizer time (`--compute-ms`), and from the profile alone; "
                "communication's rate under backward (`--busy-comm-rate`) per world and link: "
                f"{args.busy_comm_rate or '1 everywhere'}"
                + "".join(f"; for {cell}, `--set {v}`" for cell, vs in args.cell_sets.items() for v in vs)
                + ".\n\n")
        if with_reps:
            f.write("Each cell's measured values are the medians over its repetitions that measured "
                    "(reps; \"2 of 3\" where one failed) of each repetition's medians over steps, and "
                    "the prediction given the measured compute takes the medians of their forward, "
                    "backward and optimizer times; step IQR: the interquartile range of the "
                    "repetitions' step times (bench/cluster_report.py's statistics).\n\n")
        f.write("| model | N | link | cell | measured step ms | "
                + ("reps | measured step IQR ms | " if with_reps else "")
                + "predicted step ms | error | "
                "measured exposed ms | predicted exposed ms | measured MB/rank | predicted MB/rank | "
                "profile only step ms | error |\n")
        f.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if with_reps else "")
                + "\n")
        for t in main_rows:
            mark = "" if t["within"] else " **(> 15%)**"
            spread = f"{reps_text(t)} | {fmt_iqr(t['measured_step_iqr_ms'])} | " if with_reps else ""
            f.write(f"| {t['model']} | {t['world']} | {t['link']} | {t['cell']} | {t['measured_step_ms']:.0f} | "
                    f"{spread}{t['predicted_step_ms']:.0f} | {100 * t['error']:+.1f}%{mark} | {t['measured_exposed_ms']:.0f} | "
                    f"{t['predicted_exposed_ms']:.0f} | {t['measured_mb']:.2f} | {t['predicted_mb']:.2f} | "
                    f"{t['profile_only_step_ms']:.0f} | {100 * t['profile_only_error']:+.1f}% |\n")
        f.write(f"\n{sum(t['within'] for t in main_rows)} of {len(main_rows)} cells within 15% of the "
                f"measured step time in run {runs[0]}.\n")
        # One row per run and cell (main() takes each run's repetitions together), so a cell with
        # more than one row was measured in more than one run.
        repeated = [rows for rows in by_cell.values() if len(rows) > 1]
        if not repeated:
            return
        again = [run for run in runs[1:] if any(r["run"] == run for rows in repeated for r in rows)]
        f.write(f"\nCells measured again ({', '.join(again)}); the median is over each run's error:\n\n"
                "| model | N | link | cell | measured step ms, each run | "
                + ("reps, each run | " if with_reps else "")
                + "predicted | error, each run | "
                "median error |\n|---|---|---|---|---|---|---|---|" + ("---|" if with_reps else "") + "\n")
        for rows in repeated:
            t = rows[0]
            median = statistics.median(r["error"] for r in rows)
            mark = "" if abs(median) <= TARGET else " **(> 15%)**"
            measured = ", ".join(f"{r['measured_step_ms']:.0f}" for r in rows)
            predicted = ", ".join(f"{r['predicted_step_ms']:.0f}" for r in rows)
            errors = ", ".join(f"{100 * r['error']:+.1f}%" for r in rows)
            if with_reps:
                measured += " | " + ", ".join(reps_text(r) for r in rows)
            f.write(f"| {t['model']} | {t['world']} | {t['link']} | {t['cell']} | {measured} | {predicted} | "
                    f"{errors} | {100 * median:+.1f}%{mark} |\n")
        first_cells = [rows for rows in by_cell.values() if any(r["run"] == runs[0] for r in rows)]
        inside = sum(abs(statistics.median(r["error"] for r in rows)) <= TARGET for rows in first_cells)
        f.write(f"\nTaking each repeated cell's median error: {inside} of {len(first_cells)} cells of run "
                f"{runs[0]} within 15%.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="runs/bench_cluster/results.jsonl")
    ap.add_argument("--run", default="", help="RUN_ID[,RUN_ID...]: the records of these bench_cluster runs; "
                    "the first is the table, the others repeat some of its cells (default: every record)")
    ap.add_argument("--simulate", default="build/apps/simulate")
    ap.add_argument("--profiles", default="profiles")
    ap.add_argument("--out", default="docs/simulate/validation")
    ap.add_argument("--busy-comm-rate", default="", help="WORLD:LINK=RATE,... (default: 1 everywhere)")
    ap.add_argument("--cell-set", action="append", default=[], metavar="CELL=KEY=VALUE",
                    help="a config override for every simulation of one bench_cluster cell "
                    "(repeatable): what the recorded runs used where a default has changed since")
    args = ap.parse_args()
    args.cell_sets = parse_cell_sets(args.cell_set)
    busy_rates = parse_busy_rates(args.busy_comm_rate)
    wanted = [r for r in args.run.split(",") if r]
    # bench/cluster_report.py's rule: a repetition measured again replaces the earlier record, so
    # the latest record of each (run, model, world, link, cell, rep) counts (a record without rep,
    # written before REPS, is repetition 1); a cell's repetitions that measured are taken together
    # (measure_cell()), and a cell none of whose repetitions measured is out.
    latest = {}  # (run, model, world, link, cell) -> {rep: (line number, record)}
    with_reps = False  # whether any record counted carries rep
    superseded = 0
    unreadable = []  # line numbers that are not a JSON object
    unknown_models = {}  # model -> records of a sparq cell skipped for it
    bad = []  # (line number, message): one per record the script cannot use
    try:
        results = open(args.results)
    except OSError as e:
        sys.exit(f"simulate_validate.py: cannot read {args.results} (--results): {e.strerror}")
    with results as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except ValueError:
                r = None
            if not isinstance(r, dict):
                unreadable.append(number)  # a line cut by a killed run, as cluster_report.py skips it
                continue
            if wanted and r.get("run") not in wanted:
                continue
            if r.get("cell") not in CELLS:
                continue  # the other cells of bench_cluster.sh (ddp_*, floors) are not simulated
            if r.get("model") is not None and r["model"] not in MODELS:
                # A model without a config and micro-batch in MODELS (bench_cluster.sh's
                # model_config()) cannot be simulated: skipped, and said below.
                name = str(r["model"])
                unknown_models[name] = unknown_models.get(name, 0) + 1
                continue
            problems = identity_problems(r)
            if problems:
                if r.get("status") == "ok":
                    problems += measurement_problems(r)
                bad.append((number, f"{where(args.results, number, r)}: {'; '.join(problems)}"))
                continue
            key = (r["run"], r["model"], r["world"], r["link"], r["cell"])
            # a dict keeps the first position: the cell's place in its run
            reps = latest.setdefault(key, {})
            superseded += r.get("rep", 1) in reps
            reps[r.get("rep", 1)] = (number, r)
            with_reps = with_reps or "rep" in r
    if unreadable:
        shown = ", ".join(map(str, unreadable[:10])) + (", ..." if len(unreadable) > 10 else "")
        print(f"simulate_validate.py: skipped {len(unreadable)} line(s) of {args.results} that are "
              f"not a JSON record (line {shown}; a line cut by a killed run)", file=sys.stderr)
    if unknown_models:
        listed = ", ".join(f"{m} ({n} record{'s' if n > 1 else ''})" for m, n in unknown_models.items())
        print(f"simulate_validate.py: skipped the sparq cell records of models this script does not "
              f"know: {listed}; it knows {', '.join(MODELS)} (MODELS in scripts/simulate_validate.py, "
              "bench_cluster.sh's model_config())", file=sys.stderr)
    for reps in latest.values():
        for number, r in reps.values():
            if r["status"] != "ok":
                continue  # this repetition's latest measurement failed: it is out
            problems = measurement_problems(r)
            if problems:
                bad.append((number, f"{where(args.results, number, r)}: {'; '.join(problems)}"))
    if bad:
        sys.exit("\n".join(f"simulate_validate.py: {message}" for _, message in sorted(bad)))
    records = [cell for cell in (measure_cell({rep: r for rep, (_, r) in reps.items()})
                                 for reps in latest.values()) if cell is not None]
    if superseded:
        print(f"simulate_validate.py: {superseded} record(s) replaced by a later record of the same "
              f"cell{' and repetition' if with_reps else ''} in the same run (the latest counts)",
              file=sys.stderr)
    if not records:
        sys.exit(f"simulate_validate.py: no sparq cell records of {' or '.join(MODELS)} with status ok "
                 f"in {args.results}{' for run ' + args.run if args.run else ''}"
                 f"{' (other models skipped, above)' if unknown_models else ''}")
    runs = wanted or list(dict.fromkeys(r["run"] for r in records))
    missing = [run for run in runs if not any(r["run"] == run for r in records)]
    if missing:
        sys.exit(f"simulate_validate.py: no sparq cell records of run {', '.join(missing)} in {args.results}")
    records.sort(key=lambda r: runs.index(r["run"]))  # stable: each run keeps its order
    table = [predict(args, busy_rates, r, with_reps) for r in records]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    write_markdown(args, table, runs, with_reps)
    first = [t for t in table if t["run"] == runs[0]]
    print(f"wrote {args.out}.md and {args.out}.csv: {sum(t['within'] for t in first)} of {len(first)} "
          f"within 15% in run {runs[0]}", file=sys.stderr)


if __name__ == "__main__":
    main()
