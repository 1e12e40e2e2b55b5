"""One run of a study: where it lives, whether it finished, its command, and running it.

Layout (fixed; runs are also made by hand in it): <out>/<cell>/seed<s>/metrics.jsonl, the
trainer's stdout+stderr in train.log next to it, and study.json (what this tool measured).
A study.py process running a run holds <out>/<cell>/.seed<s>.lock (flock) meanwhile.
"""
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

METRICS_FILE = "metrics.jsonl"
LOG_FILE = "train.log"
RECORD_FILE = "study.json"
# An unfinished run whose metrics changed this recently is probably still being written by a
# run started by hand; restarting it would clobber that run.
BUSY_SECONDS = 120


def run_dir(out, cell, seed):
    return Path(out) / cell / f"seed{seed}"


@dataclass
class RunFiles:
    """What is on disk for one run, parsed."""
    path: Path
    records: list = field(default_factory=list)  # metrics.jsonl objects, in file order
    bad_lines: int = 0                           # lines that were not JSON (e.g. a cut-off write)
    record: dict | None = None                   # study.json, when study.py made the run
    exists: bool = False
    stale_record: bool = False                   # a study.json older than metrics.jsonl, ignored

    @property
    def returncode(self):
        return (self.record or {}).get("returncode")

    @property
    def end_step(self):
        """The step of the end record that closes metrics.jsonl, or None."""
        last = self.records[-1] if self.records else {}
        return last.get("step") if last.get("event") == "end" else None

    @property
    def final_eval_step(self):
        """The step of the last eval record in the file, or None."""
        evals = [r for r in self.records if r.get("event") == "eval"]
        return evals[-1].get("step") if evals else None

    @property
    def ended(self):
        """metrics.jsonl closes with an end record of a run that was not stopped early."""
        last = self.records[-1] if self.records else {}
        return last.get("event") == "end" and last.get("stopped_early") is False

    @property
    def complete(self):
        """The file holds the whole run: every line readable, and the final evaluation (the
        trainer evaluates at the last step of every run not stopped early) at the end
        record's step. A cut-off or missing final eval line would make an earlier eval look
        final."""
        return (self.bad_lines == 0 and self.end_step is not None
                and self.final_eval_step == self.end_step)

    @property
    def finished(self):
        # A run study.py made counts only if it also exited 0: rank 0 may write its end record
        # and the job still fail (another rank at teardown, the export after training).
        return self.ended and self.complete and self.returncode in (None, 0)

    def busy(self, now=None):
        metrics = self.path / METRICS_FILE
        if self.finished or not metrics.exists():
            return False
        # study.py's own record of how the run ended, no older than its metrics: it has ended.
        record = self.path / RECORD_FILE
        if (self.returncode is not None and record.exists()
                and record.stat().st_mtime >= metrics.stat().st_mtime):
            return False
        return (now or time.time()) - metrics.stat().st_mtime < BUSY_SECONDS

    def describe(self):
        """Why an unfinished run is not finished, in a few words."""
        rc = (self.record or {}).get("returncode")
        if not self.exists and rc in (None, 0):
            return "missing (no metrics.jsonl)"
        steps = [r["step"] for r in self.records if r.get("event") == "step" and "step" in r]
        where = f"last step {steps[-1]}" if steps else (
            "no step record" if self.exists else "no metrics.jsonl")
        last = self.records[-1] if self.records else {}
        if last.get("event") == "end":
            if last.get("stopped_early") is not False:
                where += ", stopped early"
            elif rc not in (None, 0):
                where += ", after its end record"
            elif self.final_eval_step != self.end_step:
                where += (f", but no eval record at its end step {self.end_step} (last eval: "
                          f"{'none' if self.final_eval_step is None else 'step ' + str(self.final_eval_step)})")
        if self.bad_lines:
            where += f", {self.bad_lines} unreadable line(s) in metrics.jsonl"
        if self.stale_record:
            where += ", study.json older than metrics.jsonl (ignored)"
        if rc not in (None, 0):
            return f"failed (exit status {rc}), {where}"
        return f"unfinished, {where}"


