#!/usr/bin/env bash
# The one-shot GPU check (issues 14 and 17): on a machine with one GPU and no MPI or Debian
# -dev packages (the device tool's H200), build what the check needs for sm_90, run every
# gpu-labelled test binary, the GPU benchmarks and compute-sanitizer's memcheck, all within
# one time budget, in ONE device call.
#
#   device run:  bash scripts/gpu_check.sh (carry: [".device-deps"], timeout_s: 430; exec bits
#                may not survive the copy, hence bash)
#   here:        scripts/prepare_device_deps.sh first (makes .device-deps)
#
# What must travel with the working tree: .device-deps (scripts/prepare_device_deps.sh: Eigen,
# CLI11, fmt, spdlog, yaml-cpp, GoogleTest and Google Benchmark unpacked from Debian 12
# packages). cuDNN and NCCL come from the CUDA toolkit when it has them, else from the Python
# wheels PyTorch brings (nvidia-cudnn-cu13, nvidia-nccl-cu13). Without MPI the MPI code and
# tests are not built; one GPU trains through a one-rank NCCL communicator, and multi-rank
# exchange is proven on the CPU path under mpirun.
#
# Budget: the device tool allows 600 s a call and 15 minutes a session, start-up included, and
# a machine stays warm only 30 s after a call. So the stages run in order of importance, each
# capped by what is left of GPU_CHECK_BUDGET_S (default 370 s; with the machine's cold start,
# a minute or more, the call stays near 8 minutes, and a 15-minute session keeps room to rerun
# it; 440 s with timeout_s 500 did not, review 2026-12-06); a stage that no longer fits is
# reported as skipped. Stages (all by default, in this order; name some to run only those):
#   tests      every gpu-labelled test binary once                 (issues 14, 17)
#   compress   bench_compress --device cuda against copy bandwidth  (issue 17)
#   step       compression's share of a GPT-2 124M bf16 step        (issue 17)
#   models     bench_models --device cuda, GPT-2 124M vs PyTorch    (issue 14)
#   wfbp       WFBP against communicate-after-backward, slow link   (issue 17)
#   bert_vgg   bench_models --device cuda for BERT-base and VGG-16  (issue 14)
#   memcheck   compute-sanitizer memcheck on the kernel tests       (issue 14)
# memcheck goes last: its caps alone (60 s + 5 x 90 s) can exceed what is left, and on a
# machine that refuses the sanitizer it ends at once; `gpu_check.sh memcheck` reruns it alone.
#
# What comes back (the device tool returns at most 8 files from $OUT):
#   gpu_check.txt      every result line (also on stdout, so the call's output tail has them)
#   gpu_check_log.txt  configure and build output
#   details.tgz        each test's and benchmark's full output, re-packed after every stage
# Without $OUT everything goes to ./gpu_check_out.
# Exit status: 0 only when every stage asked for built and passed; else 1, after the report
# (its last line names what failed, was cut short or was not built). With all the stages the
# budget rarely covers the last ones, which are then reported cut short (124) and make the
# status 1 although everything that ran passed: read the result lines, not the status.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
all_stages=(tests compress step models wfbp bert_vgg memcheck)
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=("${all_stages[@]}")
for s in "${stages[@]}"; do
  [[ " ${all_stages[*]} " == *" $s "* ]] ||
    { echo "gpu_check.sh: unknown stage '$s' (${all_stages[*]})" >&2; exit 2; }
done
wants() { [[ " ${stages[*]} " == *" $1 "* ]]; }

out=${OUT:-$PWD/gpu_check_out}
work=$PWD/build-gpu/check  # the details, packed into $out/details.tgz
rm -rf "$work"  # a warm machine's earlier run must not be packed as this one's
mkdir -p "$out" "$work"
results=$out/gpu_check.txt
log=$out/gpu_check_log.txt
: >"$results"
: >"$log"
start=$(date +%s)
budget=${GPU_CHECK_BUDGET_S:-370}
failed=()  # what did not pass: the exit status and the report's last line
# fail_unless_zero NAME RC: records NAME when RC is not 0 (77: every test skipped, which on
# the GPU machine means the device was not visible; 124: cut short by the budget).
fail_unless_zero() { [[ $2 == 0 ]] || failed+=("$1 (exit $2)"); }
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((budget - $(elapsed))); }
say() { echo "$*" | tee -a "$results"; }
section() { say ""; say "== $* ($(elapsed) s)"; }
pack() { tar czf "$out/details.tgz" -C "$work" . 2>/dev/null; }
# capped SECONDS CMD...: CMD under `timeout`, capped by what is left of the budget (minus a
# margin for the report); returns 124 at once when less than 20 s would be left.
capped() {
  local want=$1 room
  shift
  room=$(($(left) - 15))
  ((room < want)) && want=$room
  ((want >= 20)) || return 124
  timeout -k 5 "$want" "$@"
}

