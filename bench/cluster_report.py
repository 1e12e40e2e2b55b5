#!/usr/bin/python3
"""Results of bench/bench_cluster.sh: summarises one cell into a results record, and prints
the markdown tables. Standard library only.

    cluster_report.py cell --dir CELL_DIR --results FILE --run ID --model M --world N
                           --link L --cell C [--rep K] ...   (bench_cluster.sh calls this)
    cluster_report.py report [--results runs/bench_cluster/results.jsonl]
                             [--run ID[,ID...] | --run all] [--mix-runs]

`report` reads one run: by default the newest in the file (the run of its latest record by
time), never a mix of runs, which let a group take lbs from one run, its floor from another
and DDP from a third (review, 2026-12-07). A group (model, N, link) whose records come from
more than one of the runs asked for is refused unless --mix-runs, which takes each run as a
repetition. Each row gives the median over the repetitions (REPS of bench_cluster.sh; a rerun
of the same repetition replaces it), the IQR of the step time, and the run(s) it comes from.

A cell directory holds metrics.jsonl (sparq's log.metrics, or ddp_peer.py's records; rank
0), net_node<k>.jsonl (bench/net_watch.py: node k's veth counters at each step record), or,
for the floors, node<k>.jsonl (one single-process run per node). Every median is over the
steps after the warm-up (step > warmup, 1-based). Floors are measured per link (records
before 2026-12-07: once per (model, N), link "-", used for every link; the report still reads
those).

Record fields: step_ms (median; floors: the slowest node's median, since a synchronous
step waits for its slowest rank; step_ms_mean_nodes keeps the mean over nodes),
exposed_comm_ms (sparq: the median of its exposed_comm_ms metric; DDP: left to the report,
which subtracts torch_floor's step_ms; the report's last column gives every cell, sparq's
too, its step_ms minus its own floor's, the one measure both have), wire_tx_bytes (median
per step of a node's veth tx bytes, averaged over nodes; wire_tx_bytes_node0 for node 0
alone), sparq_bytes_sent (rank 0's bytes_sent metric: the backends' byte model), status
("ok" or "failed"), rep (the repetition, 1-based); PyTorch's cells (ddp_*, torch_floor) also
torch_blas, torch_env (the settings bench_cluster.sh gave its processes: allocator, ATen and
OpenBLAS kernels, threads) and peer (ddp_peer.py's own report of the torch version, ATen CPU
capability, BLAS libraries mapped, OpenBLAS core, allocator environment and threads it ran
with). `cell` exits 3 after writing a failed record.
"""
import argparse
import json
import os
import statistics
import sys
import time
from collections import OrderedDict

CELL_FAILED = 3  # exit status of `cell` for a record whose status is "failed"

SPARQ_CELLS = ["sparq_none", "sparq_bf16", "sparq_lbs", "sparq_lbs_2p", "sparq_powersgd",
               "sparq_lbs_auto"]
DDP_CELLS = ["ddp_dense", "ddp_fp16", "ddp_powersgd"]
FLOORS = ["sparq_floor", "torch_floor"]
LABELS = {
    "sparq_none": "sparq f32 allreduce", "sparq_bf16": "sparq bf16 allreduce",
    "sparq_lbs": "sparq lbs 1% 4-bit allgather", "sparq_lbs_2p": "sparq lbs 1% 4-bit two_phase",
    "sparq_powersgd": "sparq powersgd r4", "sparq_lbs_auto": "sparq lbs, comm.plan: auto",
    "ddp_dense": "DDP f32", "ddp_fp16": "DDP fp16 hook",
    "ddp_powersgd": "DDP PowerSGD r4", "sparq_floor": "sparq compute only",
    "torch_floor": "torch compute only",
}


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    records = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a killed run
    return records


def timed_steps(records, warmup):
    return [r for r in records if r.get("event") == "step" and r["step"] > warmup]


def median_of(records, key):
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.median(values) if values else None


