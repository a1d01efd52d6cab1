#!/bin/bash
# nbdkit-rmem-plugin as a real block device, over RDMA (rxe), in the
# Soft-RoCE VM (tests/vm/suite; make check-rdma): nbd-client attaches
# /dev/nbd0; ext4 on it, files with checksums, fsck clean, unmounted and
# mounted again; then swap on /dev/nbd1 (swap=true), and a program in a
# cgroup whose memory.max is half its working set writes, swaps out and
# verifies all of its memory, with pswpout/pswpin from /proc/vmstat moving.
# Outside the VM it skips (it needs root, /dev/nbd* and a cgroup2 of its own).
# TAP output.
# run-tests-timeout: 900
set -uo pipefail
cd "$(dirname "$0")/../../.."

. tests/lib/tap.sh
. tests/lib/rmemd.sh
. tests/lib/nbd.sh
# Never on the host: this test formats /dev/nbd0 and mounts cgroup2.
[ "${RMEM_IN_VM:-}" = 1 ] && [ -n "${RMEM_VM_RDMA_ADDR:-}" ] ||
	skip_all "needs the Soft-RoCE VM (tests/vm): RMEM_IN_VM, RMEM_VM_RDMA_ADDR"
[ "$(id -u)" = 0 ] || skip_all "needs root (nbd-client, mount, swapon)"
rmemd_setup rmem-nbd-dev
nbd_setup
for p in nbd-client mkfs.ext4 e2fsck mkswap swapon python3; do
	command -v $p > /dev/null || skip_all "$p is missing (scripts/install-deps)"
done
[ -b /dev/nbd1 ] || skip_all "no /dev/nbd1: the VM's initramfs lacks nbd.ko (tests/vm/setup, MODULES)"

mnt=$tmp/mnt
cg=
sock0=$tmp/nbd0.sock
sock1=$tmp/nbd1.sock
pid0=
pid1=
cleanup() {
	swapoff /dev/nbd1 2> /dev/null
	mountpoint -q "$mnt" && umount "$mnt"
	nbd-client -d /dev/nbd0 > /dev/null 2>&1
	nbd-client -d /dev/nbd1 > /dev/null 2>&1
	[ -n "$cg" ] && rmdir "$cg" 2> /dev/null
	for p in $pid0 $pid1; do kill -KILL "$p" 2> /dev/null; done
	rmemd_cleanup
}
trap cleanup EXIT

port=$(free_port)
rport=$(free_port)
printf '%s\n' \
	"listen = { tcp = \"$RMEM_VM_RDMA_ADDR:$port\"; rdma = \"$RMEM_VM_RDMA_ADDR:$rport\"; admin = \"$tmp/rmemd.sock\"; metrics = \"\"; };" \
	'pools = ( { name = "default"; size = "400M"; hugepages = "off"; alignment = 4096; } );' \
	'limits = { max_clients = 64; lease_timeout_ms = 30000; };' \
	'log = { level = "info"; };' > "$tmp/rmemd.conf"
rmemd_start "$tmp/rmemd.conf" "$tmp/rmemd.log"
okl $? "$tmp/rmemd.log" "rmemd starts with RDMA on $RMEM_VM_RDMA_ADDR:$rport"
# The control connection goes to the TCP port; the data path is RDMA.
url=rdma://$RMEM_VM_RDMA_ADDR:$port

# ---- a file system on /dev/nbd0 ----------------------------------------------
nbd_start "$sock0" "$tmp/nbdkit0.log" url="$url" transport=rdma name=vm/fs size=128M lanes=4
okl $? "$tmp/nbdkit0.log" "nbdkit serves vm/fs over RDMA"
pid0=$npid
grep -q 'rmem: named region vm/fs of 134217728 bytes over rdma' "$tmp/nbdkit0.log"
ok $? "its sessions use rdma"
nbd-client -unix "$sock0" /dev/nbd0 -b 4096 > "$tmp/nbd-client0.log" 2>&1
okl $? "$tmp/nbd-client0.log" "nbd-client attaches /dev/nbd0"
[ "$(blockdev --getsize64 /dev/nbd0)" = 134217728 ]; ok $? "/dev/nbd0 is 128 MiB"
mkfs.ext4 -q -F /dev/nbd0 > "$tmp/mkfs.log" 2>&1; okl $? "$tmp/mkfs.log" "mkfs.ext4 /dev/nbd0"
mkdir -p "$mnt"
mount /dev/nbd0 "$mnt"; ok $? "mount it"
# (Sizes for a TCG guest, issue 31: every block crosses nbd, nbdkit and
# rxe in emulation; 8 files of up to 12 MiB and a 96 MiB swapper took 311 s.)
for i in $(seq 1 4); do
	head -c $((i * 1536 * 1024 + 4321)) /dev/urandom > "$mnt/f$i"
