#!/usr/bin/python3
"""Convergence-study runner: runs every (cell, seed) of a study file with the train app,
skips runs that already finished (a study resumes), and writes summary.md, summary.json and
PNG plots into the study root. A tool only: the trainer never needs it. Manual: docs/study.md.

  scripts/study.py studies/markov.yaml                  run what is missing, then report
  scripts/study.py studies/markov.yaml --dry-run        print the commands, run nothing
  scripts/study.py studies/markov.yaml --report-only    summary and plots from what exists
  scripts/study.py studies/markov.yaml --list | --check | --only dense,lbs_ef | --out DIR

Paths in the study file (base, binary, launcher, prepare) are relative to the repository
root, where every command runs; --out, --binary and the study file are relative to the
current directory. Needs Debian's python3-yaml and (for the reports) python3-matplotlib.
"""
import argparse
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from study import runs  # noqa: E402
from study.spec import StudyError, load_study  # noqa: E402


def say(text=""):
    print(text, flush=True)  # the runs' output goes to files; keep ours in order with theirs


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Run a convergence study (docs/study.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study", help="the study file (YAML), e.g. studies/markov.yaml")
    p.add_argument("--out", help="study root (default: runs/studies/<name> in the repository)")
    p.add_argument("--only", metavar="CELL[,CELL]",
                   help="run, list or check only these cells (the summary still covers all)")
    p.add_argument("--seeds", metavar="S[,S]",
                   help="run only these of the study's seeds (the summary still covers all)")
    p.add_argument("--binary", help="the train binary, instead of the study's binary:")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="print the prepare steps and run commands; run nothing")
    mode.add_argument("--report-only", action="store_true",
                      help="only write summary.md/summary.json/plots from the runs on disk")
    mode.add_argument("--list", action="store_true", help="print the cells and each run's state")
    mode.add_argument("--check", action="store_true",
                      help="validate every cell's overrides with the trainer's --dry-run")
    return p.parse_args(argv)


def selected_cells(study, only):
    if not only:
        return list(study.cells)
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = [c.name for c in study.cells]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise StudyError(f"--only: unknown cell(s) {', '.join(unknown)} (cells: {', '.join(known)})")
    return [c for c in study.cells if c.name in names]


def selected_seeds(study, seeds):
    if not seeds:
        return list(study.seeds)
    try:
        wanted = [int(x) for x in seeds.split(",") if x.strip()]
    except ValueError:
        raise StudyError(f"--seeds: expected integers separated by commas, got {seeds!r}")
    unknown = [x for x in wanted if x not in study.seeds]
    if unknown or not wanted:
        raise StudyError(f"--seeds: {seeds!r} names no seed or one the study does not have "
                         f"(seeds: {study.seeds})")
    return [x for x in study.seeds if x in wanted]


def list_study(study, out, cells):
    launcher = runs.substitute(study.launcher, {"world_size": study.world_size}) \
        if study.launcher else "none: the binary runs directly"
    target = f", target eval loss {study.target:g}" if study.target is not None else ""
    say(f"study {study.name}: base {study.base}, {study.world_size} rank(s) (launcher: {launcher}), "
        f"seeds {study.seeds}, metric {study.metric}, reference {study.reference}{target}")
    say(f"runs in {runs.display_path(out, ROOT)}")
    for step in study.prepare:
        say(f"prepare: {step.run}" + (f"  (skipped when present: {', '.join(step.creates)})"
                                      if step.creates else ""))
    say(f"common: {' '.join(study.common) or '-'}")
    base_text = runs.read_base(ROOT, study.base)
    for cell in cells:
        say(f"{cell.name}  [{cell.label}]  {' '.join(cell.overrides) or '(no overrides)'}")
        for seed in study.seeds:
            path = runs.run_dir(out, cell.name, seed)
            files = runs.read_run(path)
            changed = runs.changed_settings(files, runs.train_command(
                study, cell, seed, path / runs.METRICS_FILE, study.binary), base_text)
            state = files.describe() if not files.finished else (
                f"finished with other settings ({changed}): rerun by the next study run"
                if changed else "finished")
            say(f"    seed{seed}: {state}")


def check_cells(study, binary, cells, out):
    """The trainer's --dry-run validates every key and value instantly; a typo in a cell then
    fails here, not an hour into the study."""
    refused = 0
    for cell in cells:
        metrics = runs.display_path(runs.run_dir(out, cell.name, study.seeds[0]) / runs.METRICS_FILE, ROOT)
        cmd = runs.train_command(study, cell, study.seeds[0], metrics, binary, dry_check=True)
        try:
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            rc, text = done.returncode, (done.stderr + done.stdout).strip()
        except OSError as e:
            rc, text = 127, f"cannot start {cmd[0]}: {e}"
        if rc == 0:
            missing = [line for line in text.splitlines() if line.startswith("data:") and "not found" in line]
            say(f"{cell.name}: ok" + (f" ({missing[0]})" if missing else ""))
        else:
            refused += 1
            errors = [line for line in text.splitlines() if "error" in line] or text.splitlines()[-3:]
            say(f"{cell.name}: REFUSED (exit status {rc}): {' / '.join(errors)}")
            say(f"  command: {shlex.join(cmd)}")
    return 1 if refused else 0


