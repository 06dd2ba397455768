#!/usr/bin/env bash
# bench.sh: builds Release into build-release/ and runs the standard
# benchmark matrix of rdmactor-bench, side by side with a reference.
#
#   scripts/bench.sh          host half: soft fabric vs CAF io remote actors
#   scripts/bench.sh --vm     also the VM half: verbs fabric vs perftest on
#                             Soft-RoCE inside scripts/rxe-vm.sh
#   scripts/bench.sh --quick  fewer iterations (a smoke test, not a result)
#
# Host matrix: send lat 8 B and 4 KiB; send bw 8 B, 64 B, 512 B, 4 KiB,
# 64 KiB, 1 MiB; write and read bw 64 KiB and 1 MiB (rdmactor soft vs
# --baseline=caf-io, each with its server in a process of its own:
# rdmactor-bench --fork-server); the send and actor rows also against the
# medium, plain TCP between two processes (--baseline=tcp), and the message rate
# (bw rows of at most 4 KiB show msgs/s) again with --window=256; raw
# lat 8 B and raw bw 64 KiB as diagnostics (the transport without the
# agent, compared with CAF io's send).  VM matrix: send lat 8 B, write bw
# 64 KiB, read lat 8 B, send bw 8 B (rdmactor verbs vs ib_send_lat,
# ib_write_bw, ib_read_lat, ib_send_bw on rxe0 in the same VM run; the
# last is the message rate), and the atomics: fetch_add and
# cas lat and bw (8 B; host: rdmactor soft alone, no CAF io counterpart;
# VM: vs ib_atomic_lat / ib_atomic_bw with FETCH_AND_ADD and CMP_AND_SWAP;
# bw rows show operations/s).  send, write and read run in data handlers
# (rdmactor/data_handler.hpp: the pings and echoes, or each operation
# issued from the last one's completion, inside the connections'
# activations, as perftest's loop owns its QP); send lat runs again with a user actor on each side
# (--actor-driver --actor-echo; host and VM) and read lat with the driver
# actor (--actor-driver; VM), in a table of their own.  Completion modes:
# the default
# (adaptive) everywhere, plus busy on the host (send lat 8 B, send bw 64 KiB)
# and event and busy in the VM, each in a table of its own.  Contention
# (host): actor lat 8 B and actor bw 64 KiB of both implementations again
# while two CPU hogs (busy shell loops) run.  Cores (host): send bw 8 B on
# 8 busy connections at once (--connections=8) against one.  bw rows show the CPU seconds
# per GB of both sides beside MB/s.  Scale (host):
# 1, 100, 1000 and 20,000 connections from one process to another (connect times,
# both processes' threads, RSS, registered bytes and fds), and one active
# connection alone and among 1000 idle ones (medians of the rounds); in the VM, 200 connections over
# rxe from one process to another.
#
# Writes bench-results/<stamp>-host.json (and -scale.json, -vm.json): one JSON object
# per line, as rdmactor-bench --json prints them, plus a plot
# bench-results/<stamp>.png when gnuplot or python3 with matplotlib is
# installed.  Prints the side-by-side table; ratio > 1 means rdmactor is
# ahead (latency: reference / rdmactor; bandwidth: rdmactor / reference).
#
# The host rows run interleaved (rdmactor, caf-io, tcp) in BENCH_ROUNDS
# rounds and the table shows the medians, so that load from other
# processes hits both sides alike.  The matrix takes about 1.5-2.5 minutes
# on a 2-core machine, plus the build.
#
# Environment: BENCH_ROUNDS (default 3; --quick: 1), BENCH_VM_ROUNDS (the
# VM half's rounds, perftest and rdmactor taking turns; default 3;
# --quick: 1), BENCH_BUILD_DIR
# (default build-release), BENCH_OUT (default bench-results), BENCH_JOBS
# (default nproc), BENCH_ARGS (extra arguments for every rdmactor-bench
# run, e.g. CAF scheduler options), PERFTEST_ARGS (extra perftest
# arguments in the VM, e.g. -x 1), BENCH_VM_FORCE=1 (run the VM half even
# without transport/verbs/), BENCH_VM_APPEND (the VM's extra kernel
# arguments; default "tsc=reliable clocksource=tsc", empty for the
# emulator's default HPET clock: see docs/benchmarks.md, "The clock in the
# VM"), BENCH_ONE_PROCESS=1 (the host rows run rdmactor's two nodes in
# one process, on one CAF scheduler), BENCH_SCALE=0 (skip the scale part),
# BENCH_SCALE_MAX (peers of its largest row; default 20,000, or the hard
# open-files limit less 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

want_vm=0
quick=0
vm_inner=0
for arg in "$@"; do
  case "$arg" in
    --vm) want_vm=1 ;;
    --quick) quick=1 ;;
    --vm-inner) vm_inner=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "bench.sh: unknown argument '$arg' (try --help)" >&2
      exit 2
      ;;
  esac
done

build=${BENCH_BUILD_DIR:-build-release}
out_dir=${BENCH_OUT:-bench-results}
bench="$root/$build/apps/bench/rdmactor-bench"
# Word-split on purpose: extra options for every run.
read -r -a extra <<<"${BENCH_ARGS:-}"

# The iteration counts and the host rows (shared with scripts/bench_ab.sh).
source "$root/scripts/bench_rows.sh"

