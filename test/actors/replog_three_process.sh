#!/usr/bin/env bash
# replog_three_process.sh REPLOG_BINARY [EXTRA_ARGS...]
# rdmactor-replog on three nodes as separate processes: a leader of a
# 3-node cluster and two followers, plus clients.  An append without
# followers is not committed (request_timeout; it stays in the log); with
# both followers a bench commits 300 entries; follower 2 is killed with
# kill -9 and the leader and follower 1 still commit 200 more (a majority);
# follower 2 restarts under the same id and catches up with everything it
# lacks; then the leader's status and both followers' digests agree, and
# every process stops on SIGTERM with exit 0.  Bad values are refused.
# Checks values, counts and exit statuses, never timings.
set -euo pipefail
replog=$1
shift
bin=$replog
source "$(dirname "${BASH_SOURCE[0]}")/process_test_lib.sh"
# status NAME: the leader's status line into $tmp/NAME.out; checks rc 0.
status() {
  run "$1" --status="$at" "${args[@]}"
  expect_rc "$1" 0
  cat "$tmp/$1.out"
}
args=("$@")

"$replog" --lead="$host:0" --cluster=3 --capacity=1024 \
  --commit-timeout-ms=$((2000 * scale)) "$@" >"$tmp/leader.log" 2>&1 &
leader=$!
pids+=("$leader")
wait_for "$tmp/leader.log" '^leader of a 3-node cluster .* serving on port [0-9]+'
port=$(sed -nE 's/.*serving on port ([0-9]+).*/\1/p' "$tmp/leader.log")
at="$host:$port"
echo "leader on $at"

# Alone, the leader holds one node of three: no majority.
run alone --append="$at" --value=first "$@"
expect_rc alone 1
expect_err alone "request_timeout: entry 1 was not committed within"
expect_err alone "start followers with --follow"
run empty_value --append="$at" --value="$(printf 'v%.0s' {1..241})" "$@"
expect_rc empty_value 1
expect_err empty_value "invalid_argument: values have 1 to 240 bytes; this one has 241"

start_follower() { # ID LOG
  "$replog" --follow="$at" --id="$1" "${args[@]}" >"$tmp/$2.log" 2>&1 &
  eval "follower$1=$!"
  pids+=($!)
}
start_follower 1 f1
start_follower 2 f2
wait_for "$tmp/f1.log" '^follower 1 joined the leader'
wait_for "$tmp/f2.log" '^follower 2 joined the leader'
# Entry 1 commits once a follower holds it.
wait_for "$tmp/f1.log" '^follower 1 caught up to entry 1 '

run bench1 --bench="$at" --count=300 --size=200 --window=8 "$@"
expect_rc bench1 0
grep -qE '^300 appends of 200 B committed \(8 in flight\): p50 ' \
  "$tmp/bench1.out" || fail "bench1: no summary line"
status st1 | grep -qE '^last=301 commit=301 .*followers=2( [12]:301){2}$' ||
  fail "status after the bench: $(cat "$tmp/st1.out")"

# Kill follower 2: the leader and follower 1 are still a majority.
kill -9 "$follower2"
wait "$follower2" 2>/dev/null || true
wait_for "$tmp/leader.log" '^follower 2 left '
run bench2 --bench="$at" --count=200 --size=50 --window=4 "$@"
expect_rc bench2 0
run one --append="$at" --value="the last entry" "$@"
expect_rc one 0
[[ "$(cat "$tmp/one.out")" == "committed at index 502" ]] ||
  fail "one: $(cat "$tmp/one.out")"
status st2 | grep -qE '^last=502 commit=502 .*followers=1 1:502$' ||
  fail "status with follower 2 dead: $(cat "$tmp/st2.out")"

# Follower 2 comes back under its id and catches up.
start_follower 2 f2b
wait_for "$tmp/f2b.log" '^follower 2 caught up to entry 502 '
status st3 | grep -qE '^last=502 commit=502 .*followers=2( [12]:502){2}$' ||
  fail "status after the rejoin: $(cat "$tmp/st3.out")"
digest=$(sed -nE 's/.* digest=([0-9a-f]{16}) .*/\1/p' "$tmp/st3.out")
[[ -n $digest ]] || fail "no digest in the status"

# Every process stops on SIGTERM; the followers' logs equal the leader's.
for n in 1 2; do
  eval "p=\$follower$n"
  kill -TERM "$p"
  set +e
  wait "$p"
  rc=$?
  set -e
  expect_rc "follower$n" 0
done
wait_for "$tmp/f1.log" "^follower 1 shutting down \(SIGTERM\): applied=502 .* digest=$digest$"
wait_for "$tmp/f2b.log" "^follower 2 shutting down \(SIGTERM\): applied=502 .* digest=$digest$"
kill -TERM "$leader"
set +e
wait "$leader"
rc=$?
set -e
expect_rc leader 0
grep -qE "^shutting down \(SIGTERM\): last=502 commit=502 digest=$digest" \
  "$tmp/leader.log" || fail "leader: no final status line"
echo "PASS: 502 entries on 3 nodes, follower 2 killed and caught up, digest $digest"
