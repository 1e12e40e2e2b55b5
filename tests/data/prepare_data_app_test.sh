#!/usr/bin/env bash
# End-to-end checks of the prepare_data binary: a synthetic shard is written and verifies;
# the same shard with one flipped byte, or cut short, is rejected with a clear message; bad
# --val-fraction and --name values are refused, as are flags --verify never reads. Text
# inputs (a tiny WordPiece vocabulary, no shared data): train.bin and val.bin are replaced
# together or not at all (injected faults), an empty val.bin is refused, output inside the
# input is not read back, and an unreadable subdirectory is an error, not a crash.
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
# --verify writes nothing: another mode's flag is refused (exit 2), not dropped.
out=$("$BIN" --verify "$T/train.bin" --markov-tokens 5 --out "$T/v" 2>&1)
[ $? -eq 2 ] || fail "--verify with --markov-tokens: exit not 2: $out"
grep -q -- "--verify only reads shards: --out does not apply" <<<"$out" || fail "unclear --verify refusal: $out"

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
grep -q -- "--name val: val.bin is the validation split of --name train" <<<"$out" || fail "unclear name message: $out"

out=$("$BIN" --tokenizer gpt2 --input /nonexistent --out "$T/x" --vocab-dir /nonexistent 2>&1) && fail "bad vocab accepted"
grep -q "tokenizer directory '/nonexistent' does not exist" <<<"$out" || fail "unclear vocab message: $out"
out=$("$BIN" --markov-tokens 5 --val-fraction 0.1 --out "$T/m" 2>&1) && fail "an empty markov val.bin was accepted: $out"
grep -q -- "--val-fraction 0.1 of 5 tokens leaves val.bin empty" <<<"$out" || fail "unclear empty-val message: $out"
# A bad --format is a bad argument: exit 2, as every app's (review, 2026-12-05).
"$BIN" --tokenizer gpt2 --input "$T" --out "$T/x" --format bogus >/dev/null 2>&1
[[ $? == 2 ]] || fail "--format bogus did not exit 2"
# Text given with --markov-tokens was ignored without a word (review, 2026-12-05).
out=$("$BIN" --markov-tokens 1000 --tokenizer gpt2 --input "$T" --out "$T/m" 2>&1) && fail "--input with --markov-tokens accepted: $out"
grep -q -- "--markov-tokens generates synthetic tokens; it takes no --input" <<<"$out" || fail "unclear markov+input message: $out"
# Flags the mode never reads, and bad chain settings, are bad arguments (exit 2), named.
expect2() {  # expect2 WHAT MESSAGE ARGS...
  local what=$1 message=$2 rc=0
  shift 2
  out=$("$BIN" "$@" 2>&1) || rc=$?
  [[ $rc -eq 2 ]] || fail "$what exited $rc, want 2: $out"
  grep -q -- "$message" <<<"$out" || fail "$what: no message '$message': $out"
}
expect2 "--markov-vocab without --markov-tokens" "--markov-vocab applies only with --markov-tokens" \
  --tokenizer gpt2 --input "$T" --out "$T/m" --markov-vocab 10
expect2 "--threads with --markov-tokens" "--threads applies to text" --markov-tokens 1000 --threads 2 --out "$T/m"
expect2 "--markov-order 0" "--markov-\*: Markov order must be >= 1, got 0" --markov-tokens 1000 --markov-order 0 --out "$T/m"
expect2 "--markov-smoothing 2" "Markov smoothing must be in (0, 1\], got 2" --markov-tokens 1000 --markov-smoothing 2 --out "$T/m"
# A negative count ran on every core without a word (review, 2026-12-07).
expect2 "--threads -3" "--threads: Value -3 not in range" --tokenizer gpt2 --input "$T" --out "$T/m" --threads -3
[[ -e "$T/m" ]] && fail "a refused run created its --out"
out=$("$BIN" --markov-tokens 1000 --out "$T" 2>&1) || fail "markov without val: $out"
grep -q "warning: '$T/val.bin' is from an earlier run" <<<"$out" || fail "no stale val.bin warning: $out"

# ---- text inputs
V="$T/vocab"
mkdir -p "$V" "$T/in/.git"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\n' >"$V/vocab.txt"
for i in $(seq 20); do echo "the cat sat $i"; done >"$T/in/a.txt"
echo "the cat sat in git" >"$T/in/.git/config"
prep() { "$BIN" --tokenizer wordpiece --vocab-dir "$V" --format lines --quiet "$@"; }
same() { cmp -s "$1" "$2" || fail "$3"; }

# train.bin and val.bin are replaced together: whichever step of a run fails, the folder never
# holds a new train.bin next to an old val.bin (or the reverse), and no .tmp is left behind.
O=$T/o
prep --input "$T/in" --out "$O" --val-fraction 0.2 >/dev/null || fail "text run failed"
cp "$O/train.bin" "$T/old_train.bin"
cp "$O/val.bin" "$T/old_val.bin"
echo "the cat sat again" >>"$T/in/a.txt"
out=$(SPARQ_FAULT="shard.close,hit=2,action=fail" prep --input "$T/in" --out "$O" --val-fraction 0.2 2>&1) &&
  fail "a failure to finish val.bin was ignored: $out"
