#!/usr/bin/python3
"""Reference values for sparq's models (tests/models/), from an independent PyTorch
implementation of GPT-2, BERT and VGG written below with plain torch.nn modules.

Run with Debian's python3-torch:   /usr/bin/python3 tests/reference/gen_models.py
It rewrites tests/reference/models/: param_counts.txt and one golden file per model.

param_counts.txt: one line per model spec, "<count> <spec>", where a spec is a preset name
followed by key=value overrides, exactly as sparq's parse_model_spec() reads it. The count
is the number of elements of the PyTorch model's parameters (GPT-2 includes the padded
vocabulary rows, as sparq allocates them).

Golden files (<model>.golden): a text header, then raw little-endian data.
    sparq-golden 1
    spec <model spec>
    batch <B> <T>                  (T = 0 for images)
    param <name> <ndim> <dims...> <center> <scale> <sum>
    tensor <name> <f32|i32|u8> <ndim> <dims...>
    scalars <name> <n> <v0> ... <v(n-1)>
    end
After the "end\\n" line come the tensors' elements in the order of their "tensor" lines.
"param" lines list every parameter in forward order with the recipe of its initial value:

    h     = FNV-1a 64-bit hash of the parameter's name (UTF-8 bytes)
    x_i   = splitmix64(h + i * 0x9E3779B97F4A7C15)  (mod 2^64), i = flat element index
    u_i   = (x_i >> 11) * 2^-52 - 1                  (exact in double, in [-1, 1))
    w_i   = float32(center + scale * u_i)            (double arithmetic, one rounding)

and <sum> is the double sum of the float32 values, so a reader can tell that it generated
the same weights. Reference computations run in float64 from those float32 weights.

Phases: tensors "<phase>/logits", "<phase>/grad/<param name>" and scalars "<phase>/loss"
hold the outputs of one forward + backward from the initial weights ("train" for all
models; VGG also has "eval", run after "train" so that BatchNorm's running statistics
have been updated once). "trajectory" holds the losses of TRAJ_STEPS steps of plain SGD
(p -= TRAJ_LR * grad) in training mode on the same batch, starting again from the initial
weights (VGG's running statistics continue from the phases before).
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1
IGNORE = -100
TRAJ_STEPS = 3
TRAJ_LR = 0.05

# ----------------------------------------------------------------------------- configs
# The published hyper-parameters of each preset; overrides use sparq's config keys.
PRESETS = {
    "gpt2-124M": dict(arch="gpt2", n_layer=12, n_head=12, n_embd=768, n_ctx=1024, vocab_size=50257),
    "gpt2-350M": dict(arch="gpt2", n_layer=24, n_head=16, n_embd=1024, n_ctx=1024, vocab_size=50257),
    "gpt2-tiny": dict(arch="gpt2", n_layer=4, n_head=4, n_embd=128, n_ctx=128, vocab_size=1024),
    "bert-base": dict(arch="bert", n_layer=12, n_head=12, n_embd=768, ffn_dim=3072, n_ctx=512,
                      vocab_size=30522),
    "bert-large": dict(arch="bert", n_layer=24, n_head=16, n_embd=1024, ffn_dim=4096, n_ctx=512,
                       vocab_size=30522),
    "bert-tiny": dict(arch="bert", n_layer=2, n_head=2, n_embd=128, ffn_dim=512, n_ctx=128,
                      vocab_size=1024),
    "vgg16": dict(arch="vgg", layout="64,64,M,128,128,M,256,256,256,M,512,512,512,M,512,512,512,M"),
    "vgg11": dict(arch="vgg", layout="64,M,128,M,256,256,M,512,512,M,512,512,M"),
    "vgg-tiny": dict(arch="vgg", layout="4,4,M,8,8,M,16,16,16,M,32,32,32,M,32,32,32,M"),
}
DEFAULTS = {
    "gpt2": dict(vocab_pad=64, ln_eps=1e-5, init_std=0.02, dropout=0.0, attn_dropout=0.0),
    "bert": dict(vocab_pad=1, ln_eps=1e-12, init_std=0.02, dropout=0.1, attn_dropout=0.1,
                 type_vocab_size=2, nsp=0),
    "vgg": dict(num_classes=10, image_size=32, in_channels=3, bn_eps=1e-5, bn_momentum=0.1),
}


def parse_spec(spec):
    words = spec.split()
    cfg = dict(DEFAULTS[PRESETS[words[0]]["arch"]])
    cfg.update(PRESETS[words[0]])
    for word in words[1:]:
        key, value = word.split("=", 1)
        assert key in cfg, f"{spec}: unknown key {key}"
        if key == "layout":
            cfg[key] = value
        elif isinstance(cfg[key], float):
            cfg[key] = float(value)
        else:
            cfg[key] = int(value)
    if cfg["arch"] == "gpt2":
        cfg["ffn_dim"] = 4 * cfg["n_embd"]
        cfg["nsp"] = 0
    return cfg


def padded_vocab(cfg):
    pad = cfg["vocab_pad"]
    return (cfg["vocab_size"] + pad - 1) // pad * pad


# ----------------------------------------------------------------------------- models
# How SelfAttention forms softmax(q k^T / sqrt(d)) v: "naive" materialises the scores (the
# references); bench/bench_models_torch.py sets "sdpa" on CUDA, PyTorch's fused
# scaled_dot_product_attention (torch >= 2.0), what a PyTorch user's model runs there.
ATTENTION = "naive"
# Which rows BERT's MLM decoder (the tied projection, its bias and the cross-entropy) runs on:
# "all" (the references: logits for every position, the unlabelled ones ignored by the loss),
# or "labelled", set by bench/bench_models_torch.py on the CPU: the positions with a target
# are gathered after the MLM transform (dense, GELU, LayerNorm, still on every position), as
# sparq's fused CPU head (layers/tied_head_loss.h) computes only those rows. The loss and
# every gradient are the same; "logits" then holds only the labelled rows.
MLM_HEAD_ROWS = "all"


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused input projection (q | k | v columns)."""

    def __init__(self, dim, heads, causal, device):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(dim, 3 * dim, device=device)
        self.proj = nn.Linear(dim, dim, device=device)

    def forward(self, x, key_valid=None):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        if ATTENTION == "sdpa":
            allowed = None if key_valid is None else key_valid[:, None, None, :]
            if self.causal and allowed is not None:
                allowed = allowed & torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=allowed, is_causal=self.causal and allowed is None)
            return self.proj(out.transpose(1, 2).reshape(b, t, c))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d)
        if self.causal:
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        if key_valid is not None:
            scores = scores.masked_fill(~key_valid[:, None, None, :], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, c))


