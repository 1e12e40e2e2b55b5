#!/usr/bin/python3
"""safetensors fixtures for tests/train/safetensors_test.cpp, written by hand (json + struct,
no safetensors package) so that sparq's reader is checked against an independent writer.

Run with Debian's python3-torch:   /usr/bin/python3 tests/reference/gen_safetensors.py
It rewrites tests/reference/safetensors/:

dtypes.safetensors
    Exactly representable values in F32, F16 and BF16, a scalar and an empty tensor, with
    the data stored in the reverse of the header order, an unpadded header (so 16-bit data
    starts on an odd address) and metadata that needs JSON escapes (\\", \\uXXXX, a surrogate
    pair). The expected values are spelled out in the C++ test.

gpt2_hf_tiny.safetensors
    A Hugging Face GPT2LMHeadModel state dict ("transformer." prefix, lm_head.weight, the
    attn.bias / attn.masked_bias buffers) for HF_CONFIG. Every parameter element is a known
    function of its HF name and flat index (hf_value below, mirrored by the C++ test):
        k     = (sum of the UTF-8 bytes of the name without "transformer.") % 29
        v(i)  = base + ((7 * i + 13 * k) % 29 - 14) / 256
        base  = 1 for LayerNorm weights (names containing "ln_" and ending in ".weight"), else 0
    All values are exact in float32.

gpt2_hf_tiny_logits.safetensors
    "tokens" (F32 [T], token ids) and "logits" (F32 [T, vocab]): GPT-2 forward math (HF
    modeling_gpt2: pre-LN, Conv1D weights [in, out], gelu_new, causal attention, tied head)
    in float64 torch from the float32 weights above.
"""
import json
import math
import os
import struct

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "safetensors")
# sparq spec of the same model: "gpt2-tiny n_layer=2 n_head=2 n_embd=16 n_ctx=8 vocab_size=40"
HF_CONFIG = dict(n_layer=2, n_head=2, n_embd=16, n_ctx=8, vocab_size=40)
TOKENS = [3, 17, 0, 39, 22, 5, 11, 30]
LN_EPS = 1e-5


def write_safetensors(path, tensors, metadata=None, pad=True, reverse_data=False):
    """tensors: list of (name, dtype string, shape, raw little-endian bytes)."""
    header = {}
    if metadata:
        header["__metadata__"] = metadata
    order = list(reversed(tensors)) if reverse_data else tensors
    offsets, pos = {}, 0
    for name, _, _, raw in order:
        offsets[name] = (pos, pos + len(raw))
        pos += len(raw)
    for name, dtype, shape, _ in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets[name])}
    text = json.dumps(header).encode("utf-8")  # ensure_ascii: non-ASCII becomes \\uXXXX
    if pad:
        text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in order:
            f.write(raw)


def f32(values):
    return np.asarray(values, dtype="<f4").tobytes()


def f16(values):
    return np.asarray(values, dtype="<f2").tobytes()


def bf16(values):
    # bfloat16 is the top half of float32; the values below are exact, so no rounding.
    bits = np.asarray(values, dtype="<f4").view("<u4") >> 16
    return bits.astype("<u2").tobytes()


def gen_dtypes():
    tensors = [
        ("f32", "F32", [2, 3], f32([0.5, -1.25, 3.0, 0.001, -0.0, 65504.0])),
        ("f16", "F16", [5], f16([1.0, -2.5, 2.0 ** -14, 65504.0, 2.0 ** -24])),
        ("bf16", "BF16", [2, 2], bf16([1.0, -3.140625, 2.0 ** 100, -(2.0 ** -100)])),
        ("scalar", "F32", [], f32([7.0])),
        ("empty", "F32", [0], b""),
    ]
    meta = {"format": "pt", "note": 'quote " backslash \\ e\u0301 \u2603 \U0001F600'}
    write_safetensors(os.path.join(OUT, "dtypes.safetensors"), tensors, meta, pad=False,
                      reverse_data=True)


def hf_value(name, numel):
    k = sum(name.encode("utf-8")) % 29
    base = 1.0 if "ln_" in name and name.endswith(".weight") else 0.0
    i = np.arange(numel, dtype=np.int64)
    return (base + ((7 * i + 13 * k) % 29 - 14) / 256.0).astype(np.float32)


