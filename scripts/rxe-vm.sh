#!/usr/bin/env bash
# rxe-vm.sh CMD [ARG...]: runs CMD inside a throw-away qemu VM with Soft-RoCE.
#
# The host kernel has no RDMA support (ibv_get_device_list fails with
# ENOSYS), so the verbs fabric is tested in a VM under software emulation
# (TCG; KVM hangs on these machines).  The VM boots Debian's
# linux-image-amd64 kernel (the version under /lib/modules that ships
# rdma_rxe.ko), loads the modules it needs from a small busybox initramfs,
# shares the host root file system read-only over 9p under an overlay with a
# tmpfs upper layer, chroots into it, brings up a dummy interface
# (dummy0, 198.18.0.1/15) with Soft-RoCE device rxe0 on top, and runs CMD:
#
#   - same paths as on the host (the project tree, build dirs, /usr);
#   - cwd = the caller's cwd; the caller's exported environment, plus
#     RDMACTOR_TEST_HOST=198.18.0.1 and RDMACTOR_TEST_FABRIC=verbs;
#   - memlock unlimited, stdin /dev/null;
#   - CMD's stdout and stderr stream to this script's stdout (a second
#     serial port of the VM);
#   - this script exits with CMD's exit status.
#
# Writes inside the VM land in the tmpfs overlay and vanish with the VM.
# To keep files, list host directories in RXE_VM_RW (colon-separated): each
# is mounted writable over 9p at the same path inside the VM.
#
# Exit status: CMD's status; 124 when RXE_VM_TIMEOUT ran out; 125 when the VM
# could not be prepared or booted, or did not report a status (the kernel
# console log is printed to stderr then).
#
# Environment:
#   RXE_VM_TIMEOUT  seconds for the whole run, boot included (default 1800)
#   RXE_VM_CPUS     virtual CPUs (default 2)
#   RXE_VM_MEM      guest RAM, qemu syntax (default 4G)
#   RXE_VM_RW       host directories to mount writable (default: none)
#   RXE_VM_KVER     kernel version to boot (default: newest with rdma_rxe)
#   RXE_VM_VERBOSE  1: print the boot steps and timings to stderr
#   RXE_VM_APPEND   extra kernel command line arguments (default: none),
#                   e.g. "tsc=reliable clocksource=tsc" (scripts/bench.sh)
#
# The initramfs is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/rdmactor-vm
# and rebuilt when the kernel, its modules or this script change.
set -euo pipefail

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
self="$script_dir/$(basename "${BASH_SOURCE[0]}")"

die() {
  echo "rxe-vm: $*" >&2
  exit 125
}
say() {
  if [[ "${RXE_VM_VERBOSE:-0}" == 1 ]]; then
    echo "rxe-vm: $*" >&2
  fi
}

