#!/usr/bin/python3
"""Per-step wire bytes of one cluster node, for bench/bench_cluster.sh. Runs inside a node's
namespace (scripts/cluster.sh run N -- net_watch.py ...), where /sys/class/net/eth0 is that
node's veth, and samples its tx/rx byte counters whenever rank 0 appends a step record to
the run's metrics JSONL (sparq's log.metrics or bench/ddp_peer.py --metrics).

    net_watch.py --metrics FILE --out-dir DIR [--interval 0.02] [--stop FILE] [--timeout S]

Writes DIR/net_node<SPARQ_NODE>.jsonl: {"step": 0, ...} at start, then one
{"step": s, "tx_bytes", "rx_bytes", "t"} per step record seen, and {"event": "final", ...}
when FILE gets its "end" record, the stop file appears, or the timeout passes.

Why this is exact enough: a step record is written when the step's communication has
finished on every rank, and the next step starts with a forward pass that sends nothing,
so a counter read up to one interval late still falls between the two steps' traffic.
The counters count what the veth carried: payload plus TCP/IP/Ethernet headers, ACKs, and
anything else of that node (nothing else runs in a node). Sleeping between polls costs
no measurable CPU.
"""
import argparse
import json
import os
import time


def counters():
    values = []
    for name in ("tx_bytes", "rx_bytes"):
        with open(f"/sys/class/net/eth0/statistics/{name}") as f:
            values.append(int(f.read()))
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--stop", default="")
    parser.add_argument("--timeout", type=float, default=7200)
    args = parser.parse_args()
    node = int(os.environ.get("SPARQ_NODE", "0"))
    os.makedirs(args.out_dir, exist_ok=True)
    out = open(os.path.join(args.out_dir, f"net_node{node}.jsonl"), "w")

    def emit(record):
        tx, rx = counters()
        record.update(node=node, tx_bytes=tx, rx_bytes=rx, t=time.time())
        out.write(json.dumps(record) + "\n")
        out.flush()

    emit({"step": 0})
    offset, pending, ended = 0, "", False
    deadline = time.monotonic() + args.timeout
    while not ended and time.monotonic() < deadline:
        if args.stop and os.path.exists(args.stop):
            break
        try:
            with open(args.metrics) as f:
                f.seek(offset)
                chunk = f.read()
                offset = f.tell()
        except FileNotFoundError:
            chunk = ""
        pending += chunk
        *lines, pending = pending.split("\n")  # keep a partly written line for later
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("event") == "step":
                emit({"step": record["step"]})
            elif record.get("event") == "end":
                ended = True
        time.sleep(args.interval)
    emit({"event": "final"})
    out.close()


if __name__ == "__main__":
    main()
