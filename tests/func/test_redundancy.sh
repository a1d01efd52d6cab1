#!/bin/bash
# test_redundancy.sh - erasure-coded redundant regions (issue 21): a real
# 3-member etcd on loopback (tests/lib/etcd.sh) and six rmemd of 64 MiB
# (ids s0..s5, lease_ms 3000), then $B/tests/test_redundancy, whose TAP
# stream this is (what it checks is at its top).  It calls this script back
# as its hook to kill -9 a server and to read a name's record.
# RMEM_TEST_REDUNDANCY=K+R (default 4+2) starts K+R servers instead of six;
# RMEM_TEST_SPARE=1 one more when the program asks for it, onto which it
# repairs (tests/func/rdma/test_redundancy.sh: 2+1 over RDMA).
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_redundancy.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1
KR=${RMEM_TEST_REDUNDANCY:-4+2}
NSRV=$((${KR%+*} + ${KR#*+}))
# The spare's port and configuration are made with the others.
NALL=$NSRV
[ "${RMEM_TEST_SPARE:-}" = 1 ] && NALL=$((NSRV + 1))

# ---- the hook: test_redundancy runs "$0 --hook DIR kill-server I" ---------------------
if [ "${1:-}" = --hook ]; then
	dir=$2 cmd=$3 i=${4:-}
	for fd in $(ls /proc/$$/fd); do
		((fd > 2)) && eval "exec $fd>&-" 2> /dev/null
	done
	case $cmd in
	stale-pieces)
		# exit 0 when the record of name $i marks exactly $5 pieces stale
		. tests/lib/etcd.sh
		. "$dir/state.sh"
		for ((k = 0; k < ETCD_N; k++)); do etcd_pids[$k]=$(cat "$dir/pids/etcd$k"); done
		v=$(etcdctl_ get "/rmem/$NAME/names/@anonymous/$i" --print-value-only) || exit 1
		n=$(grep -o '"state":"stale"' <<< "$v" | wc -l)
		echo "# record: $v" >&2
		[ "$n" = "$5" ]
		exit ;;
	sweep-server)
		# rmemctl cluster sweep with server $i's admin socket, no grace:
		# exit 0 when it reclaims nothing (the pieces have their record)
		. "$dir/state.sh"
		out=$("$B/rmemctl" -e "$URL" -s "$dir/r$i.sock" --grace=0 cluster sweep) || exit 1
		echo "$out" | sed 's/^/# /' >&2
		grep -q "0 regions reclaimed" <<< "$out"
		exit ;;
	listing)
		# rmemctl cluster redundant, table and --json: exit 0 when name
		# $i shows state $5 with $6 pieces not usable (stale or gone),
		# its layout $7 (K+R)
		. "$dir/state.sh"
		tab=$("$B/rmemctl" -e "$URL" cluster redundant) || exit 1
		js=$("$B/rmemctl" -e "$URL" --json cluster redundant) || exit 1
		echo "$tab" | sed 's/^/# /' >&2
		grep -q "^$i  *$7 .* $5 " <<< "$tab" || exit 1
		python3 - "$js" "$i" "$5" "$6" "$7" << 'EOP'
import json, sys
d = json.loads(sys.argv[1])["cluster_redundant"]
r = [x for x in d["regions"] if x["name"] == sys.argv[2]][0]
bad = [p for p in r["pieces"] if p["state"] != "healthy" or not p["server_present"]]
n = sum(int(x) for x in sys.argv[5].split("+"))
ok = (r["state"] == sys.argv[3] and len(bad) == int(sys.argv[4]) and r["redundancy"] == sys.argv[5]
      and len(r["pieces"]) == n and r["usable"] == n - len(bad))
sys.exit(0 if ok else 1)
EOP
		exit ;;
	start-server)
		# rmemd s$i, its configuration written with the others': exit 0
		# once it is registered
		. tests/lib/etcd.sh
		. "$dir/state.sh"
		for ((k = 0; k < ETCD_N; k++)); do etcd_pids[$k]=$(cat "$dir/pids/etcd$k"); done
		"$RMEMD" -c "$dir/r$i.conf" > "$dir/r$i.log" 2>&1 < /dev/null &
		echo $! > "$dir/pids/rmemd$i"
		disown
		for _ in $(seq 600); do
			[ -n "$(etcdctl_ get "/rmem/$NAME/servers/s$i" --print-value-only 2> /dev/null)" ] &&
				exit 0
			kill -0 "$(cat "$dir/pids/rmemd$i")" 2> /dev/null || exit 1
			sleep 0.1
		done
		exit 1 ;;
	kill-server)
		p=$(cat "$dir/pids/rmemd$i") || exit 1
		kill -KILL "$p" || exit 1
		for _ in $(seq 100); do kill -0 "$p" 2> /dev/null || exit 0; sleep 0.05; done
		exit 1 ;;
	esac
	exit 2
fi

. tests/lib/cluster_prog.sh rmem-redundancy test_redundancy
NAME=rd$$
# A server whose keepalive is late is gone: under TCG, beside make test's
# other VMs, etcd can take seconds to answer, and a 3 s lease then ends
# while the server lives (a slow call is not a death).  The clients see a
# kill -9 by its broken connection, not by its lease.
LEASE_MS=3000
[ -n "${RMEM_IN_VM:-}" ] && LEASE_MS=15000

cluster_etcd_up

read -r -a ports <<< "$(free_ports $((2 * NALL)))"
for ((i = 0; i < NALL; i++)); do
	rdma=""
	[ "$TRANSPORT" = rdma ] && rdma="$HOST:${ports[$((i + NALL))]}"
	cluster_conf "$i" "$NAME" "$HOST:${ports[$i]}" "$rdma" "$LEASE_MS" info
	((i < NSRV)) || continue
	"$RMEMD" -c "$tmp/r$i.conf" > "$tmp/r$i.log" 2>&1 < /dev/null &
	echo $! > "$tmp/pids/rmemd$i"
	disown
done
for ((i = 0; i < NSRV; i++)); do
	cluster_registered "$NAME" "$i" 150 || fail_setup "rmemd s$i did not register in etcd"
done

# What the hook needs of this shell.
URL=$(cluster_url "$NAME")
declare -p ETCD_N ETCD_CLUSTER ETCD_BIN ETCDCTL_BIN etcd_cports etcd_pports NAME B URL RMEMD \
	> "$tmp/state.sh"

RMEM_CLUSTER_URL=$URL RMEM_CLUSTER_HOOK="$0 --hook $tmp" "$PROG"
rc=$?
for ((i = 0; i < NALL; i++)); do
	[ -e "$tmp/r$i.log" ] || continue
	grep -i "asan\|runtime error" "$tmp/r$i.log" | head -3 | diag
done
exit $rc
