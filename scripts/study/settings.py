"""What defines a run of a study, and whether the run on disk was made so: the trainer's
command for a cell and seed, the shell text of prepare steps, and the comparison of a finished
run's recorded command and resolved config with the study's now (runs.py holds the files)."""
import json
import re
import shlex
import subprocess
from pathlib import Path

from .runs import METRICS_FILE, display_path, run_dir


def substitute(text, values):
    """{name} placeholders by plain replacement, so shell text like ${HOME} passes through."""
    for name, value in values.items():
        text = text.replace("{" + name + "}", str(value))
    return text


def _quoted_for(value, quote):
    """value as shell text inside the quoting context `quote` (None, "'" or '"')."""
    if quote is None:
        return shlex.quote(value)
    if quote == "'":  # end the quote, an escaped quote, reopen
        return value.replace("'", "'\\''")
    return re.sub(r'([\\$`"])', r"\\\1", value)


def substitute_shell(text, values):
    """{name} placeholders in a bash command line, each value quoted for where it stands:
    outside quotes as one shell word (shlex.quote), inside '...' or "..." escaped for that
    quote. So "{bin_dir}/x", '{bin_dir}/x' and {bin_dir}/x all name the folder as it is, with
    spaces or shell characters in it, and never run any of it. Other text, ${HOME} included,
    passes through."""
    out, i, quote = [], 0, None
    names = [("{" + name + "}", str(value)) for name, value in values.items()]
    while i < len(text):
        hit = next(((ph, v) for ph, v in names if text.startswith(ph, i)), None)
        if hit:
            out.append(_quoted_for(hit[1], quote))
            i += len(hit[0])
            continue
        c = text[i]
        if c == "\\" and quote != "'" and i + 1 < len(text):  # an escaped character
            out.append(text[i:i + 2])
            i += 2
            continue
        if quote is None and c in "'\"":
            quote = c
        elif quote == c:
            quote = None
        out.append(c)
        i += 1
    return "".join(out)


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
    # Quoted as YAML (JSON's string syntax is YAML's): the trainer reads a --set value as
    # YAML, and an --out holding " #" or ": " failed every run (review, 2026-12-08).
    cmd += ["--set", f"log.metrics={json.dumps(str(metrics_path), ensure_ascii=False)}"]
    return cmd + (["--dry-run"] if dry_check else [])


# Keys that change only what the trainer prints, never what it trains or logs to
# metrics.jsonl (docs/config.md, log): editing one reruns nothing. The other log keys stay:
# log.metrics is the tool's, log.trace and its window add work to steps, and
# log.never_sent_window adds a decode per step and a metrics field.
OUTPUT_ONLY_KEYS = ("log.progress_interval", "log.per_rank_timing")


def effective_overrides(items):
    """--set overrides as the trainer applies them, as {key: value}: the last of a key wins,
    and a section set whole (`train={...}`) replaces what came before of it (train.steps), so
    two orders that configure alike give the same mapping and two that do not differ."""
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        key = key.strip()
        for old in [k for k in out if k == key or k.startswith(key + ".")]:
            del out[old]
        out[key] = value
    return out


def run_definition(cmd):
    """What defines a run in its command, as a mapping: the base config ("--config"), the
    overrides by key (effective_overrides, without log.metrics, where it is written, nor the
    OUTPUT_ONLY_KEYS, so their order and the printing do not count), any other argument,
    and the launcher (the words before the binary, with its -np: a run on another world size
    is another run; the binary's own path is left out, so a --binary copy does not rerun a
    study). A reordered common: or a progress_interval edit reran every finished run (review,
    2026-12-07)."""
    args = list(cmd)
    if "--config" not in args:
        return None
    start = args.index("--config")
    launcher = args[:max(start - 1, 0)]
    args = args[start:]
    overrides, other, i = [], [], 0
    while i < len(args):
        if args[i] == "--set" and i + 1 < len(args):
            overrides.append(args[i + 1])
            i += 2
        elif args[i] == "--config" and i + 1 < len(args):
            other.append(("--config", args[i + 1]))
            i += 2
        else:
            other.append((args[i], None))
            i += 1
    out = {k: v for k, v in effective_overrides(overrides).items()
           if k != "log.metrics" and k not in OUTPUT_ONLY_KEYS}
    out["--config"] = tuple(other)
    out["--launcher"] = " ".join(launcher)
    return out