section "machine"
say "$(timeout 20 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "nvcc: $(nvcc --version 2>&1 | tail -1)"
say "g++: $(g++ --version 2>&1 | head -1); cmake: $(cmake --version 2>&1 | head -1);" \
  "ninja: $(ninja --version 2>&1); python3: $(python3 --version 2>&1)"
# .git may not travel to the device: prepare_device_deps.sh records the commit it ran at (run
# it right before the device call, so that the commit is this tree's).
commit=$(git rev-parse --short HEAD 2>/dev/null || cat .device-deps/commit 2>/dev/null || echo unknown)
say "commit: $commit; budget ${budget} s;" \
  "stages: ${stages[*]}"

deps=$PWD/.device-deps/root/usr
if [[ ! -d $deps ]]; then
  say "no .device-deps: run scripts/prepare_device_deps.sh where apt-get works, and carry it"
  exit 1
fi
export LD_LIBRARY_PATH=$deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}

# A library from PyTorch's NVIDIA wheels: "INCLUDE_DIR LIBRARY" for the first nvidia/**/
# include/HEADER on python3's path whose sibling lib/ holds STEM.so*. (The wheels ship no
# unversioned .so link, and some are namespace packages without __file__: search the path.)
wheel_library() {
  python3 - "$1" "$2" <<'PY' 2>/dev/null
import glob, os, sys
header, stem = sys.argv[1], sys.argv[2]
for root in sys.path:
    for inc in sorted(glob.glob(os.path.join(root, "nvidia", "**", "include", header), recursive=True)):
        libs = sorted(glob.glob(os.path.join(os.path.dirname(os.path.dirname(inc)), "lib", stem + ".so*")))
        if libs:
            print(os.path.dirname(inc), libs[0])
            sys.exit(0)
PY
}
# find_cuda_library NAME VAR HEADER STEM WHY: the toolkit's copy, else the wheel's, whose
# paths go into library_args as -DSPARQ_<VAR>_INCLUDE/_LIBRARY; WHY says what a miss costs.
library_args=()
find_cuda_library() {
  local inc lib
  # The toolkit's only with its unversioned library too, which find_library needs (a header
  # alone would leave the library quietly off).
  if [[ -f /usr/local/cuda/include/$3 ]] && compgen -G "/usr/local/cuda/lib*/$4.so" >/dev/null; then
    say "$1: the CUDA toolkit's"
  elif read -r inc lib < <(wheel_library "$3" "$4") && [[ -n $lib ]]; then
    library_args+=(-DSPARQ_$2_INCLUDE="$inc" -DSPARQ_$2_LIBRARY="$lib")
    LD_LIBRARY_PATH=$(dirname "$lib"):$LD_LIBRARY_PATH
    say "$1: $lib"
  else
    say "$1: NOT FOUND ($5)"
  fi
}
find_cuda_library cuDNN CUDNN cudnn.h libcudnn "VGG's convolutions and their tests are not built"
find_cuda_library NCCL NCCL nccl.h libnccl "the one-rank NCCL tests skip, the wfbp stage cannot run"

section "build (sm_90, no MPI)"
if ! timeout 120 cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DSPARQ_CUDA=ON -DSPARQ_MPI=OFF -DSPARQ_BUILD_LONG_TESTS=OFF -DCMAKE_PREFIX_PATH="$deps" \
  "${library_args[@]}" ${GPU_CHECK_CMAKE_ARGS:-} >>"$log" 2>&1; then
  say "configure FAILED (gpu_check_log.txt):"
  tail -30 "$log" | tee -a "$results"
  exit 1
