#!/usr/bin/env bash
# bench_smoke.sh BENCH: rdmactor-bench works end to end.  Runs every
# operation and mode briefly on the soft fabric (one process, a forked
# server with --fork-server, then two processes with --listen/--connect),
# the CAF io and tcp baselines, and checks that
# each run prints one JSON object with the documented fields and a number
# where the mode has one.  Timings are not judged here (apps/bench and
# scripts/bench.sh measure); only that the tool does what its --help says.
set -uo pipefail
bench=${1:?usage: bench_smoke.sh PATH/TO/rdmactor-bench}
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# check_line WHAT LINE OP MODE IMPL: the JSON object has the fields of
# its mode with numbers in them.
check_line() {
  local what=$1 line=$2 op=$3 mode=$4 impl=$5
  local num='-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?'
  [[ -n "$line" ]] || { fail "$what: no JSON line"; return; }
  for field in '"op":"'"$op"'"' '"mode":"'"$mode"'"' '"impl":"'"$impl"'"' \
    '"iters":50' '"fabric":"' '"size":'; do
    grep -q -- "$field" <<<"$line" || fail "$what: no $field in $line"
  done
  if [[ $mode == lat ]]; then
    for f in lat_us_p50 lat_us_p99 lat_us_p999; do
      grep -Eq "\"$f\":$num" <<<"$line" || fail "$what: $f is not a number"
    done
  else
    for f in bw_MBps ops_per_s; do
      grep -Eq "\"$f\":$num" <<<"$line" || fail "$what: $f is not a number"
    done
  fi
}

# One process, two nodes: every operation in both modes.
for op in send write read raw; do
  for mode in lat bw; do
    out=$("$bench" --op=$op --mode=$mode --size=4K --iters=50 --json 2>/dev/null)
    rc=$?
    [[ $rc -eq 0 ]] || fail "$op $mode: exit status $rc"
    check_line "$op $mode" "$(grep '^{' <<<"$out" | head -1)" $op $mode rdmactor
  done
done

# --fork-server: the server node in a child process; CPU counts both, and
# the child is gone when the run returns.
before=$(pgrep -xc rdmactor-bench)
for op in send raw actor; do
  out=$("$bench" --op=$op --mode=bw --size=8 --iters=50 --fork-server --json 2>/dev/null)
  rc=$?
  [[ $rc -eq 0 ]] || fail "$op bw --fork-server: exit status $rc"
  line=$(grep '^{' <<<"$out" | head -1)
  check_line "$op bw --fork-server" "$line" $op bw rdmactor
  for want in '"topology":"two processes (forked server)"' '"cpu_scope":"both sides"'; do
    grep -q "$want" <<<"$line" || fail "$op bw --fork-server: no $want in: $line"
  done
done
after=$(pgrep -xc rdmactor-bench)
((after <= before)) || fail "--fork-server left server processes behind ($before before, $after after)"
err=$("$bench" --baseline=tcp --fork-server 2>&1) && fail "--fork-server with --baseline: accepted"
grep -q -- "--fork-server applies to rdmactor" <<<"$err" || fail "--fork-server with --baseline: message was: $err"
err=$("$bench" --connect=127.0.0.1:1 --fork-server 2>&1) && fail "--fork-server with --connect: accepted"
grep -q -- "drop --listen and --connect" <<<"$err" || fail "--fork-server with --connect: message was: $err"

# A sweep prints one object per size.
out=$("$bench" --op=send --mode=bw --sizes=8,4K,64K --iters=50 --json 2>/dev/null)
n=$(grep -c '^{' <<<"$out")
[[ $n -eq 3 ]] || fail "--sizes=8,4K,64K printed $n JSON lines, not 3"

# Several busy connections at once: one row, their sum; --stats prints the
# client connection's batching counters.
out=$("$bench" --op=send --mode=bw --size=8 --iters=50 --connections=3 --stats --json 2>&1)
line=$(grep '^{' <<<"$out" | head -1)
check_line "send bw on 3 connections" "$line" send bw rdmactor
grep -q '3 busy connections' <<<"$line" || fail "--connections=3 not in the topology: $line"
grep -q '^rdmactor-bench: client connection: packed messages sent [0-9]* carrying [0-9]* frames' <<<"$out" ||
  fail "--stats printed no batching counters: $out"
err=$("$bench" --op=actor --mode=bw --connections=2 2>&1) && fail "--connections with --op=actor: accepted"
grep -q -- "--connections applies to" <<<"$err" || fail "--connections with --op=actor: message was: $err"

# The human-readable table has a header and a row.
out=$("$bench" --op=write --mode=bw --size=64K --iters=50 2>/dev/null)
grep -q 'MB/s' <<<"$out" || fail "table: no MB/s column in: $out"

