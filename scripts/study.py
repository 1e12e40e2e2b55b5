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

# The trainer runs in a process group of its own (Popen's process_group, new in 3.11), so that
# a stop signal reaches it once, through study.py (study/runs.py).
if sys.version_info < (3, 11):
    sys.exit(f"study.py: needs Python 3.11 or later (Debian 12's python3), not "
             f"{sys.version.split()[0]}")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from study import runs, settings  # noqa: E402
from study.spec import StudyError, load_study  # noqa: E402
from study.report import refusal  # noqa: E402


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


def list_study(study, out, cells, resolver):
    launcher = settings.substitute(study.launcher, {"world_size": study.world_size}) \
        if study.launcher else "none: the binary runs directly"
    target = f", target eval loss {study.target:g}" if study.target is not None else ""
    say(f"study {study.name}: base {study.base}, {study.world_size} rank(s) (launcher: {launcher}), "
        f"seeds {study.seeds}, metric {study.metric}, reference {study.reference}{target}")
    say(f"runs in {runs.display_path(out, ROOT)}")
    for step in study.prepare:
        say(f"prepare: {step.run}" + (f"  (skipped when present: {', '.join(step.creates)})"
                                      if step.creates else ""))
    say(f"common: {' '.join(study.common) or '-'}")
    base_text = settings.read_base(ROOT, study.base)
    for cell in cells:
        say(f"{cell.name}  [{cell.label}]  {' '.join(cell.overrides) or '(no overrides)'}")
        for seed in study.seeds:
            path = runs.run_dir(out, cell.name, seed)
            files = runs.read_run(path)
            changed = settings.run_changes(study, cell, files, settings.train_command(
                study, cell, seed, path / runs.METRICS_FILE, study.binary), base_text, resolver)
            state = files.describe() if not files.finished else (
                f"finished with other settings ({changed}): rerun by the next study run"
                if changed else "finished")
            if runs.is_locked(path):
                state = f"being run by another study.py process (it holds {runs.lock_path(path).name}); now {state}"
            say(f"    seed{seed}: {state}")


def check_cells(study, binary, cells, out):
    """The trainer's --dry-run validates every key and value instantly; a typo in a cell then
    fails here, not an hour into the study."""
    refused = 0
    for cell in cells:
        metrics = runs.display_path(runs.run_dir(out, cell.name, study.seeds[0]) / runs.METRICS_FILE, ROOT)
        cmd = settings.train_command(study, cell, study.seeds[0], metrics, binary, dry_check=True)
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
        # Quoted for the shell where they stand: a folder with spaces or shell characters is
        # one word, and none of it runs.
        command = settings.substitute_shell(step.run, values)
        creates = [settings.substitute(c, values) for c in step.creates]
        tag = f"prepare {i}/{len(study.prepare)}"
        if creates and all((ROOT / c).exists() for c in creates):
            say(f"{tag}: skip (present: {', '.join(creates)})")
            continue
        say(f"{tag}: {'would run' if dry_run else 'running'}: {command}")
        if dry_run:
            continue
        try:
            rc = runs.run_child(["bash", "-c", command], cwd=ROOT, stdin=subprocess.DEVNULL)
        except OSError as e:
            say(f"{tag}: FAILED (cannot start bash: {e}); no cell was run")
            return False
        missing = [c for c in creates if not (ROOT / c).exists()]
        if rc != 0 or missing:
            why = f"exit status {rc}" if rc else f"did not create {', '.join(missing)}"
            say(f"{tag}: FAILED ({why}); no cell was run")
            return False
    return True


REPORT_FAILED = 4  # exit status: summary.md/summary.json could not be written
_warned = set()


