#!/bin/bash
# test_daemon.sh - rmemd as a program: its options, config checking (-t),
# the RLIMIT_MEMLOCK check, the systemd notify protocol (READY=1 only once the
# pools are pinned and the sockets listen, STATUS= before, STOPPING=1 on
# SIGTERM) and clean exits on SIGTERM and SIGINT.  TAP output.
#
#   RMEM_BUILD=build tests/func/test_daemon.sh
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/lib/rmemd.sh
rmemd_setup rmemd-test

# ---- options ------------------------------------------------------------------
out=$("$RMEMD" --version 2>&1)
rc=$?
[ $rc -eq 0 ] && [[ $out =~ rmemd.*[0-9]+\.[0-9]+ ]]
ok $? "rmemd --version exits 0 and names a version ($rc: $out)"
"$RMEMD" -V > /dev/null 2>&1
ok $? "rmemd -V exits 0"
out=$("$RMEMD" -h 2>&1)
rc=$?
[ $rc -eq 0 ] && [[ $out == *-c* ]] && [[ $out == *-t* ]]
ok $? "rmemd -h exits 0 and shows -c and -t ($rc)"
"$RMEMD" --no-such-option > "$tmp/out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ -s "$tmp/out" ]
ok $? "an unknown option fails with a message (exit $rc)"

# ---- -t: config checking --------------------------------------------------------
"$RMEMD" -t -c etc/rmemd.conf > "$tmp/out" 2>&1
rc=$?
ok $rc "rmemd -t accepts the example etc/rmemd.conf (exit $rc)"
[ $rc -eq 0 ] || diag < "$tmp/out"

port=$(free_port)
rmemd_conf "$tmp/good.conf" "$port" 16M
"$RMEMD" -t -c "$tmp/good.conf" > "$tmp/out" 2>&1
rc=$?
ok $rc "rmemd -t accepts a test config (exit $rc)"
[ ! -e "$tmp/rmemd.sock" ]
ok $? "rmemd -t opens no socket"

# bad_conf NAME LINE TEXT: TEXT is the file; LINE is where the error is.
bad_conf() {
	local name=$1 line=$2 file=$tmp/$1.conf rc
	printf '%s\n' "$3" > "$file"
	"$RMEMD" -t -c "$file" > "$tmp/out" 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q -F "$file:$line:" "$tmp/err"
	ok $? "rmemd -t on $name: exit 1 (got $rc) and \"$file:$line:\" on stderr"
	sed -e 's/^/stderr: /' "$tmp/err" | head -3 | diag
}

bad_conf syntax-error 3 'listen = { tcp = "127.0.0.1:7470"; rdma = ""; };
# the next line lacks a value
pools = ( { name = "default"; size = ; } );'

bad_conf unknown-key 4 'listen = { tcp = "127.0.0.1:7470"; rdma = ""; };
pools = ( { name = "default"; size = "16M"; } );

frobnicate = 1;'

bad_conf unknown-nested-key 3 'listen = { tcp = "127.0.0.1:7470"; rdma = ""; };
limits = {
	max_clientz = 10;
};'

bad_conf bad-size 4 'listen = { tcp = "127.0.0.1:7470"; rdma = ""; };
pools = (
	{ name = "default";
	  size = "12Q"; }
);'

bad_conf bad-alignment 2 'listen = { tcp = "127.0.0.1:7470"; rdma = ""; };
pools = ( { name = "default"; size = "16M"; alignment = 48; } );'

bad_conf bad-type 1 'limits = { max_clients = "many"; };'

bad_conf bad-metrics-port 3 'listen = { tcp = "127.0.0.1:7470"; rdma = "";
	admin = "";
	metrics = "127.0.0.1:http"; };'

bad_conf bad-metrics-type 2 'pools = ( { name = "default"; size = "16M"; } );
listen = { metrics = true; };'

"$RMEMD" -t -c "$tmp/does-not-exist.conf" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q -F "does-not-exist.conf" "$tmp/out"
ok $? "rmemd -t on a missing file: exit 1 and the path in the message (exit $rc)"

# ---- rdma.required: no RDMA is fatal, with one line that says why ---------------
# A device that no host has stands for "no device" (or one DeviceAllow= hides).
req_conf() { # FILE REQUIRED RDMA_LISTEN
	rmemd_conf "$1" "$(free_port)" 16M
	printf 'rdma = { device = "nosuchdev0"; required = %s; };\n' "$2" >> "$1"
	sed -i "s|rdma = \"\";|rdma = \"$3\";|" "$1"
}
req_conf "$tmp/req.conf" true "127.0.0.1:$(free_port)"
"$RMEMD" -t -c "$tmp/req.conf" > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "rdma.required is on but RDMA cannot come up: no RDMA device" "$tmp/err" &&
	grep -q "DeviceAllow=" "$tmp/err"
