#!/bin/bash
# test_cluster.sh - rmemd's membership in a cluster on etcd (issue 12, item
# 1): a real 3-member etcd cluster on loopback (tests/lib/etcd.sh) and three
# rmemd of 64 MiB each.  Checks each server's key, its JSON and its lease;
# that the figures follow a large allocation but not a tiny one; that
# killing the etcd leader stops neither a keepalive nor a client's I/O; that
# a lost lease is replaced; that kill -9 takes the key away within lease_ms
# + 2.5 s (the time is printed) and SIGTERM at once (revoked); that rmemctl
# cluster lists the servers (table and JSON) and loses a dead one as fast;
# that with every
# etcd member down rmemd serves on and says so once, and registers again
# when etcd is back; that a bad cluster block is refused with FILE:LINE.
# TAP output.
#
# With RMEM_TEST_TRANSPORT=rdma (tests/func/rdma/test_cluster.sh, in the
# Soft-RoCE VM) the three rmemd listen on the VM's RDMA address, each with
# an RDMA port of its own on the one rxe device, advertise it, and the
# test's clients hold memory and do their I/O over rdma://.
#
#   RMEM_BUILD=build tests/func/test_cluster.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/lib/rmemd.sh
. tests/lib/etcd.sh
. tests/lib/cluster.sh
if [ "${RMEM_TEST_TRANSPORT:-tcp}" = rdma ]; then
	[ -n "${RMEM_VM_RDMA_ADDR:-}" ] ||
		skip_all "RMEM_TEST_TRANSPORT=rdma needs RMEM_VM_RDMA_ADDR (the Soft-RoCE VM, tests/vm)"
	H=$RMEM_VM_RDMA_ADDR
	SCHEME=rdma://
	# Under TCG a raft proposal takes a second or more and etcdctl as long
	# to start: slower raft timing, a longer lease (and with it each call's
	# timeout), longer waits, and only what RDMA changes in a cluster: each
	# server's RDMA endpoint in its key, in rmemctl's listing (table and
	# JSON) and in the cluster's summed stats, an rdma:// client's I/O on a
	# member, and SIGTERM's revoke with RDMA sessions up.  The rest (the
	# /metrics page, the figures' refresh, etcd's leader dying, a lost
	# lease, kill -9 and the lease's end, bad cluster blocks) is the same
	# code whatever the transport and runs on the host only (issue 31: the
	# VM repeats what real verbs change; it took 629 s of a TCG guest).
	FULL=0
	LEASE_MS=10000
	# 5 s was missed once by 0.65 s (15653 ms) on a host loaded by four
	# other builds: a TCG guest, and an etcd whose leader changed in the
	# section before (a new leader renews every lease it inherits).
	SLACK_MS=8000
	WAIT_S=90
	export ETCD_HEARTBEAT_MS=200 ETCD_ELECTION_MS=2000
else
	H=127.0.0.1
	SCHEME=tcp://
	FULL=1
	LEASE_MS=3000
	# The bound on a key's end after kill -9 (etcd's lessor checks every
	# 500 ms, then a raft round) and on SIGTERM's revoke: 1 s was missed
	# in CI with the VM suites and six other tests beside it, so 2.5 s,
	# still under the lease itself: a key that outlived its lease by a
	# whole TTL would fail.
	SLACK_MS=2500
	WAIT_S=15
fi
TTL_S=$(((LEASE_MS + 999) / 1000))
rmemd_setup rmem-cluster
etcd_setup
CLIENT=$B/tests/cluster_client
[ -x "$CLIENT" ] || skip_all "$CLIENT is not built"

POOL=$((64 << 20))
NAME=t$$
rpids=()
rports=()
rdports=()
cpids=()

cleanup_all() {
	local p
	for p in "${cpids[@]}" "${rpids[@]}"; do
		[ -n "$p" ] && kill -KILL "$p" 2> /dev/null
	done
	for p in "$tmp"/pids/keeper*; do
		[ -s "$p" ] && kill -TERM "$(cat "$p")" 2> /dev/null
	done
	etcd_cleanup
	rmemd_cleanup
}
trap cleanup_all EXIT

