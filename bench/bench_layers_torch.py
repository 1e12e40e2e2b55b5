#!/usr/bin/python3
"""PyTorch times for the ops bench_layers measures (same names, shapes and thread count).

    /usr/bin/python3 bench/bench_layers_torch.py --threads 2 --out torch.txt [--coretype X]
    build/bench/bench_layers --threads 2 --torch-results torch.txt

Writes a header line first, "#bench_layers_torch threads=N seconds=S torch=VERSION
coretype=KERNELS blas=KIND:PATH shapes=...", which bench_layers checks against its own thread count and
shapes (it refuses a file made otherwise) and prints, then one "name milliseconds" line per op (best forward+backward time,
like the C++ side), each as soon as that op is timed, so an interrupted run leaves the lines
of the ops it finished.

cross_entropy times contiguous [B*T, 50257] logits (GPT-2's real vocabulary), as sparq's side
does; until 2026-12-06 it cut them from [B*T, 50304], a strided slice whose copy forward and
zero-fill + copy backward sparq did not pay (review: about twice the time).
"""
import argparse
import os
import sys
import time


def early_option(argv, flag, default):
    """The value of `flag` ("--x V" or "--x=V") read before argparse runs, for what must be
    set before torch loads OpenBLAS."""
    value = default
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith(flag + "="):
            value = word.split("=", 1)[1]
    return value


