#!/usr/bin/env bash
# simulate --plan auto (docs/simulate.md, "The automatic plan"): every compressed
# cell gets a "<cell>+auto" row per world size and network, in the table and the CSV, never
# slower than the cell's fixed plan (the planner starts from it, comm.plan_min_compression 1);
# a dense cell gets none; without it there is no such row, comm.plan: auto in the config
# asks for them unless --plan fixed; and a minimum
# compression no plan meets prints "no plan:" for the cell.
#   simulate_auto_plan_test.sh SOURCE_DIR SIMULATE_BINARY
set -uo pipefail
src=$1
sim=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

profile=$src/profiles/this_machine_gpt2-tiny.yaml
common=(--config "$src/configs/bench/gpt2_tiny.yaml" --profile "$profile"
        --network 100mbit --network 1gbit --world 2,64 --cells dense_f32,lbs_allgather,topk)
auto=(--plan auto)

"$sim" "${common[@]}" "${auto[@]}" --csv "$T/auto.csv" >"$T/auto.out" 2>&1 ||
  fail "simulate with comm.plan: auto exited $?: $(cat "$T/auto.out")"
# 2 networks x 2 world sizes x (3 fixed cells + 2 automatic plans) rows, after the header.
rows=$(($(wc -l <"$T/auto.csv") - 1))
[[ $rows -eq 20 ]] || fail "the CSV has $rows rows, want 20: $(cat "$T/auto.csv")"
grep -q ",dense_f32+auto," "$T/auto.csv" && fail "a dense cell got an automatic plan"
for cell in lbs_allgather topk; do
  for network in 100mbit 1gbit; do
    for world in 2 64; do
      # columns: model,network,world,cell,step_ms,...
      fixed=$(awk -F, -v n=$network -v w=$world -v c=$cell '$2==n && $3==w && $4==c {print $5}' "$T/auto.csv")
      chosen=$(awk -F, -v n=$network -v w=$world -v c="$cell+auto" '$2==n && $3==w && $4==c {print $5}' "$T/auto.csv")
      if [[ -z $fixed || -z $chosen ]]; then
        fail "$cell at P=$world over $network: fixed '$fixed', auto '$chosen'"
        continue
      fi
      awk -v a="$chosen" -v f="$fixed" 'BEGIN { exit !(a <= f * (1 + 1e-9)) }' ||
        fail "$cell+auto at P=$world over $network predicts $chosen ms, slower than the fixed $fixed ms"
    done
  done
  grep -Eq "^ +64 $cell\+auto +[0-9.]+ .*(allgather|two_phase|tree|dense|allreduce) x[0-9]+" "$T/auto.out" ||
    fail "the table has no $cell+auto row with its buckets' strategies: $(cat "$T/auto.out")"
done

"$sim" "${common[@]}" --csv "$T/fixed.csv" >"$T/fixed.out" 2>&1 || fail "simulate exited $?"
grep -q "+auto" "$T/fixed.csv" "$T/fixed.out" && fail "rows +auto without comm.plan: auto"

# comm.plan: auto in the config is followed by default, and --plan fixed leaves it out (the
# dense cell still priced: review, 2026-12-06, it was refused). A config file, not --set,
# since the user's --set keys win over every cell's own.
sed -e 's/^  name: none$/  name: lbs/' "$src/configs/bench/gpt2_tiny.yaml" >"$T/auto.yaml"
grep -q "^  name: lbs$" "$T/auto.yaml" || fail "the test's config edit did not take: $(cat "$T/auto.yaml")"
from_config=(--config "$T/auto.yaml" --profile "$profile" --network 100mbit --world 2
             --cells dense_f32,lbs_allgather --set comm.plan=auto --set "comm.plan_profile=$profile"
             --set comm.plan_network=100mbit)
"$sim" "${from_config[@]}" >"$T/config.out" 2>&1 || fail "simulate exited $?: $(cat "$T/config.out")"
grep -Eq "^ +2 lbs_allgather\+auto " "$T/config.out" ||
  fail "comm.plan: auto in the config gives no +auto row: $(cat "$T/config.out")"
grep -Eq "^ +2 dense_f32 " "$T/config.out" || fail "no dense_f32 row: $(cat "$T/config.out")"
"$sim" "${from_config[@]}" --plan fixed >"$T/config_fixed.out" 2>&1 ||
  fail "--plan fixed with comm.plan: auto in the config exited $?: $(cat "$T/config_fixed.out")"
grep -q "+auto" "$T/config_fixed.out" && fail "--plan fixed still printed +auto rows"
grep -Eq "^ +2 dense_f32 " "$T/config_fixed.out" || fail "--plan fixed: no dense_f32 row"
"$sim" "${common[@]}" --plan sometimes >"$T/bad.out" 2>&1
[[ $? -eq 2 ]] || fail "--plan sometimes did not exit 2: $(cat "$T/bad.out")"

"$sim" "${common[@]}" "${auto[@]}" --set comm.plan_min_compression=1e8 >"$T/floor.out" 2>&1 ||
  fail "an unmet minimum compression ended simulate: $(cat "$T/floor.out")"
grep -Eq "lbs_allgather\+auto +no plan: comm\.plan_min_compression" "$T/floor.out" ||
  fail "an unmet minimum compression does not say 'no plan': $(cat "$T/floor.out")"

[[ $failures -eq 0 ]] && echo "PASS"
exit $((failures > 0))
