# rmemd.sh - a real rmemd for rmem's shell tests, on private paths and a free
# port, through the tests' one starter (tests/lib/rmemd_start.py: the way
# systemd would, NOTIFY_SOCKET and READY=1, under the emulated fd store).
# Sourced (bash), after tests/lib/tap.sh:
#
#   . tests/lib/rmemd.sh
#   rmemd_setup rmemctl-test           $B, $RMEMD, $tmp (removed at exit)
#   port=$(free_port)
#   rmemd_conf "$tmp/rmemd.conf" "$port" 64M
#   rmemd_start "$tmp/rmemd.conf" "$tmp/rmemd.log" "tcp:$port"
#   ... $dpid is the daemon; $tmp/notify.out what the starter saw ...
#   rmemd_stop TERM "$tmp/rmemd.log"; rmemd_notified STOPPING=1
#
# The exit trap kills what is left of $dpid (the daemon), $spid (its
# starter) and $hpid (a test's helper) and removes $tmp.

B=${RMEM_BUILD:-build}
RMEMD=$B/rmemd
STARTER=tests/lib/rmemd_start.py
dpid=
spid=
hpid=
# A command that runs rmemd (prlimit ...), for the next rmemd_start.
rmemd_prefix=()

rmemd_cleanup() {
	[ -n "$hpid" ] && kill -KILL "$hpid" 2> /dev/null
	[ -n "$dpid" ] && kill -KILL "$dpid" 2> /dev/null
	[ -n "$spid" ] && kill -TERM "$spid" 2> /dev/null
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
	python3 "$STARTER" --write-only --conf "$1" --port "$2" --pool "$3" \
		--admin "$tmp/rmemd.sock" --metrics-addr "${4:-}"
}

# ---- the starter, in the background ---------------------------------------------
# Its commands go through the fifo DIR/rmemd.ctl, its answers (a line each)
# to DIR/rmemd.answers, so that any process may drive it (a test program's
# hook: tests/lib/cluster.sh).

# rmemd_answer DIR N: the starter's Nth answer in $REPLY; 1 when it did not
# come within 150 s or the starter is gone.
rmemd_answer() {
	local deadline=$((SECONDS + 150)) sp
	sp=$(cat "$1/starter.pid" 2> /dev/null)
	while ((SECONDS <= deadline)); do
		if [ "$(wc -l < "$1/rmemd.answers")" -ge "$2" ]; then
			REPLY=$(sed -n "$2p" "$1/rmemd.answers")
			return 0
		fi
		if [ -n "$sp" ] && ! kill -0 "$sp" 2> /dev/null; then
			REPLY="starter gone: $(tail -3 "$1/starter.err" 2> /dev/null)"
			return 1
		fi
		sleep 0.05
	done
	REPLY=timeout
	return 1
}

# rmemd_ctl DIR CMD: the starter of DIR does CMD (rmemd_start.py says
# which); 0 once it answered, the answer in $REPLY.
rmemd_ctl() {
	local n
	n=$(wc -l < "$1/rmemd.answers")
	# Read and write: never blocks, even when the starter is gone.
	echo "$2" 1<> "$1/rmemd.ctl"
	rmemd_answer "$1" $((n + 1))
}

# rmemd_field KEY: KEY's value in the ready line in $REPLY.
rmemd_field() {
	local w
	for w in $REPLY; do
		[ "${w%%=*}" = "$1" ] && echo "${w#*=}" && return 0
	done
	return 1
}

# rmemd_starter DIR ARGS...: runs the starter (--dir DIR ARGS) in the
# background, its pid in DIR/starter.pid and $spid; 0 once rmemd is ready,
# its pid in $dpid; else 1, with the starter's answer in $REPLY.
rmemd_starter() {
	local dir=$1
	shift
	dpid=
	mkdir -p "$dir"
	rm -f "$dir/rmemd.ctl"
	mkfifo "$dir/rmemd.ctl" || return 1
	: > "$dir/rmemd.answers"
	python3 "$STARTER" --rmemd "$RMEMD" --dir "$dir" "$@" \
		<> "$dir/rmemd.ctl" > "$dir/rmemd.answers" 2> "$dir/starter.err" &
	spid=$!
	echo "$spid" > "$dir/starter.pid"
	rmemd_answer "$dir" 1 && [[ $REPLY == "ready "* ]] || return 1
	dpid=$(rmemd_field pid)
}

# rmemd_start CONF LOG [CHECK...]: starts rmemd on CONF ($dpid) and waits
# for READY=1; the starter checks the sockets and locked memory named by
# CHECK (tcp:PORT, unix:PATH, vmlck:) the moment READY=1 arrives, into
# $tmp/notify.out with every notify line.  0 once it did.
rmemd_start() {
	local conf=$1 log=$2 c args=()
	shift 2
	for c in "$@"; do
		args+=(--check "$c")
	done
	rmemd_quit
	: > "$tmp/notify.out"
	rmemd_starter "$tmp" --conf "$conf" --log "$log" "${args[@]}" -- "${rmemd_prefix[@]}" &&
		return 0
	diag <<< "rmemd did not get ready: $REPLY"
	return 1
}

# rmemd_notified LINE: 0 when the daemon sent LINE since its start.
rmemd_notified() {
	rmemd_ctl "$tmp" "notified $1" && [ "$REPLY" = yes ]
}

# rmemd_kill: kill -9 of the daemon, quietly; 0 once it is gone.
rmemd_kill() {
	rmemd_ctl "$tmp" "stop KILL"
	dpid=
}

# rmemd_quit: the starter of $tmp ends (and its rmemd with it).
rmemd_quit() {
	[ -n "$spid" ] || return 0
	rmemd_ctl "$tmp" quit
	wait "$spid" 2> /dev/null
	spid=
	dpid=
}

# stage_install DIR LOG: `make install PREFIX=/usr DESTDIR=DIR` of a plain
# (unsanitized) build, as a user would install it; its output to LOG.
stage_install() {
	make -s SANITIZE= WERROR=1 PREFIX=/usr DESTDIR="$1" install > "$2" 2>&1
}

# rmemd_stop SIGNAL LOG: sends SIGNAL to the daemon ($dpid) and waits until
# it is gone.  Returns its exit status (128 + signal), also in $rc; the end
# of LOG goes out as comments when that is not 0.
rmemd_stop() {
	rmemd_ctl "$tmp" "stop $1 60000"
	rc=255
	[[ $REPLY == "exit "* ]] && rc=${REPLY#exit }
	dpid=
	[ "$rc" -eq 0 ] || tail -30 "$2" | diag
	return "$rc"
}