def wire_bytes(cell_dir, warmup):
    """Per node: median over timed steps of the tx bytes between consecutive step records."""
    per_node = {}
    k = 0
    while os.path.exists(os.path.join(cell_dir, f"net_node{k}.jsonl")):
        samples = {r["step"]: r["tx_bytes"] for r in read_jsonl(os.path.join(
            cell_dir, f"net_node{k}.jsonl")) if "step" in r}
        deltas = [samples[s] - samples[s - 1] for s in samples if s > warmup and s - 1 in samples]
        if deltas:
            per_node[k] = statistics.median(deltas)
        k += 1
    return per_node


def peer_of(paths):
    """ddp_peer.py's configuration record (its "peer") from the first of paths that has one;
    with several nodes' files, differs=True when any node reports another configuration."""
    found = []
    for path in paths:
        for r in read_jsonl(path):
            if r.get("event") == "config" and isinstance(r.get("peer"), dict):
                found.append(r["peer"])
                break
    if not found:
        return None, False
    return found[0], any(p != found[0] for p in found[1:])


def summarise_cell(args):
    record = OrderedDict(run=args.run, time=time.strftime("%Y-%m-%dT%H:%M:%S"), model=args.model,
                         world=args.world, link=args.link, cell=args.cell, batch=args.batch,
                         seq=args.seq, steps=args.steps, warmup=args.warmup, rep=args.rep,
                         seconds=args.seconds, dir=args.dir)
    status = "ok" if args.exit_code == 0 else "failed"
    if args.cell in FLOORS:
        medians = []
        k = 0
        while os.path.exists(os.path.join(args.dir, f"node{k}.jsonl")):
            m = median_of(timed_steps(read_jsonl(os.path.join(args.dir, f"node{k}.jsonl")),
                                      args.warmup), "step_ms")
            if m is not None:
                medians.append(m)
            k += 1
        if len(medians) != args.world:
            status = "failed"
        # A synchronous data-parallel step waits for its slowest rank, so the compute-only
        # floor is the slowest node's median, not the mean over nodes (review, 2026-12-05).
        record.update(step_ms=max(medians) if medians else None,
                      step_ms_max_node=max(medians) if medians else None,
                      step_ms_mean_nodes=statistics.mean(medians) if medians else None,
                      exposed_comm_ms=0.0)
    else:
        steps = timed_steps(read_jsonl(os.path.join(args.dir, "metrics.jsonl")), args.warmup)
        if len(steps) < args.steps - args.warmup:
            status = "failed"
        record.update(step_ms=median_of(steps, "step_ms"),
                      forward_ms=median_of(steps, "forward_ms"),
                      backward_ms=median_of(steps, "backward_ms"),
                      optimizer_ms=median_of(steps, "optimizer_ms"))
        if args.cell.startswith("sparq_"):
            record.update(exposed_comm_ms=median_of(steps, "exposed_comm_ms"),
                          sparq_bytes_sent=median_of(steps, "bytes_sent"),
                          compression_ratio=median_of(steps, "compression_ratio"),
                          mpi_args=args.mpi_args)
        wire = wire_bytes(args.dir, args.warmup)
        record.update(wire_tx_bytes=statistics.mean(wire.values()) if wire else None,
                      wire_tx_bytes_node0=wire.get(0))
    if args.cell.startswith(("ddp_", "torch_")):
        # What the PyTorch side ran with: the settings it was given, and its own report.
        if args.cell == "torch_floor":
            paths = []
            k = 0
            while os.path.exists(os.path.join(args.dir, f"node{k}.jsonl")):
                paths.append(os.path.join(args.dir, f"node{k}.jsonl"))
                k += 1
        else:
            paths = [os.path.join(args.dir, "metrics.jsonl")]
        peer, differs = peer_of(paths)
        record.update(torch_blas=args.torch_blas or "system", torch_env=args.torch_env,
                      peer=peer)
        if differs:
            record["peer_nodes_differ"] = True
    record["status"] = status
    with open(args.results, "a") as f:
        f.write(json.dumps(record) + "\n")
    shown = {k: record.get(k) for k in ("cell", "status", "step_ms", "exposed_comm_ms",
                                        "wire_tx_bytes", "sparq_bytes_sent")}
    print("cluster_report.py:", json.dumps(shown), file=sys.stderr)
    # A cell whose command exited 0 but measured too little (timed steps missing, a node's
    # floor missing) is a failed cell too: bench_cluster.sh counts this exit status
    # (it counted only the command's: review, 2026-12-06).
    return CELL_FAILED if status == "failed" else 0


