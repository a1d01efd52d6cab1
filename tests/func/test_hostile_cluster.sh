#!/bin/bash
# run-tests-alone: case 2 restarts s1 with SIGTERM and wants its key kept: beside
# three others the restart outlived the lease (hostdown 108, key made again).
# test_hostile_cluster.sh - issue 20 item 4 and its reading finds, as an
# attacker (or bad luck) meets them: a real 3-member etcd on loopback
# (tests/lib/etcd.sh), rmemd s0 and s1 in cluster $NAME and s2 alone in
# cluster ${NAME}b, each under the fd store emulator
# (tests/func/cluster_keeper.py), and clients driven line by line
# ($B/tests/hostile_cluster).
#
#  1. a name is won once: creator A claims a name (claim TTL 2 s) while
#     both servers are stopped, so its placement hangs; A is stopped
#     (SIGSTOP) past its claim's lease; creator B takes the name; A goes
#     on.  Exactly one creator gets 0, A an error, and only B's region is
#     left on the servers (A's was freed), the record leads to it.  And a
#     creator whose placement is slow (not stopped itself) keeps its claim.
#  2. a graceful restart under the fd store (SIGTERM, as systemctl
#     restart) is not a departure: the server's key is never deleted (its
#     create_revision stays), and a client reading a region there all
#     along never gets -EHOSTDOWN.
#  3. the clients of a server that came back as a new process are not
#     kept: after two fresh restarts of s2 a client holds no more
#     descriptors or threads than before the first.
#  4. a record of a server's older generation (it started again without
#     its memory) is stale: opening the name is -ENOENT, and the record
#     goes, even when someone made the name again on the new server.
#  5. rmemctl cluster sweep reclaims a member's name that has no record
#     after the grace (a creator died between its region and its record),
#     removes records of older generations at once, and those of a server
#     gone for longer than the grace; names with a live record stay.
#
#   RMEM_BUILD=build-san tests/func/test_hostile_cluster.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/cluster_prog.sh rmem-hostile-cluster hostile_cluster
NAME=hc$$

cluster_etcd_up

read -r -a ports <<< "$(free_ports 3)"
for i in 0 1 2; do
	name=$NAME
	((i == 2)) && name=${NAME}b
	# s0 and s1 on a lease long enough not to be lost on a loaded host;
	# s2 on a short one: its fresh restarts wait for the old lease to end.
	lease=6000
	((i == 2)) && lease=3000
	cluster_conf "$i" "$name" "127.0.0.1:${ports[$i]}" "" $lease info
	cluster_keeper_start "$i"
done
cluster_registered "$NAME" 0 150 && cluster_registered "$NAME" 1 150 &&
	cluster_registered "${NAME}b" 2 150 || fail_setup "the servers did not register in etcd"

# keeper I CMD: server I's keeper does CMD; 0 if ok.
keeper() { cluster_keeper "$tmp" "$@"; }
rmemd_pid() { cat "$tmp/pids/rmemd$1"; }
# fresh_s2: s2 killed and started again without its memory; then waits (20 s
# at most) for etcd to hold the new process's key: the old one goes with its
# lease, then the new one is put.
fresh_s2() {
	local was now _
	was=$(etcdctl_ get "/rmem/${NAME}b/servers/s2" --print-value-only)
	keeper 2 kill && keeper 2 fresh || diag <<< "s2 did not start again"
	for _ in $(seq 200); do
		now=$(etcdctl_ get "/rmem/${NAME}b/servers/s2" --print-value-only)
		[ -n "$now" ] && [ "$now" != "$was" ] && break
		sleep 0.1
	done
}

. tests/lib/drive.sh
regions() { ask "$1" "stats 127.0.0.1:${ports[$2]}" | awk '{ print $4 }'; }

URL="$(cluster_url "$NAME")?claim_ttl=2"
URLB=$(cluster_url "${NAME}b")
KEY=/rmem/$NAME/names/@anonymous/race

