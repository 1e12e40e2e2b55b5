#!/usr/bin/python3
"""Results of bench/bench_cluster.sh: summarises one cell into a results record, and prints
the markdown tables. Standard library only.

    cluster_report.py cell --dir CELL_DIR --results FILE --run ID --model M --world N
                           --link L --cell C ...        (bench_cluster.sh calls this)
    cluster_report.py report [--results runs/bench_cluster/results.jsonl] [--run ID]

A cell directory holds metrics.jsonl (sparq's log.metrics, or ddp_peer.py's records; rank
0), net_node<k>.jsonl (bench/net_watch.py: node k's veth counters at each step record), or,
for the floors, node<k>.jsonl (one single-process run per node). Every median is over the
steps after the warm-up (step > warmup, 1-based).

Record fields: step_ms (median; floors: the slowest node's median, since a synchronous
step waits for its slowest rank; step_ms_mean_nodes keeps the mean over nodes),
exposed_comm_ms (sparq: the median of its exposed_comm_ms metric; DDP: left to the report,
which subtracts torch_floor's step_ms; the report's last column gives every cell, sparq's
too, its step_ms minus its own floor's, the one measure both have), wire_tx_bytes (median
per step of a node's veth tx bytes, averaged over nodes; wire_tx_bytes_node0 for node 0
alone), sparq_bytes_sent (rank 0's bytes_sent metric: the backends' byte model), status
("ok" or "failed"). `cell` exits 3 after writing a failed record.
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


def summarise_cell(args):
    record = OrderedDict(run=args.run, time=time.strftime("%Y-%m-%dT%H:%M:%S"), model=args.model,
                         world=args.world, link=args.link, cell=args.cell, batch=args.batch,
                         seq=args.seq, steps=args.steps, warmup=args.warmup,
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
        else:
            record["torch_blas"] = args.torch_blas or "system"
        wire = wire_bytes(args.dir, args.warmup)
        record.update(wire_tx_bytes=statistics.mean(wire.values()) if wire else None,
                      wire_tx_bytes_node0=wire.get(0))
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


def report(args):
    records = [r for r in read_jsonl(args.results) if not args.run or r.get("run") == args.run]
    if not records:
        sys.exit(f"cluster_report.py: no records in {args.results}"
                 + (f" for run {args.run}" if args.run else ""))
    latest = OrderedDict()  # (model, world, link, cell) -> last record (a rerun replaces)
    for r in records:
        latest[(r["model"], r["world"], r["link"], r["cell"])] = r
    groups = OrderedDict()
    for (model, world, link, _), _r in latest.items():
        if link != "-":
            groups.setdefault((model, world, link), None)
    for model, world, link in groups:
        def get(cell):
            r = latest.get((model, world, "-" if cell in FLOORS else link, cell))
            if not r or r.get("status") != "ok":
                return None
            if cell in FLOORS and r.get("step_ms_max_node") is not None:
                # Records written before the floor was the slowest node's hold the mean.
                r = dict(r, step_ms=r["step_ms_max_node"])
            return r
        torch_floor, sparq_floor = get("torch_floor"), get("sparq_floor")
        print(f"\n### {model}, N={world}, {link}\n")
        # Two different measures of exposed communication: sparq's own metric (timed inside the
        # trainer) and step minus own floor (DDP has only this one). The last column gives the
        # second for every cell, so sparq and DDP can be compared like with like.
        print("| cell | step ms | exposed comm ms (sparq: own metric; DDP: step - floor) "
              "| step / own floor | wire MB/step/rank | sparq bytes_sent MB "
              "| step - own floor ms (both) |")
        print("|---|---|---|---|---|---|---|")
        for cell in SPARQ_CELLS + DDP_CELLS + FLOORS:
            r = latest.get((model, world, "-" if cell in FLOORS else link, cell))
            if r is None:
                continue
            if r.get("status") != "ok":
                print(f"| {LABELS[cell]} | failed | | | | | |")
                continue
            floor = torch_floor if cell.startswith(("ddp_", "torch_")) else sparq_floor
            # step minus own floor: the one definition both frameworks have (floors: none).
            over_floor = (r["step_ms"] - floor["step_ms"]
                          if floor and cell not in FLOORS and r.get("step_ms") is not None else None)
            exposed = r.get("exposed_comm_ms")
            if cell.startswith("ddp_"):  # DDP reports no exposed time: step minus its floor
                exposed_text = "-" if over_floor is None else f"{over_floor:.0f} (step - floor)"
            else:
                exposed_text = fmt_ms(exposed)
            print(f"| {LABELS[cell]} | {fmt_ms(r['step_ms'])} | {exposed_text} | "
                  f"{ratio(r['step_ms'], floor['step_ms'] if floor else None)} | "
                  f"{fmt_mb(r.get('wire_tx_bytes'))} | {fmt_mb(r.get('sparq_bytes_sent'))} | "
                  f"{fmt_ms(over_floor)} |")

        def step(cell):
            r = get(cell)
            return r["step_ms"] if r else None
        print()
        print(f"- sparq dense / DDP dense step time: {ratio(step('sparq_none'), step('ddp_dense'))}")
        print(f"- DDP+PowerSGD / sparq lbs (speed-up of lbs): "
              f"{ratio(step('ddp_powersgd'), step('sparq_lbs'))} (two_phase: "
              f"{ratio(step('ddp_powersgd'), step('sparq_lbs_2p'))})")
        print(f"- sparq lbs / sparq compute only: {ratio(step('sparq_lbs'), step('sparq_floor'))}"
              f" (two_phase: {ratio(step('sparq_lbs_2p'), step('sparq_floor'))})")
    print("\nMedians over the steps after the warm-up. wire MB: the veth's tx bytes per step "
          "(headers and ACKs included), mean over ranks; sparq bytes_sent: its byte model, "
          "rank 0. Floors: N single-process runs at once (same CPU contention). Exposed comm: "
          "sparq's figure is its own exposed_comm_ms metric (the wait after backward), DDP's its "
          "step minus torch_floor; compare the two frameworks with the last column, step minus "
          "own floor (sparq_floor for sparq, torch_floor for DDP), which floor noise can push "
          "below 0.")


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
    c.add_argument("--exit-code", type=int, default=0)
    c.add_argument("--seconds", type=int, default=0)
    c.add_argument("--mpi-args", default="")
    c.add_argument("--torch-blas", default="")
    r = sub.add_parser("report")
    r.add_argument("--results", default="runs/bench_cluster/results.jsonl")
    r.add_argument("--run", default="", help="only this run id (default: every run, latest wins)")
    args = parser.parse_args()
    if args.command == "cell":
        sys.exit(summarise_cell(args))
    report(args)


if __name__ == "__main__":
    main()
