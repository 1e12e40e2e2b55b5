#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ (small valid inputs, at most 16 KB each).

    python3 fuzz/make_corpus.py            # from the repository root

Shards, checkpoints and safetensors are built here after the layouts in src/data/shard.h,
src/train/checkpoint.h and src/train/safetensors.h (with core/checksum.h's checksum64), so a
format change shows up as a seed the reader rejects. compressor_decode's seeds are real
encoder output: the target writes them itself when SPARQ_FUZZ_WRITE_SEEDS names a directory
(done here when the fuzz build, $FUZZ_BUILD_DIR or build-fuzz/ as for scripts/fuzz.sh, has
the binary), at n = 7, 64, 1000 and 4099 (up to 16 KB each).
"""
import glob
import json
import os
import shutil
import struct
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
MASK = (1 << 64) - 1


def checksum64(data: bytes) -> int:
    """FNV-1a over little-endian 8-byte words, then the tail bytes (core/checksum.h)."""
    h = 0xCBF29CE484222325
    whole = len(data) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", data[:whole]):
        h = ((h ^ w) * 0x100000001B3) & MASK
    for b in data[whole:]:
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def shard(tokens, vocab, width, tokenizer=b"gpt2", documents=1):
    fmt = "<H" if width == 2 else "<I"
    payload = b"".join(struct.pack(fmt, t) for t in tokens)
    head = b"SPARQTOK" + struct.pack("<IIQIIQ", 1, width, len(tokens), vocab, documents,
                                     checksum64(payload))
    head += tokenizer.ljust(32, b"\0") + bytes(48)
    return head + struct.pack("<Q", checksum64(head)) + payload


def checkpoint(sections, meta):
    def s(b):
        return struct.pack("<I", len(b)) + b
    table = b"".join(s(name) + bytes(24) for name, _ in sections)  # offsets filled below
    metas = b"".join(s(k) + s(v) for k, v in sorted(meta.items()))
    align = lambda n: (n + 63) // 64 * 64
    data_offset = align(40 + len(table) + len(metas))
    offsets, end = [], data_offset
    for _, body in sections:
        end = align(end)
        offsets.append(end)
        end += len(body)
    total = end + 8
    table = b"".join(s(name) + struct.pack("<QQQ", off, len(body), checksum64(body))
                     for (name, body), off in zip(sections, offsets))
    out = bytearray(b"SPARQCKP" + struct.pack("<IIIIQQ", 1, len(sections), len(meta), 0, total,
                                              data_offset) + table + metas)
    out += bytes(data_offset - len(out))
    for (_, body), off in zip(sections, offsets):
        out += bytes(off - len(out)) + body
    out += struct.pack("<Q", checksum64(bytes(out)))
    return bytes(out)


def safetensors(tensors, metadata=None):
    header, data = {}, b""
    for name, dtype, shape, body in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(body)]}
        data += body
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def main():
    build = os.path.join(ROOT, os.environ.get("FUZZ_BUILD_DIR") or "build-fuzz")
    binary = os.path.join(build, "fuzz", "compressor_decode_fuzz")
    for target in glob.glob(os.path.join(CORPUS, "*")):
        if os.path.basename(target) != "compressor_decode" or os.path.exists(binary):
            shutil.rmtree(target)

    for path in sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml"))):
        write("config", os.path.basename(path), open(path, "rb").read())
    write("config", "minimal.yaml", "model:\n  preset: gpt2-tiny\ntrain:\n  steps: 3\n")
    write("config", "overrides.yaml",
          "compress:\n  name: topk\n  topk:\n    density: 0.1\n\0"
          "compress.aggregation=two_phase\ntrain.steps=5\noptim.lr=0.5")

    write("shard", "u16_tokens", shard([1, 2, 3, 50256, 0], 50257, 2))
    write("shard", "u32_tokens", shard([70000, 5, 99999], 100000, 4, b"bert-uncased", 2))
    write("shard", "no_tokens", shard([], 10, 2, b"markov", 0))

    floats = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    write("checkpoint", "two_sections",
          checkpoint([(b"params", floats), (b"loader", b"\x01\x02\x03")],
                     {b"step": b"100", b"world_size": b"2"}))
    write("checkpoint", "no_sections", checkpoint([], {}))

    write("safetensors", "f32_f16_metadata",
          safetensors([("w", "F32", [2, 2], floats), ("b", "F16", [2], b"\x00\x3c\x00\xc0")],
                      {"format": "pt"}))
    write("safetensors", "bf16_f64_i64_empty",
          safetensors([("x", "BF16", [1], b"\x80\x3f"), ("y", "F64", [1], struct.pack("<d", 2.5)),
                       ("i", "I64", [1], struct.pack("<q", 7)), ("z", "F32", [0], b"")]))
    # The newer dtypes: packed F4 (two per byte) and F6 (four in three bytes), F8_E8M0, C64.
    write("safetensors", "packed_f4_f6_e8m0_c64",
          safetensors([("p", "F4", [2, 2], b"\x12\x34"), ("s", "F6_E2M3", [4], b"\x01\x02\x03"),
                       ("e", "F8_E8M0", [2], b"\x7f\x80"), ("c", "C64", [1], floats[:8])]))

    for name, text in [("english.txt", "Hello world! The international station's 2026 test..."),
                       ("spaces.txt", "  a\n\n\tb  c   "),
                       ("unicode.txt", "Caf\u00e9 \u4e2d\u6587 \U0001F600 \u03bf\u03b4\u03cc\u03c2"),
                       ("special.txt", "one<|endoftext|>two <|endoftext")]:
        write("gpt2_tokenizer", name, text)
        write("wordpiece_tokenizer", name, text)
    write("gpt2_tokenizer", "invalid_utf8.txt", b"ab\xff\xfe\xc3(\xe2\x82")
    write("wordpiece_tokenizer", "controls.txt", b"un\x00able\x07 HELLO\xcc\x81 ##ing")

    if os.path.exists(binary):
        out = os.path.join(CORPUS, "compressor_decode")
        os.makedirs(out, exist_ok=True)
        subprocess.run([binary, "-runs=0"], check=True, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, SPARQ_FUZZ_WRITE_SEEDS=out))
    else:
        print(binary + " not built: compressor_decode seeds skipped")


if __name__ == "__main__":
    main()
