#!/usr/bin/env bash
# Builds every libFuzzer target with clang into build-fuzz/ and runs each for
# SECONDS (default 60).  Fails on any crash, leak, timeout, out-of-memory or
# sanitizer report (AddressSanitizer + UndefinedBehaviorSanitizer, halting on
# the first report).
#
#   scripts/fuzz.sh [SECONDS]
#   RDMACTOR_FUZZ_TARGETS="agent" scripts/fuzz.sh 30   run a subset
#   RDMACTOR_FUZZ_WORKERS=2 scripts/fuzz.sh 3600       N processes per target
#                                                      (one per core; the
#                                                      inputs are summed)
#
# Each target starts from its committed seeds (test/fuzz/corpus/NAME/) and
# keeps what it finds in build-fuzz/corpus/NAME/ for the next run; a finding
# is saved as build-fuzz/artifacts/NAME-crash-* (or leak-*, timeout-*, oom-*)
# and can be replayed with: build-fuzz/test/fuzz/rdmactor_fuzz_NAME FILE
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/generator.sh

seconds=${1:-60}
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS]" >&2
  exit 2
fi
targets=(${RDMACTOR_FUZZ_TARGETS:-decode agent core actor_codec})
build=build-fuzz
jobs=${RDMACTOR_JOBS:-$(nproc)}

scripts/setup.sh --no-vm

# One unit per file: built by clang as a unity build, the actor_codec
# target crashed at its start (a null function in CAF's
# config_option::check, called from actor_system_config::set).
echo "== configure (clang, libFuzzer, ASan+UBSan) in $build"
# -O1: fuzzing at -O0 spends most of its time in unoptimized CAF templates.
cmake -S . -B "$build" $(cmake_generator "$build") \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" -DRDMACTOR_FUZZ=ON \
  -DRDMACTOR_UNITY_BUILD=OFF \
  -DRDMACTOR_BUILD_TESTS=OFF -DRDMACTOR_BUILD_APPS=OFF -DRDMACTOR_VERBS=OFF \
  >/dev/null
echo "== build"
cmake --build "$build" -j"$jobs" --target \
  $(printf 'rdmactor_fuzz_%s ' "${targets[@]}")

# No allocator_may_return_null: since the finding "peer-controlled
# alignment" (docs/reliability.md) was fixed, a peer cannot make the pool
# call aligned_alloc with a layout ASan objects to, and any such report is
# a finding again.
# quarantine_size_mb=16 (default 256): freed memory waits in a 16 MiB
# quarantine for use-after-free reports instead of 256 MiB; one input of
# the agent target frees far less than that, and cycling through 256 MiB
# of fresh pages cost a third of its CPU time in page faults
# (docs/reliability.md, "Throughput of the agent target").
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:quarantine_size_mb=16:malloc_context_size=10}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Names of findings of the agent target that are reported and not fixed
# yet (docs/reliability.md, "Findings"): the target checks them but goes
# on, so that fuzzing explores past them.  Empty: every finding is fixed,
# and the seeds test/fuzz/corpus/agent/regress_* must pass.
export RDMACTOR_FUZZ_TOLERATE=${RDMACTOR_FUZZ_TOLERATE-}

workers=${RDMACTOR_FUZZ_WORKERS:-1}
if ! [[ "$workers" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: RDMACTOR_FUZZ_WORKERS must be a positive number" >&2
  exit 2
fi

mkdir -p "$build/artifacts"
failed=()
for t in "${targets[@]}"; do
  bin="$build/test/fuzz/rdmactor_fuzz_$t"
  work="$build/corpus/$t"
  seeds="test/fuzz/corpus/$t"
  mkdir -p "$work"
  echo "== fuzz $t for ${seconds}s, $workers process(es) (log: $build/fuzz-$t*.log)"
  start=$(date +%s)
  # -timeout: one input running longer is a hang; -rss_limit_mb: growth.
  # -entropic=0: with the ~100k coverage counters of the agent target,
  # libFuzzer's entropic schedule spends 80% of the time on bookkeeping.
  # Workers share the corpus directory (each reads it at start and adds
  # what it finds) and differ in their random seed.
  # Per target: actor_codec's inputs may be long enough to nest 20,000
  # levels deep (libFuzzer's default -max_len follows the seeds: a few
  # hundred bytes), and its dictionary names CAF's type ids.
  extra=()
  if [[ $t == actor_codec ]]; then
    extra=(-max_len=65536 -dict=test/fuzz/actor_codec.dict)
  fi
  pids=()
  logs=()
  for ((w = 1; w <= workers; w++)); do
    log="$build/fuzz-$t.log"
    [[ $workers -gt 1 ]] && log="$build/fuzz-$t-$w.log"
    logs+=("$log")
    "$bin" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=3072 \
      -entropic=0 -seed="$((start + w))" -print_final_stats=1 \
      "${extra[@]}" \
      -artifact_prefix="$build/artifacts/$t-" "$work" "$seeds" \
      >"$log" 2>&1 &
    pids+=($!)
  done
  bad=()
  for ((w = 0; w < workers; w++)); do
    wait "${pids[$w]}" || bad+=("${logs[$w]}")
  done
  if [[ ${#bad[@]} -eq 0 ]]; then
    runs=0
    for log in "${logs[@]}"; do
      n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
      runs=$((runs + ${n:-0}))
    done
    cov=$(grep -ohE 'cov: [0-9]+' "${logs[@]}" | sort -t' ' -k2 -n | tail -1 || true)
    echo "   clean: $runs inputs in $(( $(date +%s) - start ))s, $cov," \
         "corpus $(ls "$work" | wc -l) files"
  else
    for log in "${bad[@]}"; do
      echo "   FAILED: $t (last lines of $log):"
      grep -E 'ERROR|SUMMARY|_fuzz: |Test unit written' "$log" \
        | head -20 || true
      tail -30 "$log"
    done
    failed+=("$t")
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) clean for ${seconds}s each"
