#!/usr/bin/env bash
# shellcheck disable=SC2016  # the nodes' shells expand $SPARQ_* in the commands below
# bench/cluster_report.py on hand-made cell directories (a sparq cell, a DDP cell, both
# floors: records, medians after the warm-up, wire bytes from net_watch samples, the table
# and its ratios; the PyTorch peer's configuration carried into its record; one run per
# report, the newest by default, a mix refused unless asked for; repetitions' median and
# IQR), bench_cluster.sh's cell order (floors and cells of both frameworks in turn, every
# repetition), ddp_peer.py's configuration record where torch imports, then, where root may
# build network namespaces with tbf, scripts/cluster.sh
# end to end: up 2 (both directions of both links shaped), a probe's bytes seen on the
# nodes' veths, a second up refused, down removing everything, and a failing up leaving
# nothing behind. No timing is asserted.
#   cluster_test.sh REPO_ROOT
set -uo pipefail
ROOT=$1
PY=/usr/bin/python3
command -v "$PY" >/dev/null || PY=python3
T=$(mktemp -d)
PREFIX="sparqtest$$-"
trap 'SPARQ_CLUSTER_PREFIX=$PREFIX "$ROOT/scripts/cluster.sh" down >/dev/null 2>&1; rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
contains() { grep -qF -- "$2" <<< "$1" || fail "$3: missing '$2' in: $1"; }

# ---------------------------------------------------------------- cluster_report.py
step() {  # step_ms exposed bytes -> a sparq-like step record
  echo "{\"event\":\"step\",\"step\":$1,\"step_ms\":$2,\"exposed_comm_ms\":$3,\"bytes_sent\":$4}"
}
mkdir -p "$T/sparq" "$T/ddp" "$T/sf" "$T/tf"
{ step 1 9000 8000 100; step 2 1000 10 100; step 3 3000 30 100; step 4 2000 20 100; } > "$T/sparq/metrics.jsonl"
{ echo '{"event":"config","peer":{"torch_version":"1.13.0","aten_cpu_capability":"AVX512","env":{"GLIBC_TUNABLES":"glibc.malloc.mmap_max=0"},"torch_threads":1}}'
  step 1 9000 0 0; step 2 4000 0 0; step 3 4000 0 0; step 4 4000 0 0; } > "$T/ddp/metrics.jsonl"
for k in 0 1; do  # node k sends 1000 (k=0) or 3000 (k=1) bytes per timed step, 5000 in step 1
  printf '{"step":0,"tx_bytes":0}\n{"step":1,"tx_bytes":5000}\n{"step":2,"tx_bytes":%d}\n' \
    $((5000 + 1000 * (2 * k + 1))) > "$T/sparq/net_node$k.jsonl"
  printf '{"step":3,"tx_bytes":%d}\n{"step":4,"tx_bytes":%d}\n{"event":"final","tx_bytes":1}\n' \
    $((5000 + 2000 * (2 * k + 1))) $((5000 + 3000 * (2 * k + 1))) >> "$T/sparq/net_node$k.jsonl"
  { step 1 50 0 0; step 2 $((1000 + 500 * k)) 0 0; step 3 $((1000 + 500 * k)) 0 0; } > "$T/sf/node$k.jsonl"
  { step 1 50 0 0; step 2 2000 0 0; step 3 2000 0 0; } > "$T/tf/node$k.jsonl"
