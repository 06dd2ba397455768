#!/usr/bin/env bash
# Installs what is missing, builds into build/ and runs every test suite.
#
#   scripts/test.sh                 unit + soft suites here, verbs suite on an
#                                   RDMA device or inside the Soft-RoCE VM
#   scripts/test.sh -L unit         pass ctest arguments (skips the VM suite
#                                   unless the arguments select it)
#   RDMACTOR_SKIP_VM=1 scripts/test.sh   skip the verbs suite when no device
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

scripts/setup.sh

build=${RDMACTOR_BUILD_DIR:-build}
build_type=${RDMACTOR_BUILD_TYPE:-Debug}
jobs=${RDMACTOR_JOBS:-$(nproc)}

echo "== configure ($build_type) in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="$build_type" >/dev/null
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
  scripts/rxe-vm.sh ctest --test-dir "$root/$build" --output-on-failure -L verbs
else
  echo "== verbs suite: skipped (no RDMA device and no scripts/rxe-vm.sh)"
fi
