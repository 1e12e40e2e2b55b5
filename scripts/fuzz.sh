#!/usr/bin/env bash
# libFuzzer targets (fuzz/, docs/reliability.md "Fuzzing"):
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]   fuzz one target for SECONDS
#   scripts/fuzz.sh --list                                the targets
#   scripts/fuzz.sh --smoke                               every target for 20 s (CI)
# Configures and builds build-fuzz/ (clang, ASan + UBSan, -DSPARQ_FUZZ=ON) when needed. Each
# run works on a copy of fuzz/corpus/TARGET and fuzz/regressions/TARGET (inputs of fixed
# findings), so new inputs never dirty the repository; a crashing input is kept as
# build-fuzz/findings/TARGET/crash-*. Exits non-zero on a crash.
# Environment: CXX (default clang++-14), FUZZ_JOBS (build jobs and --smoke's targets at once,
# default 2), FUZZ_BUILD_DIR (the build, its runs and findings; default build-fuzz),
# SPARQ_FUZZ_DATA (real tokenizer vocabularies; default ../shared/data when present), TMPDIR
# (the readers' scratch files; default /dev/shm). Extra flags go to libFuzzer (-runs=N...).
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(config shard checkpoint safetensors gpt2_tokenizer wordpiece_tokenizer compressor_decode)
build="${FUZZ_BUILD_DIR:-build-fuzz}"
cxx="${CXX:-clang++-14}"

# The header above (lines 2-13); --help exits 0, a missing argument 2.
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

# Installs nothing: names the Debian package that is missing.
check_tools() {
  if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "fuzz.sh: $cxx not found: install the Debian package clang (or clang-14), or set CXX" >&2
    exit 2
  fi
  local probe
  probe="$(mktemp -d)"
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$probe/t.cpp"
  if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/t.cpp" -o "$probe/t" 2>"$probe/err"; then
    echo "fuzz.sh: $cxx cannot link libFuzzer/ASan: install libclang-rt-14-dev" \
         "(the compiler-rt runtimes):" >&2
    head -3 "$probe/err" >&2
    rm -rf "$probe"
    exit 2
  fi
  if ! "$cxx" -fopenmp -fsanitize=fuzzer "$probe/t.cpp" -o "$probe/t" 2>"$probe/err"; then
    echo "fuzz.sh: $cxx cannot link OpenMP: install libomp-14-dev" >&2
    rm -rf "$probe"
    exit 2
  fi
  rm -rf "$probe"
  # llvm-14 ships only llvm-symbolizer-14, which the sanitizers do not look for by that name.
  if ! command -v llvm-symbolizer >/dev/null 2>&1; then
    if command -v llvm-symbolizer-14 >/dev/null 2>&1; then
      export ASAN_SYMBOLIZER_PATH
      ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer-14)
    else
      echo "fuzz.sh: no llvm-symbolizer (Debian llvm): crash reports will lack file:line" >&2
    fi
  fi
}

