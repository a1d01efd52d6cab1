#!/bin/bash
# test_repair.sh - repair of redundant regions (issue 21): a real 3-member
# etcd on loopback and eight rmemd of 64 MiB (s0..s7, each under its starter
# and fd store, lease_ms 1000, cluster.repair_grace_ms 1500), then
# $B/tests/test_repair, whose TAP stream this is (what it checks is at its
# top).  It calls this script back as its hook (tests/lib/redund_hook.sh).
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_repair.sh
# run-tests-timeout: 400
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=8
. tests/lib/redund_hook.sh

# ---- the hook: test_repair runs "$0 --hook DIR CMD ARGS" ----------------------------
hook_cmd() {
	case $cmd in
	fresh) # rmemd sI started again with a new generation, not waited for
		cluster_keeper "$dir" "$1" fresh ;;
	leader) # the index of the member leading repair
		for _ in $(seq 100); do
			v=$(etcdctl_ get "/rmem/$NAME/repair/leader" --print-value-only)
			[ -n "$v" ] && { echo "${v#s}"; exit 0; }
			sleep 0.1
		done
		exit 1 ;;
	healthy) # 0 when every piece of name $1 is healthy on a server present
		# in its generation; $2: seconds to wait for it (default: none), by
		# the clock (on a loaded host one look takes far more than 0.1 s)
		end=$((SECONDS + ${2:-0}))
		for ((t = 0; t == 0 || SECONDS < end; t++)); do
			servers=$(etcdctl_ get --prefix "/rmem/$NAME/servers/" --print-value-only)
			record "$1" | python3 -c '
import json, sys
servers = {}
for line in sys.argv[1].splitlines():
    if line.strip().startswith("{"):
        r = json.loads(line)
        servers[r["id"]] = r["generation"]
rec = json.load(sys.stdin)
ok = all(p["state"] == "healthy" and servers.get(p["server"]) == p["generation"]
         for p in rec["pieces"])
sys.exit(0 if ok else 1)' "$servers" && exit 0
			sleep 0.1
		done
		record "$1" | sed 's/^/# record: /' >&2
		exit 1 ;;
	wait-log) # waits (up to 60 s) for rmemd s$1's log to say $2, then
		# kill -9 of it at once: exit 0 when both happened
		for _ in $(seq 1200); do
			if grep -q "$2" "$dir/r$1.log"; then
				cluster_keeper "$dir" "$1" kill
				exit
			fi
			sleep 0.05
		done
		exit 1 ;;
	wait-repairing) # waits (up to 60 s) until rmemd s$1's log says it is
		# rebuilding name $2 and the repair's key is in etcd (rmemctl's
		# "repairing": put once the repair has the region, after the log
		# line), then kill -9 of it at once: exit 0 when both happened
		end=$((SECONDS + 60))
		while ((SECONDS < end)); do
			if grep -q "rebuilding" "$dir/r$1.log" &&
				etcdctl_ get --prefix "/rmem/$NAME/repairing/" --keys-only |
				grep -q "/$2\$"; then
				cluster_keeper "$dir" "$1" kill
				exit
			fi
			sleep 0.05
		done
		exit 1 ;;
	state) # 0 when rmemctl cluster redundant shows name $1 in state $2,
		# in its table and in --json
		tab=$("$B/rmemctl" -e "$URL" cluster redundant) || exit 1
		js=$("$B/rmemctl" -e "$URL" --json cluster redundant) || exit 1
		echo "$tab" | sed 's/^/# /' >&2
		grep -q "^$1  *4+2 .* $2 " <<< "$tab" || exit 1
		python3 -c '
import json, sys
d = json.loads(sys.argv[1])["cluster_redundant"]
sys.exit(0 if [r for r in d["regions"] if r["name"] == sys.argv[2]][0]["state"] == sys.argv[3] else 1)
' "$js" "$1" "$2" ;;
	pieces-held) # how many pieces of name $1 ("$1~M.I") the live servers hold;
		# with $2 and $3: 0 once that is $2, asked for up to $3 seconds
		if [ -n "${2:-}" ]; then
			for ((t = 0; t <= $3 * 5; t++)); do
				[ "$("$0" --hook "$dir" pieces-held "$1")" = "$2" ] && exit 0
				sleep 0.2
			done
			exit 1
		fi
		n=0
		for ((i = 0; i < NSRV; i++)); do
			p=$(cat "$dir/pids/rmemd$i")
			kill -0 "$p" 2> /dev/null || continue
			c=$("$B/rmemctl" -s "$dir/r$i.sock" --json names 2> /dev/null |
				grep -o "\"$1~[0-9]*\.[0-9]*\"" | wc -l)
			n=$((n + c))
		done
		echo "$n" ;;
	*) hook_common "$@" ;;
	esac
}
redund_hook "$@"

. tests/lib/cluster_prog.sh rmem-repair test_repair
# The members' lease: 1000 ms, or RMEM_REPAIR_LEASE_MS where every process
# runs several times slower (tests/func/test_tsan.sh: 5000), since the
# lead's renewals and scans wait on etcd for a third of it.
LEASE_MS=${RMEM_REPAIR_LEASE_MS:-1000}
NAME=rp$$

redund_up "$LEASE_MS,1500" info
server_diag() { grep "repair:" "$tmp/r$1.log" | head -5 | sed "s/^/s$1: /" | diag; }
redund_run