# The CAF io baseline (a forked server process on loopback).
out=$("$bench" --baseline=caf-io --op=send --mode=lat --size=8 --iters=50 --json 2>/dev/null)
check_line "caf-io send lat" "$(grep '^{' <<<"$out" | head -1)" send lat caf-io
out=$("$bench" --baseline=caf-io --op=send --mode=bw --size=64K --iters=50 --json 2>/dev/null)
check_line "caf-io send bw" "$(grep '^{' <<<"$out" | head -1)" send bw caf-io

# The medium: plain TCP between this process and a forked server.
out=$("$bench" --baseline=tcp --op=send --mode=lat --size=8 --iters=50 --json 2>/dev/null)
check_line "tcp send lat" "$(grep '^{' <<<"$out" | head -1)" send lat tcp
out=$("$bench" --baseline=tcp --op=send --mode=bw --size=8 --iters=50 --window=256 --json 2>/dev/null)
check_line "tcp send bw" "$(grep '^{' <<<"$out" | head -1)" send bw tcp
out=$("$bench" --baseline=tcp --op=write --mode=bw --size=8 --iters=50 2>&1) \
  && fail "tcp write: accepted, but the baseline has no write"
grep -q 'tcp baseline runs --op=send' <<<"$out" || fail "tcp write: no error naming the remedy in: $out"

# Two processes: a server, and a client against it.
# Below the kernel's ephemeral ports (32768-60999), which connections of
# other processes may hold.
port=$((10000 + RANDOM % 10000))
"$bench" --listen=127.0.0.1:$port >/dev/null 2>&1 &
server=$!
ok=0
for _ in $(seq 50); do
  out=$("$bench" --connect=127.0.0.1:$port --op=send --mode=lat --size=8 --iters=50 --json 2>/dev/null) && { ok=1; break; }
  sleep 0.2
done
[[ $ok -eq 1 ]] || fail "two processes: the client never ran against the server"
check_line "two-process send lat" "$(grep '^{' <<<"$out" | head -1)" send lat rdmactor
# Scale: 20 connections to the server, each echoed once; one send among 5
# idle connections.
out=$("$bench" --connect=127.0.0.1:$port --op=connect --peers=20 --json 2>/dev/null)
line=$(grep '^{' <<<"$out" | head -1)
for want in '"connected":20' '"echoes":20' '"status":"ok"' '"registered_bytes":' '"threads":'; do
  grep -q "$want" <<<"$line" || fail "connect 20 peers: no $want in: $line"
done
out=$("$bench" --connect=127.0.0.1:$port --idle-peers=5 --op=send --mode=lat --size=8 --iters=50 --json 2>/dev/null)
line=$(grep '^{' <<<"$out" | head -1)
check_line "send lat among 5 idle peers" "$line" send lat rdmactor
grep -q '5 idle peers' <<<"$line" || fail "idle peers not in the topology: $line"
kill -INT $server 2>/dev/null
wait $server 2>/dev/null

# Idle connections stay: a server whose data handler echoes (the default)
# still serves after the CAF timeout of its subscription request passed
# (before, nothing held the server actor then and CAF destroyed it, which
# closed its connection).
port=$((10000 + RANDOM % 10000))
server_log=$(mktemp)
"$bench" --listen=127.0.0.1:$port --timeout-ms=500 >"$server_log" 2>&1 &
server=$!
line=""
for _ in $(seq 50); do
  # Until the server listens (a run that connected reports, pass or fail).
  out=$("$bench" --connect=127.0.0.1:$port --op=connect --peers=3 --hold-ms=1500 --json 2>/dev/null) || true
  line=$(grep '^{' <<<"$out" | grep '"connected":[1-9]' | head -1 || true)
  [[ -n "$line" ]] && break
  sleep 0.2
done
for want in '"connected":3' '"echoes":3' '"status":"ok"' '"hold_cpu_percent":'; do
  grep -q "$want" <<<"$line" || fail "idle connections held 1.5 s: no $want in: $line"
done
kill -INT $server 2>/dev/null
wait $server 2>/dev/null
# The server reports its CPU while the idle connections stayed.
grep -qE '^rdmactor-bench: 3 connections unchanged for [0-9.]+ s: cpu [0-9.]+ % of a core' "$server_log" ||
  fail "the server printed no idle CPU line for 3 connections: $(cat "$server_log")"
rm -f "$server_log"

# --help succeeds; a wrong option fails with a message that names it.
help=$("$bench" --help 2>&1) || fail "--help exited with $?"
grep -q -- "--rdmactor.recv-depth=" <<<"$help" || fail "--help does not list the rdmactor options"
grep -q -- "--fork-server" <<<"$help" || fail "--help does not explain --fork-server"
err=$("$bench" --op=bogus 2>&1)
rc=$?
[[ $rc -ne 0 ]] || fail "--op=bogus exited 0"
grep -q -- "--op must be" <<<"$err" || fail "--op=bogus: message was: $err"

if [[ $failures -gt 0 ]]; then
  echo "bench_smoke: $failures failure(s)" >&2
  exit 1
fi
echo "bench_smoke: all checks passed"
