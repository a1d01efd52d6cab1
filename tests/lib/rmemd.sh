# rmemd.sh - a real rmemd for rmem's shell tests, on private paths and a free
# port, started the way systemd would (NOTIFY_SOCKET, READY=1).  Sourced
# (bash), after tests/lib/tap.sh:
#
#   . tests/lib/rmemd.sh
#   rmemd_setup rmemctl-test           $B, $RMEMD, $tmp (removed at exit)
#   port=$(free_port)
#   rmemd_conf "$tmp/rmemd.conf" "$port" 64M
#   rmemd_start "$tmp/rmemd.conf" "$tmp/rmemd.log" "tcp:$port"
#   ... $dpid is the daemon; $tmp/notify.out what the listener saw ...
#
# The exit trap kills what is left of $dpid (the daemon), $lpid (the notify
# listener) and $hpid (a test's helper) and removes $tmp.

B=${RMEM_BUILD:-build}
RMEMD=$B/rmemd
dpid=
lpid=
hpid=

rmemd_cleanup() {
	[ -n "$hpid" ] && kill -KILL "$hpid" 2> /dev/null
	[ -n "$dpid" ] && kill -KILL "$dpid" 2> /dev/null
	[ -n "$lpid" ] && kill -KILL "$lpid" 2> /dev/null
	wait 2> /dev/null
	rm -rf "$tmp"
}

# rmemd_setup NAME: skips the test without rmemd or python3; makes $tmp.
rmemd_setup() {
	[ -x "$RMEMD" ] || skip_all "$RMEMD is not built"
	command -v python3 > /dev/null || skip_all "python3 is missing"
	tmp=$(mktemp -d "/tmp/$1.XXXXXX") || exit 1
	trap rmemd_cleanup EXIT
}

# A TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
	python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# rmemd_conf FILE PORT POOLSIZE [METRICS]: listen on 127.0.0.1:PORT and
# $tmp/rmemd.sock; listen.metrics is METRICS ("HOST:PORT"), else off, so
# that tests running at once never meet on the default port.
rmemd_conf() {
	cat > "$1" << EOF
listen = { tcp = "127.0.0.1:$2"; rdma = ""; admin = "$tmp/rmemd.sock"; metrics = "${4:-}"; };
pools = ( { name = "default"; size = "$3"; hugepages = "off"; alignment = 64; } );
limits = { max_clients = 64; lease_timeout_ms = 10000; };
log = { level = "debug"; };
EOF
}

# listen_for LINE TIMEOUT [CHECK...]: a notify listener in the background
# ($lpid) on $tmp/notify.sock, writing $tmp/notify.out (notify_listen.py).
listen_for() {
	rm -f "$tmp/notify.sock"
	python3 tests/lib/notify_listen.py "$tmp/notify.sock" "$@" > "$tmp/notify.out" 2>&1 &
	lpid=$!
	for _ in $(seq 200); do
		[ -S "$tmp/notify.sock" ] && return 0
		sleep 0.05
	done
	return 1
}

# wait_listener: its exit status; 0 when the wanted line came.  Gives up
# early when the daemon ($dpid, if set) ends first.
wait_listener() {
	local rc
	while [ -n "$dpid" ] && kill -0 "$lpid" 2> /dev/null; do
		if ! kill -0 "$dpid" 2> /dev/null; then
			sleep 0.2
			kill "$lpid" 2> /dev/null
			break
		fi
		sleep 0.05
	done
	wait "$lpid"
	rc=$?
	lpid=
	return $rc
}

# rmemd_start CONF LOG [CHECK...]: starts rmemd ($dpid) and waits for READY=1;
# the listener checks the sockets and locked memory named by CHECK the
# moment READY=1 arrives.  0 once it did.
rmemd_start() {
	local conf=$1 log=$2
	shift 2
	listen_for READY=1 30 "$@" || return 1
	NOTIFY_SOCKET=$tmp/notify.sock "$RMEMD" -c "$conf" > "$log" 2>&1 &
	dpid=$!
	wait_listener
}

# stage_install DIR LOG: `make install PREFIX=/usr DESTDIR=DIR` of a plain
# (unsanitized) build, as a user would install it; its output to LOG.
stage_install() {
	make -s SANITIZE= WERROR=1 PREFIX=/usr DESTDIR="$1" install > "$2" 2>&1
}

# rmemd_stop SIGNAL LOG: sends SIGNAL to the daemon ($dpid) and reaps it.
# Returns its exit status, also in $rc; the end of LOG goes out as comments
# when that is not 0.
rmemd_stop() {
	kill -"$1" "$dpid" 2> /dev/null
	wait "$dpid"
	rc=$?
	dpid=
	[ $rc -eq 0 ] || tail -30 "$2" | diag
	return $rc
}
