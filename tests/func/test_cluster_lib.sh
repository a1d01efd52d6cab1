#!/bin/bash
# test_cluster_lib.sh - librmem's etcd:// cluster client (issue 12 items 2,
# 3, 4): a real 3-member etcd on loopback (tests/lib/etcd.sh) and three
# rmemd of 64 MiB each (ids s0 s1 s2, lease_ms 3000), then
# $B/tests/test_cluster_lib, whose TAP stream this is (what it checks is
# at its top).  It calls this script back as its hook for what a client
# cannot do itself: kill -9 and restart a server (each rmemd runs under the
# fd store emulator, tests/func/cluster_keeper.py, so a restart can keep its
# memory, as under systemd), kill the etcd leader and bring it back.
#
#   RMEM_BUILD=build tests/func/test_cluster_lib.sh
#   RMEM_TEST_TRANSPORT=rdma RMEM_VM_RDMA_ADDR=ADDR ...   (in the test VM:
#       the servers listen for RDMA on ADDR, every client uses transport rdma)
# run-tests-timeout: 900
set -u
cd "$(dirname "$0")/../.." || exit 1

# ---- the hook: test_cluster_lib runs "$0 --hook DIR CMD [I]" ------------------------------
if [ "${1:-}" = --hook ]; then
	dir=$2 cmd=$3 i=${4:-}
	# No descriptor of the test program (its sockets, its TAP stream) may
	# live on in a daemon started here.
	for fd in $(ls /proc/$$/fd); do
		((fd > 2)) && eval "exec $fd>&-" 2> /dev/null
	done
	. tests/lib/etcd.sh
	. tests/lib/cluster.sh
	. "$dir/state.sh"
	for ((k = 0; k < ETCD_N; k++)); do
		etcd_pids[$k]=$(cat "$dir/pids/etcd$k" 2> /dev/null)
	done
	gone() { ! kill -0 "$1" 2> /dev/null; }
	# keeper I CMD: server I's keeper (cluster_keeper.py) does CMD; 0 if ok.
	keeper() { cluster_keeper "$dir" "$@"; }
	# registered I: 0 once server I's key is back in etcd.
	registered() { cluster_registered "$NAME" "$1" 100; }
	case $cmd in
	kill-server)
		keeper "$i" kill
		exit ;;
	start-server)
		keeper "$i" fresh && registered "$i"
		exit ;;
	restart-server)
		keeper "$i" kill && keeper "$i" start && registered "$i"
		exit ;;
	compact-under-stop)
		# The test program ($i: its pid) stops; every etcd member is
		# killed and started again (its watch's stream is gone); a fake
		# server zz (s0's record under another id) is put and the
		# history compacted past it; then the program goes on: only a
		# full read can show it zz.
		kill -STOP "$i" || exit 1
		for ((k = 0; k < ETCD_N; k++)); do
			p=${etcd_pids[$k]}
			etcd_kill "$k"
			# not this shell's child: wait until its ports are free
			for _ in $(seq 200); do gone "$p" && break; sleep 0.05; done
		done
		for ((k = 0; k < ETCD_N; k++)); do
			etcd_restart "$k"
			echo "${etcd_pids[$k]}" > "$dir/pids/etcd$k"
		done
		rc=1
		if etcd_wait_healthy 120 > /dev/null; then
			v=$(etcdctl_ get "/rmem/$NAME/servers/s0" --print-value-only)
			etcdctl_ put "/rmem/$NAME/servers/zz" "${v/\"id\":\"s0\"/\"id\":\"zz\"}" \
				> /dev/null &&
				rev=$(etcdctl_ endpoint status -w fields | sed -n 's/^"Revision" : //p' |
					head -1) &&
				etcdctl_ compact "$rev" > /dev/null && rc=0
		fi
		kill -CONT "$i"
		exit $rc ;;
	del-fake)
		etcdctl_ del "/rmem/$NAME/servers/zz" > /dev/null
		exit ;;
	kill-leader)
		l=$(etcd_leader) || exit 1
		p=${etcd_pids[$l]}
		kill -KILL "$p" || exit 1
		for _ in $(seq 100); do gone "$p" && break; sleep 0.05; done
		echo "$l" > "$dir/etcd.killed"
		: > "$dir/pids/etcd$l"
		exit 0 ;;
	restart-etcd)
		l=$(cat "$dir/etcd.killed") || exit 1
		etcd_pids[$l]=
		etcd_restart "$l"
		echo "${etcd_pids[$l]}" > "$dir/pids/etcd$l"
		etcd_wait_healthy 20 > /dev/null
		exit ;;
	esac
	exit 2
fi

. tests/lib/cluster_prog.sh rmem-cluster-lib test_cluster_lib
NAME=cl$$

cluster_etcd_up

read -r -a ports <<< "$(free_ports 6)"
eps=
for i in 0 1 2; do
	rdma=""
	[ "$TRANSPORT" = rdma ] && rdma="$HOST:${ports[$((i + 3))]}"
	cluster_conf "$i" "$NAME" "$HOST:${ports[$i]}" "$rdma" 3000 info
	# Under the fd store emulator, so that the test can restart it without
	# loss (cluster_keeper.py).
	cluster_keeper_start "$i"
	eps+="${eps:+ }$HOST:${ports[$i]}"
done
for i in 0 1 2; do
	cluster_registered "$NAME" "$i" 150 || fail_setup "rmemd s$i did not register in etcd"
done

# What the hook needs of this shell.
{
	declare -p ETCD_N ETCD_CLUSTER ETCD_BIN ETCDCTL_BIN etcd_cports etcd_pports tmp B RMEMD NAME
} > "$tmp/state.sh"

url=$(cluster_url "$NAME")
RMEM_CLUSTER_URL=$url RMEM_CLUSTER_EPS=$eps \
	RMEM_CLUSTER_HOOK="$0 --hook $tmp" "$PROG"
rc=$?
for i in 0 1 2; do
	grep -i "error\|asan\|runtime error" "$tmp/r$i.log" | head -3 | diag
done
exit $rc
