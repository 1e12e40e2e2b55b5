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
backward returns) + optimizer.step. DDP runs with gradient_as_bucket_view=True (the
gradients are views into the buckets, no copy in or out: sparq's gradients live in its
buckets too) and static_graph=True (every step uses every parameter the same way). Each rank
prints its step times on stderr; rank 0 (every rank in compute mode) appends JSONL records to
--metrics: first {"event":"config", "peer": {...}} (what this process runs on: torch version,
the ATen CPU capability in use, the BLAS libraries mapped and OpenBLAS's core, the allocator
settings, threads, DDP options; see peer_config), then {"event":"step","step","step_ms",
"forward_ms","backward_ms","optimizer_ms","loss","tx_bytes","rx_bytes"} (tx/rx: this node's
eth0 counters after the step, when /sys shows them) and a final {"event":"end",
"median_step_ms","peer"} over the steps after --warmup. --print-config prints the
configuration record and exits. Benchmark only: nothing is asserted.
"""
import argparse
import ctypes
import datetime
import json
import os
import re
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
# DDP's options (torch 1.13 API): the gradients are views into the buckets, and the graph is
# the same every step (review, 2026-12-07: plain DDP(model) copied every gradient into its
# bucket and back, work sparq does not do).
DDP_OPTIONS = {"gradient_as_bucket_view": True, "static_graph": True}
# Libraries whose presence in this process says which BLAS / allocator it really runs on.
BLAS_LIB = re.compile(r"lib(open)?blas|libmkl|libblis|libcblas|libflexiblas")
MALLOC_LIB = re.compile(r"libjemalloc|libtcmalloc|libmimalloc")
ENV_RECORDED = ("GLIBC_TUNABLES", "LD_PRELOAD", "LD_LIBRARY_PATH", "ATEN_CPU_CAPABILITY",
                "OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "MALLOC_ARENA_MAX")


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


def aten_cpu_capability():
    """The ATen CPU capability in use: torch.backends.cpu.get_cpu_capability() where it
    exists (torch >= 2.0), else the "CPU capability usage" line of torch.__config__.show()
    (torch 1.13). Debian's torch 1.13 picks AVX2 on an AVX-512 host unless
    ATEN_CPU_CAPABILITY=avx512 says otherwise."""
    try:
        import torch.backends.cpu as backends_cpu  # absent in torch 1.13
        return str(backends_cpu.get_cpu_capability())
    except (ImportError, AttributeError):
        pass
    match = re.search(r"CPU capability usage:\s*(.+)", torch.__config__.show())
    return match.group(1).strip() if match else None


def mapped_libraries(pattern):
    """Paths of the shared objects mapped into this process whose file name matches."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if path.startswith("/") and pattern.search(os.path.basename(path)) \
                        and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def openblas_info(paths):
    """OpenBLAS's own report (core, build config, threads) from the first mapped library
    that exports openblas_get_corename; None where no OpenBLAS is mapped."""
    for path in paths:
        try:
            lib = ctypes.CDLL(path)  # already mapped: the same handle, nothing reloaded
        except OSError:
            continue
        if not hasattr(lib, "openblas_get_corename"):
            continue
        info = {"library": path}
        for name, restype in (("openblas_get_corename", ctypes.c_char_p),
                              ("openblas_get_config", ctypes.c_char_p),
                              ("openblas_get_num_threads", ctypes.c_int)):
            func = getattr(lib, name, None)
            if func is None:
                continue
            func.restype, func.argtypes = restype, []
            value = func()
            info[name[len("openblas_get_"):]] = value.decode() if isinstance(value, bytes) \
                else value
        return info
    return None


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def peer_config(mode=None):
    """What this process computes with, for the results record: a comparison is only as fair
    as its peer's BLAS kernels, ATen's vector width, allocator and threads (review,
    2026-12-08: the committed figures ran on Haswell kernels, AVX2 and glibc's per-step
    mmap/munmap of the logits' temporaries, and nothing in the records said so)."""
    blas = mapped_libraries(BLAS_LIB)
    flags = cpu_flags()
    config = {
        "torch_version": torch.__version__,
        "aten_cpu_capability": aten_cpu_capability(),
        "blas_libraries": blas,
        "openblas": openblas_info(blas),
        "malloc_libraries": mapped_libraries(MALLOC_LIB),
        "env": {name: os.environ.get(name) for name in ENV_RECORDED},
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "host_avx512": "avx512f" in flags,
        "python": sys.version.split()[0],
    }
    if mode is not None:
        config["mode"] = mode
        if mode != "compute":
            config["ddp"] = dict(DDP_OPTIONS, bucket_cap_mb=25)
    return config


def make_ddp(model, mode):
    from torch.nn.parallel import DistributedDataParallel as DDP
    # Default buckets: 25 MiB, first bucket 1 MiB (sparq's defaults too). The comm hooks
    # below (fp16, PowerSGD) work with both options: PowerSGD compresses the bucket's buffer
    # in place, which the gradients then view; static_graph lets DDP's reducer delay the
    # first step's allreduce to the end of backward (a warm-up step, outside every median).
    ddp = DDP(model, **DDP_OPTIONS)
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
    parser.add_argument("--print-config", action="store_true",
                        help="print this process's configuration record (JSON) and exit")
    args = parser.parse_args()
    if args.warmup >= args.steps:
        parser.error(f"--warmup {args.warmup} must be below --steps {args.steps}")

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    if args.print_config:
        print(json.dumps({"event": "config", "peer": peer_config(args.mode)}))
        return
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
    config = peer_config(args.mode)
    print(f"ddp_peer rank {rank}/{world} {args.model} mode {args.mode}: {params} parameters, "
          f"B={args.batch} T={args.seq}; torch {config['torch_version']}, ATen "
          f"{config['aten_cpu_capability']}, OpenBLAS core "
          f"{(config['openblas'] or {}).get('corename')}, GLIBC_TUNABLES "
          f"{config['env']['GLIBC_TUNABLES']}, LD_PRELOAD {config['env']['LD_PRELOAD']}",
          file=sys.stderr)
    if out:
        out.write(json.dumps({"event": "config", "peer": config}) + "\n")
        out.flush()

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
        out.write(json.dumps({"event": "end", "median_step_ms": median, "peer": config}) + "\n")
        out.close()
    if distributed:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