class Mlp(nn.Module):
    def __init__(self, dim, hidden, approximate, device):
        super().__init__()
        self.approximate = approximate
        self.fc = nn.Linear(dim, hidden, device=device)
        self.proj = nn.Linear(hidden, dim, device=device)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate))


class Gpt2Block(nn.Module):
    def __init__(self, cfg, device):
        super().__init__()
        c = cfg["n_embd"]
        self.ln_1 = nn.LayerNorm(c, eps=cfg["ln_eps"], device=device)
        self.attn = SelfAttention(c, cfg["n_head"], True, device)
        self.ln_2 = nn.LayerNorm(c, eps=cfg["ln_eps"], device=device)
        self.mlp = Mlp(c, cfg["ffn_dim"], "tanh", device)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.cfg = cfg
        c = cfg["n_embd"]
        self.wte = nn.Embedding(padded_vocab(cfg), c, device=device)
        self.wpe = nn.Embedding(cfg["n_ctx"], c, device=device)
        self.h = nn.ModuleList([Gpt2Block(cfg, device) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(c, eps=cfg["ln_eps"], device=device)

    def forward(self, batch):
        tokens = batch["tokens"].long()
        t = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(t, device=tokens.device))[None]
        for block in self.h:
            x = block(x)
        # Tied head over the valid rows of the padded table: the padded rows get no logits
        # (sparq's valid_vocab). The same values as cutting the product's padded columns, but
        # contiguous: a cut would cost every step a copy forward and a zero-fill + copy
        # backward that sparq does not pay (review, 2026-12-06; the golden files are the same).
        logits = self.ln_f(x) @ self.wte.weight[: self.cfg["vocab_size"]].t()
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               batch["targets"].long().reshape(-1), ignore_index=IGNORE)
        return {"logits": logits}, loss


