"""One run of a study: where it lives, whether it finished, its command, and running it.

Layout (fixed; runs are also made by hand in it): <out>/<cell>/seed<s>/metrics.jsonl, the
trainer's stdout+stderr in train.log next to it, and study.json (what this tool measured).
A study.py process running a run holds <out>/<cell>/.seed<s>.lock (flock) meanwhile.
"""
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import signal
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
# study.json from before it kept the metrics' fingerprint is judged by time: a copy of the
# folder (cp -r) writes the two files moments apart, a run redone by hand takes longer.
LEGACY_SLACK_SECONDS = 5


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
    stale_record: bool = False                   # a study.json of another metrics.jsonl, ignored
    fingerprint: dict | None = None              # of metrics.jsonl as it is (None: no file)

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
        # study.py's own record of how the run ended, of these very metrics (read_run drops
        # one of other metrics): it has ended.
        if self.returncode is not None:
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
            where += ", study.json written for another metrics.jsonl (ignored)"
        if rc not in (None, 0):
            return f"failed (exit status {rc}), {where}"
        return f"unfinished, {where}"


def fingerprint(data):
    """What study.json keeps of the metrics file its run left (data: the file's bytes), to
    tell later whether the file on disk is still that one: copies keep it, a rerun by hand or
    an append changes it, a touch does not."""
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def metrics_fingerprint(path):
    """fingerprint() of <path>/metrics.jsonl, or None when there is none."""
    try:
        return fingerprint((Path(path) / METRICS_FILE).read_bytes())
    except OSError:
        return None


def _record_is_of(files, record, metrics):
    """Whether study.json `record` describes the metrics file on disk. It keeps the file's
    fingerprint as the run left it (null: the run wrote none); mtimes alone made a copied
    study's runs unfinished (cp -r writes study.json first) and let a touch of metrics.jsonl
    revive a failed run (review, 2026-12-07). Without one (an older study.json) time decides:
    one clearly older than metrics.jsonl is of an earlier attempt, the run redone by hand."""
    if "metrics_fingerprint" in record:
        return record["metrics_fingerprint"] == files.fingerprint
    try:
        written = (files.path / RECORD_FILE).stat().st_mtime
        return written + LEGACY_SLACK_SECONDS >= metrics.stat().st_mtime
    except OSError:
        return True


def read_run(path):
    path = Path(path)
    files = RunFiles(path=path)
    try:
        files.record = json.loads((path / RECORD_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        files.record = None
    if not isinstance(files.record, dict):
        files.record = None
    metrics = path / METRICS_FILE
    try:
        data = metrics.read_bytes()
    except OSError:
        data = None
    if data is not None:
        files.exists = True
        files.fingerprint = fingerprint(data)
    # study.py writes study.json when its run has ended: one of other metrics (an earlier
    # attempt; the run was redone by hand, or the file written to since) is not this run's.
    if files.record is not None and (data is not None or files.record.get("metrics_fingerprint")):
        if not _record_is_of(files, files.record, metrics):
            files.record, files.stale_record = None, True
    if data is None:
        return files
    for line in data.decode(errors="replace").splitlines():
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


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """study.py got a stop signal (Ctrl-C, SIGTERM, SIGHUP); raised once no child runs. A
    BaseException, as KeyboardInterrupt is: the report's `except Exception` swallowed it and
    the study went on to its next run (self-review, 2026-12-07)."""

    def __init__(self, signum, returncode=None):
        super().__init__(signal.Signals(signum).name)
        self.signum, self.returncode = signum, returncode  # the child's, when one ran


class _Stop:
    """The stop signals' handler. While a child runs (guarded), a signal is passed on to the
    child's process group (SIGHUP as SIGTERM) and the child is waited for, so the trainer
    stops as on its own signal (after its step, with its end record) and its exit status is
    recorded; Stopped is raised after. Elsewhere a signal raises Stopped at once. The child
    has its own process group, so Ctrl-C at a terminal reaches it once, through here: a
    second signal ends the trainer at once (docs/reliability.md), which a second Ctrl-C
    should do, and the first must not."""

    def __init__(self):
        self.child, self.guarded = None, False
        self.signals, self.forwarded = [], 0  # received while guarded; how many passed on

    def guard(self, on):
        self.guarded, self.signals, self.forwarded = on, ([] if on else self.signals), 0

    def install(self):
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) != signal.SIG_IGN:  # nohup, a background job: kept
                signal.signal(sig, self.handle)

    def handle(self, signum, frame):
        if not self.guarded:
            raise Stopped(signum)
        self.signals.append(signum)
        self.forward()

    def forward(self):
        """Passes on the signals not passed on yet, once the child exists (one that came
        while it was being started waits for it)."""
        while self.child is not None and self.forwarded < len(self.signals):
            signum = self.signals[self.forwarded]
            self.forwarded += 1
            if self.child.returncode is None:
                try:  # the trainer stops cleanly on SIGINT and SIGTERM; SIGHUP would kill it
                    os.killpg(self.child.pid, signal.SIGTERM if signum == signal.SIGHUP else signum)
                except OSError:  # it has just ended
                    pass

    def run(self, cmd, **kwargs):
        """cmd's exit status, waiting for it whatever signal comes (subprocess.run would
        SIGKILL the child 0.25 s after a Ctrl-C, cutting its stop short); OSError when it
        cannot start. Call under guarded."""
        child = subprocess.Popen(cmd, process_group=0, **kwargs)
        self.child = child
        self.forward()
        try:
            return child.wait()  # a handled signal interrupts nothing here (PEP 475)
        finally:
            self.child = None


STOP = _Stop()


def run_child(cmd, **kwargs):
    """A child process (a prepare step) run as execute runs a run: a stop signal is passed on
    to it and it is waited for; then Stopped is raised."""
    STOP.guard(True)
    try:
        rc = STOP.run(cmd, **kwargs)
    finally:
        STOP.guard(False)
    if STOP.signals:
        raise Stopped(STOP.signals[0], rc)
    return rc


def execute(cmd, path, root, meta):
    """Runs cmd from the repository root with its output in train.log; writes study.json,
    with the fingerprint of the metrics the run left, also when a stop signal ended it (then
    Stopped is raised after)."""
    path.mkdir(parents=True, exist_ok=True)
    STOP.guard(True)
    try:
        started = time.time()
        with open(path / LOG_FILE, "wb") as log:
            try:
                rc = STOP.run(cmd, cwd=root, stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)
            except OSError as e:  # e.g. the launcher or binary does not exist
                log.write(f"study.py: cannot start {cmd[0]}: {e}\n".encode())
                rc = 127
        wall = time.time() - started
        record = dict(meta, command=shlex.join(cmd), returncode=rc, wall_s=round(wall, 3),
                      started=time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
                      metrics_fingerprint=metrics_fingerprint(path))
        (path / RECORD_FILE).write_text(json.dumps(record, indent=1) + "\n")
    finally:
        STOP.guard(False)
    if STOP.signals:
        raise Stopped(STOP.signals[0], rc)
    return rc, wall


def log_tail(path, lines=20):
    try:
        text = (Path(path) / LOG_FILE).read_text(errors="replace").splitlines()
    except OSError:
        return ["(no train.log)"]
    return text[-lines:]