# ---- etcd ----------------------------------------------------------------------------
etcd_start 3 || etcd_wait_healthy $WAIT_S
ok $? "a 3-member etcd cluster starts on loopback and is healthy ($ETCD_ENDPOINTS)"

# ---- three rmemd -----------------------------------------------------------------------
# rmemd_conf_cluster I: $tmp/rI.conf, server id sI.
rmemd_conf_cluster() {
	cluster_conf "$1" "$NAME" "$H:${rports[$1]}" "$(rdma_of "$1")" "$LEASE_MS" debug
}

# rdma_of I: server I's RDMA endpoint ("" over TCP: RDMA off).
rdma_of() {
	[ "$SCHEME" = rdma:// ] && echo "$H:${rdports[$1]}"
}

# key I: the key of server I.
key() { echo "/rmem/$NAME/servers/s$1"; }

# get I FIELD: FIELD of server I's key as etcdctl -w fields prints it
# (Key, Value, Lease, ModRevision...); empty when there is no key.
get() {
	etcdctl_ get "$(key "$1")" -w fields 2> /dev/null | sed -n "s/^\"$2\" : //p" | head -1
}

# value I: server I's JSON value; empty when there is no key.
value() { etcdctl_ get "$(key "$1")" --print-value-only 2> /dev/null; }

# json FIELD: FIELD of the JSON on stdin.
json() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# wait_key I present|absent SECONDS: 0 once the key is (or is not) there.
wait_key() {
	local deadline=$((SECONDS + $3)) v
	while ((SECONDS <= deadline)); do
		v=$(value "$1")
		if [ "$2" = present ] && [ -n "$v" ]; then return 0; fi
		if [ "$2" = absent ] && [ -z "$v" ]; then return 0; fi
		sleep 0.1
	done
	return 1
}

# ctl_exits CODE TEXT WHAT ARG...: rmemctl ARG... exits CODE saying TEXT (a
# grep pattern) on stderr: the assertion WHAT.
ctl_exits() {
	local code=$1 text=$2 what=$3 rc
	shift 3
	"$RMEMCTL" "$@" > /dev/null 2> "$tmp/ctl.err"
	rc=$?
	diag < "$tmp/ctl.err"
	[ $rc -eq "$code" ] && grep -q "$text" "$tmp/ctl.err"
	ok $? "$what"
}

# start_rmemd I: rmemd sI through its starter (cluster_start), its pid in
# rpids[I]; end_rmemd I: its exit status once it is gone (after a signal
# the test sent: a second SIGTERM would be another request).
start_rmemd() {
	# As by hand, without the fd store: a SIGTERM is a stop (the lease is
	# revoked), not a restart.
	cluster_start "$1" --no-store || diag <<< "s$1 did not get ready: $REPLY"
	rpids[$1]=$dpid
}
end_rmemd() {
	rmemd_ctl "$tmp/s$1" "stop 0 60000" && [[ $REPLY == "exit "* ]] || return 255
	return "${REPLY#exit }"
}

read -r -a ports <<< "$(free_ports 6)"
for i in 0 1 2; do
	rports[$i]=${ports[$i]}
	rdports[$i]=${ports[$((i + 3))]}
	rmemd_conf_cluster "$i"
done
# s2 shows its cluster state on /metrics too.
mport=$(free_port)
sed -i "s|metrics = \"\"|metrics = \"127.0.0.1:$mport\"|" "$tmp/r2.conf"
for i in 0 1 2; do
	start_rmemd "$i"
done

# state STATE: 0 when s2's /metrics says rmem_cluster_state{state="STATE"} 1.
state() {
	python3 -c 'import sys, urllib.request
page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=3).read()
sys.exit(0 if ("rmem_cluster_state{state=\"%s\"} 1\n" % sys.argv[2]).encode() in page else 1)' \
		"$mport" "$1" 2> /dev/null
}
# wait_state STATE SECONDS
wait_state() {
	local deadline=$((SECONDS + $2))
	while ((SECONDS <= deadline)); do
		state "$1" && return 0
		sleep 0.2
	done
	return 1
}
# metric NAME: the value of the series NAME on s2's /metrics (empty if none).
metric() {
	python3 -c 'import sys, urllib.request
page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=3).read().decode()
for line in page.splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(line.split()[1])' "$mport" "$1" 2> /dev/null
}
# wait_metric NAME VALUE SECONDS
wait_metric() {
	local deadline=$((SECONDS + $3))
	while ((SECONDS <= deadline)); do
		[ "$(metric "$1")" = "$2" ] && return 0
		sleep 0.2
	done
	return 1
}
for i in 0 1 2; do
	wait_key "$i" present $WAIT_S
	ok $? "rmemd s$i registers $(key "$i")"