# -- VM half, inside the VM ---------------------------------------------
# Prints "RESULT {json}" lines for the host to collect.
if [[ $vm_inner == 1 ]]; then
  host=${RDMACTOR_TEST_HOST:-198.18.0.1}
  dev=rxe0
  perf_lat_iters=$vm_lat_iters # scripts/bench_rows.sh: rdmactor's counts
  perf_bw_iters=$vm_bw_iters
  vm_rounds=${BENCH_VM_ROUNDS:-$((quick == 1 ? 1 : 3))}
  # Which clock the VM's kernel reads (BENCH_VM_APPEND): it decides what a
  # clock reading costs there, so the table says it.
  clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)
  echo "RESULT {\"impl\":\"vm-info\",\"clocksource\":\"$clocksource\"}"
  # perftest: server in the background, client against it; the client's
  # report line is the one starting with the size.
  perftest() { # TOOL SIZE ITERS [ARGS...] -> report line
    local tool=$1 size=$2 iters=$3 line
    timeout 120 "$tool" -d "$dev" -s "$size" -n "$iters" "${@:4}" ${PERFTEST_ARGS:-} >/tmp/pt-server.log 2>&1 &
    local srv=$!
    sleep 2
    line=$(timeout 120 "$tool" -d "$dev" -s "$size" -n "$iters" "${@:4}" ${PERFTEST_ARGS:-} "$host" 2>&1 |
      awk -v s="$size" '$1 == s { print; exit }') || true
    wait "$srv" 2>/dev/null || true
    echo "$line"
  }
  # One RESULT line from a perftest report line.  ib_*_lat: #bytes
  # #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%; ib_*_bw:
  # #bytes #iterations BW_peak BW_average MsgRate[Mpps].
  perftest_lat() { # OP TOOL SIZE [ARGS...]
    local op=$1 tool=$2 size=$3
    perftest "$tool" "$size" "$perf_lat_iters" "${@:4}" |
      awk -v op="$op" -v tool="$tool" -v size="$size" '{ if (NF >= 9) printf "RESULT {\"impl\":\"perftest\",\"op\":\"%s\",\"mode\":\"lat\",\"fabric\":\"verbs\",\"size\":%s,\"iters\":%s,\"lat_us_p50\":%s,\"lat_us_p99\":%s,\"lat_us_p999\":%s,\"lat_us_max\":%s,\"bw_MBps\":null,\"ops_per_s\":null}\n", op, $1, $2, $5, $8, $9, $4; else printf "RESULT {\"impl\":\"perftest\",\"op\":\"%s\",\"mode\":\"lat\",\"size\":%s,\"error\":\"%s failed\"}\n", op, size, tool } END { if (NR == 0) printf "RESULT {\"impl\":\"perftest\",\"op\":\"%s\",\"mode\":\"lat\",\"size\":%s,\"error\":\"%s failed\"}\n", op, size, tool }'
  }
  perftest_bw() { # OP TOOL SIZE [ARGS...]
    local op=$1 tool=$2 size=$3
    perftest "$tool" "$size" "$perf_bw_iters" "${@:4}" |
      awk -v op="$op" -v tool="$tool" -v size="$size" '{ if (NF >= 5) printf "RESULT {\"impl\":\"perftest\",\"op\":\"%s\",\"mode\":\"bw\",\"fabric\":\"verbs\",\"size\":%s,\"iters\":%s,\"lat_us_p50\":null,\"lat_us_p99\":null,\"lat_us_p999\":null,\"lat_us_max\":null,\"bw_MBps\":%s,\"ops_per_s\":%.1f}\n", op, $1, $2, $4, $5 * 1e6; else printf "RESULT {\"impl\":\"perftest\",\"op\":\"%s\",\"mode\":\"bw\",\"size\":%s,\"error\":\"%s failed\"}\n", op, size, tool } END { if (NR == 0) printf "RESULT {\"impl\":\"perftest\",\"op\":\"%s\",\"mode\":\"bw\",\"size\":%s,\"error\":\"%s failed\"}\n", op, size, tool }'
  }
  run_verbs() { # IMPL ARGS...: one rdmactor-bench run, one RESULT line
    local impl=$1 res
    shift
    res=$("$bench" --fabric=verbs --device="$dev" --host="$host" \
      --rdmactor.log-level=error --json "${extra[@]}" "$@" 2>/tmp/rb.err | grep '^{' || true)
    if [[ -n "$res" ]]; then
      echo "RESULT ${res/\"impl\":\"rdmactor\"/\"impl\":\"$impl\"}"
    else
      local why op mode size a
      for a in "$@"; do
        case $a in
          --op=*) op=${a#--op=} ;;
          --mode=*) mode=${a#--mode=} ;;
          --size=*) size=${a#--size=} ;;
        esac
      done
      why=$(grep -v '^\s*$' /tmp/rb.err | tail -1 | sed 's/^rdmactor-bench: //; s/["\\]/ /g')
      echo "RESULT {\"impl\":\"$impl\",\"op\":\"$op\",\"mode\":\"$mode\",\"fabric\":\"verbs\",\"size\":$size,\"error\":\"${why:-no output}\"}"
    fi
  }
  # The VM's numbers move by a third from run to run (and perftest's with
  # them), so each round runs perftest's rows, then rdmactor's, and the
  # table shows the medians of BENCH_VM_ROUNDS rounds, as on the host.
  for vm_round in $(seq 1 "$vm_rounds"); do
    echo "round $vm_round of $vm_rounds" >&2
    perftest_lat send ib_send_lat 8
    perftest_lat read ib_read_lat 8
    perftest_bw write ib_write_bw 65536
    # The message rate (issue 41: rdmactor's send bw 8 B against it).
    perftest_bw send ib_send_bw 8
    # ib_atomic_lat / ib_atomic_bw (8 B): the same columns as ib_read_lat /
    # ib_write_bw; -A picks the operation.
    perftest_lat fetch_add ib_atomic_lat 8 -A FETCH_AND_ADD
    perftest_bw fetch_add ib_atomic_bw 8 -A FETCH_AND_ADD
    perftest_lat cas ib_atomic_lat 8 -A CMP_AND_SWAP
    perftest_bw cas ib_atomic_bw 8 -A CMP_AND_SWAP
    # rdmactor's rows (scripts/bench_rows.sh): the default completion mode
    # (adaptive) as "rdmactor", then event and busy.
    while IFS='|' read -r _ impl args; do
      read -r -a row_args <<<"$args"
      run_verbs "$impl" "${row_args[@]}" </dev/null
    done <<<"$(vm_row_runs)" # no /dev/fd in the VM
  done
  # Scale on rxe (issue 13: at least 200 connections): a --listen server
  # process and a client opening the connections one after another, as on
  # the host.  One RESULT line, impl "rdmactor-scale".
  scale_peers=$((quick == 1 ? 20 : 200))
  # Below the kernel's ephemeral ports (32768-60999), which connections of
  # other processes may hold.
  port=$((10000 + RANDOM % 10000))
  "$bench" --fabric=verbs --device="$dev" --listen="$host:$port" \
    --rdmactor.log-level=error "${extra[@]}" >/tmp/rb-server.log 2>&1 &
  srv=$!
  for _ in $(seq 300); do
    grep -q 'serving on port' /tmp/rb-server.log && break
    sleep 0.1
  done
  res=$(timeout 600 "$bench" --fabric=verbs --device="$dev" --json \
    --rdmactor.log-level=error "${extra[@]}" --connect="$host:$port" \
    --op=connect --peers="$scale_peers" --hold-ms=1500 2>/tmp/rb.err |
    grep '^{' || true)
  kill -INT "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  if [[ -n "$res" ]]; then
    echo "RESULT ${res/\"impl\":\"rdmactor\"/\"impl\":\"rdmactor-scale\"}"
  else
    why=$(grep -v '^\s*$' /tmp/rb.err | tail -1 | sed 's/^rdmactor-bench: //; s/["\\]/ /g')
    echo "RESULT {\"impl\":\"rdmactor-scale\",\"op\":\"connect\",\"fabric\":\"verbs\",\"peers\":$scale_peers,\"error\":\"${why:-no output}\"}"
  fi
  exit 0
