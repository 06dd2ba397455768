#!/usr/bin/env bash
# two_process_demo.sh DEMO_BINARY [EXTRA_ARGS...]
# Starts rdmactor-demo --listen on a free port, runs two clients at once and
# one after another against it, then stops the server with SIGTERM. Passes
# when every client verified everything and the server shut down cleanly.
set -euo pipefail
demo=$1
shift
host=${RDMACTOR_TEST_HOST:-127.0.0.1}
log=$(mktemp)
trap 'kill -9 $server 2>/dev/null || true; rm -f "$log"' EXIT

"$demo" --listen="$host:0" "$@" >"$log" 2>&1 &
server=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^serving on port \([0-9]*\).*/\1/p' "$log")
  [[ -n "$port" ]] && break
  sleep 0.1
done
if [[ -z "$port" ]]; then
  echo "server did not start:"; cat "$log"; exit 1
fi
echo "server on $host:$port"

"$demo" --connect="$host:$port" "$@" >/tmp/demo-client-a.$$ 2>&1 &
a=$!
"$demo" --connect="$host:$port" "$@" >/tmp/demo-client-b.$$ 2>&1 &
b=$!
rc=0
wait $a || rc=1
wait $b || rc=1
cat /tmp/demo-client-a.$$ /tmp/demo-client-b.$$
rm -f /tmp/demo-client-a.$$ /tmp/demo-client-b.$$
"$demo" --connect="$host:$port" "$@" || rc=1

kill -TERM $server
for _ in $(seq 1 100); do
  kill -0 $server 2>/dev/null || break
  sleep 0.1
done
if kill -0 $server 2>/dev/null; then
  echo "server did not shut down within 10 s of SIGTERM"; rc=1
else
  wait $server || { echo "server exited with an error"; rc=1; }
fi
echo "--- server log"; cat "$log"
exit $rc
