"""summary.md and summary.json of a study (same numbers; the JSON is for scripts)."""
import json
from pathlib import Path

from .analysis import MIB, CellStats, Spread, relative_pct, run_stats
from .runs import METRICS_FILE, read_run, run_dir
from .settings import read_base, run_changes, train_command

WORSE_WHEN_HIGHER = {"perplexity": True, "loss": True, "accuracy": False}
DIGITS = {"perplexity": 2, "loss": 4, "accuracy": 4}
WALL_MARK = {"measured": "m", "step_ms": "Σ", "mixed": "m/Σ", "unknown": "no step_ms"}


def collect(study, out, root, resolver=None):
    """Reads every run of the study (commands run from `root`); returns CellStats in study
    order. resolver (settings.Resolver): asked for a cell's resolved config when the base
    config's text changed since a run was made."""
    base_text = read_base(root, study.base)
    cells = []
    for cell in study.cells:
        stats = CellStats(name=cell.name, label=cell.label, runs=[])
        for seed in study.seeds:
            path = run_dir(out, cell.name, seed)
            files = read_run(path)
            changed = run_changes(study, cell, files, train_command(
                study, cell, seed, path / METRICS_FILE, study.binary), base_text, resolver)
            if files.finished and not changed:
                run = run_stats(seed, files, study.metric, study.target)
                stats.runs.append(run)
                if run.final_metric is None:  # counted finished, but out of the metric's mean
                    stats.problems.append((seed, f"finished without a final {study.metric} "
                                                 "(null: not finite, or not one this model "
                                                 "reports); left out of its mean"))
            elif changed:  # made under another definition of the cell: not this study's run
                stats.problems.append((seed, f"finished with other settings ({changed})"))
            else:
                stats.problems.append((seed, files.describe()))
        if stats.mixed_steps:
            ends = ", ".join(f"seed {r.seed}: {r.end_step}" for r in stats.runs)
            stats.notes.append(f"its finished seeds end at different steps ({ends}): its means "
                               f"mix horizons, and it is compared with no cell")
        cells.append(stats)
    return cells


def _fmt(spread, digits, scale=1.0, finished=None):
    """finished: the seeds the cell finished; a mean over fewer (a seed that logged null)
    says its own n, or it would pass for the mean over all of them."""
    if spread.mean is None:
        return "–"
    text = f"{spread.mean * scale:.{digits}f}"
    text += f" ± {spread.std * scale:.{digits}f}" if spread.std is not None else ""
    return text + (f" (n={spread.n})" if finished is not None and spread.n < finished else "")


def _steps_text(steps):
    """The eval steps at which seeds reached the target: "step 6", or "steps 6-12" when they
    differ (their mean, "step 8", was no eval step at all: review, 2026-12-07)."""
    low, high = min(steps), max(steps)
    return f"step {low}" if low == high else f"steps {low}-{high}"


def _target_text(cell, target):
    reached = cell.target_reached
    if not cell.runs:
        return "–"
    if not reached:
        return "not reached"
    # The time is known only when every seed that reached the target logged step_ms up to it
    # (a mean over fewer would pass for all of them).
    times = [r.target_time for r in reached]
    seconds = "–" if None in times else f"{Spread.of(times).mean:.1f} s"
    text = f"{seconds} @ {_steps_text([r.target_step for r in reached])}"
    return text if len(reached) == len(cell.runs) else f"{text} ({len(reached)}/{len(cell.runs)} seeds)"


def _table_cell(text):
    """text as one cell of a markdown table: a '|' would end the cell, a line break the row."""
    return " ".join(str(text).replace("|", "\\|").splitlines())


def paired_means(cell, reference, attribute, seeds=None):
    """The means of `attribute` over the seeds both cells finished (equal seeds against the
    reference), and those seeds; None means when they share none. `seeds`: exactly these
    seeds (another attribute's pairing), None means unless both have the value at each."""
    # Seeds where both cells have the value: a null on one side must not unpair the means.
    shared = sorted({r.seed for r in cell.runs if getattr(r, attribute) is not None}
                    & {r.seed for r in reference.runs if getattr(r, attribute) is not None})
    if seeds is not None:
        if not seeds or not set(seeds) <= set(shared):
            return None, None, list(seeds)
        shared = list(seeds)
    mine = Spread.of([getattr(r, attribute) for r in cell.runs if r.seed in shared]).mean
    ref = Spread.of([getattr(r, attribute) for r in reference.runs if r.seed in shared]).mean
    return mine, ref, shared