done
(cd "$mnt" && sha256sum f* > "$tmp/sums")
umount "$mnt"; ok $? "4 files written (1.5 to 6 MiB), unmounted"
blockdev --flushbufs /dev/nbd0
echo 3 > /proc/sys/vm/drop_caches
e2fsck -f -n /dev/nbd0 > "$tmp/fsck.log" 2>&1; okl $? "$tmp/fsck.log" "e2fsck -f finds it clean"
mount /dev/nbd0 "$mnt"; ok $? "mounted again"
mountpoint -q "$mnt" && [ "$(wc -l < "$tmp/sums")" = 4 ] && (cd "$mnt" && sha256sum -c --quiet "$tmp/sums")
ok $? "every file has its checksum"
umount "$mnt"
nbd-client -d /dev/nbd0 > /dev/null 2>&1; ok $? "nbd-client detaches /dev/nbd0"

# ---- swap on /dev/nbd1 -------------------------------------------------------
nbd_start "$sock1" "$tmp/nbdkit1.log" url="$url" transport=rdma size=192M swap=true lanes=4
okl $? "$tmp/nbdkit1.log" "nbdkit serves an anonymous 192 MiB disk with swap=true"
pid1=$npid
lck=$(awk '/^VmLck/ {print $2}' "/proc/$pid1/status" 2> /dev/null)
[ "${lck:-0}" -gt 0 ]; ok $? "nbdkit's memory is locked (VmLck ${lck:-?} kB)"
nbd-client -unix "$sock1" /dev/nbd1 -b 4096 -swap > "$tmp/nbd-client1.log" 2>&1
okl $? "$tmp/nbd-client1.log" "nbd-client -swap attaches /dev/nbd1"
mkswap /dev/nbd1 > /dev/null 2>&1; ok $? "mkswap /dev/nbd1"
swapon /dev/nbd1; ok $? "swapon /dev/nbd1"
grep -q '^/dev/nbd1 ' /proc/swaps; ok $? "/proc/swaps lists it"

[ "$(stat -f -c %T /sys/fs/cgroup 2> /dev/null)" = cgroup2fs ] || mount -t cgroup2 none /sys/fs/cgroup
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
cg=/sys/fs/cgroup/rmem-nbd-swap
mkdir -p "$cg" && echo 32M > "$cg/memory.max"
ok $? "a cgroup with memory.max = 32 MiB"
vm() { awk -v k="$1" '$1 == k {print $2}' /proc/vmstat; }
out0=$(vm pswpout)
in0=$(vm pswpin)
# 64 MiB of 4 KiB pages, each naming itself, written, then read back twice.
cat > "$tmp/swapper.py" << 'PY'
import struct, sys
n = 64 * 256
page = lambda i: struct.pack("<QQ", i, i ^ 0x5A5A5A5A) * 256
pages = [page(i) for i in range(n)]
bad = sum(pages[i] != page(i) for _ in range(2) for i in range(n))
print(n, "pages,", bad, "wrong")
sys.exit(1 if bad else 0)
PY
sh -c "echo \$\$ > $cg/cgroup.procs && exec python3 $tmp/swapper.py" > "$tmp/swapper.out" 2>&1
ok $? "a program of twice memory.max verifies all its pages: $(cat "$tmp/swapper.out")"
out1=$(vm pswpout)
in1=$(vm pswpin)
[ "$out1" -gt "$out0" ]; ok $? "pswpout moved: $out0 -> $out1"
[ "$in1" -gt "$in0" ]; ok $? "pswpin moved: $in0 -> $in1"
swapoff /dev/nbd1; ok $? "swapoff /dev/nbd1 (what is left read back)"
nbd-client -d /dev/nbd1 > /dev/null 2>&1; ok $? "nbd-client detaches /dev/nbd1"
rmdir "$cg" && cg=

tap_done
