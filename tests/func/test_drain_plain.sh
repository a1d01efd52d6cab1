#!/bin/bash
# test_drain_plain.sh - a drain moves named plain regions (issue 32, second
# part): a real 3-member etcd on loopback and four rmemd of 64 MiB (s0..s3,
# each under its starter and fd store, lease_ms 3000, repair agents on),
# then $B/tests/test_drain_plain, whose TAP stream this is (what it checks
# is at its top).  It calls this script back as its hook
# (tests/lib/redund_hook.sh).
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_drain_plain.sh
# run-tests-timeout: 240
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=4
. tests/lib/redund_hook.sh

# sI's record field $2.
field() {
	server_key "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

hook_cmd() {
	case $cmd in
	tcp) field "$1" tcp ;;
	draining) # 0 once sI's record says draining $2 (1 or 0), within 10 s
		for _ in $(seq 100); do
			[ "$(field "$1" draining 2> /dev/null)" = "$2" ] && exit 0
			sleep 0.1
		done
		exit 1 ;;
	drain | undrain) # rmemctl cluster drain|undrain sI ARGS..., its output as comments
		i=$1
		shift
		"$B/rmemctl" -e "$URL" cluster "$cmd" "s$i" "$@" > "$dir/ctl.out" 2>&1
		rc=$?
		sed 's/^/# rmemctl: /' "$dir/ctl.out" >&2
		exit $rc ;;
	on) # the index of the server name $1's record names, or nothing
		record "$1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["server"][1:])' ;;
	held) # how many live servers hold name $1 (rmemctl names on their sockets)
		n=0
		for ((i = 0; i < NSRV; i++)); do
			kill -0 "$(cat "$dir/pids/rmemd$i")" 2> /dev/null || continue
			"$B/rmemctl" -s "$dir/r$i.sock" --json names 2> /dev/null | python3 -c '
import json, sys
sys.exit(0 if any(n["name"] == sys.argv[1] and not n["unlinked"] for n in json.load(sys.stdin)["names"]) else 1)' "$1" &&
				n=$((n + 1))
		done
		echo "$n" ;;
	copies) # each live server that holds name $1, as "I:HANDLES"
		for ((i = 0; i < NSRV; i++)); do
			kill -0 "$(cat "$dir/pids/rmemd$i")" 2> /dev/null || continue
			"$B/rmemctl" -s "$dir/r$i.sock" --json names 2> /dev/null | python3 -c '
import json, sys
for n in json.load(sys.stdin)["names"]:
    if n["name"] == sys.argv[1] and not n["unlinked"]:
        print("%s:%d" % (sys.argv[2], n["handles"]))' "$1" "$i"
		done | paste -sd' ' ;;
	moved) # the ms a repair agent logged for moving name $1 (its last move)
		grep -h "repair: @anonymous/$1: [0-9]* bytes moved in" "$dir"/r[0-9].log | tail -1 |
			sed 's/.* moved in \([0-9]*\) ms.*/\1/' ;;
	regions) # how many regions sI holds (its admin socket)
		"$B/rmemctl" -s "$dir/r$1.sock" --json regions |
			python3 -c 'import json, sys; print(len(json.load(sys.stdin)["regions"]))' ;;
	freeze-kill) # s0 drained; once its log says a freeze fenced a writer
		# (within 20 s), kill -9 of s0 and SIGCONT of s1 (stopped by the
		# caller: the move's create waits on it): 0 when all happened
		n0=$(grep -c "revoked by a freezing open" "$dir/r0.log")
		"$B/rmemctl" -e "$URL" cluster drain s0 > "$dir/ctl.out" 2>&1 || exit 1
		for _ in $(seq 1000); do
			if (($(grep -c "revoked by a freezing open" "$dir/r0.log") > n0)); then
				cluster_keeper "$dir" 0 kill
				kill -CONT "$(cat "$dir/pids/rmemd1")"
				lead=$(grep -l "repair: @anonymous/$1: moving" "$dir"/r[0-9].log | head -1)
				echo "# ${lead##*/} began the move; s0 killed -9 with $1 frozen" >&2
				exit
			fi
			sleep 0.02
		done
		kill -CONT "$(cat "$dir/pids/rmemd1")"
		exit 1 ;;
	*) hook_common "$@" ;;
	esac
}
redund_hook "$@"

. tests/lib/cluster_prog.sh rmem-drain-plain test_drain_plain
NAME=dp$$
# A membership lease of 3 s: s1 stays in the set while stopped for a moment.
redund_up "${RMEM_REPAIR_LEASE_MS:-3000},1500" info
server_diag() { grep "repair:.*mov\|freezing" "$tmp/r$1.log" | head -8 | sed "s/^/s$1: /" | diag; }
redund_run