fi
grep -E "^-- sparq:" "$log" | tail -1 | tee -a "$results"
# Only what the stages run: the gpu-labelled tests that run without mpirun, and three apps.
# (A plain gpu test's name is its target's; the mpi-labelled ones need mpirun.)
# ctest beside the cmake that configured (a pip cmake puts both in one bin/, maybe off PATH).
ctest_bin=$(dirname "$(command -v cmake)")/ctest
[[ -x $ctest_bin ]] || ctest_bin=ctest
gpu_tests=$(cd build-gpu && "$ctest_bin" -L gpu -LE mpi -N 2>>"$log" | sed -n 's/.*Test *#[0-9]*: *//p')
if [[ -z $gpu_tests ]]; then
  say "ctest ($ctest_bin) lists no gpu-labelled test that runs without mpirun"
  failed+=("no gpu tests listed")
fi
# build_targets WHAT SECONDS TARGET...: builds them, capped; a failure is reported with the
# errors of this build only. -k 0: a target that fails to compile does not keep the others
# from being built and run.
build_targets() {
  local what=$1 seconds=$2 from
  shift 2
  say "build of the $what: $*"
  from=$(($(wc -l <"$log") + 1))
  if ! capped "$seconds" cmake --build build-gpu -j"$(nproc)" --target "$@" -- -k 0 >>"$log" 2>&1; then
    say "build of the $what FAILED or cut short (gpu_check_log.txt); its errors:"
    tail -n +"$from" "$log" | grep -E "error|FAILED" | head -40 | tee -a "$results"
    failed+=("build of the $what")
  fi
  say "build of the $what done ($(elapsed) s)"
}
# The test binaries first, leaving 150 s for running them: one build of everything could
# take the whole budget on a cold machine and leave the tests none (review, 2026-12-06). The
# apps, built after the tests ran, reuse the libraries this build compiled.
apps=(train bench_compress bench_models)
if [[ -n $gpu_tests ]] && { wants tests || wants memcheck; }; then
  tests_cap=$(($(left) - 150))
  ((tests_cap > ${GPU_CHECK_BUILD_S:-300})) && tests_cap=${GPU_CHECK_BUILD_S:-300}
  build_targets "gpu tests" "$tests_cap" $gpu_tests
fi
apps_wanted=0
for s in compress step models wfbp bert_vgg; do wants "$s" && apps_wanted=1; done

if wants tests; then
  section "gpu tests (each binary once)"
  for name in $gpu_tests; do
    bin=$(find build-gpu/tests -type f -name "$name" -perm -u+x | head -1)
    [[ -n $bin ]] || { say "$name: NOT BUILT"; failed+=("$name (not built)"); continue; }
    (cd build-gpu && OMP_NUM_THREADS=4 capped 120 "../$bin" --gtest_brief=1) \
      >"$work/$name.txt" 2>&1
    rc=$?
    grep -E "^\[  (FAILED|SKIPPED) |^\[  PASSED  \]|tests? (ran|from)" "$work/$name.txt" |
      sed "s|^|$name: |" | tee -a "$results"
    say "$name: exit $rc$([[ $rc == 124 ]] && echo ' (timed out)')$([[ $rc == 77 ]] && echo ' (every test skipped)')"
    fail_unless_zero "$name" "$rc"
    # A binary with host-only tests too (test_core_cuda) exits 0 when its device tests skip:
    # on this machine any such skip means the device was not seen.
    if grep -q "no CUDA device" "$work/$name.txt"; then
      say "$name: some tests saw no CUDA device"
      failed+=("$name (no device seen)")
    fi
    pack
  done
fi
((apps_wanted)) && build_targets apps "${GPU_CHECK_BUILD_S:-300}" "${apps[@]}"

if wants compress; then
  section "bench_compress --device cuda"
  if [[ -x build-gpu/bench/bench_compress ]]; then
    capped 90 build-gpu/bench/bench_compress --device cuda --sizes 16,64 --seconds 0.1 \
      2>&1 | tee "$work/bench_compress.txt" | tee -a "$results"
    rc=${PIPESTATUS[0]}
    say "bench_compress: exit $rc"
    fail_unless_zero bench_compress "$rc"
  else
    say "bench_compress: NOT BUILT"
    failed+=("bench_compress (not built)")
  fi
  pack