def _definition_text(definition, key):
    """One entry of run_definition as the change message shows it."""
    value = definition[key]
    if key == "--config":
        return " ".join(w for pair in value for w in pair if w is not None and w != "--config")
    if key == "--launcher":
        return value or "no launcher"
    return f"{key}={value}"


def read_base(root, base):
    """The base config's text as the trainer reads it (from the repository root), or None."""
    try:
        return (Path(root) / base).read_text(errors="replace")
    except OSError:
        return None


def config_lines(text):
    """What a YAML config configures, for telling a real edit from a comment edit (which does
    not rerun a study): the parsed document where PyYAML reads it; else its lines with comments
    (from a '#' at the start of a line or after whitespace) and blank lines dropped. The lines
    alone missed an edit after ' #' inside a quoted value (review, 2026-12-08)."""
    try:
        import yaml  # the study tool's dependency (spec.py); the fallback needs none
        # As JSON text: 1 and 1.0 then differ (the trainer may refuse the float), and a .nan
        # equals itself.
        return ("parsed", json.dumps(yaml.safe_load(text), sort_keys=True, default=str))
    except Exception:  # noqa: BLE001  not YAML PyYAML reads (or no PyYAML): the lines
        pass
    out = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if line.strip():
            out.append(line)
    return ("lines", out)


def resolve_config(cmd, root, timeout=600):
    """The config the trainer would run for cmd (the trainer's argument list, launcher
    included), as its --dry-run prints it under "# resolved config": YAML text, or None when
    the dry run fails or prints none (no binary, a refused config)."""
    cmd = list(cmd) + ([] if "--dry-run" in cmd else ["--dry-run"])
    try:
        done = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    lines = done.stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("# resolved config")), None)
    if start is None:
        return None
    body = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        body.append(line)
    return "\n".join(body) + "\n" if body else None


def config_values(text):
    """A resolved config's YAML as {dotted.key: value}, or None when it does not parse."""
    try:
        import yaml
        doc = yaml.safe_load(text)
    except Exception:  # noqa: BLE001  a record written by hand or cut off: not comparable
        return None
    if not isinstance(doc, dict):
        return None
    flat = {}

    def walk(node, prefix):
        for key, value in node.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict) and value:
                walk(value, name + ".")
            else:
                flat[name] = value
    walk(doc, "")
    return flat


# The keys of which a resolved config lists only those that were set (the model's preset
# and its overrides, and each compressor's own settings, compress.<name>.<key>;
# docs/config.md): there a key one config has and the other lacks is a setting added or
# removed. Elsewhere every key is listed (compress.name, compress.seed, ... included), so a
# one-sided key is a trainer built since that added or dropped one.
def set_keys_only(key):
    return key.startswith("model.") or (key.startswith("compress.") and key.count(".") >= 2)


def config_differences(before, now, ignore=()):
    """The keys whose values differ between two resolved configs, as "key old -> new" texts
    ("(none)" for a key of set_keys_only() that one side lacks). Other keys that only one of
    them has are not compared; nor are `ignore` (the seed keys and log.metrics: the command
    says those)."""
    a, b = config_values(before), config_values(now)
    if a is None or b is None:
        return None
    # A section that was an empty mapping on one side is a single key there ("compress.topk":
    # {}); that is a one-sided key too.
    keys = set(a) & set(b) | {k for k in set(a) ^ set(b) if set_keys_only(k)}
    return [f"{k} {a.get(k, '(none)')} -> {b.get(k, '(none)')}" for k in sorted(keys)
            if k not in ignore and a.get(k, "(none)") != b.get(k, "(none)")]


class Resolver:
    """The resolved config a cell would run with now (the trainer's --dry-run, under the
    study's launcher), asked once per cell and base config text; None when it cannot be
    had (no binary, a refused cell)."""

    def __init__(self, study, root, binary, out):
        self.study, self.root, self.binary, self.out = study, root, binary, out
        self.cache = {}

    def now(self, cell, base_text):
        key = (cell.name, base_text)
        if key not in self.cache:
            seed = self.study.seeds[0]
            metrics = display_path(run_dir(self.out, cell.name, seed) / METRICS_FILE, self.root)
            self.cache[key] = resolve_config(train_command(
                self.study, cell, seed, metrics, self.binary, dry_check=True), self.root)
        return self.cache[key]


