#!/usr/bin/env bash
# Bounded load test: one rdmactor-soak server and several client processes
# over the soft fabric, each client running a fixed number of random
# operations over several connections, a share of them opened with a fault
# plan (dropped connection, corrupted frame, delay).  Every payload is
# checked on the side that receives it; every process must end with zero
# bytes in use.  Not part of scripts/test.sh (it takes a few minutes).
#
#   scripts/soak.sh [PROCESSES] [CONNECTIONS] [OPS] [FAULT_RATE]
#     defaults:     4           8             20000 0.3
#   (OPS per client process; the clients run at the same time)
#
# Builds rdmactor-soak (Release) into build-rel-soak/.  Exits 0 only when
# every client and the server report success.
set -euo pipefail
cd "$(dirname "$0")/.."

procs=${1:-4}
conns=${2:-8}
ops=${3:-20000}
fault_rate=${4:-0.3}
build=${RDMACTOR_BUILD_DIR:-build-rel-soak}
jobs=${RDMACTOR_JOBS:-$(nproc)}
host=${RDMACTOR_TEST_HOST:-127.0.0.1}

scripts/setup.sh --no-vm
echo "== configure (Release) in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRDMACTOR_BUILD_TESTS=OFF \
  >/dev/null
echo "== build"
cmake --build "$build" -j"$jobs" --target rdmactor-soak
soak="$build/apps/soak/rdmactor-soak"
common=(--fabric=soft --rdmactor.log-level=error)

# Logs stay in the build directory for a look after a failure.
logdir="$build/soak-logs"
rm -rf "$logdir"
mkdir -p "$logdir"
server=""
cleanup() {
  [[ -n "$server" ]] && kill -9 "$server" 2>/dev/null || true
}
trap cleanup EXIT

"$soak" --serve="$host:0" "${common[@]}" >"$logdir/server" 2>&1 &
server=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^serving on port \([0-9]*\).*/\1/p' "$logdir/server")
  [[ -n "$port" ]] && break
  sleep 0.1
done
if [[ -z "$port" ]]; then
  echo "soak: the server did not start:"; cat "$logdir/server"; exit 1
fi
echo "== soak: $procs clients x $conns connections, $ops ops each," \
     "fault rate $fault_rate, server on $host:$port"

start=$(date +%s)
pids=()
for i in $(seq 1 "$procs"); do
  "$soak" --connect="$host:$port" --connections="$conns" --ops="$ops" \
    --seed="$i" --fault-rate="$fault_rate" "${common[@]}" \
    >"$logdir/client$i" 2>&1 &
  pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || rc=1
done
for i in $(seq 1 "$procs"); do
  grep -E '^client ' "$logdir/client$i" || { echo "client $i:"; tail -20 "$logdir/client$i"; }
  grep -E '^rdmactor-soak: unexpected' "$logdir/client$i" | head -5 || true
done

kill -TERM "$server"
for _ in $(seq 1 300); do
  kill -0 "$server" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$server" 2>/dev/null; then
  echo "soak: the server did not stop within 30 s of SIGTERM"; rc=1
else
  wait "$server" || rc=1
fi
server=""
grep -E '^server' "$logdir/server" || { tail -20 "$logdir/server"; rc=1; }
echo "== soak: $(( $(date +%s) - start ))s, $([[ $rc -eq 0 ]] && echo passed || echo FAILED)"
exit $rc