def hf_state(cfg):
    c, t, v, L = cfg["n_embd"], cfg["n_ctx"], cfg["vocab_size"], cfg["n_layer"]
    shapes = [("wte.weight", [v, c]), ("wpe.weight", [t, c])]
    for l in range(L):
        h = f"h.{l}."
        shapes += [(h + "ln_1.weight", [c]), (h + "ln_1.bias", [c]),
                   (h + "attn.c_attn.weight", [c, 3 * c]), (h + "attn.c_attn.bias", [3 * c]),
                   (h + "attn.c_proj.weight", [c, c]), (h + "attn.c_proj.bias", [c]),
                   (h + "ln_2.weight", [c]), (h + "ln_2.bias", [c]),
                   (h + "mlp.c_fc.weight", [c, 4 * c]), (h + "mlp.c_fc.bias", [4 * c]),
                   (h + "mlp.c_proj.weight", [4 * c, c]), (h + "mlp.c_proj.bias", [c])]
    shapes += [("ln_f.weight", [c]), ("ln_f.bias", [c])]
    return {n: hf_value(n, int(np.prod(s))).reshape(s) for n, s in shapes}


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def hf_forward(state, cfg, tokens):
    w = {n: torch.from_numpy(a.astype(np.float64)) for n, a in state.items()}
    c, nh = cfg["n_embd"], cfg["n_head"]
    d = c // nh
    T = len(tokens)

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (c,), w[p + ".weight"], w[p + ".bias"], LN_EPS)

    x = w["wte.weight"][tokens] + w["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(cfg["n_layer"]):
        h = f"h.{l}."
        qkv = ln(x, h + "ln_1") @ w[h + "attn.c_attn.weight"] + w[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(c, dim=-1)
        q, k, v = (z.view(T, nh, d).transpose(0, 1) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(0, 1).reshape(T, c)
        x = x + y @ w[h + "attn.c_proj.weight"] + w[h + "attn.c_proj.bias"]
        m = gelu_new(ln(x, h + "ln_2") @ w[h + "mlp.c_fc.weight"] + w[h + "mlp.c_fc.bias"])
        x = x + m @ w[h + "mlp.c_proj.weight"] + w[h + "mlp.c_proj.bias"]
    return ln(x, "ln_f") @ w["wte.weight"].T


def gen_gpt2_hf():
    cfg = HF_CONFIG
    state = hf_state(cfg)
    t = cfg["n_ctx"]
    tensors = [("transformer." + n, "F32", list(a.shape), f32(a.ravel())) for n, a in state.items()]
    # The buffers and the tied head that HF checkpoints carry and an importer must skip.
    causal = np.tril(np.ones((t, t), dtype=np.float32)).reshape(1, 1, t, t)
    for l in range(cfg["n_layer"]):
        tensors.append((f"transformer.h.{l}.attn.bias", "F32", [1, 1, t, t], f32(causal.ravel())))
        tensors.append((f"transformer.h.{l}.attn.masked_bias", "F32", [], f32([-1e4])))
    tensors.append(("lm_head.weight", "F32", list(state["wte.weight"].shape),
                    f32(state["wte.weight"].ravel())))
    write_safetensors(os.path.join(OUT, "gpt2_hf_tiny.safetensors"), tensors, {"format": "pt"})

    logits = hf_forward(state, cfg, TOKENS)
    write_safetensors(os.path.join(OUT, "gpt2_hf_tiny_logits.safetensors"),
                      [("tokens", "F32", [len(TOKENS)], f32(TOKENS)),
                       ("logits", "F32", list(logits.shape), f32(logits.numpy().ravel()))],
                      {"config": json.dumps(cfg)})


def main():
    os.makedirs(OUT, exist_ok=True)
    gen_dtypes()
    gen_gpt2_hf()
    for name in sorted(os.listdir(OUT)):
        print(f"{os.path.getsize(os.path.join(OUT, name)):8d}  {name}")


if __name__ == "__main__":
    main()
