#!/usr/bin/env bash
# simulate --compute-ms FORWARD,BACKWARD[,OPTIMIZER] (docs/simulate.md, "The app"): every part
# present (no empty part, as "1,,2" or ",1,2,"), forward and backward > 0, the optimizer >= 0;
# a malformed value exits 2 naming the option (Note [App exit codes], core/cli_args.h), a good
# one is used as given. A --set of compress.name or compress.aggregation is refused.
#   simulate_args_test.sh SOURCE_DIR SIMULATE_BINARY
set -uo pipefail
src=$1
sim=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

common=(--config "$src/configs/default.yaml" --profile "$src/profiles/h100_node.yaml"
        --network 10gbit --world 2 --cells dense_f32)

for bad in "1,,2" ",1,2" "1,2," ",1,2," "1,2,,3" "1,,2,3" "0,2" "1,0" "1,2,-1" "1,2,3,4" "1" \
           "1,2,x" "1,2,nan" "1,2,inf" "1e400,2"; do
  "$sim" "${common[@]}" --compute-ms "$bad" >"$T/out.txt" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "--compute-ms '$bad' exited $rc, want 2: $(cat "$T/out.txt")"
  grep -q -- "--compute-ms: expected" "$T/out.txt" ||
    fail "--compute-ms '$bad': no message naming the option: $(cat "$T/out.txt")"
done

# A measured optimizer time of 0 is a measurement: used, not refused.
"$sim" "${common[@]}" --compute-ms 3,6,0 >"$T/zero.txt" 2>&1 ||
  fail "--compute-ms 3,6,0 exited $?: $(cat "$T/zero.txt")"
grep -q "forward 3.00 ms, backward 6.00 ms, optimizer 0.00 ms" "$T/zero.txt" ||
  fail "--compute-ms 3,6,0: $(cat "$T/zero.txt")"
"$sim" "${common[@]}" --compute-ms 3,6 >"$T/two.txt" 2>&1 ||
  fail "--compute-ms 3,6 exited $?: $(cat "$T/two.txt")"
grep -q "forward 3.00 ms, backward 6.00 ms" "$T/two.txt" || fail "--compute-ms 3,6: $(cat "$T/two.txt")"

# A cell is its compressor and aggregation: a --set of either is refused (it priced every
# cell alike under its own label: review, 2026-12-06); another compress key is the cells'.
for key in compress.name=topk compress.aggregation=allgather "compress={error_feedback: true}"; do
  "$sim" "${common[@]:0:8}" --cells dense_f32,topk --set "$key" >"$T/cell.txt" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "--set $key exited $rc, want 2: $(cat "$T/cell.txt")"
  grep -q -- "--set $key: each cell sets its own" "$T/cell.txt" ||
    fail "--set $key: no message naming it: $(cat "$T/cell.txt")"
done
"$sim" "${common[@]:0:8}" --cells topk --set compress.topk.density=0.05 >"$T/density.txt" 2>&1 ||
  fail "--set compress.topk.density exited $?: $(cat "$T/density.txt")"

# A malformed --set exits 2 as train's does (it exited 1 after the work had begun), and
# --world and --cells refuse blanks, empty parts and repeats (" 4" and "+4" were read as 4,
# "2,,4" as 2,4, and a repeat printed its rows twice: review, 2026-12-07).
bad_args=("--set train.steps" "--set data..x=1" "--world| 4" "--world|+4" "--world|2,,4"
          "--world|2,2" "--cells|dense_f32,dense_f32" "--cells|dense_f32,")
for args in "${bad_args[@]}"; do
  if [[ $args == --set* ]]; then
    extra=(--world 2 --cells dense_f32 --set "${args#--set }")
  elif [[ $args == --world* ]]; then
    extra=(--cells dense_f32 --world "${args#--world|}")
  else
    extra=(--world 2 --cells "${args#--cells|}")
  fi
  "$sim" "${common[@]:0:6}" "${extra[@]}" >"$T/bad.txt" 2>&1
  rc=$?
  [[ $rc -eq 2 ]] || fail "$args exited $rc, want 2: $(cat "$T/bad.txt")"
  grep -q -E -- "--set|--world|--cells" "$T/bad.txt" || fail "$args: no message naming it: $(cat "$T/bad.txt")"
done

# A repeated --network likewise (its table and CSV rows came twice: review, 2026-12-07).
"$sim" "${common[@]}" --network 10gbit >"$T/net.txt" 2>&1
rc=$?
[[ $rc -eq 2 ]] || fail "--network twice exited $rc, want 2: $(cat "$T/net.txt")"
grep -q -- "--network: '10gbit' is given twice" "$T/net.txt" || fail "--network twice: $(cat "$T/net.txt")"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "simulate_args_test: all checks passed"
