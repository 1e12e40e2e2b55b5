# The checks of study_test.sh and study_records_test.sh, sourced by both: each prints
# "ok   NAME" or "FAIL NAME ..." and counts failures in $failures. They need $PY, $STUDY_PY and
# $TRAIN set; expect leaves study.py's output in $last.

# expect NAME WANT_RC PATTERN -- ARGS...: runs study.py ARGS, checks exit code and output.
expect() {
  local name=$1 want_rc=$2 pattern=$3
  shift 4
  last=$("$PY" "$STUDY_PY" "$@" --binary "$TRAIN" 2>&1)
  local rc=$?
  if [[ $rc -ne $want_rc ]] || ! grep -qE -- "$pattern" <<<"$last"; then
    echo "FAIL $name: rc=$rc (want $want_rc), output lacks /$pattern/:"
    sed 's/^/    /' <<<"$last"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
check() {  # check NAME CONDITION...
  local name=$1
  shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; failures=$((failures + 1)); fi
}
count() { grep -cE -- "$1" <<<"$last"; }
