"""The study file: which trainer runs a convergence study is made of (docs/study.md)."""
import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

METRICS = ("perplexity", "loss", "accuracy")
DEFAULT_LAUNCHER = "scripts/mpirun.sh -np {world_size}"
DEFAULT_BINARY = "build/apps/train"
# Set for every run by the tool itself; a study that set them would break the run layout.
RESERVED_KEYS = ("train.seed", "log.metrics")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # names become folder names
# What the reports write into the study root, beside the cell folders; a cell of such a name
# made study.py fail on creating its folder (review, 2026-12-07).
REPORT_FILES = ("summary.md", "summary.json")
REPORT_SUFFIX = ".png"
TOP_KEYS = ("name", "base", "world_size", "launcher", "binary", "common", "seeds", "seed_keys",
            "reference", "metric", "target", "prepare", "cells")


class StudyError(Exception):
    """A bad study file; the message names the file and the key."""


@dataclass
class Cell:
    name: str
    overrides: list  # "key=value" strings, passed as --set after the common ones
    label: str


@dataclass
class PrepareStep:
    run: str       # a bash command line, run from the repository root
    creates: list  # paths; the step is skipped when all exist (empty: always run)


@dataclass
class Study:
    path: Path
    name: str
    base: str
    world_size: int
    launcher: str | None  # None: run the binary directly (world size 1)
    binary: str
    common: list
    seeds: list
    seed_keys: list  # config keys set to each run's seed; train.seed always among them
    reference: str
    metric: str
    target: float | None  # an eval LOSS value for "time to target"
    prepare: list
    cells: list

    def cell(self, name):
        return next(c for c in self.cells if c.name == name)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys silently; a repeated cell name must be an error."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            # A merge key (<<: *anchor) is the base loader's to expand (after this check, so
            # that a key given here overrides the merged one, as YAML says): constructing it
            # failed with "could not determine a constructor" (review, 2026-12-08).
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise StudyError(f"line {key_node.start_mark.line + 1}: a key that is not text "
                                 f"({key!r})") from None
            if key in seen:
                raise StudyError(f"line {key_node.start_mark.line + 1}: key '{key}' appears twice")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_study(path):
    path = Path(path)
    try:
        doc = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
    except (OSError, yaml.YAMLError, StudyError) as e:
        raise StudyError(f"{path}: {e}") from None
    if not isinstance(doc, dict):
        raise StudyError(f"{path}: expected a mapping of study keys")

    def fail(key, message):
        raise StudyError(f"{path}: {key}: {message}")

    for key in doc:
        if key not in TOP_KEYS:
            fail(key, f"unknown key (known keys: {', '.join(TOP_KEYS)})")
    for key in ("name", "base", "cells"):
        if doc.get(key) is None:
            fail(key, "required")

    name = _string(doc["name"], "name", fail)
    if not NAME.match(name):
        fail("name", f"'{name}' must be letters, digits, '_', '-' or '.' (it names a folder)")
    world_size = doc.get("world_size", 1)
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        fail("world_size", f"must be an integer >= 1, got {world_size!r}")
    launcher = doc.get("launcher", DEFAULT_LAUNCHER)
    # "" is documented as "run the binary directly", like none and null (it was refused as
    # not a non-empty string: review, 2026-12-07).
    if launcher is not None and launcher != "":
        launcher = _string(launcher, "launcher", fail).strip()
    if launcher in ("", "none", None):
        launcher = None
        if world_size > 1:
            fail("launcher", f"empty, but world_size is {world_size}: only one process can run "
                             "without a launcher")
    seeds = doc.get("seeds", [1])
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        fail("seeds", f"must be a non-empty list of integers >= 0, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        fail("seeds", f"repeats a seed: {seeds}")
    metric = doc.get("metric", "loss")
    if metric not in METRICS:
        fail("metric", f"must be one of {', '.join(METRICS)}, got {metric!r}")
    target = doc.get("target")
    # .inf would count every eval as reaching it, .nan none (review, 2026-12-07).
    if target is not None and (not isinstance(target, (int, float)) or isinstance(target, bool)
                               or not math.isfinite(target)):
        fail("target", f"must be a finite number (an eval loss), got {target!r}")

    # Which config keys a seed sets. train.seed alone by default (the model's init, dropout,
    # data order): every seed then shares compress.seed's draws (stochastic rounding,
    # PowerSGD's start), so the spread over seeds leaves the compressor's own noise out;
    # seed_keys: [train.seed, compress.seed] puts it in.
    seed_keys = doc.get("seed_keys", ["train.seed"])
    if (not isinstance(seed_keys, list) or not all(isinstance(k, str) and k for k in seed_keys)
            or "train.seed" not in seed_keys or len(set(seed_keys)) != len(seed_keys)
            or "log.metrics" in seed_keys):
        fail("seed_keys", f"must be a list of distinct config keys that holds train.seed (and "
                          f"not log.metrics), got {seed_keys!r}")
    common = _overrides(doc.get("common"), "common", fail)
    cells = _cells(doc["cells"], fail)
    for where, overrides in [("common", common)] + [(f"cells.{c.name}", c.overrides)
                                                   for c in cells]:
        for item in overrides:
            if item.split("=", 1)[0].strip() in seed_keys:
                fail(where, f"{item.split('=', 1)[0]} is a seed key (seed_keys): each run's "
                            "seed sets it")
    reference = doc.get("reference", cells[0].name)
    if reference not in [c.name for c in cells]:
        fail("reference", f"'{reference}' is not a cell (cells: {', '.join(c.name for c in cells)})")
    return Study(path=path, name=name, base=_string(doc["base"], "base", fail),
                 world_size=world_size, launcher=launcher,
                 binary=_string(doc.get("binary", DEFAULT_BINARY), "binary", fail),
                 common=common, seeds=seeds, seed_keys=list(seed_keys),
                 reference=reference, metric=metric,
                 target=None if target is None else float(target),
                 prepare=_prepare(doc.get("prepare"), fail), cells=cells)


def _string(value, key, fail):
    if not isinstance(value, str) or not value:
        fail(key, f"must be a non-empty string, got {value!r}")
    return value


def _overrides(value, key, fail):
    if value is None:
        return []
    if not isinstance(value, list):
        fail(key, f"must be a list of key=value strings, got {value!r}")
    for i, item in enumerate(value):
        # "- a.b: c" parses as a mapping; say how to write it instead of a confusing type error.
        if not isinstance(item, str) or "=" not in item or item.startswith("="):
            fail(f"{key}[{i}]", f"must be a 'key=value' string, got {item!r}")
        if item.split("=", 1)[0].strip() in RESERVED_KEYS:
            fail(f"{key}[{i}]", f"{item.split('=', 1)[0]} is set by study.py for every run "
                                "(seeds: and the run layout)")
    return list(value)


def _cells(value, fail):
    if not isinstance(value, dict) or not value:
        fail("cells", "must be a non-empty mapping cell-name -> overrides")
    cells = []
    for name, body in value.items():
        key = f"cells.{name}"
        if not isinstance(name, str) or not NAME.match(name):
            fail(key, "a cell name must be letters, digits, '_', '-' or '.' (it names a folder)")
        if name.lower() in REPORT_FILES or name.lower().endswith(REPORT_SUFFIX):
            fail(key, f"'{name}' is the name of a report in the study root (summary.md, "
                      "summary.json, *.png); a cell names a folder there: choose another name")
        label = name
        if isinstance(body, dict):
            for k in body:
                if k not in ("set", "label"):
                    fail(f"{key}.{k}", "unknown key (known keys: set, label)")
            label = _string(body.get("label", name), f"{key}.label", fail)
            body = body.get("set")
        cells.append(Cell(name=name, overrides=_overrides(body, f"{key}.set", fail), label=label))
    return cells


def _prepare(value, fail):
    if value is None:
        return []
    if not isinstance(value, list):
        fail("prepare", "must be a list of commands or {run, creates} mappings")
    steps = []
    for i, item in enumerate(value):
        key = f"prepare[{i}]"
        if isinstance(item, str):
            steps.append(PrepareStep(run=item, creates=[]))
            continue
        if not isinstance(item, dict):
            fail(key, f"must be a command string or a {{run, creates}} mapping, got {item!r}")
        for k in item:
            if k not in ("run", "creates"):
                fail(f"{key}.{k}", "unknown key (known keys: run, creates)")
        creates = item.get("creates", [])
        creates = [creates] if isinstance(creates, str) else creates
        if not isinstance(creates, list) or not all(isinstance(c, str) for c in creates):
            fail(f"{key}.creates", f"must be a path or a list of paths, got {creates!r}")
        # "" is the repository root, which always exists: the step was skipped for good
        # (review, 2026-12-08).
        if any(not c.strip() for c in creates):
            fail(f"{key}.creates", f"an empty path in {creates!r}")
        steps.append(PrepareStep(run=_string(item.get("run"), f"{key}.run", fail), creates=creates))
    return steps
