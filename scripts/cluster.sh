#!/usr/bin/env bash
# An emulated cluster on one machine: N network namespaces ("nodes") wired to a bridge that
# lives in a namespace of its own, every link shaped with tbf in both directions. Nothing in
# the root namespace is touched. docs/cluster.md explains what is and is not emulated.
#
#   scripts/cluster.sh up N [--rate 100mbit] [--delay-ms 0.1] [--burst BYTES] [--queue-ms 20]
#   scripts/cluster.sh exec K -- CMD...      CMD in node K (its own network, same filesystem)
#   scripts/cluster.sh run N -- CMD...       CMD in nodes 0..N-1 at once, waits for all; each
#                                            gets SPARQ_NODE, SPARQ_NODE_IP, SPARQ_WORLD,
#                                            SPARQ_MASTER_IP (node 0); exit status: first failure
#   scripts/cluster.sh mpirun N [MPIRUN ARGS] -- CMD...
#                                            one MPI rank per node, ranks talk TCP over the veths
#   scripts/cluster.sh bytes [N]             "node tx_bytes rx_bytes" of each node's eth0
#   scripts/cluster.sh check                 RTT and throughput node0 -> node1 (probe)
#   scripts/cluster.sh status | down
#
# Node k is namespace ${SPARQ_CLUSTER_PREFIX:-sparq-}node<k> with eth0 = 10.77.0.<k+1>/24; the
# bridge is namespace <prefix>switch, port p<k> faces node k.
set -euo pipefail

PREFIX="${SPARQ_CLUSTER_PREFIX:-sparq-}"
SWITCH="${PREFIX}switch"
SUBNET="10.77.0"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PYTHON="${PYTHON:-/usr/bin/python3}"

die() { echo "cluster.sh: $*" >&2; exit 1; }
say() { echo "cluster.sh: $*" >&2; }
node_ns() { echo "${PREFIX}node$1"; }
node_ip() { echo "${SUBNET}.$(($1 + 1))"; }

# The nodes that exist now, in order (0, 1, ...): the cluster keeps no state file.
existing_nodes() {
  local k=0
  while ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$(node_ns "$k")"; do
    k=$((k + 1))
  done
  echo "$k"
}

require_tools() {
  [[ "$(id -u)" == "0" ]] || die "needs root (network namespaces, veth and tc); run it with sudo"
  command -v ip >/dev/null || die "'ip' (iproute2) not found; apt-get install iproute2"
  command -v tc >/dev/null || die "'tc' (iproute2) not found; apt-get install iproute2"
}

require_nodes() {  # $1: needed node count
  local have
  have="$(existing_nodes)"
  [[ "$have" -ge "$1" ]] || die "needs $1 nodes, $have are up; run: scripts/cluster.sh up $1"
}

# "100mbit" / "1gbit" / "500kbit" / "1000000bit" -> bits per second.
rate_bits() {
  local r="${1,,}" num unit
  [[ "$r" =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit)?$ ]] || die "--rate '$1': use e.g. 100mbit, 1gbit"
  num="${BASH_REMATCH[1]}"; unit="${BASH_REMATCH[3]:-bit}"
  case "$unit" in
    bit) awk -v n="$num" 'BEGIN{printf "%d", n}' ;;
    kbit) awk -v n="$num" 'BEGIN{printf "%d", n * 1e3}' ;;
    mbit) awk -v n="$num" 'BEGIN{printf "%d", n * 1e6}' ;;
    gbit) awk -v n="$num" 'BEGIN{printf "%d", n * 1e9}' ;;
  esac
}

do_down() {
  local removed=0 ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
    if [[ "$ns" == "${PREFIX}node"* || "$ns" == "$SWITCH" ]]; then
      ip netns pids "$ns" 2>/dev/null | while read -r pid; do
        say "warning: process $pid still runs in $ns; it loses its network"
      done
      ip netns del "$ns" && removed=$((removed + 1))
    fi
  done
  say "down: removed $removed namespaces (prefix '$PREFIX')"
}