# ---- 1. a name is won once ------------------------------------------------------
client_start a "$URL"
client_start b "$URL"
ask a "self" > /dev/null # connected, the server set read
ask b "self" > /dev/null
kill -STOP "$(rmemd_pid 0)" "$(rmemd_pid 1)"
ask_send a "create race 1048576"
claimed=1
for _ in $(seq 100); do
	[ -n "$(etcdctl_ get "$KEY" --print-value-only 2> /dev/null)" ] && { claimed=0; break; }
	sleep 0.05
done
kill -STOP "$(cat "$tmp/pids/ca")"
kill -CONT "$(rmemd_pid 0)" "$(rmemd_pid 1)"
ok $claimed "1: creator A's claim is in etcd while its placement hangs"
sleep 4 # past the claim's 2 s lease: A renews nothing while stopped
b_said=$(ask b "create race 1048576")
[ "$b_said" = "create 0" ] && ask b "write B" > /dev/null
kill -CONT "$(cat "$tmp/pids/ca")"
a_said=$(ask_wait a 20)
diag <<< "A: $a_said; B: $b_said"
[ "$b_said" = "create 0" ]
ok $? "1: creator B wins the name once A's claim ended"
[ "$a_said" = "create -17" ]
ok $? "1: creator A, stalled past its claim, gets -EEXIST, not 0 (got: $a_said)"
n0=$(regions b 0) n1=$(regions b 1)
[ "$((n0 + n1))" = 1 ]
ok $? "1: one region is left on the servers, A's was freed (s0 $n0, s1 $n1)"
client_start o "$URL"
said="$(ask o "open race"), $(ask o read)"
[ "$said" = "open 0, read 0 B" ]
ok $? "1: the name's record leads to B's region, with B's bytes ($said)"
rec=$(etcdctl_ get "$KEY" --print-value-only)
diag <<< "record: $rec"

# 1b. A slow placement keeps its claim: A (running) waits on stopped servers
# for twice the claim's TTL; its claim is renewed meanwhile, so it wins.
kill -STOP "$(rmemd_pid 0)" "$(rmemd_pid 1)"
ask_send a "create slow 65536"
sleep 4
kill -CONT "$(rmemd_pid 0)" "$(rmemd_pid 1)"
said=$(ask_wait a 20)
[ "$said" = "create 0" ]
ok $? "1: a creator whose placement takes twice its claim's TTL keeps the claim ($said)"

