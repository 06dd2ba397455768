#!/usr/bin/env bash
# Compares two commits on the host rows of scripts/bench.sh (rdmactor on
# the soft fabric, two nodes in one process), interleaved, so that load
# from other processes hits both alike.
#
#   scripts/bench_ab.sh OLD [NEW]       NEW defaults to HEAD
#   scripts/bench_ab.sh --quick OLD     short runs (a smoke test of the script)
#   scripts/bench_ab.sh --vm OLD [NEW]  the VM rows as well
#   scripts/bench_ab.sh --vm-only OLD [NEW]
#
# Clones this repository at OLD and NEW into $BENCH_AB_DIR (default
# /tmp/rdmactor-ab: a fresh clone each, as the guide asks), builds each
# one's rdmactor-bench (Release, BENCH_JOBS jobs, default nproc), then runs
# every row for OLD and then NEW, BENCH_ROUNDS times (default 3; --quick:
# 1).  Prints, per row, the median of each side, NEW/OLD (> 1: NEW is
# ahead; latency: OLD/NEW) and each side's spread (max/min of its rounds):
# a ratio inside the spreads is no change.  Raw JSON lines go to
# $BENCH_AB_DIR/ab.json.  Needs both commits to have the rows' options
# (rdmactor-bench --op, --mode, --size(s), --iters, --json).
#
# --vm: then bench.sh's VM rows (rdmactor on the verbs fabric over rxe0
# inside scripts/rxe-vm.sh, every completion mode; scripts/bench_rows.sh)
# for OLD and NEW, interleaved in one boot of the VM, BENCH_VM_ROUNDS
# rounds (default: BENCH_ROUNDS); JSON in $BENCH_AB_DIR/ab-vm.json.  The
# emulated CPU makes single VM runs swing by a third: use 5 rounds or more.
# --vm-only: the VM rows alone.  BENCH_AB_ROWS: a regular expression (bash
# =~) the rows' labels must match, e.g. 'lat 8 \(event\)' (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

quick=0
host_rows=1
vm_rows_too=0
while [[ ${1:-} == --* ]]; do
  case $1 in
    --quick) quick=1 ;;
    --vm) vm_rows_too=1 ;;
    --vm-only)
      vm_rows_too=1
      host_rows=0
      ;;
    --vm-inner)
      # Inside the VM: OLD_BIN NEW_BIN ROUNDS QUICK; prints RESULT lines.
      quick=$5
      source "$root/scripts/bench_rows.sh"
      for round in $(seq 1 "$4"); do
        while IFS='|' read -r label impl args; do
          [[ $label =~ ${BENCH_AB_ROWS:-.} ]] || continue
          read -r -a row_args <<<"$args"
          for side in old new; do
            bin=$2
            [[ $side == new ]] && bin=$3
            res=$("$bin" --fabric=verbs --device=rxe0 --host="${RDMACTOR_TEST_HOST:-198.18.0.1}" \
              --rdmactor.log-level=error --json "${row_args[@]}" </dev/null 2>/tmp/ab.err | grep '^{' || true)
            if [[ -n $res ]]; then
              res=${res/\"impl\":\"rdmactor\"/\"impl\":\"$impl\"}
              echo "RESULT {\"side\":\"$side\",\"round\":$round,${res#\{}"
            else
              echo "round $round $side $label: failed ($(tail -1 /tmp/ab.err))" >&2
            fi
          done
          echo "round $round $label" >&2
        done <<<"$(vm_row_runs)" # no /dev/fd in the VM
      done
      exit 0
      ;;
    *) break ;;
  esac
  shift
