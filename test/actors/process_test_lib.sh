# Helpers of the sample tests that run processes (kv_two_process.sh,
# replog_three_process.sh); sourced, after `set -euo pipefail`.
#
# Sets $host (RDMACTOR_TEST_HOST, default 127.0.0.1), $scale
# (RDMACTOR_TEST_TIMEOUT_SCALE, default 1) and $tmp, a directory removed
# at exit together with every process in `pids` (add each one you start:
# pids+=($!)).  Before `run`, set $bin to the binary under test.
host=${RDMACTOR_TEST_HOST:-127.0.0.1}
scale=${RDMACTOR_TEST_TIMEOUT_SCALE:-1}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# fail MESSAGE: prints it and every output file of the test, exits 1.
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.out "$tmp"/*.err "$tmp"/*.log; do
    [[ -f "$f" ]] && { echo "--- $(basename "$f")"; cat "$f"; }
  done
  exit 1
}
# wait_for FILE PATTERN: polls (60 s times the timeout scale) until FILE
# has a matching line.
wait_for() {
  for _ in $(seq 1 $((600 * scale))); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no line matching '$2' in $(basename "$1") within $((60 * scale)) s"
}
# run NAME ARGS...: runs $bin to its end, output in $tmp/NAME.out and
# $tmp/NAME.err; sets $rc.
run() {
  local name=$1
  shift
  set +e
  "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  set -e
}
# expect_rc NAME RC: the last run's exit status.
expect_rc() { [[ $rc == "$2" ]] || fail "$1: exit status $rc, expected $2"; }
# expect_err NAME TEXT: TEXT is in what NAME printed on stderr.
expect_err() { grep -qF -- "$2" "$tmp/$1.err" || fail "$1: stderr lacks '$2'"; }
