#!/usr/bin/env bash
# sparq vs PyTorch DDP on the emulated cluster of scripts/cluster.sh (docs/cluster.md).
# For each link rate, world size and model, REPS repetitions of every cell: one short
# training run each, one rank per node namespace, TCP over tbf-shaped veths. Within a
# repetition sparq's and PyTorch's cells alternate (their floors first, then sparq, DDP,
# sparq, DDP, ...; every other repetition starts with PyTorch), so a drift of the machine's
# speed reaches both frameworks alike. Each cell's record is appended to $OUT/results.jsonl
# as soon as it finishes; bench/cluster_report.py prints the tables (median and IQR over the
# repetitions).
#
#   sudo bench/bench_cluster.sh                        everything (hours: see docs/cluster.md)
#   sudo MODELS=gpt2-tiny WORLDS=2 LINKS=100mbit CELLS="sparq_lbs ddp_dense" STEPS=3 \
#        WARMUP=1 bench/bench_cluster.sh               a subset
#
# Environment (defaults in brackets):
#   MODELS  [gpt2-tiny gpt2-30m]      WORLDS [2 4]      LINKS [1gbit 100mbit]
#   CELLS   [all: sparq_none sparq_bf16 sparq_lbs sparq_lbs_2p sparq_powersgd sparq_lbs_auto
#            ddp_dense ddp_fp16 ddp_powersgd sparq_floor torch_floor]
#   PROFILES [profiles]: where sparq_lbs_auto finds this_machine_<model>.yaml (comm.plan: auto)
#   STEPS [8], WARMUP [2]: steps per run, and the first steps left out of every median
#   REPS [3]: repetitions of every cell, floors included, per (link, N, model)
#   OUT [runs/bench_cluster]   RUN_ID [date-time]   CELL_TIMEOUT [1800] seconds per cell
#   LAUNCH_TIMEOUT [300]: seconds a sparq cell may go without its first step record before
#     its launch counts as hung (an orted that never reported back; docs/cluster.md): it is
#     stopped and started once more
#   MPI_ARGS [--mca btl_tcp_flags send,inplace,need-ack,need-csum]: extra mpirun arguments
#     of sparq's cells; the default turns off the TCP BTL's put protocol, which runs large
#     messages at half the link rate here (docs/cluster.md)
#   TORCH_BLAS: a folder with an optimised libblas.so.3 for PyTorch only (Debian's torch
#     otherwise runs its GEMMs on the reference BLAS); unset: Debian's libopenblas0-serial
#     is unpacked once into $OUT/openblas (apt-get download, nothing installed)
#   TORCH_OPENBLAS_CORETYPE: the OpenBLAS kernels PyTorch runs (its OPENBLAS_CORETYPE);
#     unset: SkylakeX on a CPU with AVX-512 F/BW/DQ/VL (Debian's OpenBLAS runs Haswell
#     kernels on AVX-512 AMD EPYCs), else the inherited OPENBLAS_CORETYPE or OpenBLAS's choice
#   TORCH_CPU_CAPABILITY: ATen's kernels (its ATEN_CPU_CAPABILITY: default, avx2, avx512);
#     unset: avx512 on a CPU with AVX-512 F/BW/DQ/VL and FMA (torch 1.13 runs its AVX2
#     kernels there otherwise), else ATen's own choice. none: never set
#   TORCH_MALLOC [tuned]: PyTorch's allocator. tuned: glibc with
#     GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4000000000 (the
#     logits' temporaries, ~206 MB for gpt2-tiny, stay on glibc's heap instead of being
#     mmapped and unmapped, and page-faulted in again, every step; sparq allocates its
#     buffers once); jemalloc: LD_PRELOAD of Debian's libjemalloc.so.2 (libjemalloc2);
#     system: glibc's defaults (the runs committed before 2026-12-07)
#   TRAIN [build/apps/train]  PYTHON [/usr/bin/python3]
# Floors (sparq_floor, torch_floor) do not use the network: N single-process runs started
# at once (the CPU contention of N ranks). They run in every repetition of every link, next
# to the cells they are the floor of (until 2026-12-07 once per (model, N), at the first
# link only, and reused for the second).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MODELS="${MODELS:-gpt2-tiny gpt2-30m}"
WORLDS="${WORLDS:-2 4}"
LINKS="${LINKS:-1gbit 100mbit}"
ALL_CELLS="sparq_none sparq_bf16 sparq_lbs sparq_lbs_2p sparq_powersgd sparq_lbs_auto ddp_dense ddp_fp16
  ddp_powersgd sparq_floor torch_floor"