def refusal(cell, reference):
    """Why `cell` is not compared with `reference`, or None: seeds ending at different steps
    in either (a run made by hand at another horizon) would make the paired means wrong, and
    so would a cell that trains to another horizon than the reference (a cell setting its
    own train.steps: it was compared without a word; review, 2026-12-07)."""
    if cell.mixed_steps:
        return f"its seeds end at different steps ({', '.join(map(str, cell.end_steps))})"
    if reference.mixed_steps:
        return (f"the seeds of {reference.name} end at different steps "
                f"({', '.join(map(str, reference.end_steps))})")
    if cell.end_steps and reference.end_steps and cell.end_steps != reference.end_steps:
        return (f"it ends at step {cell.end_steps[0]}, the reference {reference.name} at step "
                f"{reference.end_steps[0]}")
    return None


def cell_numbers(cell, reference, study):
    """One row of the summary, as plain numbers (summary.json; the table formats these)."""
    refused = refusal(cell, reference)
    if refused:
        metric = ref_metric = bytes_mean = ref_bytes = None
        shared = []
    else:
        metric, ref_metric, shared = paired_means(cell, reference, "final_metric")
        # Over the seeds of the vs figure, as docs/study.md says: a seed whose final metric is
        # null paired the bytes over other seeds than the vs column (review, 2026-12-08).
        bytes_mean, ref_bytes, _ = paired_means(cell, reference, "bytes_per_step", shared)
    reached = cell.target_reached
    return {
        "name": cell.name, "label": cell.label,
        "seeds_finished": [r.seed for r in cell.runs],
        "end_steps": cell.end_steps,
        "vs_reference_refused": refused,
        "final_metric": cell.spread("final_metric").as_dict(),
        "final_loss": cell.spread("final_loss").as_dict(),
        # Over the seeds both finished, so a cell with fewer seeds meets the same ones.
        "vs_reference_seeds": shared,
        "vs_reference_pct": relative_pct(metric, ref_metric),
        # Accuracy targets are stated in points (e.g. "within 0.5 point of dense").
        "vs_reference_points": (None if study.metric != "accuracy" or ref_metric is None
                                or metric is None else 100.0 * (metric - ref_metric)),
        "bytes_sent_per_step_mib": Spread.of(
            [r.bytes_per_step / MIB if r.bytes_per_step is not None else None
             for r in cell.runs]).as_dict(),
        "bytes_ratio_to_reference": (bytes_mean / ref_bytes
                                     if bytes_mean is not None and ref_bytes else None),
        "wall_s": cell.spread("wall_s").as_dict(), "wall_source": cell.wall_source,
        "time_to_target": None if study.target is None or not cell.runs else {
            "target_loss": study.target, "seeds_reached": len(reached),
            "seconds": (None if any(r.target_time is None for r in reached)
                        else Spread.of([r.target_time for r in reached]).mean),
            # The mean of eval steps is no eval step: the steps themselves, one per seed.
            "step": Spread.of([r.target_step for r in reached]).mean,
            "steps": [r.target_step for r in reached]},
        "rel_compression_error": cell.spread("rel_error_mean").as_dict(),
        "train_loss_last10pct": cell.spread("tail_loss").as_dict(),
        "problems": [{"seed": s, "status": d} for s, d in cell.problems],
        "notes": list(cell.notes),
    }


