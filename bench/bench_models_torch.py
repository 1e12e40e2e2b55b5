#!/usr/bin/python3
"""PyTorch side of bench/bench_models: forward + backward steps of one model.

Usage: bench_models_torch.py --model gpt2|bert|vgg|gpt2tiny [--threads N] [--steps S] [--warmup W]
                             [--device cpu|cuda] [--precision fp32|bf16]

On cuda the GPU workloads are used (bench_models.cpp's kGpuWorkloads), the step ends with
torch.cuda.synchronize(), bf16 means eager torch.autocast(bfloat16) (the peer issue 14
names), attention is PyTorch's fused scaled_dot_product_attention (a PyTorch user's model runs
that, not the materialised scores of the references; the naive form if it fails), fp32 means IEEE fp32 (TF32 off for cuDNN and cuBLAS, as sparq's convolutions and GEMMs
run), and the peak memory is torch.cuda.max_memory_reserved(): what the caching allocator
held from the device, the counterpart of sparq's device-wide use above its baseline.

The models are the independent PyTorch implementations of tests/reference/gen_models.py
(the ones sparq's golden tests match), in float32, in training mode, without dropout. A
step is zero_grad + forward + backward, as in the C++ driver. On the CPU BERT's MLM decoder
(tied projection, bias, cross-entropy) runs on the labelled positions only (gen_models'
MLM_HEAD_ROWS "labelled"), gathered after the MLM transform, as sparq's fused CPU head does;
on cuda on every position, as sparq's materialised CUDA head does. BERT labels exactly
round(0.15 * B * T) positions, as sparq's child does, so both heads have the same rows.
Prints "STEPS <s/step of each timed step>", "BLAS <kind> <path>" (the BLAS library loaded,
bench/torch_blas.py) and then one line
"RESULT <tokens or images per second> <peak MiB> <median s/step> <fastest s/step>"
(peak MiB: on the CPU the peak resident set above the one before the model was built) on stdout and the
per-step log on stderr. Benchmark only: nothing is asserted.
"""
import argparse
import contextlib
import os
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
import gen_models  # noqa: E402  (the reference model definitions)
from torch_blas import loaded_blas  # noqa: E402  (bench/, beside this script)

WORKLOADS = {
    # key: spec (as bench_models.cpp), micro-batch, sequence length (0 for images)
    "gpt2": ("gpt2-124M", 4, 256),
    "bert": ("bert-base dropout=0 attn_dropout=0", 8, 128),
    "vgg": ("vgg16", 32, 0),
    "gpt2tiny": ("gpt2-tiny vocab_size=50257", 8, 128),
}
GPU_WORKLOADS = {
    "gpt2": ("gpt2-124M", 16, 1024),
    "bert": ("bert-base dropout=0 attn_dropout=0", 32, 128),
    "vgg": ("vgg16", 128, 0),
}