def fmt_ms(v):
    return "-" if v is None else f"{v:.0f}"


def fmt_mb(v):
    return "-" if v is None else f"{v / 1e6:.2f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def positive_ratio(a, b):
    """a / b where both are above 0: differences (step minus floor) can fall below it."""
    return f"{a / b:.2f}" if a is not None and b is not None and a > 0 and b > 0 else "-"


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def iqr(values):
    """Interquartile range (inclusive quartiles); None below two values."""
    values = sorted(v for v in values if v is not None)
    if len(values) < 2:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


def step_value(record):
    """A record's step time; a floor's is its slowest node's (a synchronous step waits for
    its slowest rank). Floor records written before 2026-12-05 hold the mean over nodes in
    step_ms and the slowest node in step_ms_max_node."""
    if record["cell"] in FLOORS and record.get("step_ms_max_node") is not None:
        return record["step_ms_max_node"]
    return record.get("step_ms")


def newest_run(records):
    """The run of the latest record by its time (file order breaks ties and missing times)."""
    return max(enumerate(records), key=lambda ir: (ir[1].get("time") or "", ir[0]))[1]["run"]


def summarise_reps(reps):
    """Median over a cell's repetitions: reps maps (run, rep) -> its latest record."""
    ok = [r for r in reps.values() if r.get("status") == "ok" and step_value(r) is not None]
    steps = [step_value(r) for r in ok]
    return {
        "n": len(ok), "total": len(reps),
        "runs": sorted({run for run, _ in reps}),
        "step_ms": median_or_none(steps), "step_iqr": iqr(steps),
        "exposed_comm_ms": median_or_none(r.get("exposed_comm_ms") for r in ok),
        "wire_tx_bytes": median_or_none(r.get("wire_tx_bytes") for r in ok),
        "sparq_bytes_sent": median_or_none(r.get("sparq_bytes_sent") for r in ok),
        "records": ok,
    }


def describe_peer(peer):
    """One line of what a PyTorch process ran with, from ddp_peer.py's configuration record."""
    env = peer.get("env") or {}
    openblas = peer.get("openblas") or {}
    libs = ", ".join(os.path.basename(p) for p in peer.get("blas_libraries") or []) or "none"
    return (f"torch {peer.get('torch_version')}, ATen {peer.get('aten_cpu_capability')}, "
            f"BLAS {libs} (OpenBLAS core {openblas.get('corename') or '-'}), "
            f"GLIBC_TUNABLES {env.get('GLIBC_TUNABLES') or '-'}, "
            f"LD_PRELOAD {env.get('LD_PRELOAD') or '-'}, "
            f"{peer.get('torch_threads')} thread(s)"
            + (", DDP " + ", ".join(f"{k}={v}" for k, v in peer["ddp"].items())
               if peer.get("ddp") else ""))


