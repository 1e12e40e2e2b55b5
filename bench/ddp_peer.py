#!/usr/bin/python3
"""PyTorch DDP peer of bench/bench_cluster.sh: trains the same GPT-2 as sparq (the reference
model of tests/reference/gen_models.py, initialised as sparq initialises it) with AdamW on
random tokens, one process per cluster node, gloo over TCP, one compute thread per rank.

    ddp_peer.py --model gpt2-tiny|gpt2-30m --mode dense|fp16|powersgd|compute
                --batch B --seq T [--steps 8] [--warmup 2] [--metrics FILE]

Modes: dense (plain DDP: f32 bucketed allreduce overlapped with backward), fp16 (DDP comm
hook fp16_compress_hook), powersgd (PowerSGD hook, rank 4, start_powerSGD_iter 2, error
feedback and warm start: torch's defaults; one state and gloo group per bucket, see
per_bucket_powersgd_hook), compute (no process group, no DDP: the
compute-only floor; start N of them at once for the contention of an N-rank run).

Rendezvous: env:// with MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE, falling back to the
SPARQ_MASTER_IP / SPARQ_NODE / SPARQ_WORLD that scripts/cluster.sh run sets in each node;
gloo uses eth0 (GLOO_SOCKET_IFNAME) unless told otherwise.

A step is zero_grad + forward + backward (DDP's allreduce overlaps it and is complete when
backward returns) + optimizer.step. Each rank prints its step times on stderr; rank 0 (every
rank in compute mode) appends JSONL records to --metrics: {"event":"step","step","step_ms",
"forward_ms","backward_ms","optimizer_ms","loss","tx_bytes","rx_bytes"} (tx/rx: this node's
eth0 counters after the step, when /sys shows them) and a final {"event":"end",
"median_step_ms"} over the steps after --warmup. Benchmark only: nothing is asserted.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
sys.path.insert(0, HERE)
import gen_models  # noqa: E402  (the reference model definitions)
from bench_models_torch import init_like_sparq  # noqa: E402  (sparq's initialisation)

# The same models as configs/bench/*.yaml (sparq's parse_model_spec syntax).
MODELS = {
    "gpt2-tiny": "gpt2-tiny vocab_size=50257 n_ctx=128",
    "gpt2-30m": "gpt2-tiny n_layer=6 n_head=6 n_embd=384 n_ctx=256 vocab_size=50257",
}
POWERSGD_RANK = 4
POWERSGD_START_ITER = 2  # torch requires > 1 with error feedback or warm start


def env_int(*names, default=None):
    for name in names:
        if os.environ.get(name):
            return int(os.environ[name])
    return default


def read_counter(name):
    try:
        with open(f"/sys/class/net/eth0/statistics/{name}") as f:
            return int(f.read())
    except OSError:
        return None


def make_ddp(model, mode):
    from torch.nn.parallel import DistributedDataParallel as DDP
    ddp = DDP(model)  # default buckets: 25 MiB, first bucket 1 MiB (sparq's defaults too)
    if mode == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    elif mode == "powersgd":
        ddp.register_comm_hook(None, per_bucket_powersgd_hook())
    return ddp


def per_bucket_powersgd_hook(max_buckets=32):
    """torch's powerSGD_hook, with one PowerSGDState and one gloo process group per bucket.

    Why: each bucket's hook chains three collectives through future callbacks, which run on
    gloo's threads as earlier collectives finish; with several buckets in flight, ranks can
    issue them in different orders on one process group, and gloo pairs collectives by
    issue order (it aborts: "op.preamble.length <= op.nbytes"). Groups of their own keep
    every bucket's chain in step across ranks; the algorithm and its traffic are unchanged.
    The groups are made before training, as new_group needs every rank in the same order.
    """
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    states = [powerSGD_hook.PowerSGDState(process_group=dist.new_group(backend="gloo"),
                                          matrix_approximation_rank=POWERSGD_RANK,
                                          start_powerSGD_iter=POWERSGD_START_ITER)
              for _ in range(max_buckets)]

    def hook(_, bucket):
        index = bucket.index()
        if index >= max_buckets:
            raise RuntimeError(f"ddp_peer: more than {max_buckets} DDP buckets")
        future = powerSGD_hook.powerSGD_hook(states[index], bucket)
        # A state counts iterations when its bucket is the last one of the step: only one
        # state sees that bucket, so the others are advanced here (the last bucket's hook is
        # the step's last), or they would run the dense warm-up forever.
        if bucket.is_last():
            for other, state in enumerate(states):
                if other != index:
                    state.iter += 1
        return future
    return hook


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=sorted(MODELS))
    parser.add_argument("--mode", required=True, choices=["dense", "fp16", "powersgd", "compute"])
    parser.add_argument("--batch", type=int, required=True, help="rows per rank")
    parser.add_argument("--seq", type=int, required=True, help="tokens per row")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the median")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--metrics", default="", help="JSONL file (rank 0; every rank in compute)")
    args = parser.parse_args()
    if args.warmup >= args.steps:
        parser.error(f"--warmup {args.warmup} must be below --steps {args.steps}")

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    rank = env_int("RANK", "SPARQ_NODE", default=0)
    world = env_int("WORLD_SIZE", "SPARQ_WORLD", default=1)
    distributed = args.mode != "compute"
    if distributed:
        os.environ.setdefault("MASTER_ADDR", os.environ.get("SPARQ_MASTER_IP", "127.0.0.1"))
        os.environ.setdefault("MASTER_PORT", "29517")
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
        dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=300))

    cfg = gen_models.parse_spec(MODELS[args.model])
    if args.seq > cfg["n_ctx"]:
        parser.error(f"--seq {args.seq} exceeds the model's n_ctx {cfg['n_ctx']}")
    torch.manual_seed(1)  # same initial weights on every rank, as DDP expects
    model = gen_models.build(cfg)
    init_like_sparq(model, cfg)
    model.train()
    net = make_ddp(model, args.mode) if distributed else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(1000 + rank)
    vocab = cfg["vocab_size"]
    writes = args.metrics and (rank == 0 or not distributed)
    out = open(args.metrics, "a") if writes else None
    params = sum(p.numel() for p in model.parameters())
    print(f"ddp_peer rank {rank}/{world} {args.model} mode {args.mode}: {params} parameters, "
          f"B={args.batch} T={args.seq}", file=sys.stderr)

    times = []
    for step in range(1, args.steps + 1):
        batch = {"tokens": torch.randint(0, vocab, (args.batch, args.seq), generator=gen),
                 "targets": torch.randint(0, vocab, (args.batch, args.seq), generator=gen)}
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=False)
        _, loss = net(batch)
        forward_end = time.perf_counter()
        loss.backward()
        backward_end = time.perf_counter()
        optimizer.step()
        end = time.perf_counter()
        step_ms = (end - start) * 1e3
        times.append(step_ms)
        record = {"event": "step", "step": step, "step_ms": step_ms,
                  "forward_ms": (forward_end - start) * 1e3,
                  "backward_ms": (backward_end - forward_end) * 1e3,
                  "optimizer_ms": (end - backward_end) * 1e3, "loss": float(loss),
                  "tx_bytes": read_counter("tx_bytes"), "rx_bytes": read_counter("rx_bytes")}
        print(f"  rank {rank} step {step}: {step_ms:.1f} ms (forward {record['forward_ms']:.1f}, "
              f"backward+comm {record['backward_ms']:.1f}), loss {float(loss):.4f}",
              file=sys.stderr)
        if out:
            out.write(json.dumps(record) + "\n")
            out.flush()
    median = statistics.median(times[args.warmup:])
    print(f"ddp_peer rank {rank}: median step {median:.1f} ms over steps "
          f"{args.warmup + 1}..{args.steps}", file=sys.stderr)
    if out:
        out.write(json.dumps({"event": "end", "median_step_ms": median}) + "\n")
        out.close()
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
