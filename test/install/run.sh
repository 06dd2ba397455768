#!/usr/bin/env bash
# run.sh BUILD_DIR SOURCE_DIR: installs the build into a scratch prefix,
# checks what was installed, then builds and runs outside consumers with
# find_package(rdmactor): a Release build of the README tutorial, a
# soft-only consumer, a Boost.Test consumer of <rdmactor/testing.hpp>,
# the calculator and key-value samples (run as processes), and a Debug
# build of the tutorial.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
consumer=$src/test/install/consumer
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() {
  echo "install_consumer: FAIL: $*" >&2
  exit 1
}

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "cmake --install"; }

# The installed include/ holds rdmactor/ and nothing else.
[[ "$(ls "$prefix/include")" == "rdmactor" ]] ||
  fail "include/ holds: $(ls "$prefix/include" | tr '\n' ' ')"
# Every installed header includes only installed headers, and none of
# rdma-core's.
while IFS= read -r h; do
  while IFS= read -r inc; do
    [[ -f "$prefix/include/$inc" ]] ||
      fail "$h includes \"$inc\", which is not installed"
  done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/p' "$h")
done < <(find "$prefix/include" -type f)
if grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*<(infiniband|rdma)/' \
  "$prefix/include"; then
  fail "installed headers include rdma-core headers"
fi
# An installed program reads the installed config file
# (rdmactor::default_config_file), not the source tree's.
ini="$prefix/share/rdmactor/rdmactor.ini"
[[ -f "$ini" ]] || fail "share/rdmactor/rdmactor.ini was not installed"
sed -i 's/^keepalive-ms=.*/keepalive-ms=4321/' "$ini"
# (Output captured first: grep -q stopping early would make the demo die
# of SIGPIPE, which pipefail reports as a failure.)
dump=$(env -u RDMACTOR_CONFIG "$prefix/bin/rdmactor-demo" --dump-config 2>&1) ||
  fail "rdmactor-demo --dump-config failed: $dump"
grep -q 'keepalive-ms = 4321' <<<"$dump" ||
  fail "the installed rdmactor-demo did not read $ini"
# The consumers include <rdmactor/...> and nothing of the source tree.
for f in "$src/apps/tutorial/tutorial.cpp" "$src/apps/calculator/calculator.cpp" \
  "$consumer"/*.cpp; do
  if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("|<(actors|common|transport|protocol)/)' "$f"; then
    fail "$f includes something other than <rdmactor/...>, CAF, Boost or std"
  fi
done
# The key-value sample's files include each other ("kv_*.hpp") and
# otherwise only <rdmactor/...>, CAF and std.
for f in "$src"/apps/kv/*.cpp "$src"/apps/kv/*.hpp; do
  if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("[^k]|"k[^v]|<(actors|common|transport|protocol)/)' "$f"; then
    fail "$f includes something other than its own kv_*.hpp, <rdmactor/...>, CAF or std"
  fi
done
# So do the replicated-log sample's ("replog*.hpp").
for f in "$src"/apps/replog/*.cpp "$src"/apps/replog/*.hpp; do
  if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("[^r]|"r[^e]|<(actors|common|transport|protocol)/)' "$f"; then
    fail "$f includes something other than its own replog*.hpp, <rdmactor/...>, CAF or std"
  fi
done

# Release consumers.
cmake -S "$consumer" -B "$tmp/release" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DTUTORIAL_SOURCE="$src/apps/tutorial/tutorial.cpp" \
  -DCALCULATOR_SOURCE="$src/apps/calculator/calculator.cpp" \
  -DKV_SOURCE_DIR="$src/apps/kv" \
  -DREPLOG_SOURCE_DIR="$src/apps/replog" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "configuring the Release consumers"; }
cmake --build "$tmp/release" -j2 >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "building the Release consumers"; }
# Soft-only: compiling it read no rdma-core header (the compiler's
# dependency files list every header each consumer read).
grep -rlq 'rdmactor/rdmactor.hpp' "$tmp/release/CMakeFiles" --include='*.d' ||
  fail "no compiler dependency files to check"
if grep -rlE '/(infiniband|rdma)/[a-z_]+\.h' "$tmp/release/CMakeFiles" \
  --include='*.d'; then
  fail "a consumer read rdma-core headers"
fi
"$tmp/release/consumer"
"$tmp/release/soft_consumer"
"$tmp/release/testing_consumer" --report_level=short
# The calculator sample built outside the tree, as two processes.
bash "$src/test/actors/calculator_two_process.sh" "$tmp/release/calculator" \
  --fabric=soft >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "the calculator sample built against the package"; }
# The key-value sample built outside the tree, as several processes.
bash "$src/test/actors/kv_two_process.sh" "$tmp/release/kv" --fabric=soft \
  >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "the key-value sample built against the package"; }
# The replicated-log sample built outside the tree, on three nodes.
bash "$src/test/actors/replog_three_process.sh" "$tmp/release/replog" \
  --fabric=soft >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "the replicated-log sample built against the package"; }

# A Debug consumer of the same package.
cmake -S "$consumer" -B "$tmp/debug" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_PREFIX_PATH="$prefix" -DTUTORIAL_ONLY=ON \
  -DTUTORIAL_SOURCE="$src/apps/tutorial/tutorial.cpp" >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "configuring the Debug consumer"; }
cmake --build "$tmp/debug" -j2 >"$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "building the Debug consumer"; }
"$tmp/debug/consumer"
echo "install_consumer: all consumers built and ran"