def write_report(study, out, resolver):
    """summary.md and summary.json first, then the plots, so that a plotting problem (no
    matplotlib, a bad figure) costs only the plots: it is a warning (said once per process).
    Returns (cells, None), or (None, why) when the summary could not be written."""
    try:
        from study.report import collect, write_reports
        cells = collect(study, out, ROOT, resolver)
        write_reports(study, out, cells, runs.display_path(out, ROOT))
    except Exception as e:  # noqa: BLE001  said, and the exit status says so (REPORT_FAILED)
        return None, f"{type(e).__name__}: {e}"
    try:
        from study.plots import write_plots  # matplotlib is only needed here
        write_plots(study, out, cells)
    except Exception as e:  # noqa: BLE001
        text = f"warning: plots not written ({type(e).__name__}: {e}); summary.md and summary.json are"
        if text not in _warned:
            _warned.add(text)
            say(text)
    return cells, None


def final_text(study, path):
    files = runs.read_run(path)
    evals = [r for r in files.records if r.get("event") == "eval"]
    value = evals[-1].get(study.metric) if evals else None
    return f", final eval {study.metric} {value:.4g}" if isinstance(value, (int, float)) else ""


def aside_text(path, dry_run):
    """Where the run folder at path goes before its rerun, in words."""
    target, kept = runs.aside_target(path)
    text = f"{'would move' if dry_run else 'moved'} to {target.name}"
    if target.exists():
        text += ", replacing the unfinished run there"
    if kept:
        text += f"; {', '.join(k.name for k in kept)} kept (finished)"
    return text


def run_study(study, out, binary, cells, seeds, dry_run, resolver):
    if not prepare(study, binary, dry_run):
        return 1
    jobs = [(cell, seed) for cell in cells for seed in seeds]
    say(f"study {study.name}: {len(jobs)} run(s) into {runs.display_path(out, ROOT)}; "
        f"commands run from {ROOT}")
    failed, busy = [], []
    for i, (cell, seed) in enumerate(jobs, 1):
        path = runs.run_dir(out, cell.name, seed)
        tag = f"[{i}/{len(jobs)}] {cell.name} seed{seed}"
        # Held while this process decides and runs: a second study.py skips the run as busy,
        # even before the trainer has written anything (a dry run only looks).
        lock = None
        if dry_run:
            locked = runs.is_locked(path)
        else:
            lock = runs.try_lock(path)
            locked = lock is None
        if locked:
            say(f"{tag}: skip: another study.py process is running it (it holds "
                f"{runs.display_path(runs.lock_path(path), ROOT)}); rerun the study later")
            busy.append(f"{cell.name} seed{seed}")
            continue
        try:
            outcome = run_one(study, cell, seed, path, tag, binary, dry_run, resolver)
        finally:
            if lock is not None:
                lock.close()
        if outcome == "failed":
            failed.append(f"{cell.name} seed{seed}")
        elif outcome == "busy":
            busy.append(f"{cell.name} seed{seed}")
        if outcome in ("failed", "done"):
            _, error = write_report(study, out, resolver)  # partial results while a study runs
            if error:  # a report problem must not stop the runs
                say(f"  (summary not updated: {error})")
    if dry_run:
        return 0
    _, error = write_report(study, out, resolver)
    if error:
        say(f"REPORT FAILED: summary.md/summary.json not written: {error}")
    else:
        say(f"summary: {runs.display_path(Path(out) / 'summary.md', ROOT)}")
    if busy:
        say(f"skipped as busy: {', '.join(busy)}")
    if failed:
        say(f"FAILED runs ({len(failed)}): {', '.join(failed)}")
        return 1
    if error:
        return REPORT_FAILED
    # Not a failure, but not a finished study either: `study.py && publish` must not go on.
    return 3 if busy else 0