# Shapes egress of one interface: tbf at the rate, a burst that lets one GSO segment through
# without splitting it at high rates (at least 16 KiB, else 1 ms at the rate), and a queue of
# queue_ms at the rate (a switch buffer; too small a queue makes TCP lose packets on incast).
# With HOP_DELAY_US set (netem present), netem is the root and tbf its child.
shape() {  # ns dev rate_bits
  local ns="$1" dev="$2" bits="$3" burst limit parent=(root)
  burst="${BURST:-$(awk -v b="$bits" 'BEGIN{x = b / 8 * 0.001; if (x < 16384) x = 16384; printf "%d", x}')}"
  limit="$(awk -v b="$bits" -v q="$QUEUE_MS" -v u="$burst" 'BEGIN{printf "%d", b / 8 * q / 1000 + u}')"
  if [[ -n "${HOP_DELAY_US:-}" ]]; then
    ip netns exec "$ns" tc qdisc replace dev "$dev" root handle 1: netem delay "${HOP_DELAY_US}us" \
      limit 100000 || die "tc netem on $dev in $ns failed"
    parent=(parent 1:1 handle 10:)
  fi
  ip netns exec "$ns" tc qdisc replace dev "$dev" "${parent[@]}" tbf rate "${bits}bit" \
    burst "$burst" limit "$limit" || die "tc tbf on $dev in $ns failed (is sch_tbf in the kernel?)"
}

# One-way delay: netem is the tool (half of it on each of the two hops node -> switch -> node).
# Without netem, EDT (a BPF program setting skb->tstamp) needs fq or etf to hold the packet,
# and neither exists here either (docs/cluster.md: a tc BPF program stamping +20 ms changed
# nothing); a user-space delay relay would cost CPU per packet on the cores that compute.
# So we say plainly that the delay is not applied, and the check below measures the RTT.
delay_setup() {  # delay_ms; sets HOP_DELAY_US when netem works
  local probe
  HOP_DELAY_US=""
  awk -v d="$1" 'BEGIN{exit !(d > 0)}' || return 0
  if probe="$(ip netns exec "$SWITCH" tc qdisc add dev lo root netem delay 1ms 2>&1)"; then
    ip netns exec "$SWITCH" tc qdisc del dev lo root
    HOP_DELAY_US="$(awk -v d="$1" 'BEGIN{printf "%d", d * 1000 / 2}')"
    say "one-way delay $1 ms: netem ${HOP_DELAY_US} us on each of the 2 hops"
    return 0
  fi
  say "one-way delay $1 ms NOT applied: this kernel has no netem qdisc ('$probe'), nor fq/etf"
  say "  to honour a BPF-set skb->tstamp; a user-space delay relay would burn a compute core."
  say "  The links have the veths' own latency only (the RTT measured below)."
}

do_up() {
  local n="$1"; shift
  local rate="100mbit" delay="0"
  BURST=""; QUEUE_MS=20
  while [[ $# -gt 0 ]]; do
    # An option without its value ended in bash's "unbound variable" (review, 2026-12-07).
    [[ "$1" != --* || $# -ge 2 ]] || die "up: $1 needs a value"
    case "$1" in
      --rate) rate="$2"; shift 2 ;;
      --delay-ms) delay="$2"; shift 2 ;;
      --burst) BURST="$2"; shift 2 ;;
      --queue-ms) QUEUE_MS="$2"; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ && "$n" -ge 1 && "$n" -le 200 ]] || die "up: N must be 1..200, got '$n'"
  local bits; bits="$(rate_bits "$rate")"
  if [[ "$(existing_nodes)" != "0" ]] || ip netns list | awk '{print $1}' | grep -qx "$SWITCH"; then
    die "a cluster with prefix '$PREFIX' is already up; run: scripts/cluster.sh down"
  fi
  # Any failure from here on (a failing command under set -e, or die) removes what was built.
  trap 'say "up failed; tearing down"; do_down' EXIT
  ip netns add "$SWITCH"
  ip -n "$SWITCH" link set lo up
  delay_setup "$delay"
  ip -n "$SWITCH" link add br0 type bridge
  ip -n "$SWITCH" link set br0 up
  local k ns
  for ((k = 0; k < n; k++)); do
    ns="$(node_ns "$k")"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Created inside the switch namespace with the peer moved straight into the node: the
    # veth never appears in the root namespace.
    ip -n "$SWITCH" link add "p$k" type veth peer name eth0 netns "$ns"
    ip -n "$SWITCH" link set "p$k" master br0
    ip -n "$SWITCH" link set "p$k" up
    ip -n "$ns" addr add "$(node_ip "$k")/24" dev eth0
    ip -n "$ns" link set eth0 up
    shape "$ns" eth0 "$bits"
    shape "$SWITCH" "p$k" "$bits"
  done
  trap - EXIT
  say "up: $n nodes ${PREFIX}node0..$((n - 1)) ($(node_ip 0)..$(node_ip $((n - 1)))), bridge in" \
    "$SWITCH, every link tbf $rate both ways (queue ${QUEUE_MS} ms)"
  if [[ "$n" -ge 2 ]]; then do_check --quick || say "warning: the link check failed"; fi
}