def read_run(path):
    path = Path(path)
    files = RunFiles(path=path)
    try:
        files.record = json.loads((path / RECORD_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        files.record = None
    metrics = path / METRICS_FILE
    if not metrics.exists():
        return files
    files.exists = True
    # study.py writes study.json when its run has ended, so a study.json older than the
    # metrics describes an earlier attempt (the run was redone by hand since): not this run.
    try:
        if files.record is not None and (
                (path / RECORD_FILE).stat().st_mtime < metrics.stat().st_mtime):
            files.record, files.stale_record = None, True
    except OSError:
        pass
    for line in metrics.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            files.bad_lines += 1
            continue
        if isinstance(obj, dict):
            files.records.append(obj)
    return files


def display_path(path, root):
    """Paths under the repository root are shown (and passed) relative to it: shorter commands."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _aside_names(path):
    path = Path(path)
    n = 1
    while True:
        yield path.with_name(path.name + (".prev" if n == 1 else f".prev{n}"))
        n += 1


def aside_target(path):
    """Where move_aside would put the run folder `path`: the first of seed<s>.prev,
    seed<s>.prev2, ... that is missing or holds an unfinished run (which it replaces); a
    finished run there is never replaced. Returns (target, [finished ones passed over])."""
    kept = []
    for candidate in _aside_names(path):
        if not candidate.exists():
            return candidate, kept
        if not read_run(candidate).finished:
            return candidate, kept
        kept.append(candidate)


def move_aside(path):
    """A run restarts from scratch (the trainer appends to an existing metrics file); its
    folder goes to aside_target(path), replacing an unfinished run there, never a finished
    one. Returns (target or None when there was nothing, [finished ones kept])."""
    path = Path(path)
    if not path.exists():
        return None, []
    target, kept = aside_target(path)
    if target.exists():
        shutil.rmtree(target)
    path.rename(target)
    return target, kept


def lock_path(path):
    """The lock file of the run folder `path`: next to it (<cell>/.seed<s>.lock), so that it
    survives move_aside and does not make a missing run folder exist."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


def try_lock(path):
    """Takes the run's lock (an exclusive flock, held while this process decides and runs
    it); returns the open lock file, to close when done, or None when another process holds
    it. The lock ends with the process, however it ends."""
    lock = lock_path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    handle = open(lock, "a")
    for attempt in range(3):  # a moment's shared lock of is_locked (a --list) is not a run
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except OSError:
            time.sleep(0.05)
    handle.close()
    return None


def is_locked(path):
    """Whether another process holds the run's lock now (creates nothing)."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def execute(cmd, path, root, meta):
    """Runs cmd from the repository root with its output in train.log; writes study.json."""
    path.mkdir(parents=True, exist_ok=True)
    started = time.time()
    interrupted = None
    with open(path / LOG_FILE, "wb") as log:
        try:
            rc = subprocess.run(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL).returncode
        except OSError as e:  # e.g. the launcher or binary does not exist
            log.write(f"study.py: cannot start {cmd[0]}: {e}\n".encode())
            rc = 127
        except KeyboardInterrupt as e:  # recorded, so the next study sees the run has ended
            rc, interrupted = -2, e
    wall = time.time() - started
    record = dict(meta, command=shlex.join(cmd), returncode=rc, wall_s=round(wall, 3),
                  started=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)))
    (path / RECORD_FILE).write_text(json.dumps(record, indent=1) + "\n")
    if interrupted is not None:
        raise interrupted
    return rc, wall


def log_tail(path, lines=20):
    try:
        text = (Path(path) / LOG_FILE).read_text(errors="replace").splitlines()
    except OSError:
        return ["(no train.log)"]
    return text[-lines:]