def changed_settings(files, cmd, base_text=None, resolved_now=None, ignore=()):
    """How the run on disk was made differently from `cmd` (the study's command for it now)
    and `base_text` (its base config now), as a short text; None when the same or unknown (a
    run made by hand has no study.json; one made before study.json kept the base config is
    compared by its command alone). When the base config's text differs and study.json holds
    the resolved config the run was made with, `resolved_now()` (the resolved config the
    command gives now, or None) decides: an edit that changes nothing this run trains (a key
    the study overrides) is no change; without either, any edit counts."""
    record = files.record or {}
    recorded = record.get("command")
    if not recorded:
        return None
    parts = []
    before, now = run_definition(shlex.split(recorded)), run_definition(cmd)
    if before is not None and now is not None and before != now:
        added = [_definition_text(now, k) for k in now if before.get(k) != now[k]]
        gone = [_definition_text(before, k) for k in before if now.get(k) != before[k]
                and not (k == "--launcher" and not before[k])]  # "now" says the new one
        parts += [f"now {' '.join(added)}" if added else "", f"was {' '.join(gone)}" if gone else ""]
        parts = [p for p in parts if p]
    recorded_base = record.get("base_config")
    if (base_text is not None and recorded_base is not None
            and config_lines(base_text) != config_lines(recorded_base)):
        base = next((v for k, v in (now or {}).get("--config", ()) if k == "--config"),
                    "the base config")
        recorded_resolved = record.get("resolved_config")
        current = resolved_now() if recorded_resolved and resolved_now else None
        diffs = (config_differences(recorded_resolved, current, ignore)
                 if current is not None else None)
        if diffs is None:  # nothing to compare what it trains: the text decides
            parts.append(f"{base} edited since it ran")
        elif diffs:
            shown = ", ".join(diffs[:4]) + (f" and {len(diffs) - 4} more" if len(diffs) > 4 else "")
            parts.append(f"{base} edited since it ran: {shown}")
    return "; ".join(parts) or None


def study_steps(study, cell, base_text):
    """The number of steps this study's runs of `cell` train (train.steps), as the study
    says it: the last override of common and the cell (the cell's win), else the base
    config's; None when neither says. A section override (`train={steps: 12, ...}`) counts;
    one without steps replaces the section, so the horizon is then unsaid (it was the base
    config's: review, 2026-12-07, a study that set the section reran every finished cell,
    judged to have ended at the wrong step)."""
    steps, overridden = None, False
    for item in study.common + cell.overrides:
        key, _, value = item.partition("=")
        key = key.strip()
        if key == "train.steps":
            overridden = True
            try:
                steps = int(value.strip())
            except ValueError:
                steps = None
        elif key == "train":
            overridden = True
            try:
                import yaml
                section = yaml.safe_load(value)
            except Exception:  # noqa: BLE001  the trainer refuses it; no horizon here
                section = None
            steps = section.get("steps") if isinstance(section, dict) else None
            if isinstance(steps, bool) or not isinstance(steps, int):
                steps = None
    if overridden:
        return steps
    try:
        import yaml
        value = (yaml.safe_load(base_text or "") or {}).get("train", {}).get("steps")
    except Exception:  # noqa: BLE001  an unreadable base: the horizon is unknown
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def run_changes(study, cell, files, cmd, base_text, resolver=None):
    """For a finished run: how it differs from what the study now makes of it (None: not at
    all). changed_settings for a run study.py made; for any run, also its horizon: a run
    that ended at another step than the study's train.steps (one made by hand, which has no
    command to compare) is another run."""
    if not files.finished:
        return None
    changed = changed_settings(files, cmd, base_text,
                               (lambda: resolver.now(cell, base_text)) if resolver else None,
                               ignored_keys(study))
    if changed:
        return changed
    horizon = study_steps(study, cell, base_text)
    if horizon is not None and files.end_step != horizon:
        return (f"it ended at step {files.end_step}; this study's runs train {horizon} steps "
                "(train.steps)")
    return None


def ignored_keys(study):
    """Resolved-config keys left out of the comparison: the run's place and its seed, which
    the command compares (the resolved config now is asked for one seed per cell)."""
    # The keys that only change what the trainer prints, as the command comparison leaves
    # them out: an edit of log.progress_interval in the base config reran every finished run
    # (review, 2026-12-08).
    return ("log.metrics",) + OUTPUT_ONLY_KEYS + tuple(study.seed_keys)
