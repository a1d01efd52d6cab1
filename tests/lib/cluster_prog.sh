# cluster_prog.sh - the frame of a cluster test whose TAP stream is a C
# program (tests/func/test_cluster_lib.sh, test_cluster_tenants.sh).
# Sourced (bash) from the checkout's top with the test's name and its
# program's (none for a test that is its own TAP stream,
# tests/func/test_repair_pace.sh):
#
#   . tests/lib/cluster_prog.sh rmem-cluster-lib test_cluster_lib
#
# sets $tmp, $B, $RMEMD (rmemd.sh), $PROG (skips when it is not built),
# makes $tmp/pids, cleans up at exit (cluster_cleanup: what $tmp/pids/*
# names is killed, keepers first, with TERM; $tmp kept as RMEM_KEEP_TMP
# when set), and gives:
#   fail_setup WHY        one failed assertion, the logs' tails, exit 1
#   cluster_etcd_up       a 3-member etcd on loopback (pids in $tmp/pids/etcdK),
#                         or fail_setup
#   cluster_url NAME      etcd://H:P,H:P,H:P/NAME of that etcd
# and $TRANSPORT (RMEM_TEST_TRANSPORT, tcp by default) with $HOST, the
# address the servers listen on (the VM's rxe address for rdma).
. tests/lib/cluster_test.sh "$1"
if [ -n "${2:-}" ]; then
	PROG=$B/tests/$2
	[ -x "$PROG" ] || skip_all "$PROG is not built"
fi
mkdir -p "$tmp/pids"
TRANSPORT=${RMEM_TEST_TRANSPORT:-tcp}
HOST=127.0.0.1
if [ "$TRANSPORT" = rdma ]; then
	[ -n "${RMEM_VM_RDMA_ADDR:-}" ] || skip_all "RMEM_TEST_TRANSPORT=rdma needs RMEM_VM_RDMA_ADDR"
	HOST=$RMEM_VM_RDMA_ADDR
fi

cluster_cleanup() {
	local f
	[ -n "${RMEM_KEEP_TMP:-}" ] && cp -r "$tmp" "$RMEM_KEEP_TMP"
	# A keeper (tests/func/cluster_keeper.py) stops its rmemd its own way.
	for f in "$tmp"/pids/keeper*; do
		[ -s "$f" ] && kill -TERM "$(cat "$f")" 2> /dev/null
	done
	sleep 0.2
	for f in "$tmp"/pids/*; do
		[ -s "$f" ] && kill -KILL "$(cat "$f")" 2> /dev/null
	done
	etcd_cleanup
	rmemd_cleanup
}
trap cluster_cleanup EXIT

# Setup problems are one failed assertion and the end.
fail_setup() {
	echo "not ok 1 - setup: $*"
	echo "1..1"
	for f in "$tmp"/*.log "$tmp"/etcd/*.log; do [ -f "$f" ] && tail -5 "$f" | diag; done
	exit 1
}

cluster_etcd_up() {
	local k
	# In the test VM (TCG) etcd takes longer than etcd_start's 20 s to settle.
	etcd_start 3 > "$tmp/etcd-start.out" 2>&1 ||
		{ [ -n "${RMEM_IN_VM:-}" ] && etcd_wait_healthy 120 > /dev/null 2>&1; } ||
		fail_setup "a 3-member etcd did not start"
	for ((k = 0; k < ETCD_N; k++)); do
		echo "${etcd_pids[$k]}" > "$tmp/pids/etcd$k"
	done
}

cluster_url() {
	local k hosts=
	for ((k = 0; k < ETCD_N; k++)); do
		hosts+="${hosts:+,}127.0.0.1:${etcd_cports[$k]}"
	done
	echo "etcd://$hosts/$1"
}
