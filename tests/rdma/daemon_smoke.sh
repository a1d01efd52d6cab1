#!/bin/sh
# daemon_smoke.sh - runs rmemd in the test VM once per key mode ("auto", which
# is region-mr on rxe, then "window") and tests/rdma/daemon_smoke against it,
# then stops rmemd while a client holds an attached queue pair and regions,
# then checks how rmemd starts with RDMA disabled or a device name.
#
#   tests/vm/run-in-vm -- tests/rdma/daemon_smoke.sh [BUILD_DIR]
#
# BUILD_DIR holds rmemd (default build; build-san for the sanitized one);
# build/rdma-daemon/daemon_smoke is the client.  Prints rmemd's log lines.
set -u
B=${1:-build}
addr=${RMEM_VM_RDMA_ADDR:?run me in the VM: tests/vm/run-in-vm -- $0}
smoke=build/rdma-daemon/daemon_smoke
failed=0

# start_rmemd NAME RDMA_ADDR DEVICE KEYS: config, start, wait for "ready".
start_rmemd() {
	conf=/tmp/rmemd-$1.conf
	log=/tmp/rmemd-$1.log
	cat > "$conf" <<CONF
listen = { tcp = "$addr:7470"; rdma = "$2"; admin = "/tmp/rmemd-$1.sock"; };
pools = ( { size = "64M"; hugepages = "off"; } );
rdma = { device = "$3"; keys = "$4"; };
log = { level = "debug"; };
CONF
	"$B/rmemd" -c "$conf" 2> "$log" &
	pid=$!
	for i in $(seq 100); do
		grep -q "ready:" "$log" && return 0
		sleep 0.2
	done
	echo "rmemd $1 did not get ready"; cat "$log"; failed=1
}

stop_rmemd() {
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	echo "rmemd exit status $rc"
	[ "$rc" = 0 ] || failed=1
}

for keys in auto window; do
	want=$keys
	[ "$keys" = auto ] && want=region-mr
	echo "=== rdma.keys = $keys"
	start_rmemd "$keys" "$addr:7471" auto "$keys"
	$smoke "$addr" 7470 "$want" || failed=1
	echo "--- stop while a client holds a queue pair and regions"
	$smoke "$addr" 7470 "$want" hold > /tmp/hold.out 2>&1 &
	hpid=$!
	for i in $(seq 200); do
		grep -q "holding" /tmp/hold.out && break
		sleep 0.2
	done
	stop_rmemd
	wait "$hpid" || failed=1
	cat /tmp/hold.out
	echo "--- rmemd log"
	grep -v "config:" "$log"
done

echo "=== listen.rdma = \"\", rdma.device = \"nosuch\", rdma.device = \"rxe0\""
start_rmemd off "" auto auto
stop_rmemd
grep -E "RDMA|ready" "$log"
grep -q "rdma port 0, keys none" "$log" || { echo "not ok: RDMA off"; failed=1; }
start_rmemd nosuch "$addr:7471" nosuch auto
stop_rmemd
grep -E "RDMA|ready" "$log"
grep -q "rdma port 0, keys none" "$log" || { echo "not ok: no such device"; failed=1; }
start_rmemd named "$addr:7471" rxe0 region-mr
stop_rmemd
grep -E "RDMA|ready" "$log"
grep -q "rdma port 7471, keys region-mr" "$log" || { echo "not ok: named device"; failed=1; }
echo "=== overall: $([ $failed = 0 ] && echo PASS || echo FAIL)"
exit $failed
