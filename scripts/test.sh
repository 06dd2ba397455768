#!/usr/bin/env bash
# Installs what is missing, builds into build/ and runs every test suite.
#
#   scripts/test.sh                 unit + soft suites here, verbs suite on an
#                                   RDMA device or inside the Soft-RoCE VM
#   scripts/test.sh -L unit         pass ctest arguments to this host's ctest
#                                   (no VM: the verbs suite alone runs in it
#                                   with RDMACTOR_TEST_TIMEOUT_SCALE=5
#                                   scripts/rxe-vm.sh ctest --test-dir
#                                   "$PWD/build" -L verbs)
#   RDMACTOR_SKIP_VM=1 scripts/test.sh   skip the verbs suite when no device
#
#   scripts/test.sh --sanitize=address,undefined
#                                   the library's unit + soft suites built
#                                   with ASan + UBSan in build-asan/; not the
#                                   sample programs' multi-process suites
#                                   (demo, calculator, kv, replog, bench
#                                   smoke: programs to build again for
#                                   paths the library suites run) nor
#                                   install_consumer (an outside project,
#                                   which would need the sanitizer runtimes);
#                                   `scripts/test.sh --sanitize=address,undefined
#                                   -L "unit|soft" -E install_consumer` runs
#                                   them all
#   scripts/test.sh --sanitize=thread
#                                   the soft fabric suites (fabric_test_soft,
#                                   soft_fabric_test) and the transport and
#                                   actor suites (transport_actor_test,
#                                   agent_test, hostile_test,
#                                   reliability_test) built with TSan in
#                                   build-tsan/, against CAF 0.17.6 built
#                                   with TSan by scripts/caf-tsan.sh in
#                                   build-caf-tsan/ (once, ~2 min on 2
#                                   cores): Debian's libcaf is not
#                                   instrumented, so every message hand-off
#                                   would be a false report
#                                   (docs/reliability.md)
# A sanitizer run builds only what its tests run, halts on the first UBSan
# report and fails on any report; suppressions live in
# test/reliability/sanitizers/ and each says why.  Extra arguments go to
# ctest instead of the default selection.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
source scripts/generator.sh