CELLS="${CELLS:-$ALL_CELLS}"
STEPS="${STEPS:-8}"
WARMUP="${WARMUP:-2}"
REPS="${REPS:-3}"
TORCH_MALLOC="${TORCH_MALLOC:-tuned}"
OUT="${OUT:-runs/bench_cluster}"
RUN_ID="${RUN_ID:-$(date +%Y%m%d-%H%M%S)}"
CELL_TIMEOUT="${CELL_TIMEOUT:-1800}"
LAUNCH_TIMEOUT="${LAUNCH_TIMEOUT:-300}"
MPI_ARGS="${MPI_ARGS:---mca btl_tcp_flags send,inplace,need-ack,need-csum}"
TRAIN="${TRAIN:-build/apps/train}"
PYTHON="${PYTHON:-/usr/bin/python3}"
CLUSTER=scripts/cluster.sh
RESULTS="$OUT/results.jsonl"

die() { echo "bench_cluster.sh: $*" >&2; exit 1; }
say() { echo "bench_cluster.sh: $*" >&2; }

# model -> sparq config, per-rank batch and sequence length (ddp_peer.py gets the same).
model_config() {
  case "$1" in
    gpt2-tiny) echo "configs/bench/gpt2_tiny.yaml 8 128" ;;
    gpt2-30m) echo "configs/bench/gpt2_30m.yaml 4 256" ;;
    *) die "MODELS: unknown model '$1' (gpt2-tiny, gpt2-30m)" ;;
  esac
}

# sparq cell -> --set overrides over the dense base config ($2: the model, $3: the link).
sparq_sets() {
  case "$1" in
    sparq_none | sparq_floor) echo "compress.name=none" ;;
    sparq_bf16) echo "compress.name=bf16" ;;
    sparq_lbs) echo "compress.name=lbs" ;;  # allgather, density 0.01, 4 bits (the config)
    sparq_lbs_2p) echo "compress.name=lbs compress.aggregation=two_phase" ;;
    sparq_powersgd) echo "compress.name=powersgd" ;;  # rank 4 (the config)
    # comm.plan: auto (docs/simulate.md): lbs, with each bucket's dense/strategy choice made by
    # the simulator from the profile measured here and the link the cell runs over.
    sparq_lbs_auto) echo "compress.name=lbs comm.plan=auto comm.plan_network=$3" \
                         "comm.plan_profile=${PROFILES:-profiles}/this_machine_$2.yaml" ;;
  esac
}