if [[ $# -eq 0 ]]; then
  sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi

timeout_s=${RXE_VM_TIMEOUT:-1800}
cpus=${RXE_VM_CPUS:-2}
mem=${RXE_VM_MEM:-4G}
[[ "$timeout_s" =~ ^[0-9]+$ && "$timeout_s" -gt 0 ]] ||
  die "RXE_VM_TIMEOUT must be a positive number of seconds (got '$timeout_s')"
[[ "$cpus" =~ ^[0-9]+$ && "$cpus" -gt 0 ]] ||
  die "RXE_VM_CPUS must be a positive number (got '$cpus')"

# -- packages -------------------------------------------------------------
need_setup=0
for tool in qemu-system-x86_64 busybox modprobe cpio rdma ip; do
  command -v "$tool" >/dev/null 2>&1 || need_setup=1
done
[[ -x /bin/busybox || -x /usr/bin/busybox ]] || need_setup=1
ls /lib/modules/*/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko* >/dev/null 2>&1 ||
  need_setup=1
if [[ $need_setup == 1 ]]; then
  echo "rxe-vm: installing the VM packages via scripts/setup.sh" >&2
  "$script_dir/setup.sh" >&2 || die "scripts/setup.sh failed; install qemu-system-x86 linux-image-amd64 busybox-static kmod cpio iproute2"
fi
# busybox-static installs /bin/busybox; the initramfs has no libc.
busybox_bin=/bin/busybox
[[ -x "$busybox_bin" ]] || busybox_bin=$(command -v busybox)
if ldd "$busybox_bin" >/dev/null 2>&1; then
  die "$busybox_bin is dynamically linked; install busybox-static (scripts/setup.sh)"
fi

# -- kernel ---------------------------------------------------------------
if [[ -n "${RXE_VM_KVER:-}" ]]; then
  kver=$RXE_VM_KVER
else
  kver=""
  for d in $(ls -1d /lib/modules/*/ 2>/dev/null | sort -V); do
    v=$(basename "$d")
    if ls "$d"kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko* >/dev/null 2>&1 &&
      [[ -r /boot/vmlinuz-$v ]]; then
      kver=$v
    fi
  done
fi
[[ -n "$kver" ]] ||
  die "no kernel with rdma_rxe.ko and /boot/vmlinuz-* found; install linux-image-amd64 (scripts/setup.sh)"
kernel=/boot/vmlinuz-$kver
[[ -r "$kernel" ]] || die "kernel image $kernel is missing or unreadable"
[[ -d /lib/modules/$kver ]] || die "/lib/modules/$kver is missing"

# -- initramfs (cached) ---------------------------------------------------
cache_dir=${XDG_CACHE_HOME:-$HOME/.cache}/rdmactor-vm
mkdir -p "$cache_dir"
modules=(virtio_pci 9pnet_virtio 9p overlay dummy crc32_generic rdma_rxe rdma_ucm)

# Resolves the dependency chains into "path params" lines, in load order,
# each module once.
module_plan() {
  local m
  for m in "${modules[@]}"; do
    modprobe -S "$kver" --show-depends "$m" ||
      die "modprobe cannot resolve module $m for kernel $kver"
  done | awk '$1 == "insmod" && !seen[$2]++ { $1 = ""; sub(/^ /, ""); print }'
}
plan=$(module_plan)
[[ -n "$plan" ]] || die "no modules resolved for kernel $kver"

# The key covers the kernel, the module files and this script.
cache_key=$({
  echo "$kver"
  stat -L -c '%n %s %Y' "$kernel" "$busybox_bin"
  while read -r path _; do stat -L -c '%n %s %Y' "$path"; done <<<"$plan"
  sha256sum "$self"
} | sha256sum | cut -c1-16)
initrd="$cache_dir/initramfs-$kver-$cache_key.cpio"

# The guest's /init (busybox sh).  Kernel console: ttyS0; CMD's output: ttyS1.
read -r -d '' init_script <<'INIT' || true
#!/bin/busybox sh
export PATH=/bin
/bin/busybox --install -s /bin
fail() {
  echo "rxe-vm-init: $*"
  echo 125 >/newroot/run/rxe-vm/rc 2>/dev/null
  reboot -f
}
mount -t proc proc /proc
step() {
  up=$(cat /proc/uptime /newroot/proc/uptime 2>/dev/null)
  up=${up%% *}
  echo "rxe-vm-init: [$up] $*"
}
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
step "loading modules"
while read -r ko params; do
  [ -z "$RXE_VM_TRACE" ] || step "insmod $ko"
  insmod "/modules/$ko" $params || fail "insmod $ko failed"
done </modules/order
step "mounting the host root"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 \
  hostroot /host || fail "cannot mount the host root (9p tag hostroot)"
mount -t tmpfs -o mode=0755 tmpfs /ovl
mkdir -p /ovl/upper /ovl/work
mount -t overlay overlay \
  -o lowerdir=/host,upperdir=/ovl/upper,workdir=/ovl/work /newroot ||
  fail "cannot mount the overlay"
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm /newroot/run
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/run/rxe-vm
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 ctl \
  /newroot/run/rxe-vm || fail "cannot mount the control share (9p tag ctl)"
i=0
while read -r dir; do
  [ -n "$dir" ] || continue
  mkdir -p "/newroot$dir"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 "rw$i" \
    "/newroot$dir" || fail "cannot mount $dir writable (9p tag rw$i)"
  i=$((i + 1))
done </newroot/run/rxe-vm/rw
step "setting up dummy0 and rxe0"
# busybox ip for the interfaces; rdma (iproute2) from the host root.
ip link set lo up &&
  ip link add dummy0 type dummy &&
  ip addr add 198.18.0.1/15 dev dummy0 &&
  ip link set dummy0 up ||
  fail "cannot set up dummy0 (198.18.0.1/15)"
chroot /newroot rdma link add rxe0 type rxe netdev dummy0 ||
  fail "rdma link add rxe0 type rxe netdev dummy0 failed"
echo up >/newroot/run/rxe-vm/booted
step "rxe0 up, running the command"
stty -F /newroot/dev/ttyS1 raw -echo 2>/dev/null
chroot /newroot /bin/bash /run/rxe-vm/cmd.sh </dev/null >/newroot/dev/ttyS1 2>&1
rc=$?
# Setting the attributes waits until the UART has sent everything.
stty -F /newroot/dev/ttyS1 raw -echo 2>/dev/null
echo $rc >/newroot/run/rxe-vm/rc
sync
reboot -f
INIT

build_initrd() {
  local work
  work=$(mktemp -d "$cache_dir/build.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  mkdir -p "$work"/{bin,dev,proc,sys,host,ovl,newroot,modules}
  cp "$busybox_bin" "$work/bin/busybox"
  ln -s busybox "$work/bin/sh"
  : >"$work/modules/order"
  while read -r path params; do
    local base
    base=$(basename "$path")
    case "$base" in
      *.ko.xz) xz -dc "$path" >"$work/modules/${base%.xz}" ;;
      *.ko.zst) zstd -qdc "$path" >"$work/modules/${base%.zst}" ;;
      *.ko.gz) gzip -dc "$path" >"$work/modules/${base%.gz}" ;;
      *.ko) cp "$path" "$work/modules/$base" ;;
      *) die "unexpected module file $path" ;;
    esac
    echo "${base%.ko*}.ko $params" >>"$work/modules/order"
  done <<<"$plan"
  printf '%s\n' "$init_script" >"$work/init"
  chmod 755 "$work/init"
  (cd "$work" && find . -print0 | cpio --null -o -H newc --quiet) \
    >"$work.cpio"
  mv "$work.cpio" "$initrd"
  # Drop stale images of earlier kernels or script versions.
  find "$cache_dir" -maxdepth 1 -name 'initramfs-*.cpio' ! -path "$initrd" \
    -delete 2>/dev/null || true
}
if [[ ! -s "$initrd" ]]; then
  say "building $initrd"
  build_initrd