def report(args):
    everything = read_jsonl(args.results)
    if not everything:
        sys.exit(f"cluster_report.py: no records in {args.results}")
    if args.run == "all":
        wanted = None
    elif args.run:
        wanted = set(args.run.split(","))
    else:
        wanted = {newest_run(everything)}
    records = [r for r in everything if wanted is None or r.get("run") in wanted]
    if not records:
        sys.exit(f"cluster_report.py: no records in {args.results} for run {args.run}")
    # (model, world, link, cell) -> {(run, rep): its latest record}: a rerun of one
    # repetition replaces it; repetitions (and, with --mix-runs, runs) are kept side by side.
    cells = OrderedDict()
    for r in records:
        key = (r["model"], r["world"], r["link"], r["cell"])
        cells.setdefault(key, OrderedDict())[(r["run"], r.get("rep", 1))] = r
    groups = OrderedDict()
    for (model, world, link, _) in cells:
        if link != "-":
            groups.setdefault((model, world, link), None)

    def floor_key(model, world, link, cell):
        # Floors measured with the link (2026-12-07 on), else the shared ones of old runs.
        key = (model, world, link, cell)
        return key if key in cells else (model, world, "-", cell)

    def group_cells(model, world, link):
        return OrderedDict(
            (cell, cells[k]) for cell in SPARQ_CELLS + DDP_CELLS + FLOORS
            for k in [floor_key(model, world, link, cell) if cell in FLOORS
                      else (model, world, link, cell)] if k in cells)

    mixed = []
    for model, world, link in groups:
        runs = sorted({run for reps in group_cells(model, world, link).values() for run, _ in reps})
        if len(runs) > 1:
            mixed.append(f"{model}, N={world}, {link}: runs {', '.join(runs)}")
    if mixed and not args.mix_runs:
        sys.exit("cluster_report.py: refusing to mix runs in one table (a group's cells would "
                 "come from different runs):\n  " + "\n  ".join(mixed) +
                 "\nchoose one with --run ID, or pass --mix-runs to take each run as a repetition")
    print(f"Run(s): {', '.join(sorted({r['run'] for r in records}))}"
          + (" (the newest in the file; --run to choose)" if not args.run else ""))

    for model, world, link in groups:
        summaries = OrderedDict((cell, summarise_reps(reps))
                                for cell, reps in group_cells(model, world, link).items())

        def get(cell):
            summary = summaries.get(cell)
            return summary if summary and summary["n"] > 0 else None

        def step(cell):
            summary = get(cell)
            return summary["step_ms"] if summary else None

        def over_floor(cell):
            floor = step("torch_floor" if cell.startswith(("ddp_", "torch_")) else "sparq_floor")
            value = step(cell)
            return value - floor if value is not None and floor is not None else None

        def own_floor_ratio(cell):
            floor = step("torch_floor" if cell.startswith(("ddp_", "torch_")) else "sparq_floor")
            value = step(cell)
            return value / floor if value and floor else None

        print(f"\n### {model}, N={world}, {link}\n")
        # Two different measures of exposed communication: sparq's own metric (timed inside the
        # trainer) and step minus own floor (DDP has only this one). The last numeric column
        # gives the second for every cell, so sparq and DDP can be compared like with like.
        print("| cell | step ms | exposed comm ms (sparq: own metric; DDP: step - floor) "
              "| step / own floor | wire MB/step/rank | sparq bytes_sent MB "
              "| step - own floor ms (both) | reps | step IQR ms | run |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for cell, summary in summaries.items():
            runs = ", ".join(summary["runs"])
            reps_text = (str(summary["n"]) if summary["n"] == summary["total"]
                         else f"{summary['n']} of {summary['total']}")
            if summary["n"] == 0:
                print(f"| {LABELS[cell]} | failed | | | | | | {reps_text} | | {runs} |")
                continue
            # step minus own floor: the one definition both frameworks have (floors: none).
            diff = over_floor(cell) if cell not in FLOORS else None
            if cell.startswith("ddp_"):  # DDP reports no exposed time: step minus its floor
                exposed_text = "-" if diff is None else f"{diff:.0f} (step - floor)"
            else:
                exposed_text = fmt_ms(summary["exposed_comm_ms"])
            floor = step("torch_floor" if cell.startswith(("ddp_", "torch_")) else "sparq_floor")
            print(f"| {LABELS[cell]} | {fmt_ms(summary['step_ms'])} | {exposed_text} | "
                  f"{ratio(summary['step_ms'], floor)} | "
                  f"{fmt_mb(summary['wire_tx_bytes'])} | {fmt_mb(summary['sparq_bytes_sent'])} | "
                  f"{fmt_ms(diff)} | {reps_text} | {fmt_ms(summary['step_iqr'])} | {runs} |")

        def quotient(a, b):
            return f"{a / b:.2f}" if a and b else "-"
        print()
        print(f"- sparq dense / DDP dense step time: {ratio(step('sparq_none'), step('ddp_dense'))}")
        print(f"- DDP+PowerSGD / sparq lbs (speed-up of lbs): "
              f"{ratio(step('ddp_powersgd'), step('sparq_lbs'))} (two_phase: "
              f"{ratio(step('ddp_powersgd'), step('sparq_lbs_2p'))})")
        print(f"- sparq lbs / sparq compute only: {ratio(step('sparq_lbs'), step('sparq_floor'))}"
              f" (two_phase: {ratio(step('sparq_lbs_2p'), step('sparq_floor'))})")
        # The same comparisons without the compute gap between the frameworks (review,
        # 2026-12-07): the step times above mix each side's compute with its communication.
        print(f"- on communication alone, sparq dense / DDP dense, each step minus its own "
              f"floor: {positive_ratio(over_floor('sparq_none'), over_floor('ddp_dense'))} "
              f"(bf16: {positive_ratio(over_floor('sparq_bf16'), over_floor('ddp_dense'))})")
        print(f"- on the same compute, DDP+PowerSGD / sparq lbs, each step over its own floor: "
              f"{quotient(own_floor_ratio('ddp_powersgd'), own_floor_ratio('sparq_lbs'))} "
              f"(two_phase: "
              f"{quotient(own_floor_ratio('ddp_powersgd'), own_floor_ratio('sparq_lbs_2p'))})")
        peers, blas, unrecorded = OrderedDict(), OrderedDict(), 0
        for cell in DDP_CELLS + ["torch_floor"]:
            for r in (get(cell) or {}).get("records", []):
                if r.get("peer"):
                    peers.setdefault(describe_peer(r["peer"]), None)
                else:
                    unrecorded += 1
                    if r.get("torch_blas"):
                        blas.setdefault(r["torch_blas"], None)
        if unrecorded:
            peers.setdefault(f"not recorded in {unrecorded} record(s) (written before "
                             f"2026-12-07: ATen capability, OpenBLAS core and allocator "
                             f"unknown; torch_blas {', '.join(blas) or '-'})", None)
        if peers:
            print(f"- PyTorch peer: {'; '.join(peers)}")
    print("\nMedians over the repetitions (reps: those that measured; step IQR: the spread of "
          "their step times) of medians over the steps after the warm-up. wire MB: the veth's "
          "tx bytes per step (headers and ACKs included), mean over ranks; sparq bytes_sent: "
          "its byte model, rank 0. Floors: N single-process runs at once (same CPU "
          "contention), their slowest node's median. Exposed comm: "
          "sparq's figure is its own exposed_comm_ms metric (the wait after backward), DDP's its "
          "step minus torch_floor; compare the two frameworks with the column step minus "
          "own floor (sparq_floor for sparq, torch_floor for DDP), which floor noise can push "
          "below 0. On communication alone: the quotient of those differences; on the same "
          "compute: the quotient of each side's step / own floor (what each step would be over "
          "an equal compute floor).")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cell")
    c.add_argument("--dir", required=True)
    c.add_argument("--results", required=True)
    c.add_argument("--run", required=True)
    c.add_argument("--model", required=True)
    c.add_argument("--world", type=int, required=True)
    c.add_argument("--link", required=True)
    c.add_argument("--cell", required=True, choices=SPARQ_CELLS + DDP_CELLS + FLOORS)
    c.add_argument("--batch", type=int, required=True)
    c.add_argument("--seq", type=int, required=True)
    c.add_argument("--steps", type=int, required=True)
    c.add_argument("--warmup", type=int, required=True)
    c.add_argument("--rep", type=int, default=1, help="the repetition, 1-based")
    c.add_argument("--exit-code", type=int, default=0)
    c.add_argument("--seconds", type=int, default=0)
    c.add_argument("--mpi-args", default="")
    c.add_argument("--torch-blas", default="")
    c.add_argument("--torch-env", default="", help="the settings PyTorch's processes were given")
    r = sub.add_parser("report")
    r.add_argument("--results", default="runs/bench_cluster/results.jsonl")
    r.add_argument("--run", default="",
                   help="run id(s), comma-separated, or all (default: the newest run in the file)")
    r.add_argument("--mix-runs", action="store_true",
                   help="allow a group to combine runs, each taken as a repetition")
    args = parser.parse_args()
    if args.command == "cell":
        sys.exit(summarise_cell(args))
    report(args)


if __name__ == "__main__":
    main()
