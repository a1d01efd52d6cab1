#!/bin/bash
# test_drain.sh - draining a member (issue 32, first part): a real 3-member
# etcd on loopback and four rmemd of 64 MiB (s0..s3, each under its starter
# and fd store, lease_ms 1000, cluster.repair_grace_ms 1500; s0 serves
# /metrics), then $B/tests/test_drain, whose TAP stream this is (what it
# checks is at its top).  It calls this script back as its hook
# (tests/lib/redund_hook.sh).
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_drain.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=4
. tests/lib/redund_hook.sh

# sI's record field $2.
field() {
	server_key "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}
# s0's /metrics page.
page() { python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://%s/metrics" % sys.argv[1], timeout=3).read().decode())' \
	"$(cat "$dir/metrics0")"; }

# ---- the hook: test_drain runs "$0 --hook DIR CMD ARGS" -----------------------------
hook_cmd() {
	case $cmd in
	tcp) field "$1" tcp ;;
	record-free) field "$1" free_bytes ;;
	drain | undrain) # rmemctl cluster drain|undrain sI ARGS..., its output as
		# comments; a drain --wait must end saying nothing is left
		i=$1
		shift
		"$B/rmemctl" -e "$URL" cluster "$cmd" "s$i" "$@" > "$dir/ctl.out" 2>&1
		rc=$?
		sed 's/^/# rmemctl: /' "$dir/ctl.out" >&2
		[ $rc = 0 ] || exit $rc
		case "$cmd $*" in
		"drain "*--wait*) grep -q "^s$i: drained: nothing is left on it$" "$dir/ctl.out" ;;
		esac ;;
	drain-refused) # rmemctl cluster drain sI: exit 1 with the figures, no key
		"$B/rmemctl" -e "$URL" cluster drain "s$1" > "$dir/ctl.out" 2>&1
		rc=$?
		sed 's/^/# rmemctl: /' "$dir/ctl.out" >&2
		[ $rc = 1 ] &&
			grep -q "refused: s$1 holds 24.0 MiB .*; the other members have 18.0 MiB free" \
				"$dir/ctl.out" &&
			[ -z "$(etcdctl_ get "/rmem/$NAME/drain/s$1" --print-value-only)" ] ;;
	key) [ -n "$(etcdctl_ get "/rmem/$NAME/drain/s$1" --print-value-only)" ] ;;
	listed) # rmemctl cluster shows sI draining, as a table and as JSON
		"$B/rmemctl" -e "$URL" cluster > "$dir/ctl.out" || exit 1
		sed 's/^/# /' "$dir/ctl.out" >&2
		grep -q "^s$1  .* draining$" "$dir/ctl.out" || exit 1
		"$B/rmemctl" -e "$URL" --json cluster | python3 -c '
import json, sys
s = {x["id"]: x for x in json.load(sys.stdin)["servers"]}
sys.exit(0 if s[sys.argv[1]]["draining"] is True and
         all(not v["draining"] for k, v in s.items() if k != sys.argv[1]) else 1)' "s$1" ;;
	metric) page | awk -v m="$1" '$1 == m { print $2 }' ;;
	promcheck)
		page > "$dir/m0.txt" || exit 1
		promtool check metrics < "$dir/m0.txt" > "$dir/promtool.out" 2>&1
		rc=$?
		sed 's/^/# promtool: /' "$dir/promtool.out" >&2
		exit $rc ;;
	regions) # how many regions sI holds (its admin socket)
		"$B/rmemctl" -s "$dir/r$1.sock" --json regions |
			python3 -c 'import json, sys; print(len(json.load(sys.stdin)["regions"]))' ;;
	kill-moving) # once the repair leader's log says it is moving name $1
		# (within 60 s), kill -9 of s0 at once: 0 when both happened
		lead=$(etcdctl_ get "/rmem/$NAME/repair/leader" --print-value-only)
		lead=${lead#s}
		[ -n "$lead" ] || exit 1
		for _ in $(seq 1200); do
			if grep -q "moving .* $1 \|/$1: moving" "$dir/r$lead.log"; then
				cluster_keeper "$dir" 0 kill
				echo "# s$lead led the move; s0 killed -9" >&2
				exit
			fi
			sleep 0.05
		done
		exit 1 ;;
	held) # how many pieces of name $1 ("$1~M.I") the live servers hold
		n=0
		for ((i = 0; i < NSRV; i++)); do
			kill -0 "$(cat "$dir/pids/rmemd$i")" 2> /dev/null || continue
			c=$("$B/rmemctl" -s "$dir/r$i.sock" --json names 2> /dev/null |
				grep -o "\"$1~[0-9]*\.[0-9]*\"" | wc -l)
			n=$((n + c))
		done
		echo "$n" ;;
	healthy) # 0 once every piece of name $1 is healthy on a server present in
		# its generation, within $2 seconds
		end=$((SECONDS + $2))
		while ((SECONDS <= end)); do
			servers=$(etcdctl_ get --prefix "/rmem/$NAME/servers/" --print-value-only)
			record "$1" | python3 -c '
import json, sys
gens = {}
for line in sys.argv[1].splitlines():
    if line.strip().startswith("{"):
        r = json.loads(line)
        gens[r["id"]] = r["generation"]
rec = json.load(sys.stdin)
sys.exit(0 if all(p["state"] == "healthy" and gens.get(p["server"]) == p["generation"]
                  for p in rec["pieces"]) else 1)' "$servers" && exit 0
			sleep 0.2
		done
		record "$1" | sed 's/^/# record: /' >&2
		exit 1 ;;
	status) # 0 once sI's starter got STATUS=$2 (its notify.out), within 10 s
		for _ in $(seq 100); do
			tail -1 "$dir/s$1/notify.out" 2> /dev/null | grep -qxF "msg STATUS=$2" && exit 0
			sleep 0.1
		done
		grep STATUS "$dir/s$1/notify.out" | tail -3 | sed 's/^/# notify: /' >&2
		exit 1 ;;
	*) hook_common "$@" ;;
	esac
}
redund_hook "$@"

. tests/lib/cluster_prog.sh rmem-drain test_drain
command -v promtool > /dev/null || skip_all "promtool is not installed"
NAME=dr$$
# s0 serves /metrics on a port of its own.
metrics0() {
	[ "$1" = 0 ] || return 0
	echo "127.0.0.1:$(free_port)" > "$tmp/metrics0"
	sed -i "s|metrics = \"\"|metrics = \"$(cat "$tmp/metrics0")\"|" "$tmp/r0.conf"
}
# The members' lease: 1000 ms, or RMEM_REPAIR_LEASE_MS where every process
# runs several times slower (tests/func/test_tsan.sh: 5000).
redund_up "${RMEM_REPAIR_LEASE_MS:-1000},1500" info metrics0
server_diag() { grep "repair:\|draining" "$tmp/r$1.log" | head -8 | sed "s/^/s$1: /" | diag; }
redund_run