fi

# -- build ----------------------------------------------------------------
scripts/setup.sh --no-vm
echo "== configure (Release) in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DRDMACTOR_BUILD_TESTS=OFF >/dev/null
echo "== build rdmactor-bench"
cmake --build "$build" -j"${BENCH_JOBS:-$(nproc)}" --target rdmactor-bench |
  grep -E '(error|warning|Built target rdmactor-bench)' || true
[[ -x "$bench" ]] || {
  echo "bench.sh: $bench was not built" >&2
  exit 1
}

mkdir -p "$out_dir"
stamp=$(date +%Y%m%d-%H%M%S)
host_json="$out_dir/$stamp-host.json"
vm_json="$out_dir/$stamp-vm.json"
: >"$host_json"

echo "== machine: $(nproc) cores, $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), $(uname -r)"
echo "== load before the runs: $(cut -d' ' -f1-3 /proc/loadavg)"

# -- host half ------------------------------------------------------------
# Rows are interleaved (rdmactor, then caf-io, row by row) and the whole
# matrix runs BENCH_ROUNDS times, so that load from other processes hits
# both sides alike; the table shows the median of the rounds.
# rdmactor's server node runs in a process of its own (--fork-server), as
# the baselines' servers do; BENCH_ONE_PROCESS=1: both nodes in one.
rdmactor_topology=(--fork-server)
host_topology="two processes"
if [[ ${BENCH_ONE_PROCESS:-0} == 1 ]]; then
  rdmactor_topology=()
  host_topology="two nodes in one process"
