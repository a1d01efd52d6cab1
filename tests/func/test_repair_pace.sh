#!/bin/bash
# test_repair_pace.sh - rmemd's repair agent keeps its pace (issue 21): a real
# 3-member etcd on loopback and one rmemd (lease_ms 1000, repair_grace_ms
# 1000, so it leads, scans each 250 ms and renews its lead every 333 ms).
# Over about 3 s of leading, its rmem_repair_scans_total and the lease
# renewals etcd's leader sees (the member's and the lead's, 3 a second each)
# grow by at most twice what is due, plus 4; an agent whose timed waits return at once (a condition
# variable on CLOCK_REALTIME waited on until CLOCK_MONOTONIC deadlines, as
# before this test) scanned and renewed hundreds of times a second.
# TAP output.
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_repair_pace.sh
# run-tests-timeout: 120
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/cluster_prog.sh rmem-repair-pace
cluster_etcd_up
NAME=rpace$$
read -r -a ports <<< "$(free_ports 2)"
cluster_conf 0 "$NAME" "127.0.0.1:${ports[0]}" "" "1000,1000" notice
sed -i "s|metrics = \"\"|metrics = \"127.0.0.1:${ports[1]}\"|" "$tmp/r0.conf"
cluster_start 0 || fail_setup "rmemd s0 did not start"
cluster_registered "$NAME" 0 150 || fail_setup "rmemd s0 did not register in etcd"

# metric PORT NAME: the value of the series NAME on the /metrics at PORT
# (summed over its lines: etcd's lease counters have labels on some builds).
metric() {
	python3 -c 'import sys, urllib.request
page = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=3).read().decode()
v = [float(l.split()[-1]) for l in page.splitlines() if l.split(" ")[0].split("{")[0] == sys.argv[2]]
print(int(sum(v)) if v else "")' "$1" "$2"
}
renewals() {
	local i n=0 v
	for ((i = 0; i < ETCD_N; i++)); do
		v=$(metric "${etcd_cports[$i]}" etcd_debugging_lease_renewed_total)
		n=$((n + ${v:-0}))
	done
	echo "$n"
}

for _ in $(seq 100); do
	[ "$(metric "${ports[1]}" rmem_repair_leader)" = 1 ] && break
	sleep 0.1
done
[ "$(metric "${ports[1]}" rmem_repair_leader)" = 1 ]
ok $? "the one member leads repair (rmem_repair_leader 1)"

t0=$(date +%s%N)
s0=$(metric "${ports[1]}" rmem_repair_scans_total)
r0=$(renewals)
sleep 3
s1=$(metric "${ports[1]}" rmem_repair_scans_total)
r1=$(renewals)
ms=$((($(date +%s%N) - t0) / 1000000))
# Due: one scan each 250 ms, one renewal of each lease each 333 ms; twice
# that, plus 4, bounds them on a loaded host (the page is copied each
# 250 ms); the bug made them hundreds a second.
[ -n "$s0" ] && [ -n "$s1" ] && ((s1 - s0 >= ms / 1000 && s1 - s0 <= 2 * ms / 250 + 4))
ok $? "scans in $ms ms: $((${s1:-0} - ${s0:-0})) (due: $((ms / 250)); bound $((ms / 1000)) to $((2 * ms / 250 + 4)))"
[ -n "$r1" ] && ((r1 - r0 > 0 && r1 - r0 <= 2 * 2 * ms / 333 + 4))
ok $? "lease renewals etcd's leader saw in $ms ms: $((r1 - r0)) (the member's and the lead's: $((2 * ms / 333)) due; bound $((2 * 2 * ms / 333 + 4)))"
tap_done
