#!/usr/bin/python3
"""Reference values for sparq's layer tests (tests/layers/reference_test.cpp).

Run with Debian's interpreter, which has python3-torch:

    /usr/bin/python3 tests/reference/gen_layers.py [--out tests/reference/layers]

Every case draws float32 inputs and parameters from a fixed seed, evaluates the layer in
float64 with PyTorch's own modules/functionals (an implementation independent of sparq's),
back-propagates loss = sum(y * dy) for a random dy, and writes one file per case.
Re-running reproduces the files bit for bit.

Dropout cannot use torch's generator (sparq regenerates masks from Philox-4x32-10), so the
mask is computed here by an independent pure-Python Philox and applied with torch.

File format (little-endian), "<case>.bin":
    magic  b"SPQREF01"
    u32    number of tensors
    per tensor:
        u32 name length, name (UTF-8)
        u8  dtype: 0 = f32, 1 = i32, 2 = u8
        u8  ndim, then ndim x i64 dims
        data, row-major
Scalars that configure a case (eps, p, seed, ...) are stored as 1-element tensors too.
"""
import argparse
import math
import os
import struct

import torch
import torch.nn.functional as F

MASK32 = 0xFFFFFFFF


def philox4x32(seed, stream, block):
    """Philox-4x32-10 exactly as src/core/rng.h: counter (block, stream), key seed."""
    c = [block & MASK32, (block >> 32) & MASK32, stream & MASK32, (stream >> 32) & MASK32]
    k0, k1 = seed & MASK32, (seed >> 32) & MASK32
    for _ in range(10):
        p0 = 0xD2511F53 * c[0]
        p1 = 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k0) & MASK32, p1 & MASK32,
             ((p0 >> 32) ^ c[3] ^ k1) & MASK32, p0 & MASK32]
        k0 = (k0 + 0x9E3779B9) & MASK32
        k1 = (k1 + 0xBB67AE85) & MASK32
    return c


