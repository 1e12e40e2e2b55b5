#!/usr/bin/python3
"""Reference values for sparq's optimizers (tests/optim/optim_test.cpp), from PyTorch.

Run with Debian's python3-torch:   /usr/bin/python3 tests/reference/gen_optim.py
It rewrites tests/reference/optim/optim_reference.txt. The inputs are defined by formulas
that the C++ test evaluates identically (computed in double, rounded to float32):
  weight   [7, 5]  (weight decay on):   p0[i] = sin(0.37 i + 1)
  bias     [11]    (weight decay off):  p0[i] = sin(0.37 i + 2)
  gradient at step s (0-based), tensor k (weight 1, bias 2): g[i] = 0.5 cos(0.11 i (s + 1) + k)
Each case runs STEPS steps and records the final parameters of both tensors.
File format: one line per case, "case <name>", then "weight v0 v1 ...", "bias v0 ...",
values printed with 9 significant digits (round-trips float32 exactly).
"""
import math
import os

import torch

STEPS = 5
SHAPES = {"weight": (7, 5), "bias": (11,)}
OFFSETS = {"weight": 1.0, "bias": 2.0}


def init(name):
    n = math.prod(SHAPES[name])
    vals = [math.sin(0.37 * i + OFFSETS[name]) for i in range(n)]
    return torch.tensor(vals, dtype=torch.float32).reshape(SHAPES[name])


def grad(name, step):
    n = math.prod(SHAPES[name])
    vals = [0.5 * math.cos(0.11 * i * (step + 1) + OFFSETS[name]) for i in range(n)]
    return torch.tensor(vals, dtype=torch.float32).reshape(SHAPES[name])


CASES = [
    ("sgd_plain", torch.optim.SGD, dict(lr=0.1, weight_decay=0.01)),
    ("sgd_momentum", torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("sgd_nesterov", torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("adam", torch.optim.Adam, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)),
    ("adamw", torch.optim.AdamW, dict(lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)),
]


def run(cls, kwargs):
    params = {name: init(name).requires_grad_(True) for name in SHAPES}
    wd = kwargs.pop("weight_decay")
    groups = [{"params": [params["weight"]], "weight_decay": wd},
              {"params": [params["bias"]], "weight_decay": 0.0}]
    opt = cls(groups, **kwargs)
    kwargs["weight_decay"] = wd
    for step in range(STEPS):
        for name, p in params.items():
            p.grad = grad(name, step)
        opt.step()
    return {name: p.detach().reshape(-1).tolist() for name, p in params.items()}


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim", "optim_reference.txt")
    lines = []
    for case, cls, kwargs in CASES:
        final = run(cls, dict(kwargs))
        lines.append(f"case {case}")
        for name in SHAPES:
            lines.append(name + " " + " ".join(f"{v:.9g}" for v in final[name]))
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
