# drive.sh - clients driven line by line ($B/tests/hostile_cluster) for the
# shell tests: started on a fifo, asked a command, their answer waited for.
# Sourced after cluster_prog.sh (uses $tmp, $PROG).

# A client: client_start TAG URL (its pid in $tmp/pids/cTAG); ask TAG CMD
# [SECONDS] prints its answer to CMD (waited for up to SECONDS, 20 s; a
# client's first answer, which includes its start, at least 60 s: on a
# loaded host, ASan, an etcd read and a connection per server took over 20).
client_start() {
	mkfifo "$tmp/c$1.in"
	: > "$tmp/c$1.first"
	# Made here, not by the child's redirection: the child opens its
	# output only after the fifo (below) let this shell go on, and an ask
	# that counted the lines of a file not there yet waited its whole
	# timeout for an answer given at once (the "60 s" stalls of
	# test_hostile_writer #28 and test_hostile_cluster #5, #14).
	: > "$tmp/c$1.out"
	"$PROG" "$2" < "$tmp/c$1.in" >> "$tmp/c$1.out" 2> "$tmp/c$1.err" &
	echo $! > "$tmp/pids/c$1"
	eval "exec {fd_$1}> \"$tmp/c$1.in\""
}
ask_send() {
	local fd=fd_$1
	wc -l < "$tmp/c$1.out" > "$tmp/c$1.n"
	# A client that exited must not take this shell with it (SIGPIPE).
	(trap '' PIPE; echo "$2" >&"${!fd}") 2> /dev/null
	return 0
}
ask_wait() {
	local n _ s=${2:-20}
	n=$(cat "$tmp/c$1.n")
	# Its marker goes once this answer came (ask runs in a subshell).
	[ -e "$tmp/c$1.first" ] && [ "$s" -lt 60 ] && s=60
	for _ in $(seq $((s * 20))); do
		if [ "$(wc -l < "$tmp/c$1.out")" -gt "$n" ]; then
			sed -n "$((n + 1))p" "$tmp/c$1.out"
			rm -f "$tmp/c$1.first"
			return 0
		fi
		sleep 0.05
	done
	if kill -0 "$(cat "$tmp/pids/c$1")" 2> /dev/null; then
		echo "(no answer in $s s)"
		# Where it waits, for the test's stderr (run-tests shows it).
		command -v gdb > /dev/null &&
			gdb -p "$(cat "$tmp/pids/c$1")" -batch -ex "thread apply all bt" 2>&1 |
			grep "^#\|^Thread" | sed "s/^/client $1 stuck: /" >&2
	else
		echo "(client $1 exited: $(tr '\n' ' ' < "$tmp/c$1.err"))"
	fi
	return 1
}
ask() { ask_send "$1" "$2" && ask_wait "$1" "${3:-20}"; }
# ask_up TAG CMD: ask, again while the answer is -EHOSTDOWN (up to 5 s): a
# server is out of the client's set until its watch has its new record
# (or, on a loaded host, while its key blinks with a lease it lost).
ask_up() {
	local said _
	for _ in $(seq 50); do
		said=$(ask "$1" "$2")
		[ "${said##* }" != -112 ] && break
		sleep 0.1
	done
	echo "$said"
}
