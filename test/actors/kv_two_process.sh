#!/usr/bin/env bash
# kv_two_process.sh KV_BINARY [EXTRA_ARGS...]
# rdmactor-kv as separate processes: a server; puts and gets of single keys
# (values, a missing key, refused keys and values); a watch of a key (a
# subscription actor handed out in a reply) that sees two puts; four
# clients that put and get keys of their own at once while a bench races
# puts against one-sided gets (every value it reads must be well formed)
# and another bench is killed with SIGKILL mid-run; then the server still serves, saw
# the killed client go (peer_gone), and stops on SIGTERM with exit 0; its
# actor answered only the gets of the benches that asked it (--via=actor,
# --via=caf-io): every other get was a one-sided READ.
# Checks values, counts and exit statuses, never timings.
set -euo pipefail
kv=$1
shift
bin=$kv
source "$(dirname "${BASH_SOURCE[0]}")/process_test_lib.sh"
expect() { # NAME RC EXPECTED_STDOUT
  expect_rc "$1" "$2"
  [[ "$(cat "$tmp/$1.out")" == "$3" ]] ||
    fail "$1: stdout is not what was expected:"$'\n'"$3"
}

"$kv" --serve="$host:0" --slots=1024 --caf-io=127.0.0.1:0 "$@" \
  >"$tmp/server.log" 2>&1 &
server=$!
pids+=("$server")
wait_for "$tmp/server.log" '^kv table of 1024 slots .* serving on port [0-9]+'
port=$(sed -nE 's/.*serving on port ([0-9]+).*/\1/p' "$tmp/server.log")
caf_port=$(sed -nE 's/^kv actor also published over CAF io on port ([0-9]+)$/\1/p' \
  "$tmp/server.log")
at="$host:$port"
echo "server on $at"

# Single keys: a missing key, a put and its get, an overwrite, an empty
# value, a key and a value that are too long.
run missing --get="$at" --key=nope "$@"
expect missing 1 ""
expect_err missing "no value under the key 'nope'"
run put1 --put="$at" --key=hello --value="world" "$@"
expect put1 0 "stored hello (version 2)"
run get1 --get="$at" --key=hello "$@"
expect get1 0 "world"
run put2 --put="$at" --key=hello --value="brave new world" "$@"
expect put2 0 "stored hello (version 4)"
run get2 --get="$at" --key=hello "$@"
expect get2 0 "brave new world"
run put3 --put="$at" --key=empty --value= "$@"
expect put3 0 "stored empty (version 2)"
run get3 --get="$at" --key=empty "$@"
expect get3 0 ""
run longkey --put="$at" --key="$(printf 'k%.0s' {1..33})" --value=x "$@"
expect longkey 1 ""
expect_err longkey "rdmactor: invalid_argument: keys have 1 to 32 bytes; this one has 33"
run longvalue --put="$at" --key=big --value="$(printf 'v%.0s' {1..193})" "$@"
expect longvalue 1 ""
expect_err longvalue "rdmactor: invalid_argument: values have at most 192 bytes; this one has 193"
run usage --put="$at" --key=x "$@"
[[ $rc == 2 ]] || fail "usage: exit status $rc, expected 2"

# A subscription: the server answers --watch with a watcher actor (an
# actor handle in a reply, a proxy on the client) that the client asks
# for the key's next puts.
"$kv" --watch="$at" --key=watched --count=2 --seconds=$((30 * scale)) "$@" \
  >"$tmp/watch.out" 2>"$tmp/watch.err" &
watch=$!
pids+=("$watch")
wait_for "$tmp/watch.out" '^watching watched$'
run wput1 --put="$at" --key=watched --value=one "$@"
expect wput1 0 "stored watched (version 2)"
wait_for "$tmp/watch.out" '^watched = one \(version 2\)$'
run wput2 --put="$at" --key=watched --value=two "$@"
expect wput2 0 "stored watched (version 4)"
set +e
wait "$watch"
rc=$?
set -e
expect watch 0 "watching watched
watched = one (version 2)
watched = two (version 4)"

# Many clients at once: four writers of their own keys, a bench that races
# puts against one-sided gets, and a bench that is killed mid-run.
"$kv" --bench="$at" --clients=2 --writers=1 --seconds=$((3 * scale)) \
  --keys=200 "$@" >"$tmp/bench.out" 2>"$tmp/bench.err" &
bench=$!
pids+=("$bench")
"$kv" --bench="$at" --clients=2 --writers=1 --seconds=600 --keys=100 "$@" \
  >"$tmp/victim.out" 2>"$tmp/victim.err" &
