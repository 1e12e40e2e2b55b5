#!/usr/bin/env bash
# The one-shot GPU check (issues 14 and 17): on a machine with one GPU and no MPI or Debian
# -dev packages (the device tool's H200), build what the check needs for sm_90, run every
# gpu-labelled test binary, the GPU benchmarks and compute-sanitizer's memcheck, each call
# within one time budget.
#
#   here:        scripts/prepare_device_deps.sh first (makes .device-deps; right before the calls)
#   device run, the first session (two calls; `bash`: exec bits may not survive the copy):
#     call 1:    command "GPU_CHECK_BUDGET_S=300 bash scripts/gpu_check.sh build tests",
#                timeout_s 340, carry [".device-deps"] (configure and build, budget 300 s: a
#                cold build for sm_90 takes an estimated 90-150 s on 16 cores, so the tests
#                run in what is left; a review estimated them at 100-200 s)
#     call 2:    AT ONCE (the machine stays warm only 30 s; a fresh one has no build-gpu):
#                command "bash scripts/gpu_check.sh compress step models wfbp bert_vgg
#                memcheck" when call 1's result lines show the tests ran, else "bash
#                scripts/gpu_check.sh" (every stage); timeout_s 430, carry [".device-deps"]
#                (budget 370 s: continues the build where call 1 stopped, then the stages)
#   one call:    command "bash scripts/gpu_check.sh", timeout_s 430, carry [".device-deps"]
#                (builds within its budget, then the stages; a cold build may leave the tests
#                NOT BUILT)
# The build resumes: on a warm machine a later call reuses build-gpu, skips cmake's configure
# when its arguments are unchanged and continues ninja. The copy of the working tree may give
# the sources new modification times: build-gpu/.gpu_check_sources records each source's
# content hash and time before every build, and a later call puts back the time of every file
# whose content is unchanged, so that ninja rebuilds only what changed.
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
# it; 440 s with timeout_s 500 did not, review 2026-12-06; 300 s for `build` alone: with the
# start the two calls above stay near 14 minutes and leave no rerun); a stage that no longer
# fits is reported as skipped. Stages (all but build by default, in this order; name some to run only
# those; each builds what it needs):
#   build      configure and build every gpu test and app, run nothing (call 1 above)
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
#   gpu_check.txt      every result line (also on stdout, so the call's output tail has them),
#                      with the toolchain facts: GPU and driver, nvcc, g++ and its OpenMP, the
#                      linked cuDNN, NCCL and cuBLAS (NCCL_DEBUG=WARN unless set)
#   gpu_check_log.txt  nvidia-smi, nvcc --version, configure and build output
#   details.tgz        each test's and benchmark's full output, re-packed after every stage
# Without $OUT everything goes to ./gpu_check_out.
# Exit status: 0 only when every stage asked for built and passed; else 1, after the report
# (its last line names what failed, was cut short or was not built). With all the stages the
# budget rarely covers the last ones, which are then reported cut short (124) and make the
# status 1 although everything that ran passed: read the result lines, not the status. For
# `build` alone: 0 when every target built, 1 when a build failed or was cut short (then call
# again on the warm machine: it continues).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
all_stages=(tests compress step models wfbp bert_vgg memcheck)  # the default: what runs
stages=("$@")
[[ ${#stages[@]} -gt 0 ]] || stages=("${all_stages[@]}")
for s in "${stages[@]}"; do
  [[ " build ${all_stages[*]} " == *" $s "* ]] ||
    { echo "gpu_check.sh: unknown stage '$s' (build ${all_stages[*]})" >&2; exit 2; }
done
wants() { [[ " ${stages[*]} " == *" $1 "* ]]; }
runs_any=0  # whether a stage that runs something is asked for (else: build only)
for s in "${all_stages[@]}"; do wants "$s" && runs_any=1; done

out=${OUT:-$PWD/gpu_check_out}
work=$PWD/build-gpu/check  # the details, packed into $out/details.tgz
rm -rf "$work"  # a warm machine's earlier run must not be packed as this one's
mkdir -p "$out" "$work"
results=$out/gpu_check.txt
log=$out/gpu_check_log.txt
: >"$results"
: >"$log"
start=$(date +%s)
# 300 s for a build-only call (call 1 of the two above), 370 s otherwise.
if ((runs_any)); then budget=${GPU_CHECK_BUDGET_S:-370}; else budget=${GPU_CHECK_BUDGET_S:-300}; fi
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
# The driver's CUDA version (nvidia-smi's header) and the whole table, for the log.
timeout 20 nvidia-smi >"$work/nvidia-smi.txt" 2>&1
say "nvidia-smi: $(grep -o 'Driver Version.*CUDA Version: *[0-9.]*' "$work/nvidia-smi.txt" | tr -s ' ' ||
  tail -1 "$work/nvidia-smi.txt")"
{ echo "== nvidia-smi"; cat "$work/nvidia-smi.txt"; echo "== nvcc --version"; nvcc --version 2>&1
  echo "== g++ --version"; g++ --version 2>&1; } >>"$log"
say "nvcc: $(command -v nvcc 2>&1): $(nvcc --version 2>&1 | grep -m1 release || echo 'NOT FOUND')"
say "g++: $(command -v g++ 2>&1): $(g++ --version 2>&1 | head -1); cmake: $(cmake --version 2>&1 | head -1);" \
  "ninja: $(ninja --version 2>&1); python3: $(python3 --version 2>&1)"
# find_package(OpenMP REQUIRED) needs g++'s omp.h and libgomp: a one-line program says whether
# they are there before the configure fails on it.
omp_probe=$work/omp_probe
if printf '#include <omp.h>\nint main() { return omp_get_max_threads() < 1; }\n' |
  timeout 60 g++ -fopenmp -x c++ - -o "$omp_probe" >"$work/omp_probe.txt" 2>&1 && "$omp_probe"; then
  say "OpenMP: g++ -fopenmp builds and runs ($(g++ -print-file-name=libgomp.so 2>&1))"
else
  say "OpenMP: g++ -fopenmp FAILED (libgomp: $(g++ -print-file-name=libgomp.so 2>&1)):"
  head -5 "$work/omp_probe.txt" | tee -a "$results"
fi
# NCCL says why it fails only when asked: the reason then reaches the details and results.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
say "NCCL_DEBUG=$NCCL_DEBUG"
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
# shellcheck disable=SC2206  # GPU_CHECK_CMAKE_ARGS: several arguments, split on purpose
configure_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
  -DSPARQ_CUDA=ON -DSPARQ_MPI=OFF -DSPARQ_BUILD_LONG_TESTS=OFF -DCMAKE_PREFIX_PATH="$deps"
  "${library_args[@]}" ${GPU_CHECK_CMAKE_ARGS:-})
# A warm machine's build-gpu from an earlier call with the same arguments is continued: no
# configure (ninja re-runs cmake itself if a CMakeLists.txt changed).
configured=build-gpu/.gpu_check_configure
if [[ -f build-gpu/build.ninja && -f $configured && "$(cat "$configured")" == "${configure_args[*]}" ]]; then
  say "configure: reusing build-gpu from an earlier call (same arguments)"
else
  rm -f "$configured"
  if ! timeout 120 cmake -S . -B build-gpu "${configure_args[@]}" >>"$log" 2>&1; then
    say "configure FAILED (gpu_check_log.txt):"
    tail -30 "$log" | tee -a "$results"
    exit 1
  fi
  echo "${configure_args[*]}" >"$configured"
  grep -E "^-- sparq:" "$log" | tail -1 >build-gpu/.gpu_check_summary
fi
tee -a "$results" <build-gpu/.gpu_check_summary 2>/dev/null
# sources_stamp record|restore: what ninja reads (the sources and the carried packages) as
# path, content hash and modification time in build-gpu/.gpu_check_sources, recorded before
# every build; restore puts back the recorded time of each file whose content is unchanged,
# since the copy of the working tree to a warm machine may have made it newer (and ninja would
# then rebuild everything).
sources_stamp() {
  python3 - "$1" build-gpu/.gpu_check_sources CMakeLists.txt cmake src include tests apps \
    bench fuzz examples configs .device-deps <<'PY' 2>&1
import hashlib, json, os, sys
mode, stamp, roots = sys.argv[1], sys.argv[2], sys.argv[3:]
def files():
    for root in roots:
        if os.path.isfile(root):
            yield root
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    yield path
def digest(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()
if mode == "record":
    seen = {p: [digest(p), os.stat(p).st_mtime_ns] for p in files()}
    with open(stamp + ".tmp", "w") as f:
        json.dump(seen, f)
    os.replace(stamp + ".tmp", stamp)
    sys.exit(0)
try:
    with open(stamp) as f:
        old = json.load(f)
except OSError:
    sys.exit(0)
restored = changed = 0
for p in files():
    if p not in old:
        changed += 1
        continue
    st = os.stat(p)
    if st.st_mtime_ns == old[p][1]:
        continue
    if digest(p) == old[p][0]:
        os.utime(p, ns=(st.st_atime_ns, old[p][1]))
        restored += 1
    else:
        changed += 1
print(f"sources since the last build: {restored} unchanged given back their times, "
      f"{changed} new or changed")
PY
}
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
  local what=$1 seconds=$2 from rc
  shift 2
  (($(left) - 15 < seconds)) && seconds=$(($(left) - 15))  # what capped will allow
  say "build of the $what: $*"
  sources_stamp restore | tee -a "$results"
  sources_stamp record | tee -a "$results"
  # (No count of the steps left: ninja's dry run stops at the glob check and the cmake re-run
  # that CONFIGURE_DEPENDS asks for, so it said "2 steps" even cold; review, 2026-12-07.)
  say "build of the $what: at most $seconds s"
  from=$(($(wc -l <"$log") + 1))
  capped "$seconds" cmake --build build-gpu -j"$(nproc)" --target "$@" -- -k 0 >>"$log" 2>&1
  rc=$?
  if ((rc != 0)); then
    say "build of the $what FAILED (exit $rc; 124: cut short, and a next call on the warm" \
      "machine continues it; gpu_check_log.txt); its errors:"
    tail -n +"$from" "$log" | grep -E "error|FAILED" | head -40 | tee -a "$results"
    failed+=("build of the $what")
  fi
  say "build of the $what done ($(elapsed) s)"
}
# linkage WHAT FILE...: the libraries the dynamic loader finds for the files that match WHAT
# (a grep -E pattern; 'not found' stops a binary before its first test), as result lines;
# records a failure when one is not found.
linkage() {
  local what=$1 f lines
  shift
  lines=$(for f in "$@"; do
    [[ -x $f ]] || continue
    ldd "$f" 2>&1 | grep -E "$what" | sed -E "s| \(0x[0-9a-f]+\)||; s|^\s*|$(basename "$f"): |"
  done)
  [[ -n $lines ]] || return 1
  echo "$lines" | tee -a "$results"
  [[ $lines != *"not found"* ]] || failed+=("libraries not found (ldd above)")
}
# The test binaries first, leaving 150 s for running them: one build of everything could
# take the whole budget on a cold machine and leave the tests none (review, 2026-12-06). The
# apps, built after the tests ran, reuse the libraries this build compiled. The build stage
# (a build-only call) builds both now, the apps with what the tests leave of its budget.
apps=(train bench_compress bench_models)
apps_wanted=0
for s in compress step models wfbp bert_vgg build; do wants "$s" && apps_wanted=1; done
if [[ -n $gpu_tests ]] && { wants tests || wants memcheck || wants build; }; then
  if ((runs_any)); then
    tests_cap=$(($(left) - 150))
    ((tests_cap > ${GPU_CHECK_BUILD_S:-300})) && tests_cap=${GPU_CHECK_BUILD_S:-300}
  else
    tests_cap=$(($(left) - 45))  # build only: all of the budget but a little for the apps
  fi
  build_targets "gpu tests" "$tests_cap" $gpu_tests
  mapfile -t test_bins < <(find build-gpu/tests -type f -perm -u+x 2>/dev/null)
  linkage 'not found' "${test_bins[@]}"
fi
build_apps() {
  build_targets apps "${GPU_CHECK_BUILD_S:-300}" "${apps[@]}"
  if [[ -x build-gpu/apps/train ]]; then
    say "ldd build-gpu/apps/train (cuDNN, NCCL, cuBLAS):"
    linkage 'cudnn|nccl|cublas|not found' build-gpu/apps/train ||
      say "train: links none of them"
  fi
  apps_wanted=0
}
wants build && ((apps_wanted)) && build_apps

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
    grep -m 5 "NCCL WARN" "$work/$name.txt" | sed "s|^|$name: |" | tee -a "$results"
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
((apps_wanted)) && build_apps

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
((runs_any)) || say "build only: run the stages now, on this warm machine (bash scripts/gpu_check.sh)"
say "total $(elapsed) s of a ${budget} s budget (exit 124 above: a stage cut short or skipped)"
pack
if [[ ${#failed[@]} -gt 0 ]]; then
  say "NOT PASSED: ${failed[*]}"
  exit 1
fi
say "every stage passed"