fi

if wants step; then
  section "compression's share of a GPT-2 124M bf16 step"
  capped 150 bash bench/gpu_step_share.sh build-gpu "$work/step_share" 2>&1 | tee -a "$results"
  rc=${PIPESTATUS[0]}
  say "gpu_step_share: exit $rc"
  fail_unless_zero gpu_step_share "$rc"
  pack
fi

# bench_models --device cuda for MODELS (comma list) within SECONDS.
models_stage() {
  local tag=${1//,/_} rc
  # 2 + 5 steps (the defaults are 1 + 3): steps take well under a second on the device, and
  # each child's start-up (context, handles, model) costs more than the extra steps.
  capped "$2" build-gpu/bench/bench_models --device cuda --python python3 --models "$1" \
    --warmup 2 --steps 5 \
    >"$work/bench_models_$tag.txt" 2>"$work/bench_models_${tag}_log.txt"
  rc=$?
  tee -a "$results" <"$work/bench_models_$tag.txt"
  say "bench_models $1: exit $rc"
  fail_unless_zero "bench_models $1" "$rc"
  pack
}

if wants models; then
  section "bench_models --device cuda: GPT-2 124M against PyTorch"
  models_stage gpt2 150
fi

if wants wfbp; then
  section "WFBP on the GPU, emulated 8-rank link"
  capped 150 bash bench/gpu_wfbp.sh build-gpu "$work/wfbp" 2>&1 | tee -a "$results"
  rc=${PIPESTATUS[0]}
  say "gpu_wfbp: exit $rc"
  fail_unless_zero gpu_wfbp "$rc"
  pack
fi

if wants bert_vgg; then
  section "bench_models --device cuda: BERT-base and VGG-16 against PyTorch"
  models_stage bert,vgg 200
fi

if wants memcheck; then
  section "compute-sanitizer memcheck"
  # PATH, the toolkit's bin/ link, the toolkit's own folder, or an NVIDIA tools install.
  sanitizer=$(command -v compute-sanitizer ||
    ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
      /opt/nvidia/*/compute-sanitizer/compute-sanitizer 2>/dev/null | head -1)
  probe=build-gpu/tests/core/test_core_cuda
  probe_rc=1
  if [[ -n $sanitizer && -x $probe ]]; then
    capped 60 "$sanitizer" --tool memcheck --error-exitcode 9 "$probe" --gtest_brief=1 \
      >"$work/memcheck_probe.txt" 2>&1
    probe_rc=$?
  fi
  if [[ -z $sanitizer ]]; then
    say "compute-sanitizer not found"
    failed+=("memcheck (no compute-sanitizer)")
  elif [[ $probe_rc != 0 ]]; then
    say "memcheck of test_core_cuda: exit $probe_rc (9: errors found; a gVisor machine refuses" \
      "the device, 124: out of time):"
    tail -5 "$work/memcheck_probe.txt" 2>/dev/null | tee -a "$results"
    failed+=("memcheck of test_core_cuda (exit $probe_rc)")
  else
    say "test_core_cuda: memcheck clean"
    for t in tests/compress/test_compress_cuda tests/layers/test_layers_cuda_dense \
      tests/optim/test_optim_cuda tests/layers/test_layers_cuda_attention \
      tests/layers/test_layers_cuda_conv; do
      [[ -x build-gpu/$t ]] || continue
      name=$(basename "$t")
      capped 90 "$sanitizer" --tool memcheck --error-exitcode 9 "build-gpu/$t" --gtest_brief=1 \
        >"$work/memcheck_$name.txt" 2>&1
      rc=$?
      say "$name: memcheck exit $rc ($(grep -c 'Invalid\|ERROR SUMMARY: [1-9]' \
        "$work/memcheck_$name.txt") error lines)$([[ $rc == 124 ]] && echo ', timed out')"
      fail_unless_zero "memcheck $name" "$rc"
      pack
    done
  fi
fi

section "done"
say "total $(elapsed) s of a ${budget} s budget (exit 124 above: a stage cut short or skipped)"
pack
if [[ ${#failed[@]} -gt 0 ]]; then
  say "NOT PASSED: ${failed[*]}"
  exit 1
fi
say "every stage passed"
