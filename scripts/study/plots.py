"""PNG plots of a study: one line per cell, the mean over seeds with a ±std band."""
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .analysis import MIB  # noqa: E402

SIZE, DPI = (6, 4), 100


def _aligned(runs, steps_of, ys_of, xs_of):
    """Mean x, mean y and std y over seeds at the steps every seed has (the same config logs at
    the same steps; a seed that logged fewer just shortens the curve). A step where a seed
    logged null is a gap: the mean of the others there would change the curve's n without a
    word (review, 2026-12-07)."""
    common = sorted(set.intersection(*(set(steps_of(r)) for r in runs)))
    xs, ys = [], []
    for r in runs:
        index = {s: i for i, s in enumerate(steps_of(r))}
        xs.append([xs_of(r)[index[s]] for s in common])
        ys.append([ys_of(r)[index[s]] for s in common])
    x = np.array(xs, dtype=float)
    y = np.array([[np.nan if v is None else v for v in row] for row in ys], dtype=float)
    with warnings.catch_warnings():  # a step where every seed logged null is NaN, quietly
        warnings.simplefilter("ignore", RuntimeWarning)
        # The sample std (ddof=1), as the summary table's; a band needs two seeds (_figure).
        std = np.std(y, axis=0, ddof=1) if len(runs) > 1 else np.zeros(y.shape[1])
        # An x unknown in one seed (a time without step_ms) is unknown in the mean too: the
        # others' alone would pass for all of them under the label's n.
        return np.mean(x, axis=0), np.mean(y, axis=0), std


def _moving_average(values, window):
    """Trailing mean over the finite values of the last `window` steps (fewer at the start, so
    the curve keeps its length). A null step stays a gap at itself and leaves its neighbours'
    averages to the other steps: a plain convolution spread one NaN over a whole window."""
    y = np.array([np.nan if v is None else v for v in values], dtype=float)
    if window <= 1 or len(y) < window:
        return y
    finite = np.isfinite(y)
    kernel = np.ones(window)
    sums = np.convolve(np.where(finite, y, 0.0), kernel)[:len(y)]
    counts = np.convolve(finite.astype(float), kernel)[:len(y)]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(finite & (counts > 0), sums / counts, np.nan)


def _figure(path, cells, curve, xlabel, ylabel, logx=False, logy=False, title=None):
    fig, ax = plt.subplots(figsize=SIZE, dpi=DPI)
    drawn = 0
    for cell in cells:
        if not cell.runs:
            continue
        result = curve(cell.runs)
        if result is None:
            continue
        x, y, std = result
        keep = np.isfinite(y) & (x > 0 if logx else np.isfinite(x))
        if not keep.any():
            continue
        # Past the ten colours of the default cycle, the dash pattern tells cells apart.
        # Cells may have finished different numbers of seeds: each label says how many.
        label = cell.label if len(cell.runs) == 1 else f"{cell.label} (n={len(cell.runs)})"
        # NaN where a point is not kept: matplotlib breaks the line there, where dropping the
        # point drew a straight segment across it.
        x, y = np.where(keep, x, np.nan), np.where(keep, y, np.nan)
        line, = ax.plot(x, y, label=label, linewidth=1.4,
                        linestyle=("-", "--", ":")[(drawn // 10) % 3],
                        marker="o" if keep.sum() <= 30 else None, markersize=3)
        if len(cell.runs) > 1:
            ax.fill_between(x, y - std, y + std, color=line.get_color(), alpha=0.2,
                            linewidth=0)
        drawn += 1
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "nothing to plot" if any(c.runs for c in cells) else "no finished runs", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_plots(study, out, cells):
    out = Path(out)
    metric = study.metric
    logy = metric == "perplexity"  # perplexity falls over orders of magnitude early on
    ylabel = f"eval {metric}"
    seeds = (f"{study.name}: mean over each cell's finished seeds (n), ±1 sample std band"
             if len(study.seeds) > 1 else study.name)

    def eval_curve(x_of):
        return lambda runs: _aligned(runs, lambda r: r.eval_steps, lambda r: r.eval_metric, x_of)

    _figure(out / "eval_vs_step.png", cells, eval_curve(lambda r: r.eval_steps), "step",
            ylabel, logy=logy, title=seeds)
    _figure(out / "eval_vs_bytes.png", cells,
            eval_curve(lambda r: [b / MIB for b in r.eval_bytes]),
            "cumulative MiB sent per rank (rank 0)", ylabel, logx=True, logy=logy, title=seeds)
    _figure(out / "eval_vs_time.png", cells, eval_curve(lambda r: r.eval_time),
            "training time (s, cumulative step_ms)", ylabel, logy=logy, title=seeds)

    def train_curve(runs):
        longest = max(len(r.steps) for r in runs)
        window = max(1, min(50, longest // 20))
        smoothed = {id(r): list(_moving_average(r.train_loss, window)) for r in runs}
        return _aligned(runs, lambda r: r.steps, lambda r: smoothed[id(r)], lambda r: r.steps)

    _figure(out / "train_loss.png", cells, train_curve, "step",
            "training loss (moving average)", title=seeds)
    if any(r.rel_error for c in cells for r in c.runs):
        def error_curve(runs):
            if not all(r.rel_error for r in runs):
                return None
            return _aligned(runs, lambda r: [s for s, _ in r.rel_error],
                            lambda r: [e for _, e in r.rel_error],
                            lambda r: [s for s, _ in r.rel_error])
        _figure(out / "compression_error.png", cells, error_curve, "step",
                "rel_compression_error", title=seeds)
