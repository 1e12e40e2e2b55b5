#!/usr/bin/env python3
"""Scaling-efficiency curves from `simulate --csv` output (docs/simulate.md).

    scripts/plot_scaling.py OUT_DIR FILE.csv [FILE.csv ...]

One PNG per (model, network) found in the CSV files: scaling efficiency against the world
size P (log2 axis), one line per cell, written to OUT_DIR/<model>_<network>.png (characters
of the model and the network other than letters, digits, ".", "_" and "-" as "_"; OUT_DIR is
created when missing). A (model, network, cell, world) given twice is an error naming both
rows: one curve would zigzag through both values.
Needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import os
import re
import sys
from collections import defaultdict

try:
    import matplotlib
except ImportError:
    sys.exit("plot_scaling.py needs matplotlib (Debian: apt-get install python3-matplotlib)")

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def read_rows(paths):
    """Every row of the CSV files, with world and efficiency as numbers; a file that cannot be
    read or a value that is not a number ends the script naming the file and line (they
    ended it in a traceback; review, 2026-12-07)."""
    rows, seen = [], {}  # (model, network, cell, world) -> where it was first given
    for path in paths:
        try:
            with open(path, newline="") as f:
                for line, row in enumerate(csv.DictReader(f), start=2):
                    missing = {"model", "network", "world", "cell", "efficiency"} - row.keys()
                    if missing:
                        sys.exit(f"plot_scaling.py: {path}: missing columns {sorted(missing)}")
                    try:
                        row["world"], row["efficiency"] = int(row["world"]), float(row["efficiency"])
                    except (TypeError, ValueError):
                        sys.exit(f"plot_scaling.py: {path}, line {line}: world '{row['world']}' "
                                 f"or efficiency '{row['efficiency']}' is not a number")
                    # Two CSVs of one model and network (a rerun beside the first) were drawn
                    # as one zigzag line without a word (review, 2026-12-07).
                    key = (row["model"], row["network"], row["cell"], row["world"])
                    if key in seen:
                        sys.exit(f"plot_scaling.py: {path}, line {line}: model '{key[0]}', network "
                                 f"'{key[1]}', cell '{key[2]}', world {key[3]} is also in "
                                 f"{seen[key]}; plot one of them")
                    seen[key] = f"{path}, line {line}"
                    rows.append(row)
        except OSError as e:
            sys.exit(f"plot_scaling.py: cannot read {path}: {e.strerror}")
    return rows


def file_part(text):
    """text as part of a file name: characters other than letters, digits, '.', '_', '-' as '_'
    (so no '/': the name stays in OUT_DIR)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    out_dir, paths = argv[1], argv[2:]
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        sys.exit(f"plot_scaling.py: cannot create the output folder {out_dir}: {e.strerror}")
    curves = defaultdict(lambda: defaultdict(list))  # (model, network) -> cell -> [(P, eff)]
    cell_order = []
    for row in read_rows(paths):
        key = (row["model"], row["network"])
        curves[key][row["cell"]].append((row["world"], row["efficiency"]))
        if row["cell"] not in cell_order:
            cell_order.append(row["cell"])
    for (model, network), cells in sorted(curves.items()):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for cell in cell_order:
            if cell not in cells:
                continue
            points = sorted(cells[cell])
            ax.plot([p for p, _ in points], [e for _, e in points], marker="o", ms=3, label=cell)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("workers P")
        ax.set_ylabel("scaling efficiency (P-worker / P x one-worker throughput)")
        ax.set_title(f"{model}, {network}: simulated (alpha-beta model)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
        fig.tight_layout()
        # A model with overrides is "gpt2-tiny n_layer=6 n_embd=384": no spaces in file names;
        # and no '/' ("../x" as a network wrote outside OUT_DIR, or crashed: review, 2026-12-07).
        path = f"{out_dir}/{file_part(model)}_{file_part(network)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv)