class BertLayer(nn.Module):
    def __init__(self, cfg, device):
        super().__init__()
        c = cfg["n_embd"]
        self.attn = SelfAttention(c, cfg["n_head"], False, device)
        self.ln_1 = nn.LayerNorm(c, eps=cfg["ln_eps"], device=device)
        self.mlp = Mlp(c, cfg["ffn_dim"], "none", device)
        self.ln_2 = nn.LayerNorm(c, eps=cfg["ln_eps"], device=device)

    def forward(self, x, key_valid):
        x = self.ln_1(x + self.attn(x, key_valid))  # post-LN
        return self.ln_2(x + self.mlp(x))


class BertEmbeddings(nn.Module):
    def __init__(self, cfg, device):
        super().__init__()
        c = cfg["n_embd"]
        self.word = nn.Embedding(padded_vocab(cfg), c, device=device)
        self.position = nn.Embedding(cfg["n_ctx"], c, device=device)
        self.token_type = nn.Embedding(cfg["type_vocab_size"], c, device=device)
        self.ln = nn.LayerNorm(c, eps=cfg["ln_eps"], device=device)

    def forward(self, tokens, types):
        t = tokens.shape[1]
        return self.ln(self.word(tokens) + self.position(torch.arange(t, device=tokens.device))[None] + self.token_type(types))


class TiedDecoder(nn.Module):
    """Output projection through the word-embedding table, plus its own bias."""

    def __init__(self, vocab, device):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(vocab, device=device))

    def forward(self, x, table):
        return x @ table.t() + self.bias


class MlmHead(nn.Module):
    def __init__(self, cfg, device):
        super().__init__()
        c = cfg["n_embd"]
        self.dense = nn.Linear(c, c, device=device)
        self.ln = nn.LayerNorm(c, eps=cfg["ln_eps"], device=device)
        self.decoder = TiedDecoder(padded_vocab(cfg), device)

    def forward(self, x, table, rows=None):
        h = self.ln(F.gelu(self.dense(x)))
        if rows is not None:  # MLM_HEAD_ROWS "labelled": the decoder on these rows only
            h = h.reshape(-1, h.shape[-1])[rows]
        return self.decoder(h, table)


class Bert(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.cfg = cfg
        c = cfg["n_embd"]
        self.embeddings = BertEmbeddings(cfg, device)
        self.layer = nn.ModuleList([BertLayer(cfg, device) for _ in range(cfg["n_layer"])])
        self.mlm = MlmHead(cfg, device)
        if cfg["nsp"]:
            self.pooler = nn.Linear(c, c, device=device)
            self.nsp = nn.Linear(c, 2, device=device)

    def forward(self, batch):
        # No "mask": no padding (what bench_models_torch.py's BERT batches say, as sparq's
        # do with an empty attention_mask).
        key_valid = batch["mask"].bool() if "mask" in batch else None
        x = self.embeddings(batch["tokens"].long(), batch["token_types"].long())
        for layer in self.layer:
            x = layer(x, key_valid)
        targets = batch["targets"].long().reshape(-1)
        rows = None
        if MLM_HEAD_ROWS == "labelled":
            rows = (targets != IGNORE).nonzero().squeeze(1)
            targets = targets[rows]
        logits = self.mlm(x, self.embeddings.word.weight, rows)[..., : self.cfg["vocab_size"]]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets, ignore_index=IGNORE)
        out = {"logits": logits}
        if self.cfg["nsp"]:
            nsp_logits = self.nsp(torch.tanh(self.pooler(x[:, 0])))
            loss = loss + F.cross_entropy(nsp_logits, batch["nsp_labels"].long())
            out["nsp_logits"] = nsp_logits
        return out, loss


class VggBlock(nn.Module):
    def __init__(self, cin, cout, cfg, device):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, device=device)
        self.bn = nn.BatchNorm2d(cout, eps=cfg["bn_eps"], momentum=cfg["bn_momentum"], device=device)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Vgg(nn.Module):
    def __init__(self, cfg, device=None):
        super().__init__()
        self.plan = cfg["layout"].split(",")
        blocks, cin, size = [], cfg["in_channels"], cfg["image_size"]
        for item in self.plan:
            if item == "M":
                size //= 2
            else:
                blocks.append(VggBlock(cin, int(item), cfg, device))
                cin = int(item)
        self.features = nn.ModuleList(blocks)
        self.classifier = nn.Linear(cin * size * size, cfg["num_classes"], device=device)

    def forward(self, batch):
        x, i = batch["images"], 0
        for item in self.plan:
            if item == "M":
                x = F.max_pool2d(x, 2, 2)
            else:
                x = self.features[i](x)
                i += 1
        logits = self.classifier(x.flatten(1))
        return {"logits": logits}, F.cross_entropy(logits, batch["labels"].long())