ensure_built() {
  if ! [[ ${FUZZ_JOBS:-2} =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: FUZZ_JOBS must be a whole number above 0, got '${FUZZ_JOBS}'" >&2
    exit 2
  fi
  check_tools
  if [[ ! -f $build/CMakeCache.txt ]]; then
    local gen=()
    command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
    cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
      -DSPARQ_FUZZ=ON -DSPARQ_CUDA=OFF -DSPARQ_MPI=OFF -DSPARQ_BUILD_TESTS=OFF \
      -DSPARQ_BUILD_BENCH=OFF >/dev/null
  fi
  cmake --build "$build" -j"${FUZZ_JOBS:-2}" --target "${@/%/_fuzz}"
}

is_target() {
  local t
  for t in "${targets[@]}"; do [[ $t == "$1" ]] && return 0; done
  return 1
}

# run_target TARGET SECONDS [flags]: prints "TARGET: N executions in S s (E exec/s)".
run_target() {
  local target=$1 seconds=$2
  shift 2
  local work=$build/runs/$target findings=$build/findings/$target
  rm -rf "$work"
  mkdir -p "$work/corpus" "$findings"
  # Seeds, and the inputs of past findings (fuzz/regressions/TARGET), which must stay fixed.
  cp -r fuzz/corpus/"$target"/. "$work/corpus/" 2>/dev/null || true
  cp -r fuzz/regressions/"$target"/. "$work/corpus/" 2>/dev/null || true
  if [[ -z ${SPARQ_FUZZ_DATA:-} && -d ../shared/data ]]; then
    export SPARQ_FUZZ_DATA
    SPARQ_FUZZ_DATA="$(cd ../shared/data && pwd)"
  fi
  # The readers take paths: their scratch files go to memory when /dev/shm exists.
  [[ -z ${TMPDIR:-} && -d /dev/shm ]] && export TMPDIR=/dev/shm
  # Per-target libFuzzer defaults (flags given after them win): compressor_decode's largest
  # valid input, none at n = 4099, is 4 + 16396 bytes, past the 4096 that libFuzzer would
  # otherwise allow whenever the corpus holds nothing longer.
  local defaults=()
  [[ $target == compressor_decode ]] && defaults=(-max_len=16448)
  local rc=0 log=$work/fuzz.log start=$SECONDS
  # One OpenMP thread: the decoders' parallel loops would only add noise to a fuzzer.
  OMP_NUM_THREADS=1 ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    "$build/fuzz/${target}_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="$findings/" -rss_limit_mb=4096 "${defaults[@]}" "$@" "$work/corpus" \
    >"$log" 2>&1 || rc=$?
  local runs elapsed=$((SECONDS - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  ((elapsed > 0)) || elapsed=1
  if [[ -n $runs ]]; then
    echo "$target: $runs executions in $elapsed s ($((runs / elapsed)) exec/s), corpus $(ls "$work/corpus" | wc -l) inputs"
  fi
  if [[ $rc != 0 ]]; then
    # The input libFuzzer wrote for this failure, from its log: the findings folder may hold
    # older ones (review, 2026-12-07).
    local input
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    echo "$target: FAILED (exit $rc); the log: $log; the input: ${input:-none written}" >&2
    grep -m5 -E 'ERROR|runtime error|property violated|SPARQ_CHECK|Check failed' "$log" >&2 || tail -20 "$log" >&2
  fi
  return $rc
}

case "${1:-}" in
  --list) printf '%s\n' "${targets[@]}" ;;
  --smoke)
    ensure_built "${targets[@]}"
    failed=0
    # One libFuzzer process uses one core: the targets run FUZZ_JOBS at a time (each still
    # gets its 20 s of a core), their reports printed in the list's order once a batch ends.
    # -timeout=10: one input that hangs fails its target in 10 s (libFuzzer's default, 1200 s,
    # would take CI past its 30 minutes without saying which input).
    at_once="${FUZZ_JOBS:-2}"
    mkdir -p "$build"/runs
    pids=()
    # An interrupted smoke leaves no fuzzer running: each job's fuzzer, then the job.
    trap 'for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; true' EXIT
    for ((first = 0; first < ${#targets[@]}; first += at_once)); do
      batch=("${targets[@]:first:at_once}")
      pids=()
      for t in "${batch[@]}"; do
        run_target "$t" 20 -timeout=10 >"$build/runs/$t.report" 2>"$build/runs/$t.errors" &
        pids+=($!)
      done
      for i in "${!batch[@]}"; do
        wait "${pids[$i]}" || failed=1
        cat "$build/runs/${batch[$i]}.report"
        cat "$build/runs/${batch[$i]}.errors" >&2
      done
    done
    pids=()
    exit $failed
    ;;
  -h|--help) usage 0 ;;
  "") usage 2 ;;
  *)
    is_target "$1" || { echo "fuzz.sh: unknown target '$1' (scripts/fuzz.sh --list)" >&2; exit 2; }
    [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number, got '${2:-}'" >&2; exit 2; }
    target=$1 seconds=$2
    shift 2
    ensure_built "$target"
    run_target "$target" "$seconds" "$@"
    ;;
esac