def dropout_scale(seed, rank, layer, step, n, p, offset=0):
    """Scales (0 or 1/(1-p)) of sparq's dropout for n elements starting at `offset`."""
    stream = (2 << 56) | ((rank & 0xFFFFFF) << 32) | layer  # make_stream(kDropout, rank, layer)
    first = (step << 40) + offset
    out = []
    for i in range(n):
        word = philox4x32(seed, stream, (first + i) // 4)[(first + i) % 4]
        u = (word >> 8) * (1.0 / 16777216.0)
        out.append(1.0 / (1.0 - p) if u >= p else 0.0)
    return torch.tensor(out, dtype=torch.float64)


class Case:
    def __init__(self, name, seed):
        self.name = name
        self.tensors = []
        self.gen = torch.Generator().manual_seed(seed)

    def rand(self, *shape, scale=1.0):
        """f32-representable values as float64 leaf tensors that require grad."""
        t = (torch.randn(*shape, generator=self.gen) * scale).float().double()
        return t.requires_grad_(True)

    def add(self, name, t, dtype=0):
        self.tensors.append((name, t.detach(), dtype))

    def write(self, out_dir):
        path = os.path.join(out_dir, self.name + ".bin")
        with open(path, "wb") as f:
            f.write(b"SPQREF01")
            f.write(struct.pack("<I", len(self.tensors)))
            for name, t, dtype in self.tensors:
                raw = name.encode()
                f.write(struct.pack("<I", len(raw)) + raw)
                f.write(struct.pack("<BB", dtype, t.dim()))
                f.write(struct.pack("<%dq" % t.dim(), *t.shape))
                np_dtype = {0: torch.float32, 1: torch.int32, 2: torch.uint8}[dtype]
                f.write(t.contiguous().to(np_dtype).numpy().tobytes())


def backprop(case, y, named_inputs):
    """loss = sum(y * dy); stores y, dy and the gradient of every named input."""
    dy = case.rand(*y.shape).detach()
    (y * dy).sum().backward()
    case.add("y", y)
    case.add("dy", dy)
    for name, t in named_inputs:
        case.add("d" + name, t.grad)


def scalar(v):
    return torch.tensor([v], dtype=torch.float64)


def linear():
    c = Case("linear", 1)
    x, w, b = c.rand(5, 7), c.rand(3, 7), c.rand(3)
    for n, t in (("x", x), ("weight", w), ("bias", b)):
        c.add(n, t)
    backprop(c, F.linear(x, w, b), [("x", x), ("weight", w), ("bias", b)])
    return [c]


def conv2d():
    cases = []
    configs = [("conv2d_s2p1", 2, 3, 7, 6, 4, 3, 2, 1, 1, True),
               ("conv2d_dil2_nobias", 1, 2, 8, 9, 3, 3, 1, 2, 2, False),
               ("conv2d_1x1", 2, 5, 4, 3, 6, 1, 1, 0, 1, True)]
    for seed, (name, n, ci, h, wd, k, ks, stride, pad, dil, bias) in enumerate(configs, 10):
        c = Case(name, seed)
        x, w = c.rand(n, ci, h, wd), c.rand(k, ci, ks, ks)
        b = c.rand(k) if bias else None
        c.add("x", x)
        c.add("weight", w)
        if bias:
            c.add("bias", b)
        c.add("config", torch.tensor([stride, pad, dil, int(bias)]), 1)
        y = F.conv2d(x, w, b, stride=stride, padding=pad, dilation=dil)
        backprop(c, y, [("x", x), ("weight", w)] + ([("bias", b)] if bias else []))
        cases.append(c)
    return cases


def pooling():
    cases = []
    for seed, (name, shape, k, s, p) in enumerate(
            [("maxpool_k3s2p1", (2, 3, 7, 7), 3, 2, 1), ("maxpool_k2s2", (2, 2, 6, 5), 2, 2, 0)], 20):
        c = Case(name, seed)
        x = c.rand(*shape)
        c.add("x", x)
        c.add("config", torch.tensor([k, s, p]), 1)
        backprop(c, F.max_pool2d(x, k, s, p), [("x", x)])
        cases.append(c)
    for seed, (name, shape, out) in enumerate(
            [("avgpool_7x5_to_3x2", (2, 3, 7, 5), (3, 2)), ("avgpool_global", (3, 4, 4, 4), (1, 1))], 30):
        c = Case(name, seed)
        x = c.rand(*shape)
        c.add("x", x)
        c.add("config", torch.tensor(out), 1)
        backprop(c, F.adaptive_avg_pool2d(x, out), [("x", x)])
        cases.append(c)
    return cases


def batch_norm():
    cases = []
    for seed, training in ((40, True), (41, False)):
        c = Case("batchnorm_train" if training else "batchnorm_eval", seed)
        x, w, b = c.rand(3, 4, 5, 3, scale=2.0), c.rand(4), c.rand(4)
        x.data += 0.5
        rm = (torch.randn(4, generator=c.gen) * 0.3).float().double()
        rv = (torch.rand(4, generator=c.gen) + 0.5).float().double()
        for n, t in (("x", x), ("weight", w), ("bias", b), ("running_mean", rm), ("running_var", rv)):
            c.add(n, t)
        rm2, rv2 = rm.clone(), rv.clone()
        y = F.batch_norm(x, rm2, rv2, w, b, training=training, momentum=0.1, eps=1e-5)
        c.add("running_mean_after", rm2)
        c.add("running_var_after", rv2)
        backprop(c, y, [("x", x), ("weight", w), ("bias", b)])
        cases.append(c)
    return cases


def activations():
    cases = []
    fns = [("relu", F.relu), ("gelu_tanh", lambda t: F.gelu(t, approximate="tanh")),
           ("gelu_erf", F.gelu), ("tanh", torch.tanh)]
    for seed, (name, fn) in enumerate(fns, 50):
        c = Case(name, seed)
        x = c.rand(37, scale=2.0)
        c.add("x", x)
        backprop(c, fn(x), [("x", x)])
        cases.append(c)
    return cases


def dropout():
    c = Case("dropout", 60)
    x = c.rand(4, 25)
    seed, rank, layer, step, p = 1234, 1, 7, 3, 0.3
    c.add("x", x)
    c.add("rng", torch.tensor([seed, rank, layer, step]), 1)
    c.add("p", scalar(p))
    y = x * dropout_scale(seed, rank, layer, step, x.numel(), p).reshape(x.shape)
    backprop(c, y, [("x", x)])
    return [c]


def layer_norm():
    c = Case("layernorm", 70)
    x, w, b = c.rand(6, 10, scale=3.0), c.rand(10), c.rand(10)
    x.data += 1.0
    for n, t in (("x", x), ("weight", w), ("bias", b)):
        c.add(n, t)
    backprop(c, F.layer_norm(x, (10,), w, b, eps=1e-5), [("x", x), ("weight", w), ("bias", b)])
    return [c]


def embedding():
    c = Case("embedding", 80)
    table = c.rand(11, 5)
    ids = torch.tensor([3, 0, 10, 3, 7, 3, 0, 2, 9], dtype=torch.int32)
    c.add("weight", table)
    c.add("ids", ids, 1)
    backprop(c, F.embedding(ids.long(), table), [("weight", table)])
    # Tied output head on the same table: logits = h * table^T.
    d = Case("embedding_tied_head", 81)
    table2, h = d.rand(11, 5), d.rand(4, 5)
    d.add("weight", table2)
    d.add("x", h)
    backprop(d, h @ table2.t(), [("weight", table2), ("x", h)])
    return [c, d]


def attention():
    cases = []
    configs = [("attention_causal", 2, 5, 8, 2, True, False, 0.0),
               ("attention_padding", 2, 6, 12, 3, False, True, 0.0),
               ("attention_causal_dropout", 2, 7, 8, 2, True, False, 0.25)]
    for seed, (name, bsz, t, dim, heads, causal, padding, p) in enumerate(configs, 90):
        c = Case(name, seed)
        x = c.rand(bsz, t, dim)
        wqkv, bqkv = c.rand(3 * dim, dim, scale=0.3), c.rand(3 * dim, scale=0.1)
        wp, bp = c.rand(dim, dim, scale=0.3), c.rand(dim, scale=0.1)
        for n, v in (("x", x), ("qkv.weight", wqkv), ("qkv.bias", bqkv), ("proj.weight", wp),
                     ("proj.bias", bp)):
            c.add(n, v)
        c.add("config", torch.tensor([heads, int(causal), int(padding)]), 1)
        rng = (77, 0, 5, 2)  # seed, rank, layer index, step
        c.add("rng", torch.tensor(rng), 1)
        c.add("p", scalar(p))
        d = dim // heads
        qkv = F.linear(x, wqkv, bqkv)
        q, k, v = (z.reshape(bsz, t, heads, d).transpose(1, 2) for z in qkv.split(dim, dim=2))
        att = q @ k.transpose(-1, -2) / math.sqrt(d)
        visible = torch.ones(bsz, 1, t, t, dtype=torch.bool)
        if causal:
            visible &= torch.tril(torch.ones(t, t, dtype=torch.bool))
        if padding:
            valid = torch.ones(bsz, t, dtype=torch.uint8)
            valid[0, -2:] = 0  # batch 0 has two padding tokens, batch 1 one
            valid[1, -1] = 0
            c.add("key_valid", valid, 2)
            visible &= valid.bool()[:, None, None, :]
        probs = att.masked_fill(~visible, float("-inf")).softmax(-1)
        c.add("probs", probs)
        if p > 0:
            probs = probs * dropout_scale(rng[0], rng[1], rng[2], rng[3], probs.numel(), p).reshape(probs.shape)
        ctx = (probs @ v).transpose(1, 2).reshape(bsz, t, dim)
        backprop(c, F.linear(ctx, wp, bp), [("x", x), ("qkv.weight", wqkv), ("qkv.bias", bqkv),
                                            ("proj.weight", wp), ("proj.bias", bp)])
        cases.append(c)
    return cases


def cross_entropy():
    c = Case("cross_entropy", 100)
    n, v, valid = 7, 13, 11
    logits = c.rand(n, v, scale=3.0)
    targets = torch.tensor([3, -100, 10, 0, 5, -100, 7], dtype=torch.int32)
    c.add("logits", logits)
    c.add("targets", targets, 1)
    c.add("valid_vocab", torch.tensor([valid]), 1)
    loss = F.cross_entropy(logits[:, :valid], targets.long(), ignore_index=-100)
    loss.backward()
    c.add("loss", loss.reshape(1))
    c.add("dlogits", logits.grad)
    return [c]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    total = 0
    for make in (linear, conv2d, pooling, batch_norm, activations, dropout, layer_norm, embedding,
                 attention, cross_entropy):
        for case in make():
            case.write(args.out)
            total += os.path.getsize(os.path.join(args.out, case.name + ".bin"))
            print(f"wrote {case.name}.bin")
    print(f"{total} bytes in {args.out}")


if __name__ == "__main__":
    main()