check_setup() {
  [[ "$STEPS" =~ ^[0-9]+$ && "$WARMUP" =~ ^[0-9]+$ && "$WARMUP" -lt "$STEPS" ]] \
    || die "STEPS ($STEPS) and WARMUP ($WARMUP): whole numbers, WARMUP < STEPS"
  [[ "$REPS" =~ ^[1-9][0-9]*$ ]] || die "REPS ($REPS): a whole number >= 1"
  case "$TORCH_MALLOC" in tuned | jemalloc | system) ;;
    *) die "TORCH_MALLOC: tuned, jemalloc or system, got '$TORCH_MALLOC'" ;;
  esac
  local c m
  for c in $CELLS; do
    [[ " ${ALL_CELLS//$'\n'/ } " == *" $c "* ]] || die "CELLS: unknown cell '$c'"
  done
  for m in $MODELS; do model_config "$m" >/dev/null; done
  # torch's PowerSGD hook runs plain allreduce for its first start_powerSGD_iter (2) steps.
  if [[ " $CELLS " == *" ddp_powersgd "* && "$WARMUP" -lt 2 ]]; then
    die "ddp_powersgd needs WARMUP >= 2: its first 2 steps are dense (start_powerSGD_iter)"
  fi
  [[ "$(id -u)" == 0 ]] || die "needs root (scripts/cluster.sh builds network namespaces)"
  if [[ " $CELLS " == *" sparq_"* ]]; then
    [[ -x "$TRAIN" ]] || die "$TRAIN not found; build it: cmake --build build -j2 --target train"
  fi
  if [[ " $CELLS " == *" ddp_"* || " $CELLS " == *" torch_floor "* ]]; then
    "$PYTHON" -c "import torch" 2>/dev/null \
      || die "$PYTHON cannot import torch (scripts/install_deps.sh --torch)"
    prepare_torch_blas
  fi
  TORCH_ENV=(env LD_LIBRARY_PATH="${TORCH_BLAS:-}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1)
  # PyTorch ran its GEMMs on OpenBLAS's AVX2 Haswell kernels on the AVX-512 AMD EPYC (Debian's
  # OpenBLAS 0.3.21 does not know it, and that machine's environment also sets
  # OPENBLAS_CORETYPE=Haswell), while sparq's GEMMs use AVX-512: a handicapped peer (review,
  # 2026-12-05: SkylakeX kernels 1.3-1.6x faster on a 1024^3 product there). Where the CPU has
  # the AVX-512 subsets the SkylakeX kernels need, PyTorch is given them, over any inherited
  # OPENBLAS_CORETYPE; TORCH_OPENBLAS_CORETYPE chooses otherwise.
  local core="${TORCH_OPENBLAS_CORETYPE:-}"
  if [[ -z "$core" ]] && has_cpu_flags avx512f avx512bw avx512dq avx512vl; then
    core=SkylakeX
  fi
  [[ -n "$core" ]] && TORCH_ENV+=(OPENBLAS_CORETYPE="$core")
  # ATen's own kernels (softmax, layer norm, GELU, AdamW's element-wise passes): torch 1.13
  # picks AVX2 on an AVX-512 host unless told otherwise. ATen does not check the CPU when
  # told, so avx512 is set only where the CPU has what its AVX512 kernels use.
  local capability="${TORCH_CPU_CAPABILITY:-}"
  if [[ -z "$capability" ]] && has_cpu_flags avx512f avx512bw avx512dq avx512vl fma; then
    capability=avx512
  fi
  [[ "$capability" == none ]] && capability=""
  [[ -n "$capability" ]] && TORCH_ENV+=(ATEN_CPU_CAPABILITY="$capability")
  # glibc mmaps every allocation above its threshold (at most 32 MB) and unmaps it on free,
  # so the logits' temporaries (B*T*V floats: 206 MB for gpt2-tiny) are page-faulted in
  # again every step, a cost sparq, which allocates once, does not pay (review, 2026-12-07).
  local malloc_env=""
  case "$TORCH_MALLOC" in
    tuned) malloc_env="GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4000000000" ;;
    jemalloc)
      local jemalloc
      jemalloc="$(ldconfig -p 2>/dev/null | awk '/libjemalloc\.so\.2 / {print $NF; exit}')"
      [[ -n "$jemalloc" && -f "$jemalloc" ]] || jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
      [[ -f "$jemalloc" ]] || die "TORCH_MALLOC=jemalloc: no libjemalloc.so.2 (apt-get install libjemalloc2)"
      malloc_env="LD_PRELOAD=$jemalloc" ;;
  esac
  [[ -n "$malloc_env" ]] && TORCH_ENV+=("$malloc_env")
  # What PyTorch's processes get beyond the inherited environment, for the records (each
  # DDP and torch_floor record also carries ddp_peer.py's own report of what it ran on).
  TORCH_ENV_TEXT="${TORCH_ENV[*]:1}"
  say "PyTorch's BLAS: ${TORCH_BLAS:-system}, OpenBLAS core ${core:-${OPENBLAS_CORETYPE:-its own choice}}," \
    "ATen ${capability:-its own choice}, allocator $TORCH_MALLOC${malloc_env:+ ($malloc_env)}"
}

has_cpu_flags() {  # FLAG... : whether /proc/cpuinfo lists every one
  local flag
  for flag in "$@"; do grep -qw "$flag" /proc/cpuinfo || return 1; done
}

# Debian's python3-torch is built with BLAS_INFO=generic: without an optimised libblas.so.3
# its matrix products run 10x slower than sparq's, and the comparison would be meaningless.
# The OpenBLAS library is put on LD_LIBRARY_PATH of the PyTorch processes only.
prepare_torch_blas() {
  if [[ -n "${TORCH_BLAS:-}" ]]; then
    [[ -f "$TORCH_BLAS/libblas.so.3" ]] || die "TORCH_BLAS=$TORCH_BLAS has no libblas.so.3"
    return 0
  fi
  TORCH_BLAS="$OUT/openblas/usr/lib/x86_64-linux-gnu/openblas-serial"
  [[ -f "$TORCH_BLAS/libblas.so.3" ]] && return 0
  say "unpacking Debian's libopenblas0-serial into $OUT/openblas for PyTorch"
  local tmp; tmp="$(mktemp -d)"
  if (cd "$tmp" && apt-get download libopenblas0-serial >/dev/null 2>&1); then
    mkdir -p "$OUT/openblas" && dpkg -x "$tmp"/libopenblas0-serial_*.deb "$OUT/openblas"
  fi
  rm -rf "$tmp"
  [[ -f "$TORCH_BLAS/libblas.so.3" ]] || die "could not get libopenblas0-serial; set TORCH_BLAS" \
    "to a folder with an optimised libblas.so.3 (docs/cluster.md)"
}

