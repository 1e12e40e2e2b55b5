"""One run of a study: where it lives, whether it finished, its command, and running it.

Layout (fixed; runs are also made by hand in it): <out>/<cell>/seed<s>/metrics.jsonl, the
trainer's stdout+stderr in train.log next to it, and study.json (what this tool measured).
"""
import json
import re
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

    @property
    def returncode(self):
        return (self.record or {}).get("returncode")

    @property
    def finished(self):
        # A run study.py made counts only if it also exited 0: rank 0 may write its end record
        # and the job still fail (another rank at teardown, the export after training).
        last = self.records[-1] if self.records else {}
        return (last.get("event") == "end" and last.get("stopped_early") is False
                and self.returncode in (None, 0))

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
            where += ", stopped early" if last.get("stopped_early") is not False else \
                ", after its end record"
        if self.bad_lines:
            where += f", {self.bad_lines} unreadable line(s) in metrics.jsonl"
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


def substitute(text, values):
    """{name} placeholders by plain replacement, so shell text like ${HOME} passes through."""
    for name, value in values.items():
        text = text.replace("{" + name + "}", str(value))
    return text


def train_command(study, cell, seed, metrics_path, binary, dry_check=False):
    """The trainer's argument list. dry_check: with --dry-run, to validate a cell; under the
    launcher too, since some checks depend on the number of ranks (one process refused
    comm.split_tied_embedding: always, which the study's two ranks accept)."""
    launcher = [] if study.launcher is None else shlex.split(
        substitute(study.launcher, {"world_size": study.world_size}))
    cmd = launcher + [binary, "--config", study.base]
    for override in study.common + cell.overrides:
        cmd += ["--set", override]
    for key in study.seed_keys:  # in order; the default (train.seed alone) is what runs always had
        cmd += ["--set", f"{key}={seed}"]
    cmd += ["--set", f"log.metrics={metrics_path}"]
    return cmd + (["--dry-run"] if dry_check else [])


def run_definition(cmd):
    """What defines a run in its command: the arguments from --config on, without the
    log.metrics override (where it is written, not what it trains), then the launcher (the
    words before the binary, with its -np: a run on another world size is another run; the
    binary's own path is left out, so a --binary copy does not rerun a study)."""
    args = list(cmd)
    if "--config" not in args:
        return None
    start = args.index("--config")
    launcher = args[:max(start - 1, 0)]
    args = args[start:]
    out, i = [], 0
    while i < len(args):
        if args[i] == "--set" and i + 1 < len(args) and args[i + 1].startswith("log.metrics="):
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out + (["--launcher", " ".join(launcher)] if launcher else [])


def read_base(root, base):
    """The base config's text as the trainer reads it (from the repository root), or None."""
    try:
        return (Path(root) / base).read_text(errors="replace")
    except OSError:
        return None


def config_lines(text):
    """The lines of a YAML config that can change what it configures: comments (from a '#' at
    the start of a line or after whitespace) and blank lines dropped, so a comment edit does not
    rerun a study."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if line.strip():
            out.append(line)
    return out


def changed_settings(files, cmd, base_text=None):
    """How the run on disk was made differently from `cmd` (the study's command for it now)
    and `base_text` (its base config now), as a short text; None when the same or unknown (a
    run made by hand has no study.json; one made before study.json kept the base config is
    compared by its command alone)."""
    record = files.record or {}
    recorded = record.get("command")
    if not recorded:
        return None
    parts = []
    before, now = run_definition(shlex.split(recorded)), run_definition(cmd)
    if before is not None and now is not None and before != now:
        flags = ("--set", "--launcher")
        gone = [a for a in before if a not in now and a not in flags]
        added = [a for a in now if a not in before and a not in flags]
        parts += [f"now {' '.join(added)}" if added else "", f"was {' '.join(gone)}" if gone else ""]
        parts = [p for p in parts if p] or ["the same settings in another order"]
    recorded_base = record.get("base_config")
    if (base_text is not None and recorded_base is not None
            and config_lines(base_text) != config_lines(recorded_base)):
        base = now[1] if now and len(now) > 1 else "the base config"
        parts.append(f"{base} edited since it ran")
    return "; ".join(parts) or None


def move_aside(path):
    """An unfinished run restarts from scratch; its files go to seed<s>.prev (one kept)."""
    path = Path(path)
    if not path.exists():
        return None
    prev = path.with_name(path.name + ".prev")
    if prev.exists():
        shutil.rmtree(prev)
    path.rename(prev)
    return prev


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