grep -qE "fsync of '$O/val.bin.tmp.[0-9a-f]{16}' failed" <<<"$out" || fail "unclear close message: $out"
same "$O/train.bin" "$T/old_train.bin" "a failed run replaced train.bin"
same "$O/val.bin" "$T/old_val.bin" "a failed run replaced val.bin"
out=$(SPARQ_FAULT="shard.rename,hit=1,action=fail" prep --input "$T/in" --out "$O" --val-fraction 0.2 2>&1) &&
  fail "a failed rename of train.bin was ignored: $out"
grep -q "kept from the earlier run: '$O/train.bin'; removed: '$O/val.bin'" <<<"$out" || fail "unclear rename message: $out"
same "$O/train.bin" "$T/old_train.bin" "train.bin replaced although its rename failed"
[ ! -e "$O/val.bin" ] || fail "the old val.bin was kept although train.bin could not be replaced"
out=$(SPARQ_FAULT="shard.rename,hit=2,action=fail" prep --input "$T/in" --out "$O" --val-fraction 0.2 2>&1) &&
  fail "a failed rename of val.bin was ignored: $out"
grep -q "now from this run: '$O/train.bin'; missing: '$O/val.bin'" <<<"$out" || fail "unclear rename message: $out"
cmp -s "$O/train.bin" "$T/old_train.bin" && fail "train.bin is not from the new run"
[ ! -e "$O/val.bin" ] || fail "an old val.bin was left next to a new train.bin"
[ -z "$(ls "$O" | grep '\.tmp')" ] || fail "temporary files left: $(ls "$O")"
out=$(SPARQ_FAULT="shard.close,hit=2,action=fail" "$BIN" --markov-tokens 1000 --val-fraction 0.1 --out "$T" 2>&1) &&
  fail "markov: a failure to finish val.bin was ignored: $out"
"$BIN" --verify "$T/train.bin" | grep -q "ok, 1000 tokens" || fail "markov: a failed run replaced train.bin"
# A killed run leaves its private temporary file (no writer can tell a dead run's from a live
# one's); the next run names it in a warning rather than leave a full-size file unseen.
mkdir -p "$T/k"
SPARQ_FAULT="shard.rename,hit=1,action=kill" "$BIN" --markov-tokens 1000 --out "$T/k" >/dev/null 2>&1 &&
  fail "a killed run exited 0"
out=$("$BIN" --markov-tokens 1000 --out "$T/k" 2>&1) || fail "the run after a killed one failed: $out"
grep -qE "warning: '$T/k/train.bin.tmp.[0-9a-f]{16}' is another run's unfinished shard" <<<"$out" ||
  fail "a killed run's temporary file was not named: $out"

# A point only train reaches would never fire here: refused before any work (it ran to exit 0
# without its fault: review, 2026-12-06).
rc=0
out=$(SPARQ_FAULT="checkpoint.write" "$BIN" --markov-tokens 1000 --out "$T/never" 2>&1) || rc=$?
[[ $rc -eq 2 ]] || fail "SPARQ_FAULT=checkpoint.write exited $rc, want 2: $out"
grep -q "prepare_data never reaches checkpoint.write" <<<"$out" || fail "no reason given: $out"
[ ! -e "$T/never" ] || fail "a refused SPARQ_FAULT wrote $T/never"

# A failed Markov run leaves no folder it made (it kept an empty one: review, 2026-12-06),
# and reports its progress (it printed nothing for a minute at 500M tokens).
# A hit past the shards written never fires: the run fails rather than pass without its fault.
out=$(SPARQ_FAULT="shard.close,hit=3,action=fail" "$BIN" --markov-tokens 1000 --val-fraction 0.1 --out "$T/hit3" 2>&1) &&
  fail "a fault that never fired passed: $out"
grep -q "SPARQ_FAULT: 'shard.close,hit=3,action=fail' (2 of 3 matching call(s)) never fired" <<<"$out" ||
  fail "unfired fault not named: $out"
out=$(SPARQ_FAULT="shard.close,hit=1,action=fail" "$BIN" --markov-tokens 1000 --out "$T/mk/new/deeper" 2>&1) &&
  fail "markov: a failure to finish train.bin was ignored: $out"