ok $? "rdma.required without a device: rmemd -t exits 1 naming the cause and DeviceAllow= ($rc)"
diag < "$tmp/err"
timeout 60 "$RMEMD" -c "$tmp/req.conf" > "$tmp/out" 2>&1
rc=$?
[ $rc -eq 1 ] && [ "$(grep -c "rdma.required is on but RDMA cannot come up" "$tmp/out")" = 1 ] &&
	! grep -q "ready:" "$tmp/out"
ok $? "rdma.required without a device: rmemd refuses to start, with one line (exit $rc)"
req_conf "$tmp/req-off.conf" false "127.0.0.1:$(free_port)"
"$RMEMD" -t -c "$tmp/req-off.conf" > "$tmp/out" 2>&1
ok $? "rdma.required = false (the default) accepts the same host"
req_conf "$tmp/req-none.conf" true ""
"$RMEMD" -t -c "$tmp/req-none.conf" > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q 'listen.rdma is ""' "$tmp/err"
ok $? "rdma.required with listen.rdma = \"\": rmemd -t says it ($rc)"

# ---- RLIMIT_MEMLOCK ----------------------------------------------------------------
# Root has CAP_IPC_LOCK, which lifts the limit: take it away (bounding set).
nocap=(setpriv --inh-caps=-all --bounding-set=-ipc_lock --)
hard=$(ulimit -H -l)
if command -v setpriv > /dev/null && command -v prlimit > /dev/null &&
	"${nocap[@]}" true 2> /dev/null &&
	{ [ "$hard" = unlimited ] || [ "$hard" -ge 6144 ]; }; then
	rmemd_conf "$tmp/lock.conf" "$(free_port)" 64M
	timeout 60 prlimit --memlock=1048576:1048576 "${nocap[@]}" \
		"$RMEMD" -c "$tmp/lock.conf" > "$tmp/out" 2>&1
	rc=$?
	[ $rc -eq 1 ] && grep -q LimitMEMLOCK "$tmp/out"
	ok $? "memlock 1 MiB, 64 MiB pool, no CAP_IPC_LOCK: exit 1 naming LimitMEMLOCK (exit $rc)"
	grep -q -E '6710886|64 ?M' "$tmp/out" && grep -q -E '1048576|1024 ?K|1 ?M' "$tmp/out"
	ok $? "the message names the pool size and the limit"
	grep LimitMEMLOCK "$tmp/out" | head -2 | diag

	# Enough memlock and no capability: a small pool is pinned the plain way.
	# (6 MiB: we may lower the limit but not raise it above the hard one.)
	port=$(free_port)
	rmemd_conf "$tmp/lock2.conf" "$port" 4M
	listen_for READY=1 30 "vmlck:"
	NOTIFY_SOCKET=$tmp/notify.sock prlimit --memlock=6291456:6291456 "${nocap[@]}" \
		"$RMEMD" -c "$tmp/lock2.conf" > "$tmp/lock2.log" 2>&1 &
	dpid=$!
	wait_listener
	ok $? "memlock 6 MiB for a 4 MiB pool without CAP_IPC_LOCK: READY=1"
	lck=$(awk '/^vmlck/ {print $2}' "$tmp/notify.out")
	[ -n "$lck" ] && [ "$lck" -ge 4096 ]
	ok $? "and the pool is locked at READY (VmLck ${lck:-?} kB >= 4096)"
	rmemd_stop TERM "$tmp/lock2.log"
	ok $rc "and it stops with exit 0 (exit $rc)"
else
	for _ in 1 2 3 4 5; do
		skip_one "cannot drop CAP_IPC_LOCK, or the memlock hard limit is below 6 MiB"
	done
fi

# ---- start, READY, stop ---------------------------------------------------------------
# start_daemon CONF LOG: starts rmemd with a listener for READY=1 that checks
# the sockets and the locked memory the moment READY=1 arrives.
start_daemon() {
	rmemd_start "$1" "$2" "tcp:$port" "unix:$tmp/rmemd.sock" "vmlck:"
}

port=$(free_port)
rmemd_conf "$tmp/run.conf" "$port" 64M
start_daemon "$tmp/run.conf" "$tmp/run.log"
ok $? "rmemd sends READY=1 on NOTIFY_SOCKET"
cp "$tmp/notify.out" "$tmp/ready.out"
grep -q "^check tcp ok" "$tmp/ready.out"
ok $? "the TCP port accepts connections the moment READY=1 arrives"
grep -q "^check unix ok" "$tmp/ready.out"
ok $? "the admin socket accepts connections the moment READY=1 arrives"
lck=$(awk '/^vmlck/ {print $2}' "$tmp/ready.out")
[ -n "$lck" ] && [ "$lck" -ge 65536 ]
ok $? "the 64 MiB pool is locked at READY=1 (VmLck ${lck:-?} kB)"
first_status=$(grep -n '^msg STATUS=' "$tmp/ready.out" | head -1 | cut -d: -f1)
ready_at=$(grep -n '^msg READY=1' "$tmp/ready.out" | head -1 | cut -d: -f1)
[ -n "$first_status" ] && [ -n "$ready_at" ] && [ "$first_status" -lt "$ready_at" ]
ok $? "STATUS= lines come before READY=1"
grep '^msg' "$tmp/ready.out" | diag

