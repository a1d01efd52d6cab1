#!/bin/bash
# test_redund_stale.sh - a redundant region's pieces and record across servers
# that go and come back with their memory (issue 30, items 1 and 5).  What it
# checks is at the top of tests/func/test_redund_stale.c.  Three rmemd (s0..s2,
# 64 MiB, membership lease 3000 ms, under starters and fd stores; their
# repair agents off, so that nobody repairs behind the test's back) are
# killed -9, started again from their stores, stopped and continued, or
# started fresh by the program through this script's hook.
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_redund_stale.sh
# run-tests-timeout: 240
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=3

# ---- the hook: test_redund_stale runs "$0 --hook DIR CMD ARGS" -----------------------
if [ "${1:-}" = --hook ]; then
	dir=$2 cmd=$3
	shift 3
	for fd in $(ls /proc/$$/fd); do
		((fd > 2)) && eval "exec $fd>&-" 2> /dev/null
	done
	. tests/lib/etcd.sh
	. tests/lib/cluster.sh
	. "$dir/state.sh"
	for ((k = 0; k < ETCD_N; k++)); do etcd_pids[$k]=$(cat "$dir/pids/etcd$k"); done
	tmp=$dir
	record() { etcdctl_ get "/rmem/$NAME/names/@anonymous/$1" --print-value-only; }
	key() { etcdctl_ get "/rmem/$NAME/servers/s$1" --print-value-only 2> /dev/null; }
	case $cmd in
	kill) # kill -9 of rmemd sI; its store keeps its memory
		cluster_keeper "$dir" "$1" kill ;;
	start) # rmemd sI started again from its store (its memory, its generation)
		cluster_keeper "$dir" "$1" start && cluster_registered "$NAME" "$1" 150 ;;
	fresh) # rmemd sI started again with a new generation (its memory gone)
		cluster_keeper "$dir" "$1" fresh && cluster_registered "$NAME" "$1" 150 ;;
	stop | cont) # SIGSTOP / SIGCONT of rmemd sI
		kill -"${cmd^^}" "$(cat "$dir/pids/rmemd$1")" ;;
	gone) # 0 once sI's key has left etcd (its lease ended), within 20 s
		for _ in $(seq 200); do
			[ -z "$(key "$1")" ] && exit 0
			sleep 0.1
		done
		exit 1 ;;
	registered) # 0 once sI's key is in etcd, within 15 s
		cluster_registered "$NAME" "$1" 150 ;;
	stale) # 0 when name $1's record marks exactly $2 pieces stale
		v=$(record "$1") || exit 1
		echo "# record: $v" >&2
		[ "$(grep -o '"state":"stale"' <<< "$v" | wc -l)" = "$2" ] ;;
	record) # 0 when name $1 has a record in etcd
		v=$(record "$1") || exit 1
		echo "# record: $v" >&2
		[ -n "$v" ] ;;
	listing) # 0 when rmemctl cluster redundant lists name $1 in state $2
		tab=$("$B/rmemctl" -e "$URL" cluster redundant) || exit 1
		echo "$tab" | sed 's/^/# /' >&2
		grep -q "^$1  *2+1 .* $2 " <<< "$tab" ;;
	pieces) # the index of the server of each piece of name $1, in order
		record "$1" | python3 -c '
import json, sys
print(" ".join(p["server"][1:] for p in json.load(sys.stdin)["pieces"]))' ;;
	*) exit 2 ;;
	esac
	exit
fi

. tests/lib/cluster_prog.sh rmem-redund-stale test_redund_stale
NAME=rs$$

cluster_etcd_up

read -r -a ports <<< "$(free_ports $((2 * NSRV)))"
for ((i = 0; i < NSRV; i++)); do
	rdma=""
	[ "$TRANSPORT" = rdma ] && rdma="$HOST:${ports[$((i + NSRV))]}"
	cluster_conf "$i" "$NAME" "$HOST:${ports[$i]}" "$rdma" "3000,0" info
	cluster_start "$i" || fail_setup "rmemd s$i did not start"
done
for ((i = 0; i < NSRV; i++)); do
	cluster_registered "$NAME" "$i" 150 || fail_setup "rmemd s$i did not register in etcd"
done

URL=$(cluster_url "$NAME")
declare -p ETCD_N ETCD_CLUSTER ETCD_BIN ETCDCTL_BIN etcd_cports etcd_pports NAME B URL NSRV \
	> "$tmp/state.sh"

RMEM_CLUSTER_URL=$URL RMEM_CLUSTER_HOOK="$0 --hook $tmp" "$PROG"
rc=$?
for ((i = 0; i < NSRV; i++)); do
	grep -i "asan\|runtime error" "$tmp/r$i.log" | head -3 | diag
done
exit $rc
