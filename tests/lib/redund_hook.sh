# redund_hook.sh - the frame of the redundancy and repair tests
# (tests/func/test_redund_life.sh, test_repair.sh, test_repair_hostile.sh,
# test_drain.sh):
# NSRV rmemd under starters and fd stores on a 3-member etcd, and a C
# program, their TAP stream, that calls the script back as its hook
# ("$0 --hook DIR CMD ARGS", RMEM_CLUSTER_HOOK; tests/lib/redund_prog.h).
# Sourced (bash) from the checkout's top, with NSRV set, before anything
# else; the script is then
#
#   hook_cmd() {           # its own commands, if any ($cmd; $1...: ARGS)
#       case $cmd in
#       mine) ... ;;
#       *) hook_common "$@" ;;
#       esac
#   }
#   redund_hook "$@"       # as the hook: runs CMD and exits
#   . tests/lib/cluster_prog.sh rmem-x test_x
#   NAME=x$$
#   redund_up 3000,0 info  # etcd and the servers, or fail_setup
#   redund_run             # the program; its status is the test's
#
# The hook's common commands (hook_common), on server sI:
#   kill I         kill -9 (its fd store keeps its memory: it may come back)
#   start I        started again from its store (memory and generation
#                  kept), then registered in etcd
#   fresh I        started again with a new generation (its memory gone),
#                  then registered in etcd
#   stop I, cont I SIGSTOP, SIGCONT
#   gone I         0 once sI's key has left etcd (its lease ended), within 20 s
#   registered I   0 once sI's key is in etcd, within 15 s
#   pieces NAME    the index of the server of each piece of NAME, in order
# any other: exit 2.  Beside them the hook has record NAME (NAME's record
# in etcd, JSON) and server_key I (sI's key's value, or nothing), $dir and
# $tmp (the test's directory), $NAME, $B, $URL, $NSRV and etcdctl_.

# redund_hook ARGS: nothing unless ARGS are "--hook DIR CMD ...": then
# CMD runs (hook_cmd, else hook_common) with what the test's shell left in
# DIR/state.sh, and the script ends with its status.
redund_hook() {
	local fd k
	[ "${1:-}" = --hook ] || return 0
	dir=$2 cmd=$3
	shift 3
	# No descriptor of the test program (its sockets, its TAP stream) may
	# live on in a daemon started here.
	for fd in $(ls /proc/$$/fd); do
		((fd > 2)) && eval "exec $fd>&-" 2> /dev/null
	done
	. tests/lib/etcd.sh
	. tests/lib/cluster.sh
	. "$dir/state.sh"
	for ((k = 0; k < ETCD_N; k++)); do etcd_pids[$k]=$(cat "$dir/pids/etcd$k"); done
	tmp=$dir
	if declare -F hook_cmd > /dev/null; then
		hook_cmd "$@"
	else
		hook_common "$@"
	fi
	exit
}

record() { etcdctl_ get "/rmem/$NAME/names/@anonymous/$1" --print-value-only; }
server_key() { etcdctl_ get "/rmem/$NAME/servers/s$1" --print-value-only 2> /dev/null; }

# hook_common ARGS: the common command $cmd (above).
hook_common() {
	local _
	case $cmd in
	kill) cluster_keeper "$dir" "$1" kill ;;
	start | fresh) cluster_keeper "$dir" "$1" "$cmd" && cluster_registered "$NAME" "$1" 150 ;;
	stop | cont) kill -"${cmd^^}" "$(cat "$dir/pids/rmemd$1")" ;;
	gone)
		for _ in $(seq 200); do
			[ -z "$(server_key "$1")" ] && return 0
			sleep 0.1
		done
		return 1 ;;
	registered) cluster_registered "$NAME" "$1" 150 ;;
	pieces)
		record "$1" | python3 -c '
import json, sys
print(" ".join(p["server"][1:] for p in json.load(sys.stdin)["pieces"]))' ;;
	*) exit 2 ;;
	esac
}

# redund_up LEASE_MS,GRACE_MS LEVEL [FN]: a 3-member etcd (cluster_etcd_up)
# and rmemd s0..s$((NSRV - 1)) of cluster $NAME (cluster_conf: TCP on
# $HOST, RDMA too when $TRANSPORT is rdma, that membership lease and
# cluster.repair_grace_ms, log level LEVEL; FN I, when given, adds to
# $tmp/rI.conf), each started, then registered in etcd, or fail_setup.
# Sets $URL (cluster_url) and writes $tmp/state.sh for the hook.
redund_up() {
	local i rdma ports
	cluster_etcd_up
	read -r -a ports <<< "$(free_ports $((2 * NSRV)))"
	for ((i = 0; i < NSRV; i++)); do
		rdma=""
		[ "$TRANSPORT" = rdma ] && rdma="$HOST:${ports[$((i + NSRV))]}"
		cluster_conf "$i" "$NAME" "$HOST:${ports[$i]}" "$rdma" "$1" "$2"
		[ -z "${3:-}" ] || "$3" "$i"
		cluster_start "$i" || fail_setup "rmemd s$i did not start"
	done
	for ((i = 0; i < NSRV; i++)); do
		cluster_registered "$NAME" "$i" 150 || fail_setup "rmemd s$i did not register in etcd"
	done
	URL=$(cluster_url "$NAME")
	declare -p ETCD_N ETCD_CLUSTER ETCD_BIN ETCDCTL_BIN etcd_cports etcd_pports NAME B URL NSRV \
		> "$tmp/state.sh"
}

# redund_run [VAR=VALUE...]: $PROG with RMEM_CLUSTER_URL=$URL,
# RMEM_CLUSTER_HOOK (this script's --hook on $tmp) and those in its
# environment; then, as comments, each server's sanitizer reports and what
# the test's server_diag I (if it has one) picks from its log.  Returns the
# program's status.
redund_run() {
	local i rc
	env RMEM_CLUSTER_URL="$URL" RMEM_CLUSTER_HOOK="$0 --hook $tmp" "$@" "$PROG"
	rc=$?
	for ((i = 0; i < NSRV; i++)); do
		grep -i "asan\|runtime error" "$tmp/r$i.log" | head -3 | diag
		if declare -F server_diag > /dev/null; then server_diag "$i"; fi
	done
	return $rc
}