sanitize=""
if [[ "${1:-}" == --sanitize=* ]]; then
  sanitize=${1#--sanitize=}
  shift
fi

if [[ -n "$sanitize" ]]; then
  scripts/setup.sh --no-vm
  jobs=${RDMACTOR_JOBS:-$(nproc)}
  supp="$root/test/reliability/sanitizers"
  case "$sanitize" in
    thread)
      build=${RDMACTOR_BUILD_DIR:-build-tsan}
      # CAF built with TSan; its headers and libraries replace Debian's
      # (explicit cache entries: an older build-tsan/ cached /usr's).
      if caf=$(scripts/caf-tsan.sh | tail -n1) && [[ -d "$caf/lib" ]]; then
        cmake_extra=(-DRDMACTOR_BUILD_APPS=OFF
                     -DCAF_INCLUDE_DIR="$caf/include"
                     -DCAF_CORE_LIBRARY="$caf/lib/libcaf_core.so"
                     -DCAF_IO_LIBRARY="$caf/lib/libcaf_io.so")
        select=(-R "^(fabric_test_soft|soft_fabric_test|transport_actor_test|agent_test|hostile_test|reliability_test|direct_poll_test|link_driver_test)$")
      else
        # Without CAF's source (no route to deb.debian.org) only the suites
        # that do not rely on CAF's synchronization can run under TSan.
        echo "== WARNING: scripts/caf-tsan.sh failed (is deb.debian.org" \
             "reachable?): TSan runs the soft fabric suites only" >&2
        caf=""
        cmake_extra=(-DRDMACTOR_BUILD_APPS=OFF)
        select=(-R "^(fabric_test_soft|soft_fabric_test)$")
      fi
      export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1:suppressions=$supp/tsan.supp}"
      ;;
    address,undefined | undefined,address | address)
      build=${RDMACTOR_BUILD_DIR:-build-asan}
      cmake_extra=()
      select=(-L "unit|soft" -E "^(install_consumer|demo_two_process|demo_in_process|calculator_two_process|kv_two_process|replog_three_process|bench_smoke)$")
      export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
      export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$supp/lsan.supp}"
      export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp}"
      ;;
    *)
      echo "test.sh: --sanitize takes address,undefined or thread" >&2
      exit 2
      ;;
  esac
  # Arguments replace the default selection.
  if [[ $# -gt 0 ]]; then
    select=("$@")
  fi
  echo "== configure (Debug, -fsanitize=$sanitize) in $build"
  cmake -S . -B "$build" $(cmake_generator "$build") -DCMAKE_BUILD_TYPE=Debug \
    -DRDMACTOR_SANITIZE="$sanitize" "${cmake_extra[@]}" >/dev/null
  # Build what the selected tests run: the executables named in their
  # add_test lines (CTestTestfile.cmake) are targets of the same name.
  abs=$(cd "$build" && pwd)
  # Make lists "... name", Ninja "name: phony".
  known=$(cmake --build "$build" --target help \
    | sed -n -e 's/^\.\.\. \([^ ]*\).*/\1/p' -e 's/^\([^ :]*\): phony$/\1/p')
  names=$(ctest --test-dir "$build" -N "${select[@]}" 2>/dev/null \
    | sed -n 's/^ *Test *#[0-9]*: *//p')
  targets=$(for n in $names; do
      grep -rhE --include=CTestTestfile.cmake "^add_test\((\[=\[)?$n(\]=\])? " "$build"
    done | grep -oE "\"$abs/[^\"]+\"" | tr -d '"' | xargs -rn1 basename \
    | sort -u | grep -Fxf <(echo "$known") || true)
  if [[ -z "$targets" ]]; then
    echo "test.sh: no test selected in $build" >&2
    exit 1
  fi
  echo "== build" $targets
  cmake --build "$build" -j"$jobs" --target $targets
  if [[ "$sanitize" == thread && -n "$caf" ]]; then
    # The binaries must load the TSan libcaf (RUNPATH), not Debian's.
    for t in $targets; do
      exe=$(find "$build" -type f -name "$t" -perm -u+x | head -n1)
      if ldd "$exe" | grep -E 'libcaf_(core|io)' | grep -vqF "$caf/lib/"; then
        echo "test.sh: $exe does not load libcaf from $caf/lib:" >&2
        ldd "$exe" | grep libcaf >&2
        exit 1
      fi
    done
  fi
  # Sanitizers slow the stress loops 5-20x: as many round trips as on verbs.
  export RDMACTOR_TEST_ROUNDTRIPS=${RDMACTOR_TEST_ROUNDTRIPS:-20000}
  echo "== ${select[*]} suites under -fsanitize=$sanitize"
  ctest --test-dir "$build" --output-on-failure "${select[@]}"
  exit 0
fi

scripts/setup.sh

build=${RDMACTOR_BUILD_DIR:-build}
build_type=${RDMACTOR_BUILD_TYPE:-Debug}
jobs=${RDMACTOR_JOBS:-$(nproc)}

echo "== configure ($build_type) in $build"
cmake -S . -B "$build" $(cmake_generator "$build") \
  -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
echo "== build"
cmake --build "$build" -j"$jobs"

echo "== unit and soft suites"
if [[ $# -gt 0 ]]; then
  ctest --test-dir "$build" --output-on-failure "$@"
  exit 0
fi
ctest --test-dir "$build" --output-on-failure -LE verbs

if [[ -z "$(ctest --test-dir "$build" -N -L verbs | grep -E '^ *Test +#')" ]]; then
  echo "== verbs suite: none registered"
  exit 0
fi
if command -v ibv_devices >/dev/null && ibv_devices 2>/dev/null | grep -qvE '^\s*(device|------)'; then
  echo "== verbs suite: on this host's RDMA device"
  RDMACTOR_TEST_FABRIC=verbs ctest --test-dir "$build" --output-on-failure -L verbs
elif [[ "${RDMACTOR_SKIP_VM:-0}" == "1" ]]; then
  echo "== verbs suite: skipped (no RDMA device, RDMACTOR_SKIP_VM=1)"
elif [[ -x scripts/rxe-vm.sh ]]; then
  echo "== verbs suite: no RDMA device here; running it inside the Soft-RoCE VM"
  # The VM's CPU is emulated: 10-50x slower than the host, slower still on a
  # busy host.  The suites' timeouts scale with this factor.
  RDMACTOR_TEST_TIMEOUT_SCALE=${RDMACTOR_TEST_TIMEOUT_SCALE:-5} \
    scripts/rxe-vm.sh ctest --test-dir "$root/$build" --output-on-failure -L verbs
else
  echo "== verbs suite: skipped (no RDMA device and no scripts/rxe-vm.sh)"
fi
