#!/usr/bin/env bash
# Installs what is missing, builds into build/ and runs rdmactor-demo:
# two nodes in one process over the soft fabric, every operation verified.
# Arguments are passed to the demo (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/generator.sh
scripts/setup.sh --no-vm
build=${RDMACTOR_BUILD_DIR:-build}
cmake -S . -B "$build" $(cmake_generator "$build") \
  -DCMAKE_BUILD_TYPE="${RDMACTOR_BUILD_TYPE:-Debug}" >/dev/null
cmake --build "$build" -j"${RDMACTOR_JOBS:-$(nproc)}" --target rdmactor-demo
exec "$build/apps/demo/rdmactor-demo" "$@"
