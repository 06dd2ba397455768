# Sourced by scripts/bench.sh and scripts/bench_ab.sh: the iteration
# counts and the host rows of rdmactor-bench.  Expects `quick` (1: short
# runs) to be set.

lat_iters=5000
if [[ $quick == 1 ]]; then
  lat_iters=300
fi
# Small messages run 100,000 times: at rdmactor's message rates 20,000
# took 15-40 ms, and such runs spread 1.5-2.5x from round to round.
iters_for_bw() { # SIZE -> iterations (256 MiB, 200..100000; quick: /10)
  local n=$((268435456 / $1))
  ((n < 200)) && n=200
  ((n > 100000)) && n=100000
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

# The VM rows (verbs on rxe0 inside scripts/rxe-vm.sh): rdmactor's side of
# bench.sh's VM half, also what `bench_ab.sh --vm` compares.  Each row:
# LABEL|IMPL|MODES|ARGUMENTS.  MODES: the completion modes it runs in;
# "default" runs without the option and is labelled IMPL, the others with
# --rdmactor.completion-mode=M and labelled IMPL-M.  perftest's rows in
# bench.sh use the same sizes and counts.
vm_lat_iters=$((quick == 1 ? 200 : 1000))
vm_bw_iters=$((quick == 1 ? 200 : 2000))
vm_rows=(
  "send lat 8|rdmactor|default event busy|--op=send --mode=lat --size=8 --iters=$vm_lat_iters"
  "write bw 64K|rdmactor|default event busy|--op=write --mode=bw --size=65536 --iters=$vm_bw_iters"
  "send bw 8|rdmactor|default|--op=send --mode=bw --size=8 --iters=$vm_bw_iters"
  "read lat 8|rdmactor|default event busy|--op=read --mode=lat --size=8 --iters=$vm_lat_iters"
  "actors send lat 8|rdmactor-actors|default|--op=send --mode=lat --size=8 --iters=$vm_lat_iters --actor-driver --actor-echo"
  "actors read lat 8|rdmactor-actors|default|--op=read --mode=lat --size=8 --iters=$vm_lat_iters --actor-driver"
  "fetch_add lat 8|rdmactor|default|--op=fetch_add --mode=lat --size=8 --iters=$vm_lat_iters"
  "fetch_add bw 8|rdmactor|default|--op=fetch_add --mode=bw --size=8 --iters=$vm_bw_iters"
  "cas lat 8|rdmactor|default|--op=cas --mode=lat --size=8 --iters=$vm_lat_iters"
  "cas bw 8|rdmactor|default|--op=cas --mode=bw --size=8 --iters=$vm_bw_iters"
)

# vm_row_runs: one line per (row, mode) of vm_rows, "LABEL|IMPL|ARGUMENTS"
# with the mode's option and label applied.
vm_row_runs() {
  local row label impl modes args mode
  for row in "${vm_rows[@]}"; do
    IFS='|' read -r label impl modes args <<<"$row"
    for mode in $modes; do
      if [[ $mode == default ]]; then
        echo "$label|$impl|$args"
      else
        echo "$label ($mode)|$impl-$mode|$args --rdmactor.completion-mode=$mode"
      fi
    done
  done
}
