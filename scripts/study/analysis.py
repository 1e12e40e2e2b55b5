"""The numbers of a study: per run from its metrics.jsonl, then per cell over seeds.

Time axis: the cumulative step_ms of the step records (training steps only, no evaluation or
start-up), the one clock every run has. Total wall time: what study.py measured (study.json)
when it made the run, else the same step_ms sum; each cell says which (wall_source). Step
records without step_ms (an older trainer's) leave the times from there on unknown (None).
"""
import bisect
import math
import statistics
from dataclasses import dataclass, field

MIB = 1024.0 * 1024.0


def _num(value):
    """A finite float, or None (the trainer writes non-finite values as null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _latest_by_step(records, event):
    """Records of one event, one per step, in step order. A resumed run appends to its metrics
    file, so a step may appear twice; the later record is the one the run continued from."""
    by_step = {}
    for r in records:
        if r.get("event") == event and isinstance(r.get("step"), int):
            by_step[r["step"]] = r
    return [by_step[s] for s in sorted(by_step)]


def _seconds(ms):
    return None if ms is None else ms / 1000.0


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


@dataclass
class RunStats:
    seed: int
    steps: list               # step numbers of the step records
    train_loss: list          # per step (None where not finite)
    eval_steps: list
    eval_metric: list         # the study's lead metric at each eval
    eval_loss: list
    eval_bytes: list          # cumulative bytes sent by this rank up to each eval
    eval_time: list           # cumulative step_ms / 1000 up to each eval
    rel_error: list           # (step, rel_compression_error) where logged
    final_metric: float | None
    final_loss: float | None
    bytes_per_step: float | None  # mean bytes_sent per step record
    wall_s: float | None      # None: unknown (no study.json, and steps without step_ms)
    wall_source: str          # "measured", "step_ms" or "unknown"
    end_step: int | None = None   # the step of the end record: the run's horizon
    target_step: int | None = None
    target_time: float | None = None  # None also when the steps up to it lack step_ms
    tail_loss: float | None = None  # mean train loss of the last 10% of steps
    rel_error_mean: float | None = None


def run_stats(seed, files, metric, target):
    steps = _latest_by_step(files.records, "step")
    evals = _latest_by_step(files.records, "eval")
    cum_bytes, cum_ms, total_bytes, total_ms = [], [], 0.0, 0.0
    for r in steps:
        total_bytes += _num(r.get("bytes_sent")) or 0.0
        # A step without its time makes every sum past it unknown: counted as 0, a run of an
        # older format looked the fastest (review, 2026-12-07).
        ms = _num(r.get("step_ms"))
        total_ms = None if total_ms is None or ms is None else total_ms + ms
        cum_bytes.append(total_bytes)
        cum_ms.append(total_ms)

    numbers = [r["step"] for r in steps]

    def upto(cumulative, step):  # the cumulative value after the last step record <= step
        i = bisect.bisect_right(numbers, step)
        return cumulative[i - 1] if i else 0.0

    # study.json of a failed attempt could sit next to a run redone by hand: only a
    # successful run's measurement is this run's wall time.
    record = files.record or {}
    measured = record.get("wall_s") if record.get("returncode") == 0 else None
    stats = RunStats(
        seed=seed, steps=numbers,
        train_loss=[_num(r.get("loss")) for r in steps],
        eval_steps=[r["step"] for r in evals],
        eval_metric=[_num(r.get(metric)) for r in evals],
        eval_loss=[_num(r.get("loss")) for r in evals],
        eval_bytes=[upto(cum_bytes, r["step"]) for r in evals],
        eval_time=[_seconds(upto(cum_ms, r["step"])) for r in evals],
        rel_error=[(r["step"], _num(r["rel_compression_error"])) for r in steps
                   if _num(r.get("rel_compression_error")) is not None],
        final_metric=_num(evals[-1].get(metric)) if evals else None,
        final_loss=_num(evals[-1].get("loss")) if evals else None,
        bytes_per_step=mean([_num(r.get("bytes_sent")) for r in steps]),
        wall_s=_num(measured) if _num(measured) is not None else (
            _seconds(total_ms) if steps else None),
        wall_source="measured" if _num(measured) is not None else (
            "step_ms" if steps and total_ms is not None else "unknown"),
        end_step=files.end_step)
    if target is not None:
        for step, loss, t in zip(stats.eval_steps, stats.eval_loss, stats.eval_time):
            if loss is not None and loss <= target:
                stats.target_step, stats.target_time = step, t
                break
    tail = stats.train_loss[int(len(steps) * 0.9):] if steps else []
    stats.tail_loss = mean(tail)
    stats.rel_error_mean = mean([e for _, e in stats.rel_error])
    return stats


@dataclass
class Spread:
    mean: float | None
    std: float | None  # sample std over seeds; None with fewer than 2 values
    n: int

    @staticmethod
    def of(values):
        values = [v for v in values if v is not None]
        return Spread(mean(values), statistics.stdev(values) if len(values) > 1 else None,
                      len(values))

    def as_dict(self):
        return {"mean": self.mean, "std": self.std, "n": self.n}


@dataclass
class CellStats:
    name: str
    label: str
    runs: list                       # RunStats of the finished seeds
    problems: list = field(default_factory=list)  # (seed, description) of the others
    notes: list = field(default_factory=list)     # what is wrong with the cell as a whole

    @property
    def end_steps(self):
        """The distinct end steps of the finished seeds, sorted."""
        return sorted({r.end_step for r in self.runs if r.end_step is not None})

    @property
    def mixed_steps(self):
        """The finished seeds end at different steps: their mean mixes horizons."""
        return len(self.end_steps) > 1

    def spread(self, attribute):
        return Spread.of([getattr(r, attribute) for r in self.runs])

    @property
    def wall_source(self):
        """How the wall times in the cell's mean were had; "unknown" when none is known (a run
        whose time is unknown is left out of the mean, which then says its n)."""
        sources = {r.wall_source for r in self.runs if r.wall_s is not None}
        if not sources:
            return "unknown" if self.runs else None
        return sources.pop() if len(sources) == 1 else "mixed"

    @property
    def target_reached(self):
        return [r for r in self.runs if r.target_step is not None]


def relative_pct(value, reference):
    if value is None or reference in (None, 0):
        return None
    return 100.0 * (value - reference) / reference