fi

# Under TCG the decompressor of the bzImage alone takes seconds: boot the
# uncompressed ELF vmlinux instead (PVH entry, CONFIG_PVH) with qboot.  Falls
# back to the bzImage with the default BIOS when extraction fails.
extract_vmlinux() {
  local out=$1 i off
  local magics=($'\xfd7zXZ' $'\x28\xb5\x2f\xfd' $'\x1f\x8b\x08')
  local tools=("xz -dc" "zstd -qdc" "gzip -dc")
  for i in 0 1 2; do
    command -v "${tools[i]%% *}" >/dev/null 2>&1 || continue
    for off in $(LC_ALL=C grep -abo "${magics[i]}" "$kernel" 2>/dev/null |
      head -3 | cut -d: -f1); do
      tail -c +$((off + 1)) "$kernel" | ${tools[i]} >"$out" 2>/dev/null
      if [[ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]] &&
        [[ $(stat -c %s "$out") -gt 1000000 ]]; then
        return 0
      fi
    done
  done
  rm -f "$out"
  return 1
}
kernel_key=$(stat -L -c '%n %s %Y' "$kernel" | sha256sum | cut -c1-16)
vmlinux="$cache_dir/vmlinux-$kver-$kernel_key"
boot_args=(-kernel "$kernel")
if grep -q '^CONFIG_PVH=y' "/boot/config-$kver" 2>/dev/null; then
  if [[ ! -s "$vmlinux" ]]; then
    say "extracting $vmlinux"
    if extract_vmlinux "$vmlinux.tmp$$" && mv "$vmlinux.tmp$$" "$vmlinux"; then
      # Drop images of earlier kernels (not other runs' temporary files).
      find "$cache_dir" -maxdepth 1 -name 'vmlinux-*' ! -name '*.tmp*' \
        ! -path "$vmlinux" -delete 2>/dev/null || true
    else
      say "cannot extract vmlinux; booting the bzImage (slower)"
    fi
  fi
  if [[ -s "$vmlinux" ]]; then
    boot_args=(-kernel "$vmlinux")
    [[ -r /usr/share/qemu/qboot.rom ]] &&
      boot_args+=(-bios /usr/share/qemu/qboot.rom)
  fi
fi