fi
run() { # ROUND LABEL rdmactor-bench arguments...  (RUN_IMPL: label the JSON "impl" so)
  local round=$1 label=$2
  shift 2
  local t0=$SECONDS
  # RUN_IMPL renames the line's impl, whichever it is (rdmactor or caf-io).
  local rename='s/^$//'
  [[ -n ${RUN_IMPL:-} ]] && rename="s/\"impl\":\"[^\"]*\"/\"impl\":\"$RUN_IMPL\"/"
  local topology=()
  [[ " $* " != *" --baseline="* ]] && topology=("${rdmactor_topology[@]}")
  # pipefail: the status is rdmactor-bench's.
  if ! "$bench" --json --rdmactor.log-level=error "${topology[@]}" "${extra[@]}" "$@" \
    2>"$out_dir/.stderr" | sed "s/^{/{\"round\":$round,/; $rename" >>"$host_json"; then
    echo "   round $round $label: failed ($(grep -v '^\s*$' "$out_dir/.stderr" | tail -1))"
  else
    printf '   round %s %-28s %3d s\n' "$round" "$label:" $((SECONDS - t0))
  fi
}
# Message rate with a deeper window (--window=256): rdmactor, CAF io and
# the medium (--baseline=tcp), each labelled IMPL-w256.
w256_rows=(
  "send bw 8|--op=send --mode=bw --size=8 --iters=$(iters_for_bw 8)"
  "send bw 64|--op=send --mode=bw --size=64 --iters=$(iters_for_bw 64)"
  "send bw 512|--op=send --mode=bw --size=512 --iters=$(iters_for_bw 512)"
  "send bw 4K|--op=send --mode=bw --size=4K --iters=$(iters_for_bw 4096)"
  "actor bw 8|--op=actor --mode=bw --size=8 --iters=$(iters_for_bw 8)"
)
# Under contention: two CPU hogs (busy shell loops) share the cores while
# request/response rows of both implementations run.
hog_rows=(
  "actor lat 8|--op=actor --mode=lat --size=8 --iters=$lat_iters"
  "actor bw 64K|--op=actor --mode=bw --size=64K --iters=$(iters_for_bw 65536)"
)
hog_pids=()
stop_hogs() {
  ((${#hog_pids[@]} == 0)) && return 0
  kill "${hog_pids[@]}" 2>/dev/null || true
  wait "${hog_pids[@]}" 2>/dev/null || true
  hog_pids=()
}
trap stop_hogs EXIT
rounds=${BENCH_ROUNDS:-$((quick == 1 ? 1 : 3))}
echo "== host: rdmactor (soft fabric, $host_topology) vs caf-io (two processes on loopback), $rounds round(s)"
t_host=$SECONDS
for round in $(seq 1 "$rounds"); do
  for row in "${rows[@]}"; do
    label=${row%%|*}
    read -r -a args <<<"${row#*|}"
    run "$round" "rdmactor $label" "${args[@]}"
    run "$round" "caf-io $label" --baseline=caf-io "${args[@]}"
    # The medium (plain TCP between two processes) where it has the
    # pattern: ping-pong and pushes.
    case $label in send* | actor*) run "$round" "tcp $label" --baseline=tcp "${args[@]}" ;; esac
  done
  for row in "${w256_rows[@]}"; do
    label=${row%%|*}
    read -r -a args <<<"${row#*|}"
    RUN_IMPL=rdmactor-w256 run "$round" "rdmactor-w256 $label" "${args[@]}" --window=256
    RUN_IMPL=caf-io-w256 run "$round" "caf-io-w256 $label" --baseline=caf-io "${args[@]}" --window=256
    RUN_IMPL=tcp-w256 run "$round" "tcp-w256 $label" --baseline=tcp "${args[@]}" --window=256
  done
  run "$round" "rdmactor raw lat 8" --op=raw --mode=lat --size=8 --iters=$lat_iters
  run "$round" "rdmactor raw bw 64K" --op=raw --mode=bw --size=64K --iters="$(iters_for_bw 65536)"
  # Atomics (8 B; CAF io has no counterpart).
  for op in fetch_add cas; do
    run "$round" "rdmactor $op lat 8" --op=$op --mode=lat --size=8 --iters=$lat_iters
    run "$round" "rdmactor $op bw 8" --op=$op --mode=bw --size=8 --iters="$(iters_for_bw 8)"
  done
  # send lat with a user actor on each side (the driver pings, an actor
  # echoes) instead of the data handlers of the default rows.
  RUN_IMPL=rdmactor-actors run "$round" "rdmactor-actors send lat 8" --op=send --mode=lat --size=8 --iters=$lat_iters --actor-driver --actor-echo
  # completion-mode=busy (the default, adaptive, polls only while work is
  # outstanding and for poll-budget-us after it; busy never arms).
  RUN_IMPL=rdmactor-busy run "$round" "rdmactor-busy send lat 8" --op=send --mode=lat --size=8 --iters=$lat_iters --rdmactor.completion-mode=busy
  RUN_IMPL=rdmactor-busy run "$round" "rdmactor-busy send bw 64K" --op=send --mode=bw --size=64K --iters="$(iters_for_bw 65536)" --rdmactor.completion-mode=busy
  # Cores: 8 busy connections at once (--connections=8, a driver each;
  # their sum) against the one-connection send bw 8 B row.
  RUN_IMPL=rdmactor-c8 run "$round" "rdmactor-c8 send bw 8" --op=send --mode=bw --size=8 --iters="$(iters_for_bw 8)" --connections=8
  for _ in 1 2; do
    bash -c 'while :; do :; done' &
    hog_pids+=($!)
  done
  for row in "${hog_rows[@]}"; do
    label=${row%%|*}
    read -r -a args <<<"${row#*|}"
    RUN_IMPL=rdmactor-hogs run "$round" "rdmactor-hogs $label" "${args[@]}"
    RUN_IMPL=caf-io-hogs run "$round" "caf-io-hogs $label" --baseline=caf-io "${args[@]}"
  done
  stop_hogs
done

rm -f "$out_dir/.stderr"
echo "== host half took $((SECONDS - t_host)) s; load now: $(cut -d' ' -f1-3 /proc/loadavg); results: $host_json"

# awk's jget(LINE, KEY): the value of KEY in one JSON line as
# rdmactor-bench prints it (a string without its quotes, or a number).
awk_jget='
    function jget(s, k,   i, r) {
      i = index(s, "\"" k "\":")
      if (i == 0) return ""
      r = substr(s, i + length(k) + 3)
      if (substr(r, 1, 1) == "\"") { r = substr(r, 2); return substr(r, 1, index(r, "\"") - 1) }
      match(r, /^[^,}]*/)
      return substr(r, 1, RLENGTH)
    }'

# -- side-by-side table -----------------------------------------------------
# table FILE IMPL REF_IMPL TITLE [ONLY]: one row per (op, mode, size), the
# median over the rounds of each side; raw rows compare with the reference's
# send; bw rows add the CPU seconds per GB of both sides (ratio > 1: rdmactor
# spends less); bw rows of at most 4 KiB add the message rate.  ONLY=1:
# just the rows IMPL ran (the completion-mode tables); ONLY=2: the rows both
# ran.
table() {
  awk -v impl="$2" -v ref="$3" -v title="$4" -v only="${5:-0}" "$awk_jget"'
    function num(x) { return x != "" && x != "null" }
    function fmt(x) { return num(x) ? sprintf("%.2f", x) : "-" }
    function ratio(a, b, lower_better) {
      if (!num(a) || !num(b) || a + 0 == 0 || b + 0 == 0) return "-"
      return sprintf("%.2f", lower_better ? b / a : a / b)
    }
    # median of the values stored under vals[id, 1..cnt[id]]
    function median(id,   m, i, j, t, v) {
      m = cnt[id] + 0
      if (m == 0) return ""
      for (i = 1; i <= m; i++) v[i] = vals[id, i] + 0
      for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
    }
    function add(id, x) { if (num(x)) vals[id, ++cnt[id]] = x }
    {
      who = jget($0, "impl"); op = jget($0, "op"); mode = jget($0, "mode"); size = jget($0, "size")
      if (who != impl && who != ref) next
      key = op SUBSEP mode SUBSEP size
      if (who == ref && op == "raw") next
      if (!(key in seen)) { seen[key] = 1; order[++n] = key }
      side = who == impl ? "a" : "b"
      runs[side, key]++
      e = jget($0, "error")
      if (e != "") { fails[side, key]++; why[side, key] = e }
      add(side SUBSEP key SUBSEP "p50", jget($0, "lat_us_p50"))
      add(side SUBSEP key SUBSEP "p99", jget($0, "lat_us_p99"))
      add(side SUBSEP key SUBSEP "bw", jget($0, "bw_MBps"))
      add(side SUBSEP key SUBSEP "ops", jget($0, "ops_per_s"))
      add(side SUBSEP key SUBSEP "cpu", jget($0, "cpu_s_per_GB"))
    }
    function note(side, key, name) {
      if (!((side, key) in runs)) return "  " name ": no result"
      if ((side, key) in fails) return "  " name ": " fails[side, key] "/" runs[side, key] " failed (" why[side, key] ")"
      return ""
    }
    END {
      printf "\n%s\n(median of the rounds; ratio > 1: rdmactor ahead)\n", title
      printf "%-6s %-4s %9s  %-8s %14s %14s %7s\n", "op", "mode", "bytes", "metric", impl, ref, "ratio"
      for (i = 1; i <= n; i++) {
        key = order[i]
        if (only && !(("a", key) in runs)) continue
        if (only == 2 && !(("b", key) in runs)) continue
        split(key, k, SUBSEP)
        rk = (k[1] == "raw" ? "send" : k[1]) SUBSEP k[2] SUBSEP k[3]
        atomic = k[1] == "fetch_add" || k[1] == "cas"
        msg = note("a", key, impl) (atomic && ref == "caf-io" ? "" : note("b", rk, ref))
        if (atomic && k[2] == "bw") {
          # 8-byte operations: operations/s says more than MB/s.
          a = median("a" SUBSEP key SUBSEP "ops"); b = median("b" SUBSEP rk SUBSEP "ops")
          printf "%-6s %-4s %9s  %-8s %14s %14s %7s%s\n", k[1], k[2], k[3], "ops/s", fmt(a), fmt(b), ratio(a, b, 0), msg
        } else if (k[2] == "lat") {
          a = median("a" SUBSEP key SUBSEP "p50"); b = median("b" SUBSEP rk SUBSEP "p50")
          printf "%-6s %-4s %9s  %-8s %14s %14s %7s%s\n", k[1], k[2], k[3], "p50 us", fmt(a), fmt(b), ratio(a, b, 1), msg
          a = median("a" SUBSEP key SUBSEP "p99"); b = median("b" SUBSEP rk SUBSEP "p99")
          printf "%-6s %-4s %9s  %-8s %14s %14s %7s\n", "", "", "", "p99 us", fmt(a), fmt(b), ratio(a, b, 1)
        } else {
          a = median("a" SUBSEP key SUBSEP "bw"); b = median("b" SUBSEP rk SUBSEP "bw")
          printf "%-6s %-4s %9s  %-8s %14s %14s %7s%s\n", k[1], k[2], k[3], "MB/s", fmt(a), fmt(b), ratio(a, b, 0), msg
          # Small messages: the message rate says more than MB/s.
          if (k[3] + 0 <= 4096) {
            a = median("a" SUBSEP key SUBSEP "ops"); b = median("b" SUBSEP rk SUBSEP "ops")
            printf "%-6s %-4s %9s  %-8s %14s %14s %7s\n", "", "", "", "msgs/s", fmt(a), fmt(b), ratio(a, b, 0)
          }
          # CPU seconds per GB of both sides (lower is better).
          a = median("a" SUBSEP key SUBSEP "cpu"); b = median("b" SUBSEP rk SUBSEP "cpu")
          if (num(a) || num(b))
            printf "%-6s %-4s %9s  %-8s %14s %14s %7s\n", "", "", "", "CPU s/GB", fmt(a), fmt(b), ratio(a, b, 1)
        }
      }
    }' "$1"
}
table "$host_json" rdmactor caf-io \
  "Host: rdmactor soft fabric vs CAF io (BASP over TCP loopback); raw rows vs caf-io send; fetch_add and cas: rdmactor alone"
table "$host_json" rdmactor tcp \
  "Host: rdmactor soft fabric vs the medium (plain TCP between two processes, one writev per message; --baseline=tcp)" 2
table "$host_json" rdmactor-w256 caf-io-w256 \
  "Host: message rate with --window=256, rdmactor vs CAF io" 1
table "$host_json" rdmactor-w256 tcp-w256 \
  "Host: message rate with --window=256, rdmactor vs the medium (--baseline=tcp)" 2
table "$host_json" rdmactor-actors caf-io \
  "Host: rdmactor send lat with a user actor on each side (--actor-driver --actor-echo) vs CAF io" 1
table "$host_json" rdmactor-busy caf-io \
  "Host: rdmactor soft fabric with completion-mode=busy vs CAF io" 1
table "$host_json" rdmactor-hogs caf-io-hogs \
  "Host: request/response to a remote actor with two CPU hogs running, rdmactor vs CAF io" 1
table "$host_json" rdmactor-c8 rdmactor \
  "Host: 8 busy connections at once (--connections=8, their sum) vs one connection, $(nproc) cores" 1

# -- scale ------------------------------------------------------------------
# Two processes on loopback: a server (rdmactor-bench --listen) and a client
# that opens N connections to it (--op=connect), holds them 12 s, sends 8
# bytes on each and waits for every echo.  The client's JSON has its own
# threads, RSS, registered bytes and fds while holding (and before it
# connected) and its CPU while holding; the server prints the same about
# itself whenever they change, and its CPU once N connections stayed for
# 1 s: its first lines for N connections (idle, while held) are joined to
# the client's row.  Then send lat 8 B and send bw 64 KiB of one connection,
# alone and among 1000 idle ones (--idle-peers), interleaved for the
# rounds (BENCH_ROUNDS), medians in the table.  BENCH_SCALE=0 skips this part.
scale_json="$out_dir/$stamp-scale.json"
if [[ ${BENCH_SCALE:-1} == 1 ]]; then
  echo "== scale: rdmactor soft fabric, client and server processes on loopback"
  : >"$scale_json"
  # Below the kernel's ephemeral ports (32768-60999), which connections of
  # other processes may hold.
  port=$((10000 + RANDOM % 10000))
  "$bench" --listen=127.0.0.1:$port --rdmactor.log-level=error "${extra[@]}" \
    >"$out_dir/.server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    grep -q 'serving on port' "$out_dir/.server.log" && break
    sleep 0.1
  done
  peer_counts=(1 100 1000)
  # The largest row: 20,000 peers, or what the hard open-files limit leaves
  # (each process holds a socket per connection; BENCH_SCALE_MAX overrides).
  hard_fds=$(ulimit -Hn)
  [[ $hard_fds == unlimited ]] && hard_fds=1048576
  big=${BENCH_SCALE_MAX:-$((hard_fds - 1000 < 20000 ? hard_fds - 1000 : 20000))}
  ((big > 1000)) && peer_counts+=("$big")
  ((big < 20000)) && echo "   the largest row has $big peers: the hard open-files limit is $hard_fds (20,000 needs 21,000; see README, Many peers)"
  [[ $quick == 1 ]] && peer_counts=(1 100)
  for n in "${peer_counts[@]}"; do
    t0=$SECONDS
    # Rows past 1000 peers connect from 16 threads at once.
    threads=1
    ((n > 1000)) && threads=16
    line=$("$bench" --json --rdmactor.log-level=error "${extra[@]}" \
      --connect=127.0.0.1:$port --op=connect --peers="$n" --hold-ms=12000 \
      --connect-threads=$threads \
      2>"$out_dir/.stderr" | grep '^{' || true)
    # The server's first line with N connections was taken while the client
    # held them idle; later ones include the echo (a receive slot and the
    # socket buffer touched per connection, ~11 KiB more each).
    srv=$(grep "serving $n connections:" "$out_dir/.server.log" | head -1 |
      sed -E 's/.*threads ([0-9]+), rss_kb ([0-9]+), registered_bytes ([0-9]+), fds ([0-9]+).*/"server_threads":\1,"server_rss_kb":\2,"server_registered_bytes":\3,"server_fds":\4/')
    [[ "$srv" == \"server_* ]] || srv='"server_threads":null'
    # Its CPU while the N connections stayed idle: the longest window it
    # printed (1 s, then every 5 s after the last one came) that ended
    # before the client's echo, 12 s later (keepalive-ms is 5000: two
    # rounds of Pings fall in it).
    cpu=$(grep "^rdmactor-bench: $n connections unchanged for" "$out_dir/.server.log" |
      sed -E 's/.*unchanged for ([0-9.]+) s: cpu ([0-9.]+) %.*/\1 \2/' |
      awk '$1 < 11.5 { c = $2 } END { if (c != "") print "\"server_idle_cpu_percent\":" c }')
    [[ "$cpu" == \"server_* ]] && srv="$srv,$cpu"
    if [[ -n "$line" ]]; then
      echo "${line%\}},$srv}" >>"$scale_json"
      printf '   connect %-5s peers %3d s\n' "$n" $((SECONDS - t0))
    else
      echo "   connect $n peers: failed ($(grep -v '^\s*$' "$out_dir/.stderr" | tail -1))"
    fi
    # The next runs start once the server has closed these (closing
    # thousands keeps it busy for seconds), at most 120 s later.
    for _ in $(seq 600); do
      [[ $(grep -o 'serving [0-9]* connections' "$out_dir/.server.log" | tail -1) == "serving 0 connections" ]] && break
      sleep 0.2
    done
  done
  # Alone and among idle ones, interleaved for $rounds rounds: the table
  # shows each row's median.  The 64 KiB row runs 100,000 messages (6.1
  # GiB, about two seconds): shorter runs land in one of two modes (about
  # 2.2 or 3.5 GB/s on the 2-core machine, idle peers or not), and one
  # such run each swung the comparison by 15-25 % either way.
  for round in $(seq "$rounds"); do
    for idle in 0 1000; do
      [[ $quick == 1 && $idle == 1000 ]] && idle=100
      for args in "--op=send --mode=lat --size=8 --iters=$lat_iters" \
        "--op=send --mode=bw --size=64K --iters=$((quick == 1 ? 4000 : 100000))"; do
        read -r -a a <<<"$args"
        t0=$SECONDS
        if "$bench" --json --rdmactor.log-level=error "${extra[@]}" \
          --connect=127.0.0.1:$port --idle-peers="$idle" "${a[@]}" \
          2>"$out_dir/.stderr" | grep '^{' |
          sed "s/\"impl\":\"rdmactor\"/\"impl\":\"rdmactor-idle$idle\"/" >>"$scale_json"; then
          printf '   round %s %-28s %3d s\n' "$round" "${a[0]#--op=} ${a[1]#--mode=} ${a[2]#--size=}, $idle idle:" $((SECONDS - t0))
        else
          echo "   round $round ${a[*]} with $idle idle peers: failed ($(grep -v '^\s*$' "$out_dir/.stderr" | tail -1))"
        fi
      done
    done
  done
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  rm -f "$out_dir/.stderr"
  awk "$awk_jget"'
    function mib(x) { return x == "" || x == "null" ? "-" : sprintf("%.1f", x / 1048576) }
    function per(a, b, n, d) { return a == "" || a == "null" || n == 0 ? "-" : sprintf("%.1f", (a - b) / n / d) }
    jget($0, "op") == "connect" {
      if (!hdr++) {
        printf "\nScale: N connections from one process to another (soft, loopback)\n"
        printf "%6s %4s %9s %9s %9s | %-33s | %-33s\n", "peers", "thr", "total s", "p50 ms", "p99 ms", "client: threads rss_MiB reg_MiB fds", "server: threads rss_MiB reg_MiB fds"
      }
      n = jget($0, "connected") + 0
      printf "%6s %4s %9.3f %9.3f %9.3f | %7s %7s %9s %7s | %7s %7s %9s %7s%s\n", jget($0, "peers"), jget($0, "connect_threads") == "" ? 1 : jget($0, "connect_threads"), jget($0, "connect_s_total"), jget($0, "connect_ms_p50"), jget($0, "connect_ms_p99"), jget($0, "threads"), mib(jget($0, "rss_kb") * 1024), mib(jget($0, "registered_bytes")), jget($0, "fds"), jget($0, "server_threads"), mib(jget($0, "server_rss_kb") * 1024), mib(jget($0, "server_registered_bytes")), jget($0, "server_fds"), jget($0, "status") == "ok" ? "" : "  " jget($0, "error")
      if (n > 1) printf "%6s %34s | per peer: rss %s KiB, registered %s KiB, fds %s\n", "", "", per(jget($0, "rss_kb"), jget($0, "rss_kb_before"), n, 1), per(jget($0, "registered_bytes"), jget($0, "registered_bytes_before"), n, 1024), per(jget($0, "fds"), jget($0, "fds_before"), n, 1)
      printf "%6s %34s | idle CPU while held: client %s %%, server %s %% of a core\n", "", "", jget($0, "hold_cpu_percent") == "" ? "-" : jget($0, "hold_cpu_percent"), jget($0, "server_idle_cpu_percent") == "" ? "-" : jget($0, "server_idle_cpu_percent")
    }
    jget($0, "op") == "send" {
      imp = jget($0, "impl"); sub(/rdmactor-idle/, "", imp)
      if (jget($0, "mode") == "lat") lat[imp, ++nlat[imp]] = jget($0, "lat_us_p50")
      else bw[imp, ++nbw[imp]] = jget($0, "bw_MBps")
      idles[imp] = 1
    }
    # The median of the n values v[key, 1..n] ("-" when none).
    function median(v, key, n,   i, j, t, a) {
      if (n == 0) return "-"
      for (i = 1; i <= n; i++) a[i] = v[key, i] + 0
      for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function row(i) { printf "%12s %16s %16s   (%d / %d runs)\n", i, median(lat, i, nlat[i]), median(bw, i, nbw[i]), nlat[i], nbw[i] }
    END {
      printf "\nOne active connection, alone and among idle ones (two processes; medians)\n"
      printf "%12s %16s %16s\n", "idle peers", "send lat 8 B us", "send bw 64K MB/s"
      if ("0" in idles) row("0")
      for (i in idles) if (i != "0") row(i)
    }' "$scale_json"
fi

# -- VM half ----------------------------------------------------------------
if [[ $want_vm == 1 ]]; then
  if [[ ! -x scripts/rxe-vm.sh ]]; then
    echo "== VM half skipped: scripts/rxe-vm.sh is missing"
  elif [[ ! -f transport/verbs/CMakeLists.txt && "${BENCH_VM_FORCE:-0}" != 1 ]]; then
    echo "== VM half skipped: the verbs fabric is not built yet (transport/verbs/)"
  else
    echo "== VM half: rdmactor verbs vs perftest on rxe0, ${BENCH_VM_ROUNDS:-$((quick == 1 ? 1 : 3))} round(s) (software-emulated CPU: only ratios mean anything)"
    t_vm=$SECONDS
    vm_args=(--vm-inner)
    [[ $quick == 1 ]] && vm_args+=(--quick)
    # The TSC as the VM's clock: under the emulator the kernel falls back to
    # the HPET, where every clock reading is a system call (CAF reads the
    # clock on each actor activation); real hosts read the TSC in user space.
    if RXE_VM_APPEND="${BENCH_VM_APPEND-tsc=reliable clocksource=tsc}" \
      scripts/rxe-vm.sh env BENCH_BUILD_DIR="$build" BENCH_ARGS="${BENCH_ARGS:-}" \
      BENCH_VM_ROUNDS="${BENCH_VM_ROUNDS:-}" \
      bash "$root/scripts/bench.sh" "${vm_args[@]}" >"$out_dir/.vm.log" 2>&1; then
      :
    else
      echo "   the VM run failed (status $?); its log: $out_dir/.vm.log"
    fi
    grep '^RESULT ' "$out_dir/.vm.log" | sed 's/^RESULT //' >"$vm_json" || true
    echo "== VM half took $((SECONDS - t_vm)) s; results: $vm_json"
    vm_clock=$(sed -n 's/.*"impl":"vm-info","clocksource":"\([^"]*\)".*/\1/p' "$vm_json" | head -1)
    echo "   VM clock source: ${vm_clock:-unknown}"
    table "$vm_json" rdmactor perftest "VM (Soft-RoCE rxe0): rdmactor verbs (completion-mode=adaptive, the default) vs perftest"
    table "$vm_json" rdmactor-actors perftest "VM: with user actors (send lat: --actor-driver --actor-echo; read lat: --actor-driver) vs perftest" 1
    table "$vm_json" rdmactor-event perftest "VM: completion-mode=event vs perftest" 1
    table "$vm_json" rdmactor-busy perftest "VM: completion-mode=busy vs perftest" 1
    # The scale row (rdmactor-scale): connections over rxe from one process
    # to another in the VM.
    grep '"impl":"rdmactor-scale"' "$vm_json" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if "error" in r:
        print("VM scale: %s connections failed: %s" % (r.get("peers"), r["error"]))
        continue
    print("VM scale (rxe, two processes): %d of %d connected in %.3f s, "
          "connect p50 %.1f ms, p99 %.1f ms; client threads %d, "
          "RSS %d KiB (%d before), registered %d B, fds %d"
          % (r["connected"], r["peers"], r["connect_s_total"],
             r["connect_ms_p50"], r["connect_ms_p99"], r["threads"],
             r["rss_kb"], r["rss_kb_before"], r["registered_bytes"], r["fds"]))
' || true
  fi
fi

# -- plot -------------------------------------------------------------------
png="$out_dir/$stamp.png"
files=("$host_json")
[[ -s "$vm_json" ]] && files+=("$vm_json")
if command -v gnuplot >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  # One data file per (impl, fabric, op, mode): size and the median of the
  # rounds (p50 or MB/s); xtics.gp labels the sizes that occur.
  cat "${files[@]}" | awk -v dir="$tmp" "$awk_jget"'
    function label(x) {
      if (x >= 1048576 && x % 1048576 == 0) return (x / 1048576) "M"
      if (x >= 1024 && x % 1024 == 0) return (x / 1024) "K"
      return x
    }
    {
      mode = jget($0, "mode")
      v = mode == "lat" ? jget($0, "lat_us_p50") : jget($0, "bw_MBps")
      if (v == "" || v == "null") next
      id = mode "-" jget($0, "impl") "-" jget($0, "fabric") "-" jget($0, "op") SUBSEP jget($0, "size")
      vals[id, ++cnt[id]] = v + 0
      sizes[jget($0, "size")] = 1
    }
    END {
      for (id in cnt) {
        m = cnt[id]
        for (i = 1; i <= m; i++) w[i] = vals[id, i]
        for (i = 2; i <= m; i++) for (j = i; j > 1 && w[j - 1] > w[j]; j--) { t = w[j]; w[j] = w[j - 1]; w[j - 1] = t }
        med = m % 2 ? w[(m + 1) / 2] : (w[m / 2] + w[m / 2 + 1]) / 2
        split(id, part, SUBSEP)
        print part[2], med >> (dir "/" part[1] ".dat")
      }
      sep = "set xtics ("
      for (x in sizes) { printf "%s\"%s\" %s", sep, label(x), x > (dir "/xtics.gp"); sep = ", " }
      print ")" > (dir "/xtics.gp")
    }'
  # Distinct colours and point types: series share a panel.
  colours=(e41a1c 377eb8 4daf4a 984ea3 ff7f00 a65628 f781bf 999999 000000 66c2a5 b8860b 1e90ff)
  plot_cmds() { # MODE
    local sep="plot " i=0 f t
    for f in "$tmp"/"$1"-*.dat; do
      [[ -e "$f" ]] || continue
      sort -n -o "$f" "$f"
      t=$(basename "$f" .dat)
      printf '%s"%s" using 1:2 with linespoints lw 2 pt %d lc rgb "#%s" title "%s"' \
        "$sep" "$f" $((i % 13 + 1)) "${colours[i % ${#colours[@]}]}" "${t#"$1"-}"
      sep=", "
      i=$((i + 1))
    done
    echo
  }
  {
    echo 'set terminal pngcairo size 1200,500 noenhanced'
    echo "set output '$png'"
    echo 'set multiplot layout 1,2 title "rdmactor-bench '"$stamp"'"'
    echo 'set logscale x 2; set grid; set key top left; set xlabel "bytes"; set offsets graph 0.05, graph 0.05, 0, 0'
    cat "$tmp/xtics.gp"
    echo 'set title "latency p50 (us, lower is better)"; set logscale y'
    plot_cmds lat
    echo 'set title "bandwidth (MB/s, higher is better)"; set logscale y'
    plot_cmds bw
    echo 'unset multiplot'
  } >"$tmp/plot.gp"
  if gnuplot "$tmp/plot.gp" 2>"$tmp/err"; then
    echo "== plot (gnuplot): $png"
  else
    echo "== plot: gnuplot failed: $(head -1 "$tmp/err")"
  fi
  rm -rf "$tmp"
elif command -v python3 >/dev/null 2>&1 && python3 -c 'import matplotlib' 2>/dev/null; then
  python3 - "$png" "${files[@]}" <<'PY'
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
series = {}
for path in sys.argv[2:]:
    for line in open(path):
        r = json.loads(line)
        v = r.get("lat_us_p50") if r.get("mode") == "lat" else r.get("bw_MBps")
        if v is None:
            continue
        key = (r["mode"], "%s-%s-%s" % (r["impl"], r.get("fabric", ""), r["op"]))
        series.setdefault(key, []).append((r["size"], v))
fig, axes = plt.subplots(1, 2, figsize=(12, 5))
for ax, mode, title in ((axes[0], "lat", "latency p50 (us, lower is better)"),
                        (axes[1], "bw", "bandwidth (MB/s, higher is better)")):
    for (m, name), pts in sorted(series.items()):
        if m != mode:
            continue
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2); ax.set_yscale("log"); ax.grid(True)
    ax.set_xlabel("bytes"); ax.set_title(title); ax.legend(fontsize=8)
fig.savefig(sys.argv[1], dpi=100, bbox_inches="tight")
PY
  echo "== plot (python3 + matplotlib): $png"
else
  echo "== plot skipped: neither gnuplot nor python3 with matplotlib is installed (apt-get install gnuplot-nox)"
fi