def write_reports(study, out, cells, display_out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    reference = next(c for c in cells if c.name == study.reference)
    rows = [cell_numbers(c, reference, study) for c in cells]
    (out / "summary.json").write_text(json.dumps({
        "study": study.name, "study_file": str(study.path), "base": study.base,
        "world_size": study.world_size, "seeds": study.seeds, "metric": study.metric,
        "reference": study.reference, "target_loss": study.target,
        "time_axis": "cumulative step_ms of the step records",
        "cells": rows}, indent=1) + "\n")
    (out / "summary.md").write_text(_markdown(study, cells, rows, display_out))


def _markdown(study, cells, rows, display_out):
    m, digits = study.metric, DIGITS[study.metric]
    reference = next(c for c in cells if c.name == study.reference)
    sign = "+ = worse" if WORSE_WHEN_HIGHER[m] else "+ = better"
    any_error = any(r["rel_compression_error"]["n"] for r in rows)
    lead_is_loss = m == "loss"  # no second loss column then
    head = ["cell", "label", "seeds finished", f"final eval {m}"]
    head += [] if lead_is_loss else ["final eval loss"]
    points = m == "accuracy"
    head += [f"vs {study.reference} (% of {m}, {sign})"]
    head += [f"vs {study.reference} (accuracy points)"] if points else []
    head += ["MiB sent/step/rank",
             f"bytes × {study.reference}", "wall time (s)"]
    head += [f"time to eval loss ≤ {study.target:g}"] if study.target is not None else []
    head += ["rel. compression error"] if any_error else []
    head += ["train loss, last 10% of steps"]
    lines = [f"# Study `{study.name}`", "",
             f"Base config `{study.base}`, {study.world_size} rank(s), seeds "
             f"{', '.join(map(str, study.seeds))}, reference `{study.reference}`; runs in "
             f"`{display_out}`. Written by scripts/study.py from `{study.path}`.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for cell, row in zip(cells, rows):
        pct = row["vs_reference_pct"]
        ratio = row["bytes_ratio_to_reference"]
        def fmt(spread, digits, scale=1.0):
            return _fmt(spread, digits, scale, finished=len(cell.runs))

        wall = fmt(cell.spread("wall_s"), 1)
        wall = wall if not cell.runs else f"{wall} ({WALL_MARK[cell.wall_source]})"
        values = [cell.name, cell.label, f"{len(cell.runs)}/{len(study.seeds)}",
                  fmt(cell.spread("final_metric"), digits)]
        values += [] if lead_is_loss else [fmt(cell.spread("final_loss"), 4)]
        # The seeds compared, when they are not all of this cell's and the reference's.
        paired = row["vs_reference_seeds"]
        some = (f" (seeds {', '.join(map(str, paired))})"
                if paired and len(paired) < max(len(cell.runs), len(reference.runs)) else "")
        if row["vs_reference_refused"]:
            values += ["– (not compared: another horizon, see below)"]
        else:
            values += ["–" if pct is None else f"{pct:+.2f}{some}"]
        if points:
            pts = row["vs_reference_points"]
            values += ["–" if pts is None else f"{pts:+.2f}"]
        values += [fmt(Spread.of([r.bytes_per_step for r in cell.runs]), 3, 1 / MIB),
                   "–" if ratio is None else f"{ratio:.4f}",
                   wall]
        values += [_target_text(cell, study.target)] if study.target is not None else []
        values += [fmt(cell.spread("rel_error_mean"), 4)] if any_error else []
        values += [fmt(cell.spread("tail_loss"), 4)]
        lines.append("| " + " | ".join(_table_cell(v) for v in values) + " |")
    lines += ["", "Means over the finished seeds, ± the sample standard deviation when more than "
              "one finished; (n=k) marks a mean over fewer seeds, the others having logged null "
              f"for it. The vs and bytes × columns compare with `{study.reference}` over "
              "the seeds both finished (named when that is not all of them). Bytes: `bytes_sent` of rank 0's step records. Wall time: "
              "m = measured by study.py (launch to exit, with start-up and evaluation); "
              "Σ = sum of `step_ms` of the step records (training steps only: a run made "
              "without study.py); – (no step_ms): neither (a run made without study.py by a "
              "trainer that logged no `step_ms`). Time to target and the time axis of "
              "eval_vs_time.png: cumulative `step_ms` up to the first eval whose loss reached "
              "the target, @ the eval step at which the seeds reached it (their range when "
              "it differs)."]
    notes = [(c.name, n) for c in cells for n in c.notes]
    # A cell at another horizon than the reference's (each consistent in itself) has no note
    # of its own: its refusal is the note.
    notes += [(c.name, row["vs_reference_refused"] + ": compared with no cell")
              for c, row in zip(cells, rows) if row["vs_reference_refused"]
              and not c.mixed_steps and not reference.mixed_steps]
    if notes:
        lines += ["", "## Cells not compared", ""]
        lines += [f"- `{name}`: {note}" for name, note in notes]
        if reference.mixed_steps:
            lines += [f"- every cell: the reference `{study.reference}` mixes horizons, so no "
                      "vs or bytes × figure is given"]
    problems = [(c.name, s, d) for c in cells for s, d in c.problems]
    lines += ["", "## Missing or failed runs", ""]
    lines += [f"- `{name}` seed {seed}: {what}" for name, seed, what in problems] or ["none"]
    return "\n".join(lines) + "\n"