victim=$!
pids+=("$victim")
worker() { # I: puts and gets c$I-k1..5, each get checked
  local i=$1 j v
  for j in 1 2 3 4 5; do
    v="value $i.$j $(printf '%*s' $((i * 20 + j)) '' | tr ' ' x)"
    "$kv" --put="$at" --key="c$i-k$j" --value="$v" "${@:2}" >/dev/null ||
      { echo "put c$i-k$j failed"; return 1; }
    [[ "$("$kv" --get="$at" --key="c$i-k$j" "${@:2}")" == "$v" ]] ||
      { echo "get c$i-k$j: wrong value"; return 1; }
  done
  echo "worker $i: 5 puts, 5 gets checked"
}
workers=()
for i in 1 2 3 4; do
  worker "$i" "$@" >"$tmp/worker$i.out" 2>"$tmp/worker$i.err" &
  workers+=($!)
  pids+=($!)
done
# The victim dies by SIGKILL while its clients get and put.
wait_for "$tmp/victim.out" '^filled 100 keys'
sleep 1
kill -9 "$victim"
wait "$victim" 2>/dev/null || true
for i in 1 2 3 4; do
  wait "${workers[$((i - 1))]}" ||
    fail "worker $i: $(cat "$tmp/worker$i.out" "$tmp/worker$i.err")"
  [[ "$(cat "$tmp/worker$i.out")" == "worker $i: 5 puts, 5 gets checked" ]] ||
    fail "worker $i printed: $(cat "$tmp/worker$i.out")"
done
set +e
wait "$bench"
brc=$?
set -e
[[ $brc == 0 ]] || fail "bench: exit status $brc, expected 0"
grep -qE '^gets [1-9][0-9]*, missing 0, wrong 0, retries [0-9]+ \(reads that raced a put\), puts [1-9][0-9]*, errors 0$' \
  "$tmp/bench.out" || fail "bench: counts are not what was expected"
tail -n 1 "$tmp/bench.out" | grep -qE '^kv bench \(one-sided RDMA READ gets, .*gets/s$' ||
  fail "bench: its last line is not the summary"

# The killed client's connections end on the server (peer_gone), and the
# server serves on: the workers' keys are all there.
wait_for "$tmp/server.log" 'client left \(rdmactor: peer_gone'
for i in 1 2 3 4; do
  run after$i --get="$at" --key="c$i-k5" "$@"
  expect after$i 0 "value $i.5 $(printf '%*s' $((i * 20 + 5)) '' | tr ' ' x)"
done
run after --put="$at" --key=hello --value=again "$@"
expect after 0 "stored hello (version 6)"
# Gets through the server's actor (the bench's comparison modes) agree.
run via_actor --bench="$at" --via=actor --clients=1 --seconds=1 --keys=10 "$@"
[[ $rc == 0 ]] || fail "via_actor: exit status $rc, expected 0"
grep -qE '^gets [1-9][0-9]*, missing 0, wrong 0, retries 0 .*errors 0$' \
  "$tmp/via_actor.out" || fail "via_actor: counts are not what was expected"
# And through the same actor over CAF io (the bench's baseline).
run via_caf_io --bench="127.0.0.1:$caf_port" --via=caf-io --clients=1 \
  --seconds=1 --keys=10 "$@"
[[ $rc == 0 ]] || fail "via_caf_io: exit status $rc, expected 0"
grep -qE '^gets [1-9][0-9]*, missing 0, wrong 0, retries 0 .*errors 0$' \
  "$tmp/via_caf_io.out" || fail "via_caf_io: counts are not what was expected"

kill -TERM "$server"
set +e
wait "$server"
src=$?
set -e
[[ $src == 0 ]] || fail "server: exit status $src after SIGTERM, expected 0"
grep -q '^shutting down (SIGTERM)' "$tmp/server.log" ||
  fail "server: no 'shutting down (SIGTERM)'"
# Only the gets of the two --via benches went through the server's actor;
# every other get (the clients', the benches' one-sided ones) read the table
# without it.
gets_of() { sed -nE 's/^gets ([0-9]+), .*/\1/p' "$1"; }
via_gets=$(($(gets_of "$tmp/via_actor.out") + $(gets_of "$tmp/via_caf_io.out")))
grep -qE "^the kv actor stored [0-9]+ puts \([0-9]+ keys\) and answered $via_gets gets; " \
  "$tmp/server.log" ||
  fail "server: its actor did not answer exactly the $via_gets gets of the --via benches"

for f in "$tmp"/bench.out "$tmp"/victim.out "$tmp"/via_actor.out "$tmp"/via_caf_io.out \
  "$tmp"/server.log; do
  echo "--- $(basename "$f")"
  cat "$f"
done
echo "kv_two_process: all checks passed"