done
if [ $FULL = 1 ]; then
wait_state registered 10
ok $? "s2's /metrics says rmem_cluster_state{state=\"registered\"} 1"
sleep 1.5 # a keepalive or more
python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=3).read().decode())' \
	"$mport" > "$tmp/m2.txt"
grep "^rmem_cluster" "$tmp/m2.txt" | diag
age=$(metric rmem_cluster_last_answer_age_seconds)
[ "$(metric rmem_cluster_registered)" = 1 ] && [ "$(metric rmem_cluster_etcd_reachable)" = 1 ] &&
	[ "$(metric rmem_cluster_registrations_total)" = 1 ] &&
	[ "$(metric rmem_cluster_leases_lost_total)" = 0 ] &&
	[ "$(metric rmem_cluster_etcd_unreachable_total)" = 0 ] &&
	[ "$(metric rmem_cluster_lease_renewals_total)" -ge 1 ] &&
	{ [ $FULL = 0 ] || [ "$(metric rmem_cluster_lease_renewal_failures_total)" = 0 ]; } &&
	python3 -c 'import sys; sys.exit(0 if 0 <= float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$age" \
		"$((LEASE_MS / 2000)).5"
ok $? "s2's /metrics: registered 1, etcd reachable 1, 1 registration, renewals, no failure, last answer ${age}s ago"
promtool check metrics < "$tmp/m2.txt" > "$tmp/promtool.out" 2>&1
rc=$?
diag < "$tmp/promtool.out"
ok $rc "promtool check metrics passes on a cluster member's page"
fi # FULL