done
if [[ $# -lt 1 || ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 2
fi
old=$(git rev-parse --short "$1")
new=$(git rev-parse --short "${2:-HEAD}")
dir=${BENCH_AB_DIR:-/tmp/rdmactor-ab}
rounds=${BENCH_ROUNDS:-$((quick == 1 ? 1 : 3))}
source "$root/scripts/bench_rows.sh"

build_at() { # COMMIT -> path of its rdmactor-bench
  local src="$dir/$1"
  if [[ ! -d $src ]]; then
    git clone -q "$root" "$src"
    git -C "$src" checkout -q "$1"
  fi
  cmake -S "$src" -B "$src/build-release" -DCMAKE_BUILD_TYPE=Release \
    -DRDMACTOR_BUILD_TESTS=OFF >/dev/null
  cmake --build "$src/build-release" -j"${BENCH_JOBS:-$(nproc)}" \
    --target rdmactor-bench | grep -E '(error|Built target rdmactor-bench)' >&2 || true
  [[ -x $src/build-release/apps/bench/rdmactor-bench ]] || {
    echo "bench_ab.sh: rdmactor-bench of $1 was not built" >&2
    exit 1
  }
  echo "$src/build-release/apps/bench/rdmactor-bench"
}

mkdir -p "$dir"
echo "== build $old and $new in $dir"
bin_old=$(build_at "$old")
bin_new=$(build_at "$new")
json="$dir/ab.json"
: >"$json"
echo "== $(nproc) cores, load before the runs: $(cut -d' ' -f1-3 /proc/loadavg), $rounds round(s)"
for round in $(seq 1 $((host_rows == 1 ? rounds : 0))); do
  for row in "${rows[@]}"; do
    label=${row%%|*}
    [[ $label =~ ${BENCH_AB_ROWS:-.} ]] || continue
    read -r -a args <<<"${row#*|}"
    for side in old new; do
      bin=$bin_old
      [[ $side == new ]] && bin=$bin_new
      if ! "$bin" --json --rdmactor.log-level=error "${args[@]}" 2>"$dir/.stderr" |
        sed "s/^{/{\"side\":\"$side\",\"round\":$round,/" >>"$json"; then
        echo "   round $round $side $label: failed ($(tail -1 "$dir/.stderr"))"
      fi
    done
    echo "   round $round $label"
  done
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
summary() { # JSON TITLE: medians, ratios and spreads per row
  echo "== $2"
  python3 - "$1" "$old" "$new" <<'EOF'
import json, statistics, sys
path, old, new = sys.argv[1:]
runs = {}
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    lat = r.get("lat_us_p50") is not None
    key = (r.get("impl", "rdmactor"), r["op"], r["mode"], r["size"])
    value = r["lat_us_p50"] if lat else r.get("bw_MBps")
    if value is None:
        continue
    runs.setdefault(key, {"lat": lat, "old": [], "new": []})[r["side"]].append(value)
print(f"{'row':<18} {old + ' (median)':>18} {new + ' (median)':>18} {'new/old':>8} {'spread old':>10} {'spread new':>10}")
for (impl, op, mode, size), v in runs.items():
    if not v["old"] or not v["new"]:
        continue
    a, b = statistics.median(v["old"]), statistics.median(v["new"])
    unit = "us p50" if v["lat"] else "MB/s"
    ratio = (a / b) if v["lat"] else (b / a)
    spread = lambda xs: max(xs) / min(xs) if min(xs) > 0 else float("nan")
    label = op + " " + mode + " " + str(size)
    if impl != "rdmactor":
        label += " " + impl.replace("rdmactor-", "")
    print(f"{label:<18} {a:>11.2f} {unit:<6} {b:>11.2f} {unit:<6} {ratio:>8.2f} {spread(v['old']):>10.2f} {spread(v['new']):>10.2f}")
EOF
}
[[ $host_rows == 1 ]] && summary "$json" "host rows (soft fabric)"
if [[ $vm_rows_too == 1 ]]; then
  vm_json="$dir/ab-vm.json"
  vm_rounds=${BENCH_VM_ROUNDS:-$rounds}
  echo "== VM rows (verbs on rxe0, scripts/rxe-vm.sh), $vm_rounds round(s); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  t_vm=$SECONDS
  RXE_VM_APPEND="${BENCH_VM_APPEND-tsc=reliable clocksource=tsc}" \
    scripts/rxe-vm.sh bash "$root/scripts/bench_ab.sh" --vm-inner "$bin_old" "$bin_new" \
    "$vm_rounds" "$quick" >"$dir/.vm.log" 2>&1 || echo "   the VM run failed (status $?); its log: $dir/.vm.log"
  grep '^RESULT ' "$dir/.vm.log" | sed 's/^RESULT //' >"$vm_json" || true
  echo "== VM rows took $((SECONDS - t_vm)) s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  summary "$vm_json" "VM rows (verbs on rxe0, emulated CPU)"
fi
