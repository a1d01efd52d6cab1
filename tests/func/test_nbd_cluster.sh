#!/bin/bash
# test_nbd_cluster.sh - nbdkit-rmem-plugin on a cluster (url=etcd://...): a
# real 3-member etcd on loopback and three rmemd of 64 MiB.  A plain cluster
# disk takes posted calls; a disk with ?redundancy=2+1, anonymous or named,
# is served through one session of posted calls (a redundant region admits
# one writer: lanes=2 asked gives one), and the named one keeps its bytes when a
# server is killed -9: read back the same, written and read again, and
# reopened by a second nbdkit.  TAP output.
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_nbd_cluster.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/cluster_test.sh rmem-nbd-cluster
. tests/lib/nbd.sh
nbd_setup
command -v fio > /dev/null || skip_all "fio is missing (scripts/install-deps)"
command -v nbdcopy > /dev/null || skip_all "nbdcopy is missing (libnbd-bin)"
NSRV=3
NAME=nc$$
rpids=()
cleanup_all() {
	local p
	[ -n "$npid" ] && kill -KILL "$npid" 2> /dev/null
	for p in "${rpids[@]}"; do kill -KILL "$p" 2> /dev/null; done
	etcd_cleanup
	rmemd_cleanup
}
trap cleanup_all EXIT

etcd_start 3 > "$tmp/etcd-start.out" 2>&1
ok $? "a 3-member etcd starts"
read -r -a ports <<< "$(free_ports "$NSRV")"
for ((i = 0; i < NSRV; i++)); do
	cluster_conf "$i" "$NAME" "127.0.0.1:${ports[$i]}" "" 3000 info
	"$RMEMD" -c "$tmp/r$i.conf" > "$tmp/r$i.log" 2>&1 < /dev/null &
	rpids[i]=$!
done
up=0
for ((i = 0; i < NSRV; i++)); do
	cluster_registered "$NAME" "$i" 150 && up=$((up + 1))
done
[ $up -eq $NSRV ]; ok $? "three rmemd registered in etcd ($up)"
hosts=
for ((k = 0; k < ETCD_N; k++)); do hosts+="${hosts:+,}127.0.0.1:${etcd_cports[$k]}"; done
url=etcd://$hosts/$NAME
sock=$tmp/nbd.sock
uri=$(nbd_uri "$sock")

# ---- a plain cluster disk: posted calls, as on one server -------------------
head -c 32M /dev/urandom > "$tmp/a.bin"
nbd_start "$sock" "$tmp/nbdkit-plain.log" url="$url" name=nbd/plain size=32M lanes=2
okl $? "$tmp/nbdkit-plain.log" "nbdkit serves a named 32 MiB disk on the cluster (etcd://)"
grep -q ', 2 lanes, posted calls' "$tmp/nbdkit-plain.log"
okl $? "$tmp/nbdkit-plain.log" "through 2 lanes of posted calls"
nbdcopy "$tmp/a.bin" "$uri" && nbdcopy "$uri" "$tmp/a.out" && cmp -s "$tmp/a.bin" "$tmp/a.out"
ok $? "32 MiB in and out, the same bytes"
nbd_stop
ok $? "nbdkit stops cleanly"

# ---- a redundant disk (2+1): it survives a server's death -------------------
rurl="$url?redundancy=2+1"
nbd_start "$sock" "$tmp/nbdkit-redanon.log" url="$rurl" size=8M
okl $? "$tmp/nbdkit-redanon.log" "an anonymous disk with redundancy 2+1 is served"
head -c 8M "$tmp/a.bin" > "$tmp/c.bin"
rm -f "$tmp/c.out"
nbdcopy "$tmp/c.bin" "$uri" && nbdcopy "$uri" "$tmp/c.out" && cmp -s "$tmp/c.bin" "$tmp/c.out"
ok $? "8 MiB in and out of it"
nbd_stop
ok $? "nbdkit stops cleanly"
nbd_start "$sock" "$tmp/nbdkit-red.log" url="$rurl" name=nbd/red size=32M resume=500 lanes=2
okl $? "$tmp/nbdkit-red.log" "nbdkit serves a 32 MiB disk with redundancy 2+1"
grep -q ', 1 lanes, posted calls' "$tmp/nbdkit-red.log"
okl $? "$tmp/nbdkit-red.log" "through one lane of posted calls (lanes=2 asked: one writer per region)"
fio --name=red --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth=16 --numjobs=2 \
	--size=4M --offset=16M --offset_increment=4M --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --verify_state_save=0 --group_reporting \
	--output="$tmp/fio-red.out" > /dev/null 2>&1
rc=$?
grep -q 'err= 0' "$tmp/fio-red.out" && ! grep -qi 'verify:.*bad\|crc32c.*mismatch' "$tmp/fio-red.out"
ok $((rc | $?)) "fio: random 4 KiB writes, 2 x 16 in flight, all verified (crc32c)"
[ $rc -eq 0 ] || tail -20 "$tmp/fio-red.out" | diag
nbdcopy "$tmp/a.bin" "$uri"
ok $? "nbdcopy 32 MiB onto it"
victim=1
kill -KILL "${rpids[$victim]}"
wait "${rpids[$victim]}" 2> /dev/null
! kill -0 "${rpids[$victim]}" 2> /dev/null; ok $? "rmemd s$victim killed -9 (it held a piece)"
rm -f "$tmp/a.out"
nbdcopy "$uri" "$tmp/a.out" 2> "$tmp/nbdcopy-degraded.err"
okl $? "$tmp/nbdkit-red.log" "nbdcopy out with one server gone"
cmp -s "$tmp/a.bin" "$tmp/a.out"; ok $? "the same 32 MiB come back"
head -c 32M /dev/urandom > "$tmp/b.bin"
nbdcopy "$tmp/b.bin" "$uri"
okl $? "$tmp/nbdkit-red.log" "32 MiB of new bytes written with the server gone"
rm -f "$tmp/b.out"
nbdcopy "$uri" "$tmp/b.out" && cmp -s "$tmp/b.bin" "$tmp/b.out"
ok $? "and read back the same"
nbd_stop
ok $? "nbdkit stops cleanly"
nbd_start "$sock" "$tmp/nbdkit-red2.log" url="$rurl" name=nbd/red create=never resume=500
okl $? "$tmp/nbdkit-red2.log" "a second nbdkit opens the degraded disk (create=never)"
rm -f "$tmp/b.out"
nbdcopy "$uri" "$tmp/b.out" && cmp -s "$tmp/b.bin" "$tmp/b.out"
ok $? "it holds the bytes written after the death"
nbd_stop
rm -f "$tmp"/*.bin "$tmp"/*.out

! grep -l 'runtime error\|AddressSanitizer\|LeakSanitizer' "$tmp"/nbdkit-*.log "$tmp"/r*.log \
	2> /dev/null
ok $? "no sanitizer report in any log"

tap_done