# ---- 2. a graceful restart keeps the server in the set --------------------------
server=$(sed -n 's/.*"server":"\(s[01]\)".*/\1/p' <<< "$rec")
i=${server#s}
rev_of() { etcdctl_ get "/rmem/$NAME/servers/s$1" -w json | sed -n 's/.*"create_revision":\([0-9]*\).*/\1/p'; }
rev0=$(rev_of "$i")
ask_send o "loop 7000"
sleep 1
keeper "$i" restart
ok $? "2: $server restarted with SIGTERM under the fd store"
said=$(ask_wait o 30)
diag <<< "$said"
read -r _ n _ down _ other <<< "$said"
[ "${n:-0}" -gt 0 ] && [ "${down:-1}" = 0 ] && [ "${other:-1}" = 0 ]
ok $? "2: reads of a region on $server never failed across its restart ($said)"
rev1=$(rev_of "$i")
[ -n "$rev0" ] && [ "$rev0" = "$rev1" ]
ok $? "2: $server's key was never deleted (create_revision $rev0, then $rev1)"
said=$(ask o read)
[ "$said" = "read 0 B" ]
ok $? "2: the region reads with its bytes after the restart ($said)"

# ---- 3. clients of a server that came back are not kept ------------------------
client_start d "$URLB"
declare -a fds threads
created=0
for round in 1 2 3; do
	said=$(ask_up d "create o$round 4096")
	[ "$said" = "create 0" ] && created=$((created + 1))
	[ "$said" = "create 0" ] || diag <<< "round $round: $said"
	read -r _ _ fds[round] _ threads[round] <<< "$(ask d self)"
	((round == 3)) && break
	fresh_s2
	said=$(ask d read 30)
	diag <<< "round $round: after a fresh restart: $said"
done
diag <<< "fds ${fds[*]}, threads ${threads[*]}"
[ "$created" = 3 ]
ok $? "3: a name was created on s2 after each start ($created of 3)"
[ "${fds[3]:-99}" -le "${fds[1]:-0}" ] && [ "${threads[3]:-99}" -le "${threads[1]:-0}" ]
ok $? "3: after two fresh restarts of its server a client holds no more fds or threads" \
	"(fds ${fds[1]:-?} -> ${fds[3]:-?}, threads ${threads[1]:-?} -> ${threads[3]:-?})"

# ---- 4. a record of an older generation is stale ----------------------------------
# A name made on s2; s2 starts again without its memory; someone makes the
# same name on the new s2 directly.  The cluster's record names the old
# generation: opening it must not reach the newcomer's region.
GKEY=/rmem/${NAME}b/names/@anonymous/gen
said=$(ask_up d "create gen 4096")
[ "$said" = "create 0" ]
ok $? "4: name gen created on s2 ($said)"
fresh_s2
client_start e "127.0.0.1:${ports[2]}"
said=$(ask e "create gen 4096")
[ "$said" = "create 0" ]
ok $? "4: another client made gen on the new s2 directly ($said)"
client_start f "$URLB"
said=$(ask_up f "open gen")
[ "$said" = "open -2" ]
ok $? "4: opening gen through the old generation's record is -ENOENT ($said)"
[ -z "$(etcdctl_ get "$GKEY" --print-value-only)" ]
ok $? "4: the stale record is deleted"

# ---- 5. the sweeper: rmemctl cluster sweep -------------------------------------
# 5a. A name on s0 without a record, as a creator that died between making
# its region and writing the record leaves it: reclaimed after the grace;
# names with a record stay.
client_start g "127.0.0.1:${ports[0]}"
said=$(ask g "create leftover 4096")
[ "$said" = "create 0" ] || diag <<< "leftover: $said"
sleep 1.5
"$B/rmemctl" -e "$(cluster_url "$NAME")" -s "$tmp/r0.sock" --grace=1 cluster sweep \
	> "$tmp/sweep0.out" 2>&1
diag < "$tmp/sweep0.out"
said=$(ask g "open leftover")
[ "$said" = "open -2" ]
ok $? "5: a name on s0 older than the grace with no record is reclaimed ($said)"
said="$(ask_up o "open race"), $(ask o read)"
[ "$said" = "open 0, read 0 B" ]
ok $? "5: a name with its record stays ($said)"
# 5b. Records of s2: o1..o3 name generations gone (stale at once); live
# names this one, and stays while s2 may come back, and goes once s2 has
# been gone for the grace.
rec_of() { etcdctl_ get "/rmem/${NAME}b/names/@anonymous/$1" --print-value-only; }
sweep() {
	"$B/rmemctl" -e "$URLB" --grace=2 cluster sweep > "$tmp/sweep.out" 2>&1
	diag < "$tmp/sweep.out"
}
said=$(ask_up f "create live 4096")
[ "$said" = "create 0" ] || diag <<< "live: $said"
sweep
[ -z "$(rec_of o1)" ] && [ -z "$(rec_of o3)" ] && [ -n "$(rec_of live)" ]
ok $? "5: records of s2's older generations are swept at once, its live one stays"
keeper 2 kill
for _ in $(seq 100); do
	[ -z "$(etcdctl_ get "/rmem/${NAME}b/servers/s2" --print-value-only)" ] && break
	sleep 0.1
done
sweep
[ -n "$(rec_of live)" ]
ok $? "5: the record of a server gone for less than the grace stays"
sleep 2.5
sweep
[ -z "$(rec_of live)" ]
ok $? "5: ... and is swept once the server has been gone for the grace"

for i in 0 1 2; do
	grep -i "asan\|runtime error" "$tmp/r$i.log" | head -3 | diag
done
for c in a b o d e f g; do
	[ -s "$tmp/c$c.err" ] && diag < "$tmp/c$c.err"
done
tap_done
