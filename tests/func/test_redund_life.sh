#!/bin/bash
# test_redund_life.sh - redundant regions against their client's threads (issue 30)
# What it checks is at the top of tests/func/test_redund_life.c.  The five
# rmemd (s0..s4, 64 MiB, lease_ms 3000, under starters and fd stores; their
# repair agents off, so that only the test's writer repairs) are killed -9
# and started fresh by the program through this script's hook.
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_redund_life.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=5

# ---- the hook: test_redund_life runs "$0 --hook DIR CMD ARGS" ------------------------
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
	case $cmd in
	kill) # kill -9 of rmemd sI
		cluster_keeper "$dir" "$1" kill ;;
	fresh) # rmemd sI started again with a new generation (its memory gone)
		cluster_keeper "$dir" "$1" fresh && cluster_registered "$NAME" "$1" 150 ;;
	stop | cont) # SIGSTOP / SIGCONT of rmemd sI
		kill -"${cmd^^}" "$(cat "$dir/pids/rmemd$1")" ;;
	made) # the layout generation that made piece $2 of name $1
		record "$1" | python3 -c '
import json, sys
print(json.load(sys.stdin)["pieces"][int(sys.argv[1])]["made"])' "$2" ;;
	pieces) # the index of the server of each piece of name $1, in order
		record "$1" | python3 -c '
import json, sys
print(" ".join(p["server"][1:] for p in json.load(sys.stdin)["pieces"]))' ;;
	*) exit 2 ;;
	esac
	exit
fi

. tests/lib/cluster_prog.sh rmem-redund-life test_redund_life
NAME=rl$$

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
