#!/usr/bin/env bash
# Builds CAF 0.17.6 (the version Debian's libcaf-dev ships) with
# -fsanitize=thread into build-caf-tsan/prefix, for
# scripts/test.sh --sanitize=thread.  Debian's libcaf_core.so is not
# instrumented: TSan cannot see the atomics its mailboxes and scheduler
# synchronize with and reports every message hand-off (docs/reliability.md).
#
#   scripts/caf-tsan.sh            build once; a no-op when the prefix exists
#   RDMACTOR_CAF_TSAN_DIR=DIR      use DIR instead of build-caf-tsan/
#
# Only libcaf_core and libcaf_io (the bench and rdmactor-kv link CAF::io)
# are built: gcc, -O1 -g1 (line tables: what a report needs), shared
# libraries, as a unity build; no examples, tools, unit tests, OpenSSL,
# OpenCL or Python.  The upstream tarball is Debian's .orig.tar.gz,
# checked against the sha256 in its .dsc, plus the one-line fix Debian's
# headers carry (see below).  Prints the prefix on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.17.6
dsc_rev=2.1
sha256=e2bf5bd243f08bb7d8adde197cfe3e6d71314ed3378fe0692f8932f4c3b3928c
mirror=${RDMACTOR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
dir=${RDMACTOR_CAF_TSAN_DIR:-build-caf-tsan}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
prefix=$dir/prefix

if [[ -f "$prefix/lib/libcaf_core.so" && -f "$prefix/lib/libcaf_io.so" \
      && -f "$prefix/include/caf/config.hpp" ]]; then
  echo "caf-tsan: using $prefix"
  echo "$prefix"
  exit 0
fi

tarball=actor-framework_${version}.orig.tar.gz
dsc=actor-framework_${version}-${dsc_rev}.dsc
pool=$mirror/pool/main/a/actor-framework
cd "$dir"
for f in "$dsc" "$tarball"; do
  if [[ ! -s "$f" ]]; then
    echo "caf-tsan: downloading $f"
    curl -fsSL --retry 3 -o "$f.part" "$pool/$f"
    mv "$f.part" "$f"
  fi
done
# The pinned hash must be the one the .dsc lists, and the tarball must match it.
if ! grep -qE "^ $sha256 [0-9]+ $tarball\$" "$dsc"; then
  echo "caf-tsan: $dsc does not list sha256 $sha256 for $tarball" >&2
  exit 1
fi
if ! echo "$sha256  $tarball" | sha256sum -c --status; then
  echo "caf-tsan: $tarball does not match sha256 $sha256; delete it to retry" >&2
  exit 1
fi

src=$dir/actor-framework-$version
rm -rf "$src" "$dir/build"
tar xzf "$tarball"
# The one change Debian's headers carry against upstream 0.17.6
# (/usr/include/caf/io/network/receive_buffer.hpp): the missing <limits>,
# without which gcc 12 does not compile receive_buffer.cpp.
sed -i 's|^#include <cstddef>$|#include <cstddef>\n#include <limits>|' \
  "$src/libcaf_io/caf/io/network/receive_buffer.hpp"
grep -q '^#include <limits>$' "$src/libcaf_io/caf/io/network/receive_buffer.hpp"
# CAF compiles as a unity build (16 files per unit: each parses CAF's
# headers once; about 2 minutes on 2 cores instead of 10).  One file of
# libcaf_io defines helpers another one defines too, in an anonymous
# namespace: it stays a unit of its own.
sed -i 's|^add_custom_target(libcaf_io)$|&\nset_source_files_properties(src/io/network/native_socket.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)|' \
  "$src/libcaf_io/CMakeLists.txt"
grep -q 'native_socket.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION' \
  "$src/libcaf_io/CMakeLists.txt"

# CAF 0.17's CMakeLists: a non-empty CMAKE_CXX_FLAGS replaces its warning
# flags; -std=c++11 is what it uses by default (and what Debian built).
# CAF_LOG_LEVEL stays QUIET and memory management on, as in Debian's
# caf/detail/build_config.hpp.
flags="-std=c++11 -fsanitize=thread -fno-omit-frame-pointer"
jobs=${RDMACTOR_JOBS:-$(nproc)}
echo "caf-tsan: configuring CAF $version (gcc, -fsanitize=thread -O1 -g1)"
CC=gcc CXX=g++ cmake -S "$src" -B "$dir/build" -G Ninja \
  -Wno-dev \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" \
  -DCMAKE_INSTALL_PREFIX="$prefix" \
  -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_INSTALL_RPATH="$prefix/lib" \
  -DCAF_NO_EXAMPLES=yes -DCAF_NO_UNIT_TESTS=yes -DCAF_NO_TOOLS=yes \
  -DCAF_NO_OPENSSL=yes -DCAF_NO_OPENCL=yes -DCAF_NO_PYTHON=yes \
  -DCAF_NO_SUMMARY=yes -DCAF_NO_COMPILER_CHECK=yes \
  -DCAF_LOG_LEVEL=QUIET \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 >/dev/null
echo "caf-tsan: building libcaf_core and libcaf_io (-j$jobs)"
cmake --build "$dir/build" -j"$jobs"
# Install into a staging folder, then move it in place: an interrupted run
# leaves no half prefix that the check above would accept.
rm -rf "$prefix.part"
DESTDIR= cmake --install "$dir/build" --prefix "$prefix.part" >/dev/null
rm -rf "$prefix"
mv "$prefix.part" "$prefix"
rm -rf "$dir/build" "$src"
echo "caf-tsan: installed $prefix"
echo "$prefix"