# -- per-run control share ------------------------------------------------
ctl=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX")
qemu_pid=""
reader_pid=""
cleanup() {
  [[ -n "$qemu_pid" ]] && kill "$qemu_pid" 2>/dev/null
  [[ -n "$reader_pid" ]] && kill "$reader_pid" 2>/dev/null
  rm -rf "$ctl"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

{
  echo '# generated by rxe-vm.sh'
  # The caller's exported environment (minus what belongs to this host
  # session), then the test settings.
  for name in $(compgen -e); do
    case "$name" in
      BASH* | SHELLOPTS | SHLVL | _ | PWD | OLDPWD | TERM | SSH_* | DISPLAY | \
        XDG_RUNTIME_DIR | DBUS_* | TMPDIR) continue ;;
    esac
    printf 'export %s=%q\n' "$name" "${!name}"
  done
  echo 'export RDMACTOR_TEST_HOST=198.18.0.1'
  echo 'export RDMACTOR_TEST_FABRIC=verbs'
  echo 'export TERM=dumb'
  echo 'ulimit -l unlimited'
  printf 'cd %q || exit 125\n' "$PWD"
  printf 'exec'
  printf ' %q' "$@"
  printf '\n'
} >"$ctl/cmd.sh"

rw_args=()
: >"$ctl/rw"
if [[ -n "${RXE_VM_RW:-}" ]]; then
  IFS=: read -r -a rw_dirs <<<"$RXE_VM_RW"
  i=0
  for dir in "${rw_dirs[@]}"; do
    [[ -n "$dir" ]] || continue
    dir=$(realpath -e "$dir") || die "RXE_VM_RW: $dir does not exist"
    [[ -d "$dir" ]] || die "RXE_VM_RW: $dir is not a directory"
    rw_args+=(-virtfs "local,path=$dir,mount_tag=rw$i,security_model=none,multidevs=remap")
    echo "$dir" >>"$ctl/rw"
    i=$((i + 1))
  done
fi

mkfifo "$ctl/out"
cat "$ctl/out" &
reader_pid=$!

# -- boot -----------------------------------------------------------------
quiet="quiet loglevel=3"
[[ "${RXE_VM_VERBOSE:-0}" == 1 ]] && quiet="printk.time=1 RXE_VM_TRACE=1"
say "booting ${boot_args[1]} ($cpus CPUs, $mem RAM, timeout ${timeout_s}s)"
start=$(date +%s.%N)
set +e
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
  -accel tcg -cpu max -smp "$cpus" -m "$mem" \
  -nic none -display none -vga none -monitor none -no-reboot \
  "${boot_args[@]}" -initrd "$initrd" \
  -append "console=ttyS0 panic=-1 $quiet ${RXE_VM_APPEND:-} rdinit=/init" \
  -serial "file:$ctl/console.log" \
  -chardev "file,id=out,path=$ctl/out" -serial chardev:out \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
  -virtfs "local,path=$ctl,mount_tag=ctl,security_model=none,multidevs=remap" \
  "${rw_args[@]}" </dev/null >"$ctl/qemu.log" 2>&1 &
qemu_pid=$!
wait "$qemu_pid"
qemu_rc=$?
qemu_pid=""
set -e
# Wakes the reader in case qemu never opened the fifo (an O_RDWR open of a
# fifo does not block), then waits for it to drain.
: <>"$ctl/out"
wait "$reader_pid" 2>/dev/null || true
reader_pid=""
end=$(date +%s.%N)
say "VM ran $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
if [[ "${RXE_VM_VERBOSE:-0}" == 1 ]]; then
  echo "rxe-vm: kernel console:" >&2
  cat "$ctl/console.log" >&2 || true
fi

if [[ $qemu_rc -eq 124 || $qemu_rc -eq 137 ]]; then
  echo "rxe-vm: timed out after ${timeout_s}s (RXE_VM_TIMEOUT); the VM was killed" >&2
  exit 124
fi
if [[ -s "$ctl/rc" ]]; then
  rc=$(head -c 16 "$ctl/rc" | tr -dc 0-9)
  if [[ ! -e "$ctl/booted" ]]; then
    echo "rxe-vm: the VM failed to set up Soft-RoCE; kernel console:" >&2
    tail -n 40 "$ctl/console.log" >&2 || true
    exit 125
  fi
  exit "${rc:-125}"
fi
echo "rxe-vm: the VM did not boot or did not report CMD's exit status (qemu status $qemu_rc)" >&2
echo "rxe-vm: qemu said:" >&2
tail -n 20 "$ctl/qemu.log" >&2 || true
echo "rxe-vm: kernel console (last 40 lines):" >&2
tail -n 40 "$ctl/console.log" >&2 || true
exit 125