def openblas_core_type(argv):
    """The OpenBLAS kernels PyTorch's products run on, chosen before torch loads OpenBLAS, by
    bench_models.cpp's rule: Debian's OpenBLAS picks its AVX2 Haswell kernels on AVX-512 AMD
    EPYCs (whose environment sets OPENBLAS_CORETYPE=Haswell too), where sparq's GEMMs use
    AVX-512; where the CPU has AVX-512 F/BW/DQ/VL the peer gets SkylakeX over any inherited
    value. --coretype NAME chooses NAME, --coretype inherit keeps the environment's. Returns
    what the header line records (this peer inherited whatever was set: review, 2026-12-06)."""
    chosen = early_option(argv, "--coretype", "")
    if chosen == "inherit":
        return "inherited:" + os.environ.get("OPENBLAS_CORETYPE", "unset")
    if not chosen:
        try:
            with open("/proc/cpuinfo") as f:
                flags = next((line.split(":", 1)[1].split() for line in f
                              if line.startswith("flags")), [])
        except OSError:
            flags = []
        if all(flag in flags for flag in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
            chosen = "SkylakeX"
    if not chosen:
        return "inherited:" + os.environ.get("OPENBLAS_CORETYPE", "unset")
    os.environ["OPENBLAS_CORETYPE"] = chosen
    return chosen


CORETYPE = openblas_core_type(sys.argv[1:])


def pin_blas_threads(argv):
    """A pthread OpenBLAS reads OPENBLAS_NUM_THREADS when it loads and ignores
    torch.set_num_threads: without it the peer's products used every core while the header
    said threads=N (review, 2026-12-07). Set from --threads (default 2) before torch loads."""
    threads = early_option(argv, "--threads", "2")
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[name] = threads


pin_blas_threads(sys.argv[1:])

import torch  # noqa: E402 (after OPENBLAS_CORETYPE and the thread counts are set: OpenBLAS reads them when it loads)
import torch.nn.functional as F  # noqa: E402
from torch_blas import loaded_blas  # noqa: E402  (bench/, beside this script)

B, T, C, H, V = 4, 256, 768, 12, 50304
VALID_V = 50257  # GPT-2's real tokens: cross_entropy's logits' width
N, CH, HW = 32, 64, 32
BERT_B, BERT_T = 8, 128
# As bench_layers.cpp's shapes_word(): a file made for other shapes is refused there.
SHAPES = (f"B={B},T={T},C={C},H={H},V={V},ce={B * T}x{VALID_V},N={N},CH={CH},HW={HW},"
          f"bertB={BERT_B},bertT={BERT_T}")


def best_ms(step, seconds):
    step()
    best, start, reps = 1e30, time.perf_counter(), 0
    while time.perf_counter() - start < seconds or reps < 3:
        t0 = time.perf_counter()
        step()
        best = min(best, (time.perf_counter() - t0) * 1e3)
        reps += 1
    return best


def fwd_bwd(module_fn, *inputs):
    """Forward then backward with a given upstream gradient, like the C++ calls. The upstream
    gradient is made once, on the untimed first call, as the C++ side's is before its loop
    (review, 2026-12-05: allocating and filling it inside every timed step charged PyTorch a
    pass over the output); parameter gradients accumulate, as the C++ layers' do (dW +=)."""
    upstream = []

    def step():
        for t in inputs:
            if t.grad is not None:
                t.grad = None
        y = module_fn(*inputs)
        if not upstream:
            upstream.append(torch.ones_like(y))
        y.backward(upstream[0])
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--out", default="torch_layers.txt")
    ap.add_argument("--coretype", default="",
                    help="OpenBLAS kernels (default: SkylakeX on AVX-512 F/BW/DQ/VL, else the "
                         "environment's; 'inherit' keeps the environment's)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    req = dict(requires_grad=True)
    x = torch.randn(B, T, C, **req)
    x4 = torch.randn(B, T, 4 * C, **req)
    cases = {}
    for name, i, o, inp in (("linear_768x2304", C, 3 * C, x), ("linear_768x3072", C, 4 * C, x),
                            ("linear_3072x768", 4 * C, C, x4)):
        lin = torch.nn.Linear(i, o)
        cases[name] = fwd_bwd(lin, inp)
    ln = torch.nn.LayerNorm(C)
    cases["layernorm"] = fwd_bwd(ln, x)
    cases["gelu_tanh"] = fwd_bwd(lambda t: F.gelu(t, approximate="tanh"), x4)
    cases["dropout"] = fwd_bwd(lambda t: F.dropout(t, 0.1, True), x)
    y2 = torch.randn(B, T, C, **req)
    cases["residual"] = fwd_bwd(lambda a, b: a + b, x, y2)
    qkv = torch.nn.Linear(C, 3 * C)
    proj = torch.nn.Linear(C, C)

    # Built once, as a model's registered buffer is.
    future = ~torch.ones(T, T, dtype=torch.bool).tril()

    def attention(t):
        q, k, v = qkv(t).split(C, dim=2)
        q, k, v = (z.view(B, T, H, C // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / (C // H) ** 0.5
        att = att.masked_fill(future, float("-inf")).softmax(-1)
        return proj((att @ v).transpose(1, 2).reshape(B, T, C))
    cases["attention_causal"] = fwd_bwd(attention, x)
    bert_b, bert_t = BERT_B, BERT_T
    valid = torch.ones(bert_b, bert_t, dtype=torch.bool)
    for b in range(bert_b):
        valid[b, bert_t - 13 * b:] = False
    padding = ~valid[:, None, None, :]

    def attention_padded(t):
        q, k, v = qkv(t).split(C, dim=2)
        q, k, v = (z.view(bert_b, bert_t, H, C // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / (C // H) ** 0.5
        att = att.masked_fill(padding, float("-inf")).softmax(-1)
        return proj((att @ v).transpose(1, 2).reshape(bert_b, bert_t, C))
    cases["attention_padded"] = fwd_bwd(attention_padded, torch.randn(bert_b, bert_t, C, **req))
    emb = torch.nn.Embedding(V, C)
    ids = (torch.arange(B * T) * 7919 % V).view(B, T)
    cases["embedding"] = fwd_bwd(emb, ids)
    logits = torch.randn(B * T, VALID_V, **req)
    targets = ids.view(-1) % VALID_V
    cases["cross_entropy"] = fwd_bwd(lambda t: F.cross_entropy(t, targets), logits)
    xi = torch.randn(N, CH, HW, HW, **req)
    conv = torch.nn.Conv2d(CH, CH, 3, padding=1)
    cases["conv3x3_64"] = fwd_bwd(conv, xi)
    for ch, hw in ((128, 16), (256, 8), (512, 4), (512, 2)):
        deep = torch.nn.Conv2d(ch, ch, 3, padding=1)
        cases[f"conv3x3_{ch}_{hw}x{hw}"] = fwd_bwd(deep, torch.randn(N, ch, hw, hw, **req))
    bn = torch.nn.BatchNorm2d(CH)
    cases["batchnorm2d"] = fwd_bwd(bn, xi)
    cases["relu"] = fwd_bwd(F.relu, xi)
    cases["maxpool2x2"] = fwd_bwd(lambda t: F.max_pool2d(t, 2, 2), xi)
    blas = ":".join(loaded_blas()).replace(" ", "_")  # the header's words are space-separated
    with open(args.out, "w") as f:
        f.write(f"#bench_layers_torch threads={args.threads} seconds={args.seconds} "
                f"torch={torch.__version__} coretype={CORETYPE} blas={blas} shapes={SHAPES}\n")
        for name, step in cases.items():
            ms = best_ms(step, args.seconds)
            f.write(f"{name} {ms:.4f}\n")
            f.flush()  # each op's line as it finishes: an interrupted run keeps the ops it timed
            print(f"{name:<18} {ms:10.3f} ms", flush=True)


if __name__ == "__main__":
    main()
