#!/usr/bin/env bash
# run.sh BUILD_DIR SOURCE_DIR: install, build a consumer, run it.
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/test/install/consumer" -B "$tmp/build" \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DTUTORIAL_SOURCE="$src/apps/tutorial/tutorial.cpp" >/dev/null
cmake --build "$tmp/build" -j2 >/dev/null
"$tmp/build/consumer"
