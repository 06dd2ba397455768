#!/usr/bin/env bash
# hostile-rss.sh: the resident size of a node under two attacks of
# docs/security.md, measured from outside.  Builds Release into
# build-hostile/ (rdmactor-calculator and test/actors' rdmactor-hostile-probe),
# starts a calculator server (soft fabric, the default config), then:
#
#   partials    CONNECTIONS connections each send the first MIB MiB of an
#               unfinished chunked request and answer Pings for HOLD_MS,
#               then close (the node's budget: peer-max-queued-bytes per
#               peer, peer-partial-timeout-ms per message)
#   no-credits  a peer sends Pings and never returns a credit (the node
#               ends it past its grant)
#
# and prints the server's VmRSS before, at its peak during, and after each
# attack (after the peer closed and the node trimmed its heap), plus
# whether a good client is still answered.  Numbers, not a pass/fail test:
# record them with the commit and the machine's load (docs/security.md).
#
#   scripts/hostile-rss.sh [--connections=N] [--mib=M] [--hold-ms=MS]
#   HOSTILE_JOBS=N   build jobs (default nproc)
set -euo pipefail
cd "$(dirname "$0")/.."

connections=2
mib=48
hold_ms=5000
for arg in "$@"; do
  case $arg in
    --connections=*) connections=${arg#*=} ;;
    --mib=*) mib=${arg#*=} ;;
    --hold-ms=*) hold_ms=${arg#*=} ;;
    -h | --help)
      sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "hostile-rss.sh: unknown argument $arg (see --help)" >&2
      exit 2
      ;;
  esac
done

build=build-hostile
scripts/setup.sh --no-vm
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRDMACTOR_BUILD_TESTS=ON \
  >/dev/null
cmake --build "$build" -j"${HOSTILE_JOBS:-$(nproc)}" \
  --target rdmactor-calculator rdmactor-hostile-probe | tail -1
calc=$(find "$build" -type f -name rdmactor-calculator -perm -u+x | head -1)
probe=$(find "$build" -type f -name rdmactor-hostile-probe -perm -u+x | head -1)

tmp=$(mktemp -d)
server=""
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$calc" --serve=127.0.0.1:0 >"$tmp/server.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do
  grep -qE 'serving on port [0-9]+' "$tmp/server.log" && break
  sleep 0.1
done
port=$(sed -nE 's/.*serving on port ([0-9]+).*/\1/p' "$tmp/server.log")
[[ -n "$port" ]] || { cat "$tmp/server.log"; exit 1; }

rss() { awk '/^VmRSS/ { print $2 }' "/proc/$server/status"; }
mib_of() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
good_client() {
  if "$calc" --connect="127.0.0.1:$port" --expr="20 + 22" 2>&1 \
      | grep -q '= 42'; then
    echo yes
  else
    echo NO
  fi
}
# attack NAME ARGS...: runs the probe while sampling the server's RSS.
attack() {
  local name=$1
  shift
  local before peak now after served
  good_client >/dev/null
  before=$(rss)
  peak=$before
  "$probe" --connect="127.0.0.1:$port" --attack="$name" "$@" \
    >"$tmp/$name.out" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    now=$(rss)
    ((now > peak)) && peak=$now
    sleep 0.1
  done
  wait "$pid" || { cat "$tmp/$name.out"; exit 1; }
  sleep 2
  after=$(rss)
  served=$(good_client)
  printf '%-11s %10s %10s %10s  %s\n' "$name" "$(mib_of "$before")" \
    "$(mib_of "$peak")" "$(mib_of "$after")" "$served"
  sed 's/^/    probe: /' "$tmp/$name.out"
}

echo "== rdmactor-calculator (pid $server, port $port), commit" \
  "$(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-11s %10s %10s %10s  %s\n' attack "RSS before" "peak" "after" \
  "good client served"
printf '%-11s %10s %10s %10s\n' "" "(MiB)" "(MiB)" "(MiB)"
attack partials --connections="$connections" --mib="$mib" --hold-ms="$hold_ms"
attack no-credits --seconds=20