[ ! -e "$T/mk" ] || fail "markov: the --out folders a failed run made were left: $(find "$T/mk")"
out=$("$BIN" --markov-tokens 3000000 --out "$T/mk" 2>&1) || fail "markov 3M: $out"
grep -q "100.0%  3000000 tokens" <<<"$out" || fail "markov: no progress lines: $out"
# A last piece smaller than a report step still ends the bar at 100% (it stopped at 95.3%).
out=$("$BIN" --markov-tokens 1100000 --out "$T/mk" 2>&1) || fail "markov 1.1M: $out"
grep -q "100.0%  1100000 tokens" <<<"$out" || fail "markov: the bar did not end at 100%: $out"
out=$("$BIN" --markov-tokens 3000000 --out "$T/mk" --quiet 2>&1) || fail "markov --quiet: $out"
grep -q "%" <<<"$out" && fail "markov --quiet printed progress: $out"
touch "$T/afile"
out=$("$BIN" --markov-tokens 10 --out "$T/afile" 2>&1)
[ $? -eq 1 ] || fail "markov: --out naming a file: exit not 1: $out"
grep -q "'$T/afile' is a file, not a folder\|cannot create output directory '$T/afile'" <<<"$out" ||
  fail "markov: unclear message for an --out that is a file: $out"
# --name must be a file stem, --markov-tokens 0 is no count (it read as absent and the
# refusal named --markov-vocab).
for name in "" "a/b" ".."; do
  out=$("$BIN" --markov-tokens 100 --out "$T/n" --name "$name" 2>&1)
  [ $? -eq 2 ] || fail "--name '$name': exit not 2: $out"
  want="--name '$name': the shard's file stem"
  [ -z "$name" ] && want="--name: an empty value"  # every app's rule (core/cli_args.h)
  grep -q -- "$want" <<<"$out" || fail "unclear --name '$name' refusal: $out"
done
[ ! -e "$T/n" ] || fail "a refused --name made the --out folder"
out=$("$BIN" --markov-tokens 0 --markov-vocab 5 --out "$T/z" 2>&1)
[ $? -eq 2 ] || fail "--markov-tokens 0: exit not 2: $out"
grep -q -- "--markov-tokens: must be > 0, got 0" <<<"$out" || fail "unclear --markov-tokens 0 refusal: $out"

# An empty validation split is an error, and writes nothing.
printf 'the cat\nsat\n' >"$T/two.txt"
out=$(prep --input "$T/two.txt" --out "$T/e" --val-fraction 0.3 2>&1) && fail "an empty val.bin was accepted: $out"
grep -q "floor(2 x 0.3) = 0 of the 2 documents of '$T/two.txt'" <<<"$out" || fail "unclear empty-val message: $out"
[ ! -e "$T/e/val.bin" ] && [ ! -e "$T/e/train.bin" ] || fail "files written by a failed run"
[ ! -e "$T/e" ] || fail "the --out folder a failed run made was left behind"

# A run of another --name in the same folder writes its own split, <name>.val.bin: one val.bin
# for every name let it replace train.bin's split with another corpus's (review, 2026-12-07).
prep --input "$T/in" --out "$T/names" --val-fraction 0.2 >/dev/null || fail "train run failed"
cp "$T/names/val.bin" "$T/train_val.bin"
out=$(prep --input "$T/two.txt" --out "$T/names" --name small --val-fraction 0.5 2>&1) || fail "small: $out"
same "$T/names/val.bin" "$T/train_val.bin" "a run of --name small replaced train.bin's val.bin"
grep -q "$T/names/small.val.bin" <<<"$out" || fail "small's split not named: $out"
[ -s "$T/names/small.val.bin" ] || fail "no small.val.bin"

# Output inside the input folder is not read back by the next run; hidden entries are skipped.
first=$(prep --input "$T/in" --out "$T/in/out" | grep '^documents') || fail "run inside the input failed"
second=$(prep --input "$T/in" --out "$T/in/out" | grep '^documents') || fail "second run inside the input failed"
[ "$first" = "documents      21" ] && [ "$second" = "$first" ] || fail "output or .git read back: '$first' then '$second'"

# An unreadable subdirectory is an error naming it (it used to abort). Root reads anything,
# so as root the binary runs as nobody.
mkdir -p "$T/locked/sub" && echo "the cat" >"$T/locked/a.txt" && echo "sat" >"$T/locked/sub/b.txt"
chmod 000 "$T/locked/sub"
chmod 755 "$T"
as=()
[ "$(id -u)" = 0 ] && as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if [ ${#as[@]} -gt 0 ] && ! command -v setpriv >/dev/null; then
  echo "skipped the unreadable-directory check: root without setpriv"
else
  out=$("${as[@]}" "$BIN" --tokenizer wordpiece --vocab-dir "$V" --input "$T/locked" --out "$T/lo" --quiet 2>&1)
  rc=$?
  [ "$rc" = 1 ] || fail "unreadable subdirectory: exit $rc (134 is an abort): $out"
  grep -q "cannot read directory '$T/locked/sub' (under input '$T/locked'): Permission denied" <<<"$out" ||
    fail "unclear unreadable-directory message: $out"
fi
chmod 755 "$T/locked/sub"
echo "prepare_data app checks passed"
