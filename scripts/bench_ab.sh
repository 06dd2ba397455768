#!/usr/bin/env bash
# Compares two commits on the host rows of scripts/bench.sh (rdmactor on
# the soft fabric, two nodes in one process), interleaved, so that load
# from other processes hits both alike.
#
#   scripts/bench_ab.sh OLD [NEW]     NEW defaults to HEAD
#   scripts/bench_ab.sh --quick OLD   short runs (a smoke test of the script)
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
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

quick=0
if [[ ${1:-} == --quick ]]; then
  quick=1
  shift
fi
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
for round in $(seq 1 "$rounds"); do
  for row in "${rows[@]}"; do
    label=${row%%|*}
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
python3 - "$json" "$old" "$new" <<'EOF'
import json, statistics, sys
path, old, new = sys.argv[1:]
runs = {}
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    lat = r.get("lat_us_p50") is not None
    key = (r["op"], r["mode"], r["size"])
    value = r["lat_us_p50"] if lat else r.get("bw_MBps")
    if value is None:
        continue
    runs.setdefault(key, {"lat": lat, "old": [], "new": []})[r["side"]].append(value)
print(f"{'row':<18} {old + ' (median)':>18} {new + ' (median)':>18} {'new/old':>8} {'spread old':>10} {'spread new':>10}")
for (op, mode, size), v in runs.items():
    if not v["old"] or not v["new"]:
        continue
    a, b = statistics.median(v["old"]), statistics.median(v["new"])
    unit = "us p50" if v["lat"] else "MB/s"
    ratio = (a / b) if v["lat"] else (b / a)
    spread = lambda xs: max(xs) / min(xs) if min(xs) > 0 else float("nan")
    print(f"{op + ' ' + mode + ' ' + str(size):<18} {a:>11.2f} {unit:<6} {b:>11.2f} {unit:<6} {ratio:>8.2f} {spread(v['old']):>10.2f} {spread(v['new']):>10.2f}")
EOF
