#!/usr/bin/env bash
# calculator_two_process.sh CALCULATOR_BINARY [EXTRA_ARGS...]
# rdmactor-calculator as separate processes: a server publishes the
# calculator; clients evaluate expressions given with --expr and on stdin,
# including errors (division by zero from the remote actor, overflow, an
# unreadable line, an unknown name); a client connected while the server
# stops on SIGTERM (exit 0) learns that the calculator is gone
# (peer_closed); one whose server is killed learns peer_gone; connecting to
# a server that is gone fails.  Checks every printed result and exit status.
set -euo pipefail
calc=$1
shift
host=${RDMACTOR_TEST_HOST:-127.0.0.1}
tmp=$(mktemp -d)
server=""
client=""
cleanup() {
  exec 3>&- 2>/dev/null || true
  [[ -n "$server" ]] && kill -9 "$server" 2>/dev/null || true
  [[ -n "$client" ]] && kill -9 "$client" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$tmp"/*.out "$tmp"/*.err "$tmp"/server*.log; do
    [[ -f "$f" ]] && { echo "--- $(basename "$f")"; cat "$f"; }
  done
  exit 1
}
# wait_for FILE PATTERN: polls (at most 30 s) until FILE has a matching line.
wait_for() {
  for _ in $(seq 1 300); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no line matching '$2' in $(basename "$1") within 30 s"
}
# start_server LOG: starts a server on a free port; sets $server and $port.
start_server() {
  local log=$1
  shift
  "$calc" --serve="$host:0" "$@" >"$log" 2>&1 &
  server=$!
  wait_for "$log" '^calculator published as "calculator", serving on port [0-9]+'
  port=$(sed -nE 's/.*serving on port ([0-9]+).*/\1/p' "$log")
}
# client NAME [ARGS...]: runs a client to its end; sets $rc.  (Input comes
# from files: the Soft-RoCE VM has no /dev/fd for process substitution.)
client() {
  local name=$1
  shift
  set +e
  "$calc" --connect="$host:$port" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  rc=$?
  set -e
}
end_fed_client() { # NAME: closes the client's input, expects exit status 1
  exec 3>&-
  set +e
  wait "$client"
  rc=$?
  set -e
  client=""
  [[ $rc == 1 ]] || fail "$1: client exit status $rc, expected 1"
}

expect_out() { # NAME EXPECTED_STDOUT
  [[ "$(cat "$tmp/$1.out")" == "$2" ]] ||
    fail "$1: stdout is not what was expected:"$'\n'"$2"
}
expect_err() { # NAME PATTERN
  grep -qF -- "$2" "$tmp/$1.err" || fail "$1: stderr lacks '$2'"
}

start_server "$tmp/server.log" "$@"
echo "server on $host:$port"

# Expressions on the command line: values, and the calculator's own error
# (a caf::error from the remote actor) without ending the client.
client exprs "$@" --expr="3 + 4" --expr="-6*7" --expr="10 / -3" \
  --expr="7 / 0" --expr="2 - 5"
[[ $rc == 1 ]] || fail "exprs: exit status $rc, expected 1 (one failed)"
expect_out exprs "3 + 4 = 7
-6 * 7 = -42
10 / -3 = -3
2 - 5 = -3"
expect_err exprs "7 / 0: rdmactor: invalid_argument: division by zero"

# Expressions on stdin, all good: exit 0; "quit" ends the input.
printf '1 + 1\n\n100 / 7\n9223372036854775807 - 1\nquit\n5 * 5\n' >"$tmp/stdin.in"
client stdin "$@" <"$tmp/stdin.in"
[[ $rc == 0 ]] || fail "stdin: exit status $rc, expected 0"
expect_out stdin "1 + 1 = 2
100 / 7 = 14
9223372036854775807 - 1 = 9223372036854775806"

# Overflow (an error of the remote actor) and an unreadable line.
printf '9223372036854775807 + 1\nthree + 4\n2 * 21\n' >"$tmp/errors.in"
client errors "$@" <"$tmp/errors.in"
[[ $rc == 1 ]] || fail "errors: exit status $rc, expected 1"
expect_out errors "2 * 21 = 42"
expect_err errors "9223372036854775807 + 1: rdmactor: invalid_argument: overflow"
expect_err errors "three + 4: cannot read it"

# A name nobody published: the library's unknown_actor.
client unknown "$@" --name=nobody --expr="1 + 1"
[[ $rc == 1 ]] || fail "unknown: exit status $rc, expected 1"
expect_err unknown "rdmactor: unknown_actor"
[[ ! -s "$tmp/unknown.out" ]] || fail "unknown: printed a result"

# A client connected while the server stops on SIGTERM: the server exits 0,
# the client's next expression finds the calculator gone (peer_closed).
mkfifo "$tmp/in"
exec 3<>"$tmp/in"
"$calc" --connect="$host:$port" "$@" <"$tmp/in" >"$tmp/sigterm.out" \
  2>"$tmp/sigterm.err" &
client=$!
echo "2 + 2" >&3
wait_for "$tmp/sigterm.out" '^2 \+ 2 = 4$'
wait_for "$tmp/server.log" '^client connected'
kill -TERM "$server"
set +e
wait "$server"
src=$?
set -e
server=""
[[ $src == 0 ]] || fail "server: exit status $src after SIGTERM, expected 0"
grep -q '^shutting down (SIGTERM)' "$tmp/server.log" ||
  fail "server: no 'shutting down (SIGTERM)'"
echo "3 + 3" >&3
end_fed_client sigterm
expect_out sigterm "2 + 2 = 4"
expect_err sigterm "the calculator is gone: rdmactor: peer_closed"

# The server is gone: connecting fails with the library's message.
client refused "$@" --expr="1 + 1"
[[ $rc == 1 ]] || fail "refused: exit status $rc, expected 1"
grep -qE "rdmactor: connect_(failed|timeout)" "$tmp/refused.err" ||
  fail "refused: stderr lacks connect_failed or connect_timeout"

# A server that is killed: the client learns peer_gone.
start_server "$tmp/server2.log" "$@"
mkfifo "$tmp/in2"
exec 3<>"$tmp/in2"
"$calc" --connect="$host:$port" "$@" <"$tmp/in2" >"$tmp/killed.out" \
  2>"$tmp/killed.err" &
client=$!
echo "4 * 4" >&3
wait_for "$tmp/killed.out" '^4 \* 4 = 16$'
kill -9 "$server"
wait "$server" 2>/dev/null || true
server=""
# The proxy quits when the connection notices the peer is gone; a request
# sent before that fails with peer_gone too.
echo "5 + 5" >&3
end_fed_client killed
expect_out killed "4 * 4 = 16"
expect_err killed "the calculator is gone: rdmactor: peer_gone"

for f in "$tmp"/*.out "$tmp"/*.err "$tmp"/server*.log; do
  echo "--- $(basename "$f")"
  cat "$f"
done
echo "calculator_two_process: all checks passed"