done
summarise() {  # dir cell link steps
  "$PY" "$ROOT/bench/cluster_report.py" cell --dir "$T/$1" --results "$T/results.jsonl" \
    --run r1 --model gpt2-tiny --world 2 --link "$3" --cell "$2" --batch 8 --seq 128 \
    --steps "$4" --warmup 1 --torch-env "GLIBC_TUNABLES=x ATEN_CPU_CAPABILITY=avx512" \
    2>/dev/null || fail "cell $2 exited nonzero"
}
summarise sparq sparq_lbs 100mbit 4
summarise ddp ddp_powersgd 100mbit 4
summarise sf sparq_floor - 3
summarise tf torch_floor - 3
records=$(cat "$T/results.jsonl")
contains "$records" '"cell": "sparq_lbs"' "results"
contains "$records" '"step_ms": 2000' "sparq median of steps 2..4"
contains "$records" '"exposed_comm_ms": 20' "sparq exposed median"
contains "$records" '"wire_tx_bytes": 2000' "mean over nodes of per-step tx medians"
contains "$records" '"wire_tx_bytes_node0": 1000' "node 0 tx median"
contains "$records" '"step_ms": 1500' "floor: the slowest node's median"
contains "$records" '"step_ms_mean_nodes": 1250' "floor: mean of node medians kept"
contains "$records" '"rep": 1' "repetition recorded (default 1)"
contains "$records" '"torch_env": "GLIBC_TUNABLES=x ATEN_CPU_CAPABILITY=avx512"' "torch settings recorded"
contains "$records" '"aten_cpu_capability": "AVX512"' "the peer's own configuration carried into its record"
[[ $(grep -c '"status": "ok"' <<< "$records") == 4 ]] || fail "all four cells ok: $records"
report=$("$PY" "$ROOT/bench/cluster_report.py" report --results "$T/results.jsonl")
contains "$report" "### gpt2-tiny, N=2, 100mbit" "report heading"
contains "$report" "| sparq lbs 1% 4-bit allgather | 2000 | 20 | 1.33 | 0.00 | 0.00 |" "lbs row"
contains "$report" "| DDP PowerSGD r4 | 4000 | 2000 (step - floor) | 2.00 |" "DDP row"
contains "$report" "DDP+PowerSGD / sparq lbs (speed-up of lbs): 2.00" "speed-up ratio"
contains "$report" "sparq lbs / sparq compute only: 1.33" "lbs over floor"
contains "$report" "| sparq lbs 1% 4-bit allgather | 2000 | 20 | 1.33 | 0.00 | 0.00 | 500 | 1 | - | r1 |" \
  "row: step minus own floor, repetitions, IQR, run"
contains "$report" "each step over its own floor: 1.50" "lbs vs PowerSGD on the same compute (2.00 / 1.33)"
contains "$report" "PyTorch peer: torch 1.13.0, ATen AVX512" "peer configuration printed"
contains "$report" "Run(s): r1 (the newest in the file" "the run reported"
# A record written before the floor was the slowest node's: the report takes its max.
sed 's/"step_ms": 1500/"step_ms": 1250/' "$T/results.jsonl" > "$T/old.jsonl"
old_report=$("$PY" "$ROOT/bench/cluster_report.py" report --results "$T/old.jsonl")
contains "$old_report" "sparq lbs / sparq compute only: 1.33" "old floor record read by its slowest node"
# The floor's own row shows the value its ratios use (it printed the mean: review, 2026-12-07).
contains "$old_report" "| sparq compute only | 1500 | 0 | 1.00 |" "floor row: slowest node"
# A cell that died: too few steps -> failed, shown as such, and `cell` exits 3 for it, which
# bench_cluster.sh counts as a failed cell (it exited 0: review, 2026-12-06).
{ step 1 9000 0 0; } > "$T/ddp/metrics.jsonl"
"$PY" "$ROOT/bench/cluster_report.py" cell --dir "$T/ddp" --results "$T/results.jsonl" \
  --run r1 --model gpt2-tiny --world 2 --link 100mbit --cell ddp_dense --batch 8 --seq 128 \
  --steps 4 --warmup 1 2>/dev/null
rc=$?
[[ $rc == 3 ]] || fail "a cell that measured too few steps exited $rc, want 3"
contains "$("$PY" "$ROOT/bench/cluster_report.py" report --results "$T/results.jsonl")" \
  "| DDP f32 | failed |" "failed cell"

# Runs: the report takes the newest run, never a mix (review, 2026-12-07: the latest record of
# each cell won by file order, so a table could take lbs from one run and DDP from another).
cell_of() {  # results run rep link cell dir steps [exit code]
  "$PY" "$ROOT/bench/cluster_report.py" cell --dir "$6" --results "$1" --run "$2" --rep "$3" \
    --model gpt2-tiny --world 2 --link "$4" --cell "$5" --batch 8 --seq 128 --steps "$7" \
    --warmup 1 --exit-code "${8:-0}" 2>/dev/null
}
R="$T/runs.jsonl"
mkdir -p "$T/ddp2" "$T/lbs2"
{ step 1 9000 0 0; step 2 4000 0 0; step 3 4000 0 0; step 4 4000 0 0; } > "$T/ddp2/metrics.jsonl"
cell_of "$R" r1 1 100mbit sparq_lbs "$T/sparq" 4; cell_of "$R" r1 1 100mbit ddp_powersgd "$T/ddp2" 4
{ step 1 9000 0 0; step 2 7000 0 0; step 3 7000 0 0; step 4 7000 0 0; } > "$T/lbs2/metrics.jsonl"
cell_of "$R" r2 1 100mbit sparq_lbs "$T/lbs2" 4  # a later run measured lbs only
out=$("$PY" "$ROOT/bench/cluster_report.py" report --results "$R")
contains "$out" "Run(s): r2 (the newest" "default: the newest run"
contains "$out" "| sparq lbs 1% 4-bit allgather | 7000 |" "newest run's lbs"
grep -q "DDP PowerSGD" <<< "$out" && fail "the default report took DDP from an older run: $out"
out=$("$PY" "$ROOT/bench/cluster_report.py" report --results "$R" --run r1)
contains "$out" "DDP+PowerSGD / sparq lbs (speed-up of lbs): 2.00" "--run r1 alone"
out=$("$PY" "$ROOT/bench/cluster_report.py" report --results "$R" --run r1,r2 2>&1) \
  && fail "a group mixing runs must be refused: $out"