# Starts one net_watch.py per node (sampling its veth at each step record of $1), runs the
# rest of the arguments under a timeout, then stops the watchers. Returns the job's status.
with_watchers() {  # metrics dir world CMD...
  local metrics="$1" dir="$2" world="$3"; shift 3
  "$CLUSTER" run "$world" -- "$PYTHON" bench/net_watch.py --metrics "$metrics" \
    --out-dir "$dir" --stop "$dir/stop" --timeout "$CELL_TIMEOUT" &
  local watchers=$! rc=0 job waited=0
  timeout --kill-after=30 "$CELL_TIMEOUT" "$@" &
  job=$!
  # A launch hang leaves mpirun waiting for a daemon forever: no rank ever writes a step.
  while kill -0 "$job" 2>/dev/null; do
    if [[ ! -s "$metrics" && "$waited" -ge "$LAUNCH_TIMEOUT" ]]; then
      say "  no step record after ${LAUNCH_TIMEOUT} s: the launch hung; stopping it"
      touch "$dir/launch_hung"
      pkill -f "mpirun -np $world --hostfile /tmp/sparq-cluster-hosts" || true
      pkill -x orted || true
      break
    fi
    sleep 5
    waited=$((waited + 5))
  done
  wait "$job" || rc=$?
  touch "$dir/stop"
  wait "$watchers" || true
  return "$rc"
}


run_cell() {  # model world link cell rep
  local model="$1" world="$2" link="$3" cell="$4" rep="$5" cfg b t dir sets=() s
  read -r cfg b t <<< "$(model_config "$model")"
  # Floors too run under the link's cluster (their record names it), though they send nothing.
  dir="$OUT/$RUN_ID/$model-n$world-$link/rep$rep/$cell"
  rm -rf "$dir"; mkdir -p "$dir"
  local tokens=$((STEPS * world * b * (t + 1) * 2)); [[ "$tokens" -lt 262144 ]] && tokens=262144
  for s in $(sparq_sets "$cell" "$model" "$link"); do sets+=(--set "$s"); done
  local train_args=(--config "$cfg" --set train.steps="$STEPS" --set train.micro_batch="$b"
    --set data.seq_len="$t" --set data.markov.train_tokens="$tokens" "${sets[@]}")
  local peer_args=(bench/ddp_peer.py --model "$model" --batch "$b" --seq "$t" --steps "$STEPS"
    --warmup "$WARMUP")
  # shellcheck disable=SC2016  # expanded by the inner shell of the floors
  local per_node='exec "$0" "$@"' node_file='"$CELL_DIR/node$SPARQ_NODE.jsonl"'
  local rc=0 started; started="$(date +%s)"
  say "[$model N=$world $link rep $rep/$REPS] $cell -> $dir"
  case "$cell" in
    # The floors' per-node file names need each node's SPARQ_NODE: an inner shell adds them.
    sparq_floor)
      timeout --kill-after=30 "$CELL_TIMEOUT" "$CLUSTER" run "$world" -- env CELL_DIR="$dir" \
        sh -c "$per_node --set comm.backend=self --set log.metrics=$node_file" \
        "$TRAIN" "${train_args[@]}" > "$dir/log.txt" 2>&1 || rc=$? ;;
    torch_floor)
      timeout --kill-after=30 "$CELL_TIMEOUT" "$CLUSTER" run "$world" -- "${TORCH_ENV[@]}" \
        CELL_DIR="$dir" sh -c "$per_node --mode compute --metrics $node_file" \
        "$PYTHON" "${peer_args[@]}" > "$dir/log.txt" 2>&1 || rc=$? ;;
    sparq_*)
      local attempt
      for attempt in 1 2; do
        rc=0
        rm -f "$dir/launch_hung" "$dir/metrics.jsonl" "$dir"/net_node*.jsonl "$dir/stop"
        # shellcheck disable=SC2086  # MPI_ARGS is a list of words
        with_watchers "$dir/metrics.jsonl" "$dir" "$world" "$CLUSTER" mpirun "$world" \
          $MPI_ARGS -- "$TRAIN" "${train_args[@]}" --set log.metrics="$dir/metrics.jsonl" \
          > "$dir/log.txt" 2>&1 || rc=$?
        [[ -f "$dir/launch_hung" ]] || break
        say "  $cell: no step record after ${LAUNCH_TIMEOUT} s, the launch hung (docs/cluster.md)"
        [[ "$attempt" == 1 ]] || break
        say "  starting $cell again"
      done ;;
    ddp_*)
      PORT=$((PORT + 1))
      with_watchers "$dir/metrics.jsonl" "$dir" "$world" "$CLUSTER" run "$world" -- \
        "${TORCH_ENV[@]}" MASTER_PORT="$PORT" "$PYTHON" "${peer_args[@]}" --mode "${cell#ddp_}" \
        --metrics "$dir/metrics.jsonl" > "$dir/log.txt" 2>&1 || rc=$? ;;
  esac
  local seconds=$(($(date +%s) - started))
  [[ "$rc" == 0 ]] || say "  $cell FAILED (exit $rc); see $dir/log.txt"
  local summary_rc=0
  "$PYTHON" bench/cluster_report.py cell --dir "$dir" --results "$RESULTS" --run "$RUN_ID" \
    --model "$model" --world "$world" --link "$link" --cell "$cell" --batch "$b" --seq "$t" \
    --steps "$STEPS" --warmup "$WARMUP" --rep "$rep" --exit-code "$rc" --seconds "$seconds" \
    --mpi-args "$MPI_ARGS" --torch-blas "${TORCH_BLAS:-}" --torch-env "${TORCH_ENV_TEXT:-}" \
    || summary_rc=$?
  # A cell fails when its command does, when its record says so (it exited 0 but measured
  # too few steps, or a node's floor is missing: cluster_report.py exits 3), or when its
  # summary could not be made. Only the first was counted, and the run exited 0 with failed
  # records (review, 2026-12-06).
  if [[ "$rc" == 0 && "$summary_rc" == 3 ]]; then
    say "  $cell FAILED: it measured too little (its record says why); see $dir/log.txt"
  elif [[ "$summary_rc" != 0 && "$summary_rc" != 3 ]]; then
    say "  summary of $cell failed (exit $summary_rc)"
  fi
  if [[ "$rc" != 0 || "$summary_rc" != 0 ]]; then FAILED_CELLS=$((FAILED_CELLS + 1)); fi
}