def build(cfg, device=None):
    return {"gpt2": Gpt2, "bert": Bert, "vgg": Vgg}[cfg["arch"]](cfg, device)


# ----------------------------------------------------------------------------- weights
def fnv1a64(name):
    h = 0xCBF29CE484222325
    for byte in name.encode():
        h = ((h ^ byte) * 0x100000001B3) & MASK64
    return h


def splitmix64(state):
    z = (state + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def formula_values(name, n, center, scale):
    h = fnv1a64(name)
    vals = [center + scale * ((splitmix64((h + i * 0x9E3779B97F4A7C15) & MASK64) >> 11) * 2.0 ** -52 - 1.0)
            for i in range(n)]
    return torch.tensor(vals, dtype=torch.float64).to(torch.float32)


def recipe(name, shape):
    """(center, scale) of a parameter: chosen so that activations stay O(1) and every
    nonlinearity is exercised away from its linear regime."""
    leaf = name.rsplit(".", 1)[-1]
    owner = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
    if owner in ("ln_1", "ln_2", "ln_f", "ln", "bn") and leaf == "weight":
        return 1.0, 0.2
    if leaf == "bias":
        return 0.0, 0.1
    if len(shape) == 2 and owner in ("wte", "wpe", "word", "position", "token_type"):
        return 0.0, 0.8
    fan_in = math.prod(shape[1:])
    return 0.0, math.sqrt(3.0 / fan_in)


def set_formula_weights(model):
    lines = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            center, scale = recipe(name, tuple(p.shape))
            values = formula_values(name, p.numel(), center, scale).reshape(p.shape)
            p.copy_(values.to(p.dtype))
            total = float(values.double().sum())
            dims = " ".join(str(d) for d in p.shape)
            lines.append(f"param {name} {p.dim()} {dims} {center!r} {scale!r} {total!r}")
    return lines


# ----------------------------------------------------------------------------- golden cases
def gpt2_batch(cfg, b, t, gen):
    v = cfg["vocab_size"]
    stream = torch.randint(0, v, (b, t + 1), generator=gen, dtype=torch.int32)
    targets = stream[:, 1:].clone()
    targets[1, -1] = IGNORE  # one ignored position exercises the mean over counted rows
    return {"tokens": stream[:, :-1].contiguous(), "targets": targets}


def bert_batch(cfg, b, t, gen):
    v = cfg["vocab_size"]
    lengths = [t, t - 5, t // 2][:b]
    tokens = torch.randint(0, v, (b, t), generator=gen, dtype=torch.int32)
    mask = torch.zeros(b, t, dtype=torch.uint8)
    types = torch.zeros(b, t, dtype=torch.int32)
    targets = torch.full((b, t), IGNORE, dtype=torch.int32)
    pick = torch.rand(b, t, generator=gen)
    for r, n in enumerate(lengths):
        mask[r, :n] = 1
        types[r, n // 2:n] = 1
        tokens[r, n:] = 0  # the [PAD] id
        sel = pick[r, :n] < 0.3
        sel[1] = True  # at least one prediction per row
        targets[r, :n][sel] = torch.randint(0, v, (int(sel.sum()),), generator=gen, dtype=torch.int32)
    nsp = torch.tensor([r % 2 for r in range(b)], dtype=torch.int32)
    return {"tokens": tokens, "mask": mask, "token_types": types, "targets": targets, "nsp_labels": nsp}


def vgg_batch(cfg, b, gen):
    s, c = cfg["image_size"], cfg["in_channels"]
    images = torch.randn(b, c, s, s, generator=gen, dtype=torch.float32)
    labels = torch.randint(0, cfg["num_classes"], (b,), generator=gen, dtype=torch.int32)
    return {"images": images, "labels": labels}


GOLDEN = [
    # name, spec, B, T (context shorter than n_ctx for GPT-2; BERT rows padded to 16, 11, 8)
    ("gpt2", "gpt2-tiny n_layer=2 n_embd=64 n_head=4 n_ctx=32 vocab_size=200", 2, 20),
    ("bert", "bert-tiny n_layer=2 n_embd=64 n_head=4 ffn_dim=256 n_ctx=32 vocab_size=200 nsp=1 "
             "dropout=0 attn_dropout=0", 3, 16),
    ("vgg", "vgg-tiny", 4, 0),
]


def run_phase(model, batch, phase, tensors, scalars):
    model.zero_grad(set_to_none=False)
    outputs, loss = model(batch)
    loss.backward()
    for key, value in outputs.items():
        tensors.append((f"{phase}/{key}", value.detach().float()))
    for name, p in model.named_parameters():
        tensors.append((f"{phase}/grad/{name}", p.grad.detach().float()))
    scalars.append((f"{phase}/loss", [float(loss)]))


def golden_case(name, spec, b, t, out_dir):
    cfg = parse_spec(spec)
    # This reference has no dropout: golden runs must switch it off.
    assert cfg.get("dropout", 0) == 0 and cfg.get("attn_dropout", 0) == 0, spec
    gen = torch.Generator().manual_seed(1234)
    model = build(cfg).double()
    param_lines = set_formula_weights(model)
    initial = {n: p.detach().clone() for n, p in model.named_parameters()}
    if cfg["arch"] == "gpt2":
        batch = gpt2_batch(cfg, b, t, gen)
    elif cfg["arch"] == "bert":
        batch = bert_batch(cfg, b, t, gen)
    else:
        batch = vgg_batch(cfg, b, gen)
    inputs = {k: v for k, v in batch.items()}
    if "images" in batch:
        batch = dict(batch, images=batch["images"].double())
    tensors = [(f"input/{k}", v) for k, v in inputs.items()]
    scalars = []
    model.train()
    run_phase(model, batch, "train", tensors, scalars)
    if cfg["arch"] == "vgg":
        model.eval()
        run_phase(model, batch, "eval", tensors, scalars)
        model.train()
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(initial[n])
    losses = []
    for _ in range(TRAJ_STEPS):
        model.zero_grad(set_to_none=False)
        _, loss = model(batch)
        loss.backward()
        losses.append(float(loss))
        with torch.no_grad():
            for p in model.parameters():
                p -= TRAJ_LR * p.grad
    scalars.append(("trajectory", losses))
    write_golden(os.path.join(out_dir, f"{name}.golden"), spec, b, t, param_lines, tensors, scalars)


def write_golden(path, spec, b, t, param_lines, tensors, scalars):
    kinds = {torch.float32: "f32", torch.int32: "i32", torch.uint8: "u8"}
    header = ["sparq-golden 1", f"spec {spec}", f"batch {b} {t}"] + param_lines
    for name, value in tensors:
        dims = " ".join(str(d) for d in value.shape)
        header.append(f"tensor {name} {kinds[value.dtype]} {value.dim()} {dims}")
    for name, values in scalars:
        header.append(f"scalars {name} {len(values)} " + " ".join(repr(v) for v in values))
    header.append("end")
    assert sys.byteorder == "little", "golden files are little-endian"
    with open(path, "wb") as f:
        f.write(("\n".join(header) + "\n").encode())
        for _, value in tensors:
            f.write(value.contiguous().numpy().tobytes())
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


COUNT_SPECS = [
    "gpt2-124M", "gpt2-350M", "gpt2-tiny", "gpt2-tiny vocab_size=50257",
    "bert-base", "bert-base nsp=1", "bert-large", "bert-large nsp=1", "bert-tiny", "bert-tiny nsp=1",
    "vgg16", "vgg11", "vgg-tiny", "vgg16 num_classes=100",
]


def main():
    torch.set_num_threads(1)
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    for spec in COUNT_SPECS:
        model = build(parse_spec(spec), device="meta")
        lines.append(f"{sum(p.numel() for p in model.parameters())} {spec}")
    with open(os.path.join(out_dir, "param_counts.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    for name, spec, b, t in GOLDEN:
        golden_case(name, spec, b, t, out_dir)


if __name__ == "__main__":
    main()