def prepare(study, binary, dry_run):
    """The study's prepare: steps, once, before any cell; a failure stops the study."""
    values = {"bin_dir": str(Path(binary).parent), "world_size": study.world_size}
    for i, step in enumerate(study.prepare, 1):
        command = runs.substitute(step.run, values)
        creates = [runs.substitute(c, values) for c in step.creates]
        tag = f"prepare {i}/{len(study.prepare)}"
        if creates and all((ROOT / c).exists() for c in creates):
            say(f"{tag}: skip (present: {', '.join(creates)})")
            continue
        say(f"{tag}: {'would run' if dry_run else 'running'}: {command}")
        if dry_run:
            continue
        rc = subprocess.run(["bash", "-c", command], cwd=ROOT, stdin=subprocess.DEVNULL).returncode
        missing = [c for c in creates if not (ROOT / c).exists()]
        if rc != 0 or missing:
            why = f"exit status {rc}" if rc else f"did not create {', '.join(missing)}"
            say(f"{tag}: FAILED ({why}); no cell was run")
            return False
    return True


def write_report(study, out):
    from study.plots import write_plots  # matplotlib is only needed here
    from study.report import collect, write_reports
    cells = collect(study, out, ROOT)
    write_reports(study, out, cells, runs.display_path(out, ROOT))
    write_plots(study, out, cells)
    return cells


def final_text(study, path):
    files = runs.read_run(path)
    evals = [r for r in files.records if r.get("event") == "eval"]
    value = evals[-1].get(study.metric) if evals else None
    return f", final eval {study.metric} {value:.4g}" if isinstance(value, (int, float)) else ""


def run_study(study, out, binary, cells, seeds, dry_run):
    if not prepare(study, binary, dry_run):
        return 1
    jobs = [(cell, seed) for cell in cells for seed in seeds]
    say(f"study {study.name}: {len(jobs)} run(s) into {runs.display_path(out, ROOT)}; "
        f"commands run from {ROOT}")
    failed, busy = [], []
    for i, (cell, seed) in enumerate(jobs, 1):
        path = runs.run_dir(out, cell.name, seed)
        files = runs.read_run(path)
        tag = f"[{i}/{len(jobs)}] {cell.name} seed{seed}"
        metrics = runs.display_path(path / runs.METRICS_FILE, ROOT)
        cmd = runs.train_command(study, cell, seed, metrics, binary)
        base_text = runs.read_base(ROOT, study.base)  # per run: an edit mid-study counts
        changed = runs.changed_settings(files, cmd, base_text) if files.finished else None
        if files.finished and not changed:
            say(f"{tag}: skip (finished)")
            continue
        if files.busy():
            age = time.time() - (path / runs.METRICS_FILE).stat().st_mtime
            say(f"{tag}: skip: its metrics.jsonl changed {age:.0f} s ago, another process may be "
                "writing it; rerun the study later")
            busy.append(f"{cell.name} seed{seed}")
            continue
        restart = f" (unfinished run moved to seed{seed}.prev)" if path.exists() and not dry_run else ""
        if changed:  # the study file now defines this run otherwise: it is rerun
            restart = (f" (its settings changed since it ran: {changed}; the old run "
                       f"{'would move' if dry_run else 'moved'} to seed{seed}.prev)")
        say(f"{tag}: {'would run' if dry_run else 'running'}{restart}")
        say(f"  command: {shlex.join(cmd)}")
        say(f"  log:     {runs.display_path(path / runs.LOG_FILE, ROOT)}")
        if dry_run:
            continue
        runs.move_aside(path)
        rc, wall = runs.execute(cmd, path, ROOT, {"study": study.name, "cell": cell.name, "seed": seed,
                                                  "base_config": base_text})
        if rc == 0 and runs.read_run(path).finished:
            say(f"  done in {wall:.1f} s{final_text(study, path)}")
        else:
            why = f"exit status {rc}" if rc else "exit status 0, but metrics.jsonl has no finished end record"
            say(f"  FAILED ({why}); last lines of its train.log:")
            for line in runs.log_tail(path):
                say(f"    | {line}")
            failed.append(f"{cell.name} seed{seed}")
        try:  # partial results are visible while a long study runs
            write_report(study, out)
        except Exception as e:  # noqa: BLE001  a report problem must not stop the runs
            say(f"  (summary not updated: {e})")
    if dry_run:
        return 0
    write_report(study, out)
    say(f"summary: {runs.display_path(Path(out) / 'summary.md', ROOT)}")
    if busy:
        say(f"skipped as busy: {', '.join(busy)}")
    if failed:
        say(f"FAILED runs ({len(failed)}): {', '.join(failed)}")
        return 1
    # Not a failure, but not a finished study either: `study.py && publish` must not go on.
    return 3 if busy else 0


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `study.py --list | head` ends quietly
    args = parse_args(argv)
    try:
        study = load_study(args.study)
        cells = selected_cells(study, args.only)
        seeds = selected_seeds(study, args.seeds)
    except StudyError as e:
        print(f"study.py: {e}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve() if args.out else ROOT / "runs" / "studies" / study.name
    binary = str(Path(args.binary).resolve()) if args.binary else study.binary
    if args.list:
        list_study(study, out, cells)
        return 0
    if args.report_only:
        reported = write_report(study, out)
        for cell in reported:
            for seed, what in cell.problems:
                say(f"{cell.name} seed{seed}: {what}")
        say(f"summary: {runs.display_path(out / 'summary.md', ROOT)}")
        return 0
    if not args.dry_run and not (ROOT / binary).exists():
        print(f"study.py: binary {binary} not found (build it: cmake --build build --target train, "
              "or pass --binary)", file=sys.stderr)
        return 2
    if args.check:
        return check_cells(study, binary, cells, out)
    return run_study(study, out, binary, cells, seeds, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
