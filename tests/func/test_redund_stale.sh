#!/bin/bash
# test_redund_stale.sh - a redundant region's pieces and record across servers
# that go and come back with their memory (issue 30, items 1 and 5).  What it
# checks is at the top of tests/func/test_redund_stale.c.  Three rmemd (s0..s2,
# 64 MiB, membership lease 3000 ms, under starters and fd stores; their
# repair agents off, so that nobody repairs behind the test's back) are
# killed -9, started again from their stores, stopped and continued (past
# their lease, or for less than it), or
# started fresh by the program through this script's hook.
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_redund_stale.sh
# run-tests-timeout: 240
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=3
. tests/lib/redund_hook.sh

# ---- the hook: test_redund_stale runs "$0 --hook DIR CMD ARGS" -----------------------
hook_cmd() {
	case $cmd in
	stale) # 0 when name $1's record marks exactly $2 pieces stale
		v=$(record "$1") || exit 1
		echo "# record: $v" >&2
		[ "$(grep -o '"state":"stale"' <<< "$v" | wc -l)" = "$2" ] ;;
	record) # 0 when name $1 has a record in etcd
		v=$(record "$1") || exit 1
		echo "# record: $v" >&2
		[ -n "$v" ] ;;
	keyrev) # sI's key's create revision (a key that left etcd and came back has another)
		etcdctl_ get "/rmem/$NAME/servers/s$1" -w fields | sed -n 's/^"CreateRevision" : //p' ;;
	ranges) # how many etcd reads (POST /v3/kv/range) went through the recording proxy
		grep -ao "POST /v3/kv/range" "$dir/etcd.rec" | wc -l ;;
	listing) # 0 when rmemctl cluster redundant lists name $1 in state $2
		tab=$("$B/rmemctl" -e "$URL" cluster redundant) || exit 1
		echo "$tab" | sed 's/^/# /' >&2
		grep -q "^$1  *2+1 .* $2 " <<< "$tab" ;;
	*) hook_common "$@" ;;
	esac
}
redund_hook "$@"

. tests/lib/cluster_prog.sh rmem-redund-stale test_redund_stale
NAME=rs$$
redund_up 3000,0 info
# st-short's reader reaches etcd through a recording proxy
# (tests/lib/tcprecord.py), so that the program counts the etcd reads
# its reads make (the hook's "ranges").
: > "$tmp/etcd.rec"
python3 tests/lib/tcprecord.py "127.0.0.1:${etcd_cports[0]}" "$tmp/etcd.rec" \
	> "$tmp/etcd.rec.port" &
echo $! > "$tmp/pids/etcdrec"
for _ in $(seq 200); do [ -s "$tmp/etcd.rec.port" ] && break; sleep 0.05; done
redund_run RMEM_CLUSTER_URL_REC="etcd://127.0.0.1:$(cat "$tmp/etcd.rec.port")/$NAME"