# The pool asks for transparent 2 MiB pages; what it gets depends on the
# kernel's shmem_enabled, which this test reads and never changes (the
# systemd VM test, tests/systemd/test_thp.sh, sets it both ways).
thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/shmem_enabled 2> /dev/null)
case "$thp" in
advise | always | within_size | force)
	grep -q 'pool default: .*4096-byte pages (transparent 2 MiB)' "$tmp/run.log"
	ok $? "shmem_enabled $thp: the log says the pool has transparent 2 MiB pages" ;;
*)
	grep -q "pool default: 4 KiB pages, no transparent hugepages (shmem_enabled: ${thp:-unknown}).*/sys/kernel/mm/transparent_hugepage/shmem_enabled" "$tmp/run.log"
	ok $? "shmem_enabled ${thp:-unreadable}: the log names the setting that makes a restart cheap" ;;
esac

bad_lines=$(grep -c -v -E '^<[0-7]>' "$tmp/run.log")
[ -s "$tmp/run.log" ] && [ "$bad_lines" -eq 0 ]
ok $? "every log line carries a <N> syslog priority prefix ($bad_lines without)"

listen_for STOPPING=1 30
rmemd_stop TERM "$tmp/run.log"
ok $rc "SIGTERM: rmemd exits 0 (exit $rc)"
wait_listener
ok $? "SIGTERM: rmemd sent STOPPING=1"

# A daemon killed hard leaves its socket file behind; the next start must cope.
start_daemon "$tmp/run.conf" "$tmp/run2.log"
ok $? "restart on the same config: READY=1"
# (Inside one redirected group, so bash's "Killed" notice goes nowhere.)
{
	kill -KILL "$dpid"
	wait "$dpid"
} 2> /dev/null
dpid=
start_daemon "$tmp/run.conf" "$tmp/run3.log"
rc=$?
ok $rc "start after a SIGKILL (stale admin socket file): READY=1"
[ $rc -eq 0 ] || tail -10 "$tmp/run3.log" | diag
if [ -n "$dpid" ]; then
	rmemd_stop INT "$tmp/run3.log"
	ok $rc "SIGINT: rmemd exits 0 (exit $rc)"
else
	ok 1 "SIGINT: no daemon to stop"
fi

# ---- listen.metrics ----------------------------------------------------------------
# On a port of its own it serves /metrics from READY=1 on; a second rmemd
# that cannot have that port stops at start, naming the key.
port=$(free_port)
mport=$(free_port)
rmemd_conf "$tmp/m.conf" "$port" 16M "127.0.0.1:$mport"
rmemd_start "$tmp/m.conf" "$tmp/m.log" "tcp:$port" "tcp:$mport"
ok $? "listen.metrics = 127.0.0.1:$mport: READY=1"
[ "$(grep -c '^check tcp ok' "$tmp/notify.out")" -eq 2 ]
ok $? "the TCP and the metrics ports accept connections the moment READY=1 arrives"
grep -q "config: listen.metrics = 127.0.0.1:$mport" "$tmp/m.log"
ok $? "the effective config in the log names listen.metrics"
python3 -c 'import sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10) as r:
    print(r.status, r.headers["Content-Type"])
    sys.stdout.write(r.read().decode())' "$mport" > "$tmp/m.page" 2>&1
head -1 "$tmp/m.page" | grep -q "^200 text/plain; version=0.0.4" &&
	grep -q '^rmem_pool_bytes{pool="default"} 16777216$' "$tmp/m.page"
ok $? "GET /metrics: 200, text format 0.0.4, rmem_pool_bytes of the 16 MiB pool" ||
	head -5 "$tmp/m.page" | diag
printf 'listen = { tcp = "127.0.0.1:%s"; rdma = ""; admin = ""; metrics = "127.0.0.1:%s"; };\n%s\n' \
	"$(free_port)" "$mport" 'pools = ( { name = "default"; size = "4M"; hugepages = "off"; } );' \
	> "$tmp/m2.conf"
timeout 60 "$RMEMD" -c "$tmp/m2.conf" > "$tmp/m2.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "listen.metrics: 127.0.0.1:$mport: Address already in use" "$tmp/m2.out"
ok $? "a second rmemd on the same metrics port: exit 1 naming listen.metrics (exit $rc)"
grep "listen.metrics" "$tmp/m2.out" | head -2 | diag
rmemd_stop TERM "$tmp/m.log"
ok $rc "and the first stops with exit 0 (exit $rc)"

tap_done
