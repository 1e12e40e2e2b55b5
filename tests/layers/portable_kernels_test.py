#!/usr/bin/env python3
"""The CPU kernels written for wide vectors (GCC vector extensions, asm register operands,
AVX-512 paths) compile for x86-64 machines without AVX-512 too: the build uses -march=native,
so a machine with AVX-512 (CI's, the developers') never compiles the narrower paths, and an
AVX2 machine could not build sparq at all (review, 2026-12-06: an asm "+v" operand of a
64-byte vector, attention_tile.h). Every source under src/ that uses them, or includes a
header that does, is compiled here with its build command at -march=x86-64-v2 (SSE4.2) and
x86-64-v3 (AVX2). Skips (77) on a build that is not for x86-64.
  portable_kernels_test.py BUILD_DIR SOURCE_DIR"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

build, source = sys.argv[1], os.path.realpath(sys.argv[2])
WIDE = re.compile(r"vector_size|\basm\s*\(|__AVX|immintrin")
if os.uname().machine != "x86_64":
    print("SKIP: not an x86-64 machine")
    sys.exit(77)

src = os.path.join(source, "src")
wide_headers = set()
for root, _, files in os.walk(src):
    for name in files:
        path = os.path.join(root, name)
        if name.endswith(".h") and WIDE.search(open(path, errors="replace").read()):
            wide_headers.add(os.path.relpath(path, src))

with open(os.path.join(build, "compile_commands.json")) as f:
    entries = json.load(f)
checked = failed = 0
with tempfile.TemporaryDirectory() as tmp:
    for e in entries:
        path = os.path.realpath(e["file"])
        if not (path.startswith(src + "/") and path.endswith(".cpp")):
            continue
        text = open(path, errors="replace").read()
        if not (WIDE.search(text) or any(f'"{h}"' in text for h in wide_headers)):
            continue
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        # The object goes to the scratch folder; the precompiled header of the native build
        # does not match the other -march and is left out (its header is read as text).
        out, i = [], 0
        while i < len(args):
            a = args[i]
            if a == "-o":
                i += 2
                continue
            if a == "-include" and i + 1 < len(args) and "pch" in args[i + 1]:
                i += 2
                continue
            if a.startswith("-march=") or a.startswith("-Winvalid-pch"):
                i += 1
                continue
            out.append(a)
            i += 1
        for arch in ("x86-64-v2", "x86-64-v3"):
            cmd = out + [f"-march={arch}", "-Wno-psabi", "-o", os.path.join(tmp, "kernel.o")]
            done = subprocess.run(cmd, cwd=e["directory"], capture_output=True, text=True)
            checked += 1
            rel = os.path.relpath(path, source)
            if done.returncode != 0:
                failed += 1
                print(f"FAIL {rel} at -march={arch}:")
                print("\n".join("    " + l for l in done.stderr.strip().splitlines()[-12:]))
            else:
                print(f"ok   {rel} at -march={arch}")
print(f"{checked - failed} of {checked} compiles of wide-vector kernels for narrower machines")
sys.exit(1 if failed or checked == 0 else 0)