# A node number or count that is not one ended in a bash arithmetic error (review, 2026-12-07).
require_number() {  # what value
  [[ "$2" =~ ^[0-9]+$ ]] || die "$1 must be a whole number, got '$2'"
}

do_exec() {  # K -- CMD...
  local k="$1"; shift
  require_number "exec: K" "$k"
  [[ "${1:-}" == "--" ]] && shift
  [[ $# -gt 0 ]] || die "exec: no command"
  require_nodes $((k + 1))
  exec ip netns exec "$(node_ns "$k")" env SPARQ_NODE="$k" SPARQ_NODE_IP="$(node_ip "$k")" \
    SPARQ_MASTER_IP="$(node_ip 0)" "$@"
}

do_run() {  # N -- CMD...
  local n="$1"; shift
  require_number "run: N" "$n"
  [[ "${1:-}" == "--" ]] && shift
  [[ $# -gt 0 ]] || die "run: no command"
  require_nodes "$n"
  local k pids=() rc=0 status
  # A signal to this script (a timeout, a kill) ends the nodes' commands too.
  trap 'kill "${pids[@]}" 2>/dev/null; exit 143' TERM INT
  for ((k = 0; k < n; k++)); do
    ip netns exec "$(node_ns "$k")" env SPARQ_NODE="$k" SPARQ_NODE_IP="$(node_ip "$k")" \
      SPARQ_WORLD="$n" SPARQ_MASTER_IP="$(node_ip 0)" "$@" &
    pids+=("$!")
  done
  for k in "${!pids[@]}"; do
    status=0; wait "${pids[$k]}" || status=$?
    if [[ "$status" != 0 && "$rc" == 0 ]]; then rc="$status"; say "run: node $k exited $status"; fi
  done
  return "$rc"
}

# MPI with one rank per node. mpirun itself runs inside node 0 and treats every node as a
# host of a hostfile (their eth0 addresses); its rsh launcher, instead of ssh, calls this
# script's "_agent" mode, which starts Open MPI's daemon inside that host's namespace. Every
# rank then reaches its own node's daemon over that namespace's loopback (PMIx uses TCP on
# 127.0.0.1, so starting all ranks from one mpirun in the root namespace cannot work), and
# ranks, daemons and mpirun talk only over the shaped links. The BTL is TCP on the cluster
# subnet, so no shared-memory shortcut bypasses the links; the launch traffic (a few KiB)
# counts in the interface counters too.
do_mpirun() {  # N [ARGS] -- CMD...
  local n="$1"; shift
  require_number "mpirun: N" "$n"
  local extra=() k hostfile
  while [[ $# -gt 0 && "$1" != "--" ]]; do extra+=("$1"); shift; done
  [[ "${1:-}" == "--" ]] && shift
  [[ $# -gt 0 ]] || die "mpirun: no command"
  require_nodes "$n"
  command -v mpirun >/dev/null || die "mpirun not found (apt-get install openmpi-bin)"
  hostfile="$(mktemp /tmp/sparq-cluster-hosts.XXXXXX)"
  for ((k = 0; k < n; k++)); do echo "$(node_ip "$k") slots=1" >> "$hostfile"; done
  local rc=0
  ip netns exec "$(node_ns 0)" mpirun -np "$n" --hostfile "$hostfile" --map-by node \
    --allow-run-as-root --oversubscribe --bind-to none \
    --mca plm_rsh_agent "$HERE/cluster.sh _agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca btl tcp,self --mca btl_tcp_if_include "${SUBNET}.0/24" \
    --mca oob_tcp_if_include "${SUBNET}.0/24" --mca pml ob1 \
    -x OMPI_MCA_mpi_yield_when_idle=1 -x OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" \
    "${extra[@]}" "$@" || rc=$?
  rm -f "$hostfile"
  return "$rc"
}

do_agent() {  # HOST CMD... (called by mpirun's rsh launcher in place of ssh)
  local host="$1" last; shift
  last="${host#"$SUBNET".}"
  [[ "$last" =~ ^[0-9]+$ && "$last" != "$host" ]] || die "_agent: '$host' is not a cluster node"
  exec ip netns exec "$(node_ns $((last - 1)))" /bin/sh -c "$*"
}

do_bytes() {
  local n="${1:-$(existing_nodes)}" k
  require_nodes "$n"
  for ((k = 0; k < n; k++)); do
    echo "$k $(ip netns exec "$(node_ns "$k")" cat /sys/class/net/eth0/statistics/tx_bytes)" \
      "$(ip netns exec "$(node_ns "$k")" cat /sys/class/net/eth0/statistics/rx_bytes)"
  done
}

do_check() {  # [--quick]: node0 -> node1 only, whatever the cluster's size
  local mb=24
  [[ "${1:-}" == "--quick" ]] && mb=6
  require_nodes 2
  ip netns exec "$(node_ns 1)" "$PYTHON" "$HERE/cluster_probe.py" server --bind "$(node_ip 1)" &
  local server=$!
  # `|| rc=...`: under set -e a failing client ended the script here, and the server was left
  # waiting out its accept timeout (review, 2026-12-07).
  local rc=0
  ip netns exec "$(node_ns 0)" "$PYTHON" "$HERE/cluster_probe.py" client --host "$(node_ip 1)" \
    --megabytes "$mb" | sed 's/^/cluster.sh: node0 -> node1: /' >&2 || rc=${PIPESTATUS[0]}
  if [[ $rc != 0 ]]; then kill "$server" 2>/dev/null || true; fi
  wait "$server" || true
  return "$rc"
}

do_status() {
  local n k; n="$(existing_nodes)"
  echo "prefix '$PREFIX': $n nodes"
  [[ "$n" == 0 ]] && return 0
  for ((k = 0; k < n; k++)); do
    echo "node$k $(node_ip "$k"): $(ip netns exec "$(node_ns "$k")" tc qdisc show dev eth0 | head -1)"
  done
  ip netns exec "$SWITCH" tc qdisc show | grep -E "dev p[0-9]+ " | sed 's/^/switch: /'
}

cmd="${1:-}"; shift || true
case "$cmd" in
  up) require_tools; command -v "$PYTHON" >/dev/null || die "$PYTHON not found (the link check)"
      [[ $# -ge 1 ]] || die "usage: cluster.sh up N [--rate R] [--delay-ms D]"; do_up "$@" ;;
  down) require_tools; do_down ;;
  exec) require_tools; [[ $# -ge 1 ]] || die "usage: cluster.sh exec K -- CMD..."; do_exec "$@" ;;
  run) require_tools; [[ $# -ge 1 ]] || die "usage: cluster.sh run N -- CMD..."; do_run "$@" ;;
  mpirun) require_tools; [[ $# -ge 1 ]] || die "usage: cluster.sh mpirun N -- CMD..."
          do_mpirun "$@" ;;
  _agent) do_agent "$@" ;;
  bytes) require_tools; do_bytes "$@" ;;
  check) require_tools; [[ $# -eq 0 ]] || die "check takes no argument (it probes node0 -> node1)"; do_check ;;
  status) require_tools; do_status ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; [[ -z "$cmd" ]] || exit 2 ;;
esac