def current_rss_mib():
    """The resident set now (MiB), from /proc/self/statm; 0 if unreadable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def init_like_sparq(model, cfg):
    """sparq's initialisation (models/*.h), so both sides compute on the same value ranges.
    PyTorch's module defaults (N(0, 1) embeddings) give GPT-2 logits in the hundreds, whose
    softmax underflows into denormals and slows every later step down many times over."""
    import math
    import torch.nn as nn
    with torch.no_grad():
        for name, m in model.named_modules():
            if isinstance(m, (nn.Linear, nn.Embedding)) and cfg["arch"] != "vgg":
                std = cfg["init_std"]
                if cfg["arch"] == "gpt2" and name.endswith("proj"):
                    std /= math.sqrt(2 * cfg["n_layer"])
                nn.init.normal_(m.weight, 0.0, std)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
            elif isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if getattr(m, "bias", None) is not None and isinstance(m.bias, torch.Tensor):
                nn.init.zeros_(m.bias)


def make_batch(cfg, b, t, gen):
    if cfg["arch"] == "vgg":
        s = cfg["image_size"]
        return {"images": torch.randn(b, cfg["in_channels"], s, s, generator=gen),
                "labels": torch.randint(0, cfg["num_classes"], (b,), generator=gen)}
    v = cfg["vocab_size"]
    tokens = torch.randint(0, v, (b, t), generator=gen)
    targets = torch.randint(0, v, (b, t), generator=gen)
    batch = {"tokens": tokens, "targets": targets}
    if cfg["arch"] == "bert":
        # Exactly round(0.15 * B * T) labelled positions, as bench_models_child.cpp labels:
        # both heads then compute the same number of rows.
        labelled = torch.zeros(b * t, dtype=torch.bool)
        labelled[torch.randperm(b * t, generator=gen)[:round(0.15 * b * t)]] = True
        batch["targets"] = targets.masked_fill(~labelled.view(b, t), gen_models.IGNORE)
        # No padding mask: sparq's child runs without one (an empty attention_mask), and an
        # all-ones mask would cost PyTorch a masked_fill and sdpa its fused kernels (review).
        batch["token_types"] = torch.zeros(b, t, dtype=torch.long)
    return batch


def choose_attention(model, batch, autocast):
    """PyTorch's fused scaled_dot_product_attention when one step (forward and backward, as
    timed) runs with it, else the naive form: a failure of the fused path falls back rather
    than losing the peer. Logs which. Returns (seconds, loss) of that step when it ran: it is
    the run's first step, so that PyTorch gets no more warm-up than sparq (it was an extra
    untimed step: review, 2026-12-06), else None."""
    probe = None
    if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        gen_models.ATTENTION = "sdpa"
        try:
            start = time.perf_counter()
            model.zero_grad(set_to_none=False)
            with autocast:
                _, loss = model(batch)
            loss.backward()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            probe = (time.perf_counter() - start, float(loss))
        except Exception as error:  # noqa: BLE001 (any failure of the fused path)
            print(f"torch: scaled_dot_product_attention failed ({error})", file=sys.stderr)
            gen_models.ATTENTION = "naive"
            model.zero_grad(set_to_none=True)
    print(f"torch: attention {gen_models.ATTENTION}", file=sys.stderr)
    return probe


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True, choices=sorted(WORKLOADS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    spec, b, t = (GPU_WORKLOADS if cuda else WORKLOADS)[args.model]
    # The interpreter and torch's libraries before the model: the CPU peak is reported above
    # this, as sparq's child reports its own (review, 2026-12-05: a few hundred MiB of
    # libraries counted against PyTorch alone).
    baseline_rss_mib = current_rss_mib()
    cfg = gen_models.parse_spec(spec)
    # BERT's MLM decoder on the rows sparq's head computes: the labelled ones on the CPU (its
    # fused head), every one on cuda (its materialised head). Before 2026-12-06 it ran on
    # every row on the CPU too, ~120 GFLOP a step more than sparq (review).
    gen_models.MLM_HEAD_ROWS = "all" if cuda else "labelled"
    model = gen_models.build(cfg)  # float32
    init_like_sparq(model, cfg)
    model.train()
    gen = torch.Generator().manual_seed(99)
    batch = make_batch(cfg, b, t, gen)
    if cuda:
        # PyTorch lets cuDNN use TF32 for fp32 convolutions by default; sparq's run IEEE fp32.
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        print("torch: TF32 off for cuDNN and cuBLAS", file=sys.stderr)
        model = model.cuda()
        batch = {k: v.cuda() for k, v in batch.items()}
    # Constructing a bf16 autocast asks CUDA whether bf16 is supported even when disabled,
    # which raises on a CPU-only torch: build it only when it is used.
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if cuda and args.precision == "bf16"
                else contextlib.nullcontext())
    probe = None
    if cuda and cfg["arch"] != "vgg":
        probe = choose_attention(model, batch, autocast)
    params = sum(p.numel() for p in model.parameters())
    print(f"torch {spec}: {params} parameters, B={b} T={t}", file=sys.stderr)
    if cfg["arch"] == "bert":
        labelled = int((batch["targets"] != gen_models.IGNORE).sum())
        print(f"torch: MLM decoder on {'all' if gen_models.MLM_HEAD_ROWS == 'all' else labelled} "
              f"of {b * t} rows ({labelled} labelled)", file=sys.stderr)
    timed = []  # seconds of each timed step
    for step in range(args.warmup + args.steps):
        if step == 0 and probe is not None:  # the attention probe was this step
            elapsed, probe_loss = probe
            if step >= args.warmup:
                timed.append(elapsed)
            print(f"  torch {args.model} step {step}: loss {probe_loss:.4f}, {elapsed:.2f} s "
                  "(the attention probe)", file=sys.stderr)
            continue
        start = time.perf_counter()
        model.zero_grad(set_to_none=False)
        with autocast:
            _, loss = model(batch)
        loss.backward()
        if cuda:
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if step >= args.warmup:
            timed.append(elapsed)
        print(f"  torch {args.model} step {step}: loss {float(loss):.4f}, {elapsed:.2f} s", file=sys.stderr)
    print("STEPS " + " ".join(repr(s) for s in timed))
    # The median step, as bench_models_child.cpp reports it.
    timed.sort()
    n = len(timed)
    median = timed[n // 2] if n % 2 == 1 else 0.5 * (timed[n // 2 - 1] + timed[n // 2])
    items = b * (t if t > 0 else 1)
    peak_mib = (torch.cuda.max_memory_reserved() / 2**20 if cuda
                else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0 - baseline_rss_mib)
    print("BLAS {} {}".format(*loaded_blas()))
    print(f"RESULT {items / median} {peak_mib} {median} {timed[0]}")


if __name__ == "__main__":
    main()
