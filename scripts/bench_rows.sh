# Sourced by scripts/bench.sh and scripts/bench_ab.sh: the iteration
# counts and the host rows of rdmactor-bench.  Expects `quick` (1: short
# runs) to be set.

lat_iters=5000
if [[ $quick == 1 ]]; then
  lat_iters=300
fi
iters_for_bw() { # SIZE -> iterations (256 MiB, 200..20000; quick: /10)
  local n=$((268435456 / $1))
  ((n < 200)) && n=200
  ((n > 20000)) && n=20000
  [[ $quick == 1 ]] && n=$((n / 10 > 50 ? n / 10 : 50))
  echo "$n"
}

# Each row: LABEL and its arguments (without the implementation).
rows=(
  "send lat 8,4K|--op=send --mode=lat --sizes=8,4K --iters=$lat_iters"
  "send bw 8|--op=send --mode=bw --size=8 --iters=$(iters_for_bw 8)"
  "send bw 64|--op=send --mode=bw --size=64 --iters=$(iters_for_bw 64)"
  "send bw 512|--op=send --mode=bw --size=512 --iters=$(iters_for_bw 512)"
  "send bw 4K|--op=send --mode=bw --size=4K --iters=$(iters_for_bw 4096)"
  "send bw 64K|--op=send --mode=bw --size=64K --iters=$(iters_for_bw 65536)"
  "send bw 1M|--op=send --mode=bw --size=1M --iters=$(iters_for_bw 1048576)"
  "write bw 64K|--op=write --mode=bw --size=64K --iters=$(iters_for_bw 65536)"
  "write bw 1M|--op=write --mode=bw --size=1M --iters=$(iters_for_bw 1048576)"
  "read bw 64K|--op=read --mode=bw --size=64K --iters=$(iters_for_bw 65536)"
  "read bw 1M|--op=read --mode=bw --size=1M --iters=$(iters_for_bw 1048576)"
  "actor lat 8|--op=actor --mode=lat --size=8 --iters=$lat_iters"
  "actor bw 8|--op=actor --mode=bw --size=8 --iters=$(iters_for_bw 8)"
  "actor bw 64K|--op=actor --mode=bw --size=64K --iters=$(iters_for_bw 65536)"
)