# ---- the key, its JSON, its lease --------------------------------------------------------
now_ms=$(($(date +%s) * 1000))
for i in 0 1 2; do
	v=$(value "$i")
	echo "$v" | diag
	# One python3 for the fields (each start is a second under TCG).
	{ read -r f_id; read -r f_tcp; read -r f_rdma; read -r f_pool; read -r f_free
		read -r f_largest; read -r f_gen; read -r st; } < <(echo "$v" | python3 -c '
import json, sys
v = json.load(sys.stdin)
for k in ("id", "tcp", "rdma", "pool_bytes", "free_bytes", "largest_free", "generation",
          "start_time_ms"):
    print(v[k])' 2> /dev/null)
	[ "${f_id:-}" = "s$i" ] && [ "${f_tcp:-}" = "$H:${rports[$i]}" ] &&
		[ "${f_rdma:-}" = "$(rdma_of "$i")" ] && [ "${f_pool:-}" = "$POOL" ] &&
		[ "${f_free:-}" = "$POOL" ] && [ "${f_largest:-}" = "$POOL" ] &&
		[ "${f_gen:-0}" -gt 0 ] && [ -n "${st:-}" ] &&
		((st > now_ms - 3600000 && st <= now_ms + 1000))
	ok $? "s$i's value: id, tcp endpoint, rdma endpoint (${SCHEME%://}), pool/free/largest = 64 MiB, generation, start time"
	lease=$(get "$i" Lease)
	ttl=$(etcdctl_ lease timetolive "$(printf %x "$lease")" 2> /dev/null)
	[ "$lease" -gt 0 ] 2> /dev/null && [[ $ttl == *"TTL(${TTL_S}s)"* ]]
	ok $? "s$i's key is under lease $lease granted with a TTL of lease_ms ($ttl)"
done

# ---- rmemctl cluster: the listing, as a table and as JSON ------------------------------------
RMEMCTL=$B/rmemctl
EURL="etcd://${ETCD_ENDPOINTS//http:\/\//}/$NAME"
# table_ok FILE: the titles, and a row per server with its figures.
table_ok() {
	local i
	head -1 "$1" | grep -q "^ID  *STATE  *TCP  *RDMA  *POOL  *USED  *FREE  *LARGEST FREE  *GENERATION  *UP  *LEASE  *REGIONS  *DRAIN$" &&
		[ "$(grep -c "^s[012] " "$1")" = 3 ] || return 1
	for i in 0 1 2; do
		grep -q "^s$i  *up  *$H:${rports[$i]}  *$(rdma_of "$i" | grep . || echo -)  *64.0 MiB  *0 B  *64.0 MiB  *64.0 MiB  *[0-9][0-9]*  .*[1-9][0-9]*/${TTL_S}s  *0  *-$" "$1" ||
			return 1
	done
}
# A server whose renewal came late on a loaded host is listed "late" for a
# moment (a third of the lease or less left): up to 5 s for all three "up".
for _ in $(seq 10); do
	"$RMEMCTL" -e "$EURL" cluster > "$tmp/ctl.txt" 2> "$tmp/ctl.err"
	rc=$?
	[ $rc -eq 0 ] && table_ok "$tmp/ctl.txt" && break
	sleep 0.5
done
diag < "$tmp/ctl.txt"
diag < "$tmp/ctl.err"
[ $rc -eq 0 ] && table_ok "$tmp/ctl.txt"
ok $? "rmemctl -e $EURL cluster lists s0, s1, s2: up, endpoints, 64 MiB free, lease n/${TTL_S}s"
# jsoncheck FILE: the listing's figures against what each server should say.
cat > "$tmp/jsoncheck.py" << 'EOP'
import json, sys
doc = json.load(open(sys.argv[1]))
name, pool = sys.argv[2], int(sys.argv[3])
ports, gens = sys.argv[4:7], [int(g) for g in sys.argv[7:10]]
host, rdmas, ttl = sys.argv[10], sys.argv[11:14], int(sys.argv[14])
assert doc["cluster"] == name, doc["cluster"]
srv = {s["id"]: s for s in doc["servers"]}
assert sorted(srv) == ["s0", "s1", "s2"], sorted(srv)
for i in range(3):
    s = srv["s%d" % i]
    assert s["state"] == "up", s
    assert s["tcp"] == host + ":" + ports[i] and s["rdma"] == rdmas[i], s
    assert s["pool_bytes"] == pool and s["free_bytes"] == pool, s
    assert s["used_bytes"] == 0 and s["largest_free"] == pool, s
    assert s["generation"] == gens[i], (s, gens[i])
    assert s["lease"] > 0 and s["lease_granted_s"] == ttl, s
    assert 1 <= s["lease_ttl_s"] <= ttl, s
    assert 0 <= s["uptime_ms"] < 3600000, s
    assert s["draining"] is False and s["regions"] == 0, s
EOP
# The same moment of "late" as above: up to 5 s for a listing all "up".
for _ in $(seq 10); do
	"$RMEMCTL" -e "$EURL" --json cluster > "$tmp/ctl.json" 2>&1
	rc_json=$?
	[ $rc_json -eq 0 ] && python3 -m json.tool "$tmp/ctl.json" > /dev/null
	rc_json=$?
	python3 "$tmp/jsoncheck.py" "$tmp/ctl.json" "$NAME" "$POOL" "${rports[@]}" \
		"$(value 0 | json generation)" "$(value 1 | json generation)" \
		"$(value 2 | json generation)" "$H" "$(rdma_of 0)" "$(rdma_of 1)" "$(rdma_of 2)" \
		"$TTL_S" > "$tmp/jsoncheck.out" 2>&1
	rc=$?
	[ $rc_json -eq 0 ] && [ $rc -eq 0 ] && break
	sleep 0.5
done
ok $rc_json "rmemctl --json cluster prints JSON that python3 -m json.tool accepts"
diag < "$tmp/jsoncheck.out"
ok $rc "the JSON gives each server's id, state up, endpoints, pool/used/free/largest, generation, lease 1..$TTL_S of $TTL_S s"
"$RMEMCTL" -e "$EURL" --json stats > "$tmp/stats.json" 2> "$tmp/ctl.err"
rc=$?
diag < "$tmp/ctl.err"
[ $rc -eq 0 ] && [ "$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["stats"]["pool_bytes"])' "$tmp/stats.json")" = $((3 * POOL)) ]
ok $? "rmemctl -e $EURL stats: a cluster client's stats, summed over the three servers"
if [ $FULL = 1 ]; then
ctl_exits 2 "needs an etcd endpoint" \
	"rmemctl -c HOST:PORT cluster: exit 2, 'needs an etcd endpoint'" \
	-c "127.0.0.1:${rports[0]}" cluster
ctl_exits 1 "reading /rmem/$NAME/servers/ from etcd" \
	"rmemctl cluster with no etcd there: exit 1, says etcd cannot be read" \
	-e "etcd://127.0.0.1:$(free_port)/$NAME" cluster

# ---- the figures: a large allocation moves them, a tiny one does not -----------------------
ep0=$SCHEME$H:${rports[0]}

# hold NAME ENDPOINT SIZE: a client holding SIZE bytes until release NAME
# (its stdin is a fifo the test keeps open); 0 once it said "allocated".
declare -A hold_fd hold_pid
hold() {
	local fd
	mkfifo "$tmp/$1.in"
	"$CLIENT" "$2" alloc "$3" < "$tmp/$1.in" > "$tmp/$1.out" 2>&1 &
	hold_pid[$1]=$!
	cpids+=("$!")
	exec {fd}> "$tmp/$1.in"
	hold_fd[$1]=$fd
	for _ in $(seq 100); do
		grep -q allocated "$tmp/$1.out" && return 0
		sleep 0.1
	done
	return 1
}
# release NAME: the client frees and exits; its exit status.
release() {
	exec {hold_fd[$1]}>&-
	wait "${hold_pid[$1]}"
}

# wait_free I WANT: 0 once server I's free_bytes is WANT (polled for up to
# 10 s: the refresh is immediate, the bound is for a loaded host); what it
# was last in $got.
wait_free() {
	got=
	for _ in $(seq 100); do
		got=$(value "$1" | json free_bytes)
		[ "$got" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

rev0=$(get 0 ModRevision)
hold tiny "$ep0" 4096
ok $? "a client holds 4 KiB on s0"
sleep 1.5
[ "$(get 0 ModRevision)" = "$rev0" ] && [ "$(value 0 | json free_bytes)" = "$POOL" ]
ok $? "a 4 KiB allocation (below the refresh step) writes nothing to etcd"
hold big "$ep0" $((16 << 20))
ok $? "a client holds 16 MiB on s0"
want=$((POOL - (16 << 20) - 4096))
wait_free 0 "$want"
ok $? "after a 16 MiB allocation s0's free_bytes follows ($got, want $want)"
release big
ok $? "the 16 MiB client frees and exits 0"
wait_free 0 $((POOL - 4096))
ok $? "after the free s0's free_bytes is back ($got)"
release tiny
fi # FULL

if [ $FULL = 1 ]; then
# ---- the etcd leader dies: keepalives and clients' I/O go on ------------------------------
leases_before="$(get 0 Lease) $(get 1 Lease) $(get 2 Lease)"
"$CLIENT" "$SCHEME$H:${rports[1]}" io 8 > "$tmp/io.out" 2>&1 &
io_pid=$!
cpids+=("$io_pid")
sleep 1
leader=$(etcd_leader)
[ -n "$leader" ]
ok $? "etcdctl endpoint status names a leader (member $leader)"
etcd_kill "$leader"
sleep $((LEASE_MS / 1000 + 2))
leases_after="$(get 0 Lease) $(get 1 Lease) $(get 2 Lease)"
[ "$leases_before" = "$leases_after" ]
ok $? "with the leader killed, every key stays under its lease, kept alive ($leases_after)"
wait "$io_pid"
rc=$?
diag < "$tmp/io.out"
ok $rc "a ${SCHEME%://} client of s1 read and wrote throughout, every block verified"
etcd_restart "$leader"
etcd_wait_healthy 20
ok $? "the killed member rejoins"
grep -c "etcd is unreachable" "$tmp"/r[012].log | diag
else
# ---- an rdma:// client's I/O on a member ----------------------------------------------------
"$CLIENT" "$SCHEME$H:${rports[1]}" io 4 > "$tmp/io.out" 2>&1
rc=$?
diag < "$tmp/io.out"
ok $rc "a ${SCHEME%://} client of s1 reads and writes, every block verified"
fi

if [ $FULL = 1 ]; then
# ---- a lost lease: registered again ---------------------------------------------------------
old=$(get 2 Lease)
etcdctl_ lease revoke "$(printf %x "$old")" > /dev/null 2>&1
ok $? "the test revokes s2's lease from outside"
new=
for _ in $(seq 60); do
	new=$(get 2 Lease)
	[ -n "$new" ] && [ "$new" != "$old" ] && break
	sleep 0.1
done
[ -n "$new" ] && [ "$new" != "$old" ] && grep -q "is lost" "$tmp/r2.log"
ok $? "s2 sees its lease lost and registers again under a new one ($old -> $new)"
wait_metric rmem_cluster_registrations_total 2 10 &&
	[ "$(metric rmem_cluster_leases_lost_total)" = 1 ] &&
	[ "$(metric rmem_cluster_registered)" = 1 ]
ok $? "s2's /metrics: 1 lease lost, 2 registrations, registered again"

# ---- kill -9: the key goes when the lease ends -------------------------------------------------
v0_before=$(value 0)
t0=$(date +%s%N)
kill -KILL "${rpids[0]}"
end_rmemd 0
rpids[0]=
# Watched through rmemctl cluster, as an operator would: s0 is listed (late
# once its lease runs low) until etcd ends the lease.
late=no
listed=yes
deadline=$((SECONDS + LEASE_MS / 1000 + 10))
while ((SECONDS <= deadline)); do
	"$RMEMCTL" -e "$EURL" cluster > "$tmp/ctl9.txt" 2>&1 || break
	grep -q "^s0  *late " "$tmp/ctl9.txt" && late=yes
	if ! grep -q "^s0 " "$tmp/ctl9.txt"; then
		listed=no
		break
	fi
	sleep 0.05
done
t_ctl=$(date +%s%N)
wait_key 0 absent $((LEASE_MS / 1000 + 10))
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
ms_ctl=$(((t_ctl - t0) / 1000000))
echo "# kill -9 of s0: gone from rmemctl cluster after $ms_ctl ms, its key after $ms ms" \
	"(lease_ms $LEASE_MS; listed as late before: $late)"
((ms <= LEASE_MS + SLACK_MS))
ok $? "kill -9: s0's key is gone within lease_ms + $((SLACK_MS / 1000)) s ($ms ms)"
[ $listed = no ] && ((ms_ctl <= LEASE_MS + SLACK_MS)) && [ "$(grep -c "^s[12]  *up " "$tmp/ctl9.txt")" = 2 ]
ok $? "kill -9: s0 is gone from rmemctl cluster within lease_ms + $((SLACK_MS / 1000)) s ($ms_ctl ms); s1, s2 up"

# ---- the same id again: a restarted s0 is s0 ------------------------------------------------------
gen_before=$(echo "$v0_before" | json generation)
start_rmemd 0
wait_key 0 present 10
ok $? "s0 restarted with the same config registers $(key 0) again"
v=$(value 0)
[ "$(echo "$v" | json id)" = s0 ] && [ "$(echo "$v" | json tcp)" = "$H:${rports[0]}" ] &&
	[ "$(echo "$v" | json generation)" -gt "$gen_before" ]
ok $? "same id and endpoint, a new generation (its memory was lost)"

# ---- two servers with one id: the second waits, never takes the key over ----------------------------
dport=$(free_port)
# (its own RDMA port too, over RDMA: only the id is the same)
sed -e "s/$H:${rports[2]}/$H:$dport/" -e "s|$tmp/r2.sock|$tmp/dup.sock|" \
	-e "s|metrics = \"127.0.0.1:$mport\"|metrics = \"\"|" \
	-e "s|rdma = \"$H:${rdports[2]}\"|rdma = \"$H:$(free_port)\"|" \
	"$tmp/r2.conf" > "$tmp/dup.conf"
"$RMEMD" -c "$tmp/dup.conf" > "$tmp/dup.log" 2>&1 &
dup_pid=$!
cpids+=("$dup_pid")
for _ in $(seq 50); do
	grep -q "is held by lease" "$tmp/dup.log" && break
	sleep 0.1
done
grep -q "is held by lease" "$tmp/dup.log" &&
	[ "$(value 2 | json tcp)" = "$H:${rports[2]}" ]
ok $? "a second rmemd with id s2 says the key is held and leaves it to s2"
kill -TERM "$dup_pid"
wait "$dup_pid"
rc=$?
sleep 0.5
[ $rc -eq 0 ] && [ "$(value 2 | json tcp)" = "$H:${rports[2]}" ]
ok $? "it stops (exit $rc) and s2's key is untouched"

# ---- restart without loss: the same id and generation, the named region there ---------------
# s3 has no cluster.id (its id is drawn) and runs under an emulated systemd
# fd store (tests/func/cluster_restart.py): restarted after SIGTERM and after
# kill -9 it must come back as the same server with the same memory; from
# an empty store, as a new one.
r3port=$(free_port)
cluster_conf 3 "$NAME" "127.0.0.1:$r3port" "" "$LEASE_MS" info ""
mkdir -p "$tmp/r3"
ETCD_ENDPOINTS=$ETCD_ENDPOINTS RMEM_BUILD=$B ETCDCTL_BIN=$ETCDCTL_BIN \
	python3 tests/func/cluster_restart.py "$tmp/r3" "$tmp/r3.conf" "$r3port" \
	"/rmem/$NAME/servers/" > "$tmp/r3.out" 2>&1
rc=$?
diag < "$tmp/r3.out"
grep -h "restore\|cluster: \(joining\|registered\)" "$tmp/r3/restart.log" | diag
# life KIND FIELD: field 2 (id), 3 (generation), 4 (ms) or 5 (named) of KIND's line.
life() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$tmp/r3.out"; }
[ $rc -eq 0 ] && [ -n "$(life first 2)" ] && [ "$(life first 5)" = intact ]
ok $? "s3 (id drawn: $(life first 2)) registers under the fd store and holds the named region keep/c"
[ "$(life term 2)" = "$(life first 2)" ] && [ "$(life term 3)" = "$(life first 3)" ] &&
	[ "$(life term 5)" = intact ]
ok $? "SIGTERM and restart: the same id and generation in etcd, keep/c intact through its endpoint"
[ "$(life kill 2)" = "$(life first 2)" ] && [ "$(life kill 3)" = "$(life first 3)" ] &&
	[ "$(life kill 5)" = intact ]
ok $? "kill -9 and restart: the same id and generation, keep/c intact (registered $(life kill 4) ms after the start)"
[ -n "$(life fresh 2)" ] && [ "$(life fresh 2)" != "$(life first 2)" ] &&
	[ "$(life fresh 3)" -gt "$(life first 3)" ] && [ "$(life fresh 5)" = gone ]
ok $? "from an empty fd store: a new id and a larger generation, keep/c gone (its memory was lost)"

fi # FULL

# ---- SIGTERM: revoked at once ----------------------------------------------------------------------
t0=$(date +%s%N)
kill -TERM "${rpids[1]}"
wait_key 1 absent $((SLACK_MS / 1000 + 4))
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
echo "# SIGTERM of s1: its key disappeared after $ms ms"
((ms <= SLACK_MS))
ok $? "SIGTERM: s1's key is gone at once, revoked ($ms ms)"
end_rmemd 1
ok $? "s1 exits 0"
rpids[1]=
grep -q "revoked" "$tmp/r1.log"
ok $? "s1's log says its lease was revoked"

if [ $FULL = 1 ]; then
# ---- every etcd member down: s2 serves on, says so once; back: registered ---------------------------
etcd_stop
"$CLIENT" "$SCHEME$H:${rports[2]}" io 4 > "$tmp/io2.out" 2>&1
rc=$?
diag < "$tmp/io2.out"
ok $rc "with all of etcd down a client of s2 allocates, writes and reads"
sleep 2
n=$(grep -c "etcd is unreachable" "$tmp/r2.log")
[ "$n" = 1 ]
ok $? "s2 logged the loss of etcd once ($n times)"
state unreachable
ok $? "s2's /metrics says rmem_cluster_state{state=\"unreachable\"} 1"
[ "$(metric rmem_cluster_etcd_reachable)" = 0 ] &&
	[ "$(metric rmem_cluster_etcd_unreachable_total)" = 1 ] &&
	[ "$(metric rmem_cluster_lease_renewal_failures_total)" -ge 1 ] &&
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 1 else 1)' \
		"$(metric rmem_cluster_last_answer_age_seconds)"
ok $? "s2's /metrics: etcd reachable 0, unreachable once, renewals failing, last answer $(metric rmem_cluster_last_answer_age_seconds)s ago"
ctl_exits 1 "from etcd: " \
	"with all of etcd down rmemctl cluster exits 1 and says etcd cannot be read" \
	-e "$EURL" cluster
for i in 0 1 2; do etcd_restart "$i"; done
etcd_wait_healthy 30
ok $? "etcd comes back"
wait_key 2 present 10
ok $? "s2's key is there again"
for _ in $(seq 50); do
	grep -q "etcd is reachable again" "$tmp/r2.log" && break
	sleep 0.1
done
n=$(grep -c "etcd is reachable again" "$tmp/r2.log")
[ "$n" = 1 ]
ok $? "s2 logged once that etcd is back ($n times)"
wait_state registered 10
ok $? "s2's /metrics says registered again"
wait_metric rmem_cluster_etcd_reachable 1 10 && [ "$(metric rmem_cluster_registered)" = 1 ]
ok $? "s2's /metrics: etcd reachable 1, registered 1 again"
sleep 1.5
lease=$(get 2 Lease)
ttl=$(etcdctl_ lease timetolive "$(printf %x "$lease")" 2> /dev/null)
[[ $ttl == *"remaining("[123]"s)"* ]]
ok $? "s2's lease is kept alive again ($ttl)"

kill -TERM "${rpids[2]}"
end_rmemd 2
ok $? "s2 exits 0 on SIGTERM"
rpids[2]=
wait_key 2 absent 5
ok $? "s2's key is gone"
kill -TERM "${rpids[0]}"
end_rmemd 0
ok $? "s0 exits 0 on SIGTERM"
rpids[0]=
grep -h "^<[0-4]>" "$tmp"/r[012].log | grep -v "etcd is unreachable\|is lost\|held by lease" | diag

fi # FULL

if [ $FULL = 1 ]; then
# ---- bad cluster blocks: FILE:LINE ----------------------------------------------------------------
bad() {
	local name=$1 line=$2 file=$tmp/bad-$1.conf rc
	printf '%s\n' "$3" > "$file"
	"$RMEMD" -t -c "$file" > /dev/null 2> "$tmp/err"
	rc=$?
	[ $rc -eq 1 ] && grep -q -F "$file:$line:" "$tmp/err"
	ok $? "rmemd -t refuses $name with $file:$line: ($(head -1 "$tmp/err"))"
}
bad not-http 2 'listen = { tcp = "127.0.0.1:7470"; };
cluster = { etcd = "ftp://127.0.0.1:2379"; };'
bad no-port 3 'listen = { tcp = "127.0.0.1:7470"; };
cluster = {
  etcd = "http://127.0.0.1:2379,http://127.0.0.1";
};'
bad short-lease 2 'listen = { tcp = "127.0.0.1:7470"; };
cluster = { etcd = "http://127.0.0.1:2379"; lease_ms = 100; };'
bad wildcard 2 'listen = { tcp = "0.0.0.0:7470"; };
cluster = { etcd = "http://127.0.0.1:2379"; };'
bad unknown-key 2 'listen = { tcp = "127.0.0.1:7470"; };
cluster = { etcd = "http://127.0.0.1:2379"; leases = 3; };'
printf '%s\n' 'listen = { tcp = "0.0.0.0:7470"; };' \
	'cluster = { etcd = "http://127.0.0.1:2379"; advertise = "10.0.0.1:7470"; id = "a-1"; };' \
	> "$tmp/good.conf"
"$RMEMD" -t -c "$tmp/good.conf" > /dev/null 2> "$tmp/err"
ok $? "rmemd -t accepts a cluster block with advertise and id"
fi # FULL

tap_done
