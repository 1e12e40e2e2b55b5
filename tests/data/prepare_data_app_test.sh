#!/usr/bin/env bash
# End-to-end checks of the prepare_data binary: a synthetic shard is written and verifies;
# the same shard with one flipped byte, or cut short, is rejected with a clear message; bad
# --val-fraction and --name values are refused.
#   prepare_data_app_test.sh PREPARE_DATA
set -uo pipefail
BIN=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$BIN" --markov-tokens 20000 --markov-vocab 50 --val-fraction 0.1 --out "$T" 2>&1) || fail "markov: $out"
grep -q "entropy rate" <<<"$out" || fail "no entropy rate reported: $out"
out=$("$BIN" --verify "$T/train.bin" "$T/val.bin" 2>&1) || fail "verify of a good shard failed: $out"
grep -q "train.bin: ok, 18000 tokens" <<<"$out" || fail "unexpected verify output: $out"

cp "$T/train.bin" "$T/flipped.bin"
# No token of a 50-word vocabulary has a 0xff byte, so this always changes the payload.
printf '\xff' | dd of="$T/flipped.bin" bs=1 seek=5000 conv=notrunc status=none
out=$("$BIN" --verify "$T/flipped.bin" 2>&1) && fail "a corrupt shard was accepted: $out"
grep -q "is corrupt: payload checksum" <<<"$out" || fail "unclear corruption message: $out"
echo "$out"

head -c 1000 "$T/train.bin" > "$T/short.bin"
out=$("$BIN" --verify "$T/short.bin" 2>&1) && fail "a truncated shard was accepted: $out"
grep -q "is truncated: 1000 bytes on disk" <<<"$out" || fail "unclear truncation message: $out"
echo "$out"

out=$("$BIN" --markov-tokens 1000 --val-fraction 1.5 --out "$T/m" 2>&1) && fail "--val-fraction 1.5 accepted: $out"
grep -q -- "--val-fraction must be in \[0, 1), got 1.5" <<<"$out" || fail "unclear fraction message: $out"
out=$("$BIN" --markov-tokens 1000 --val-fraction 0.1 --name val --out "$T/m" 2>&1) && fail "--name val accepted: $out"
grep -q -- "--name val: the validation split is val.bin too" <<<"$out" || fail "unclear name message: $out"

out=$("$BIN" --tokenizer gpt2 --input /nonexistent --out "$T/x" --vocab-dir /nonexistent 2>&1) && fail "bad vocab accepted"
grep -q "tokenizer directory '/nonexistent' does not exist" <<<"$out" || fail "unclear vocab message: $out"
echo "prepare_data app checks passed"