def run_one(study, cell, seed, path, tag, binary, dry_run, resolver):
    """One (cell, seed) of run_study, under its lock: "skipped", "busy", "planned" (dry
    run), "done" or "failed"."""
    files = runs.read_run(path)
    metrics = runs.display_path(path / runs.METRICS_FILE, ROOT)
    cmd = settings.train_command(study, cell, seed, metrics, binary)
    base_text = settings.read_base(ROOT, study.base)  # per run: an edit mid-study counts
    changed = settings.run_changes(study, cell, files, cmd, base_text, resolver)
    if files.finished and not changed:
        say(f"{tag}: skip (finished)")
        return "skipped"
    if files.busy():
        age = time.time() - (path / runs.METRICS_FILE).stat().st_mtime
        say(f"{tag}: skip: its metrics.jsonl changed {age:.0f} s ago, another process may be "
            "writing it; rerun the study later")
        return "busy"
    restart = ""
    if changed:  # the study file now defines this run otherwise: it is rerun
        restart = (f" (its settings changed since it ran: {changed}; the old run "
                   f"{aside_text(path, dry_run)})")
    elif path.exists():
        restart = f" (unfinished run {aside_text(path, dry_run)})"
    say(f"{tag}: {'would run' if dry_run else 'running'}{restart}")
    say(f"  command: {shlex.join(cmd)}")
    say(f"  log:     {runs.display_path(path / runs.LOG_FILE, ROOT)}")
    if dry_run:
        return "planned"
    runs.move_aside(path)
    # What the trainer resolves this command to (its --dry-run), kept in study.json: a later
    # edit of the base config reruns the run only if it changes this.
    resolved = settings.resolve_config(cmd, ROOT)
    try:
        rc, wall = runs.execute(cmd, path, ROOT, {"study": study.name, "cell": cell.name,
                                                  "seed": seed, "base_config": base_text,
                                                  "resolved_config": resolved})
    except runs.Stopped as e:
        say(f"  stopped by {e}: the run ended with exit status {e.returncode} (in its study.json)")
        raise
    if rc == 0 and runs.read_run(path).finished:
        say(f"  done in {wall:.1f} s{final_text(study, path)}")
        return "done"
    why = (f"exit status {rc}" if rc else
           f"exit status 0, but metrics.jsonl does not end with a complete, finished run "
           f"({runs.read_run(path).describe()})")
    say(f"  FAILED ({why}); last lines of its train.log:")
    for line in runs.log_tail(path):
        say(f"    | {line}")
    return "failed"


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `study.py --list | head` ends quietly
    # Ctrl-C, SIGTERM and SIGHUP stop the run in progress as the trainer's own signal would,
    # wait for it and record it, then end study.py (128 + the signal); SIGTERM or SIGHUP
    # killed study.py and left the trainer running, and Ctrl-C killed the trainer (review,
    # 2026-12-07).
    runs.STOP.install()
    try:
        return _main(argv)
    except runs.Stopped as e:
        print(f"study.py: stopped by {e}", file=sys.stderr)
        return 128 + e.signum


def _main(argv):
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
    resolver = settings.Resolver(study, ROOT, binary, out)
    if args.list:
        list_study(study, out, cells, resolver)
        return 0
    if args.report_only:
        reported, error = write_report(study, out, resolver)
        if error:
            say(f"REPORT FAILED: summary.md/summary.json not written: {error}")
            return REPORT_FAILED
        reference = next((c for c in reported if c.name == study.reference), None)
        for cell in reported:
            for seed, what in cell.problems:
                say(f"{cell.name} seed{seed}: {what}")
            for note in cell.notes:
                say(f"{cell.name}: {note}")
            # A cell at another horizon than the reference: in summary.md's "Cells not
            # compared", and not said here (review, 2026-12-08).
            refused = (refusal(cell, reference) if reference is not None and cell is not reference
                       and not cell.mixed_steps and not reference.mixed_steps else None)
            if refused:
                say(f"{cell.name}: {refused}: compared with no cell")
        say(f"summary: {runs.display_path(out / 'summary.md', ROOT)}")
        return 0
    # Before any prepare step or run: each run failed on it, after minutes of preparing
    # (review, 2026-12-08).
    if not (ROOT / study.base).is_file():
        print(f"study.py: {args.study}: base: {study.base} not found (a path from the repository "
              f"root, {ROOT})", file=sys.stderr)
        return 2
    # The dry run too: it would print commands that cannot run (docs/study.md: exit 2).
    if not (ROOT / binary).exists():
        print(f"study.py: binary {binary} not found (build it: cmake --build build --target train, "
              "or pass --binary)", file=sys.stderr)
        return 2
    if args.check:
        return check_cells(study, binary, cells, out)
    return run_study(study, out, binary, cells, seeds, args.dry_run, resolver)


if __name__ == "__main__":
    sys.exit(main())