FAILED_CELLS=0
TORCH_ENV_TEXT=""

# The order of one repetition's cells: the two floors, then sparq's and PyTorch's cells in
# turn (ABAB), each framework's in CELLS order; PyTorch's first in even repetitions. Until
# 2026-12-07 every sparq cell ran before every DDP cell, once, and the floors at the first
# link only: a machine that slowed down during a group slowed DDP alone (review).
cell_order() {  # rep -> cells, one a line
  local rep="$1" c sparq=() torch=() i
  for c in $CELLS; do [[ "$c" == sparq_floor ]] && sparq+=("$c"); done
  for c in $CELLS; do [[ "$c" == torch_floor ]] && torch+=("$c"); done
  for c in $CELLS; do [[ "$c" == sparq_* && "$c" != *_floor ]] && sparq+=("$c"); done
  for c in $CELLS; do [[ "$c" == ddp_* ]] && torch+=("$c"); done
  local first=("${sparq[@]}") second=("${torch[@]}")
  if ((rep % 2 == 0)); then first=("${torch[@]}"); second=("${sparq[@]}"); fi
  for ((i = 0; i < ${#first[@]} || i < ${#second[@]}; i++)); do
    if ((i < ${#first[@]})); then echo "${first[i]}"; fi
    if ((i < ${#second[@]})); then echo "${second[i]}"; fi
  done
}

main() {
  check_setup
  mkdir -p "$OUT"
  say "run $RUN_ID: models [$MODELS], worlds [$WORLDS], links [$LINKS], $REPS repetition(s)" \
    "of $STEPS steps (median of the last $((STEPS - WARMUP))), results in $RESULTS"
  PORT=29600
  local link world model cell rep
  trap '"$CLUSTER" down >/dev/null 2>&1 || true' EXIT
  for link in $LINKS; do
    for world in $WORLDS; do
      "$CLUSTER" down >/dev/null 2>&1 || true
      "$CLUSTER" up "$world" --rate "$link" || die "cluster.sh up $world --rate $link failed"
      for model in $MODELS; do
        for ((rep = 1; rep <= REPS; rep++)); do
          for cell in $(cell_order "$rep"); do
            run_cell "$model" "$world" "$link" "$cell" "$rep"
          done
        done
      done
    done
  done
  "$CLUSTER" down
  "$PYTHON" bench/cluster_report.py report --results "$RESULTS" --run "$RUN_ID"
  # A run whose cells failed is a failed run, though its report prints (it exited 0 even
  # when every cell failed: review, 2026-12-06).
  if ((FAILED_CELLS > 0)); then
    say "$FAILED_CELLS cell(s) failed; their records say so"
    exit 1
  fi
}

main "$@"