contains "$out" "gpt2-tiny, N=2, 100mbit: runs r1, r2" "the mixed group named"
out=$("$PY" "$ROOT/bench/cluster_report.py" report --results "$R" --run all --mix-runs 2>&1) \
  || fail "--mix-runs: $out"
contains "$out" "| sparq lbs 1% 4-bit allgather | 4500 | 10 | - | 0.00 | 0.00 | - | 2 | 2500 | r1, r2 |" \
  "--mix-runs: runs as repetitions, median and IQR"

# Repetitions of one run (bench_cluster.sh REPS): median and IQR, floors per link, a rerun of a
# repetition replacing it, a failed repetition counted apart.
P="$T/reps.jsonl"
k=0
for ms in 1000 2000 4000; do
  k=$((k + 1)); mkdir -p "$T/rep$k/lbs" "$T/rep$k/sf"
  { step 1 9000 0 0; step 2 "$ms" 0 0; step 3 "$ms" 0 0; } > "$T/rep$k/lbs/metrics.jsonl"
  for node in 0 1; do { step 1 50 0 0; step 2 $((ms / 4)) 0 0; } > "$T/rep$k/sf/node$node.jsonl"; done
  cell_of "$P" r3 "$k" 1gbit sparq_floor "$T/rep$k/sf" 2
  cell_of "$P" r3 "$k" 1gbit sparq_lbs "$T/rep$k/lbs" 3
done
cell_of "$P" r3 2 1gbit sparq_lbs "$T/rep1/lbs" 3            # rep 2 rerun: now 1000
cell_of "$P" r3 4 1gbit sparq_lbs "$T/rep1/lbs" 3 1          # rep 4 failed
out=$("$PY" "$ROOT/bench/cluster_report.py" report --results "$P")
contains "$out" "| sparq lbs 1% 4-bit allgather | 1000 | 0 | 2.00 | - | 0.00 | 500 | 3 of 4 | 1500 | r3 |" \
  "repetitions: median of 1000, 1000, 4000; IQR; a failed repetition counted"
contains "$out" "| sparq compute only | 500 | 0 | 1.00 | - | - | - | 3 | 375 | r3 |" \
  "floors measured with the link, median over repetitions"

# bench_cluster.sh: both floors and both frameworks' cells in turn, in every repetition, the
# framework that starts changing between repetitions (until 2026-12-07 every sparq cell ran
# before every DDP cell, and the floors once, at the first link).
bash -n "$ROOT/bench/bench_cluster.sh" || fail "bench_cluster.sh: syntax"
order=$(CELLS="sparq_none sparq_lbs ddp_dense ddp_powersgd sparq_floor torch_floor sparq_bf16" bash -c \
  "set -u; eval \"\$(sed -n '/^cell_order() {/,/^}/p' '$ROOT/bench/bench_cluster.sh')\"; \
   echo \$(cell_order 1) / \$(cell_order 2)")
[[ "$order" == "sparq_floor torch_floor sparq_none ddp_dense sparq_lbs ddp_powersgd sparq_bf16 / torch_floor sparq_floor ddp_dense sparq_none ddp_powersgd sparq_lbs sparq_bf16" ]] \
  || fail "bench_cluster.sh cell order: $order"

# ddp_peer.py's configuration record (what the PyTorch side ran with), where torch imports.
if "$PY" -c "import torch" 2>/dev/null; then
  cfg=$(GLIBC_TUNABLES=glibc.malloc.mmap_max=0 "$PY" "$ROOT/bench/ddp_peer.py" --model gpt2-tiny \
    --mode dense --batch 1 --seq 8 --print-config 2>/dev/null) || fail "ddp_peer.py --print-config"
  for key in '"event": "config"' '"torch_version"' '"aten_cpu_capability"' '"blas_libraries"' \
      '"openblas"' '"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0"' '"LD_PRELOAD"' \
      '"torch_threads": 1' '"gradient_as_bucket_view": true' '"static_graph": true'; do
    contains "$cfg" "$key" "ddp_peer.py configuration"
  done
