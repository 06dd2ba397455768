#!/usr/bin/env bash
# Installs every Debian package that rdmactor's build, tests, apps (the
# benchmark plot included) and the Soft-RoCE VM need. Idempotent: installs
# only what is missing and says so.
#
#   scripts/setup.sh          build + test + apps + VM packages
#   scripts/setup.sh --no-vm  skip the packages that only the rxe VM needs
set -euo pipefail

build_pkgs=(
  build-essential cmake ninja-build pkg-config
  libcaf-dev
  libprotobuf-dev protobuf-compiler
  libboost-test-dev
  libibverbs-dev librdmacm-dev rdma-core ibverbs-providers ibverbs-utils
  rdmacm-utils perftest
  libspdlog-dev
  iproute2 procps curl
  clang libclang-rt-14-dev
  gnuplot-nox
)
# The verbs suite runs inside a qemu VM with Soft-RoCE (see scripts/rxe-vm.sh).
vm_pkgs=(qemu-system-x86 linux-image-amd64 busybox-static kmod cpio)

want=("${build_pkgs[@]}")
if [[ "${1:-}" != "--no-vm" && "${RDMACTOR_NO_VM:-0}" != "1" ]]; then
  want+=("${vm_pkgs[@]}")
fi

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#want[@]} packages present"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=sudo
  else
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run as root (or with passwordless sudo) to install them:" >&2
    echo "       sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
else
  SUDO=
fi

export DEBIAN_FRONTEND=noninteractive
stamp=/var/lib/apt/periodic/update-success-stamp
lists=$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' 2>/dev/null | head -1)
if [[ -z "$lists" ]] || ! $SUDO apt-get install -y --no-install-recommends --dry-run "${missing[@]}" >/dev/null 2>&1; then
  echo "setup: apt-get update"
  $SUDO apt-get update -q >/dev/null
fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: installed ${#missing[@]} package(s): ${missing[*]}"