else
  echo "SKIP: ddp_peer.py configuration record (no torch for $PY)"
fi

# ---------------------------------------------------------------- scripts/cluster.sh
C=(env SPARQ_CLUSTER_PREFIX="$PREFIX" "$ROOT/scripts/cluster.sh")
# Whether this kernel shapes at all is asked of a probe namespace first: skipping when up's
# output mentioned tbf skipped every error of cluster.sh's own tbf arguments too (each names
# the qdisc; review, 2026-12-07).
tbf_works() {
  ip netns exec "${PREFIX}probe" tc qdisc add dev lo root tbf rate 100mbit burst 32kb \
    latency 50ms 2>/dev/null
}
if [[ $(id -u) != 0 ]] || ! ip netns add "${PREFIX}probe" 2>/dev/null; then
  echo "SKIP: scripts/cluster.sh part (needs root and network namespaces)"
elif ! tbf_works; then
  ip netns del "${PREFIX}probe"
  echo "SKIP: scripts/cluster.sh part (this kernel has no tbf qdisc)"
else
  ip netns del "${PREFIX}probe"
  if ! out=$("${C[@]}" up 2 --rate 100mbit --delay-ms 0.1 2>&1); then
    fail "up: $out"
  else
    contains "$out" "up: 2 nodes" "up"
    contains "$out" "node0 -> node1: rtt median" "up runs the link check"
    grep -q "netem" <<< "$out" || contains "$out" "delay 0.1 ms NOT applied" "delay message"
    status=$("${C[@]}" status 2>&1)
    [[ $(grep -c "tbf" <<< "$status") == 4 ]] || fail "4 shaped egresses expected: $status"
    contains "$status" "node1 10.77.0.2" "status"
    before=$("${C[@]}" bytes)
    "${C[@]}" check >/dev/null 2>&1 || fail "check"
    after=$("${C[@]}" bytes)
    sent0=$(($(awk '$1 == 0 {print $2}' <<< "$after") - $(awk '$1 == 0 {print $2}' <<< "$before")))
    [[ "$sent0" -gt 20000000 ]] || fail "node0 eth0 sent $sent0 bytes for a 24 MB probe"
    got=$("${C[@]}" exec 1 -- sh -c 'echo $SPARQ_NODE $SPARQ_NODE_IP $SPARQ_MASTER_IP')
    [[ "$got" == "1 10.77.0.2 10.77.0.1" ]] || fail "exec environment: $got"
    got=$("${C[@]}" run 2 -- sh -c 'echo node$SPARQ_NODE of $SPARQ_WORLD' | sort | tr '\n' ' ')
    [[ "$got" == "node0 of 2 node1 of 2 " ]] || fail "run: $got"
    "${C[@]}" run 2 -- sh -c '[ "$SPARQ_NODE" = 0 ]' 2>/dev/null && fail "run: a failing node must fail"
    out=$("${C[@]}" up 2 2>&1) && fail "a second up must be refused"
    contains "$out" "already up" "second up"
    "${C[@]}" down >/dev/null 2>&1
    ip netns list | grep -qF "$PREFIX" && fail "down left: $(ip netns list)"
  fi
  out=$("${C[@]}" up 2 --burst nonsense 2>&1) && fail "up with a bad burst must fail"
  contains "$out" "tearing down" "failed up"
  ip netns list | grep -qF "$PREFIX" && fail "failed up left: $(ip netns list)"
  out=$("${C[@]}" up 2 --rate fast 2>&1) && fail "a bad rate must fail"
  contains "$out" "--rate 'fast'" "bad rate"
  # Missing option values and non-numeric node numbers are said, not bash errors.
  out=$("${C[@]}" up 2 --rate 2>&1) && fail "--rate without a value must fail"
  contains "$out" "up: --rate needs a value" "--rate without a value"
  out=$("${C[@]}" exec one -- true 2>&1) && fail "a non-numeric K must fail"
  contains "$out" "exec: K must be a whole number, got 'one'" "non-numeric K"
  out=$("${C[@]}" run 2x -- true 2>&1) && fail "a non-numeric N must fail"
  contains "$out" "run: N must be a whole number, got '2x'" "non-numeric N"
fi

if [[ $failures -gt 0 ]]; then echo "$failures check(s) failed"; exit 1; fi
echo "cluster_test: all checks passed"
