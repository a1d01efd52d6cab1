#!/bin/bash
# test_restart.sh - restart without loss under real systemd (in the test VM):
# named regions created over TCP and over RDMA, with seeded patterns, keep
# their names, sizes and every byte across `systemctl restart rmemd` and
# across a kill -9 of the main PID that systemd restarts (Restart=on-failure),
# both times through systemd's fd store; a name acknowledged right before a
# kill -9 survives it; `systemctl stop` + `start` starts fresh (the store is
# emptied); rmem_restarts_restored_total says 1 after a restore, 0 after a
# fresh start.  Prints the client-visible pause of a `systemctl restart` of a
# 256 MiB pool (no assertion on time: the VM is TCG).  TAP output.
# run-tests-timeout: 900
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/systemd/lib.sh
sysd_setup

NC=$B/tests/systemd/namedcheck
[ -x "$NC" ] || skip_all "$NC is not built"
# Named regions as NAME:SIZE:SEED (tests/systemd/namedcheck.c), of sizes that
# are not multiples of anything in particular.
TCP_SPECS=(restart/t1:4096:11 restart/t2:1048576:12 restart/t3:3000001:13)
RDMA_SPECS=(restart/r1:65536:21 restart/r2:2097153:22)
METRICS_URL=http://127.0.0.1:9470/metrics

# nc_tcp/nc_rdma OP SPEC...: namedcheck over each transport; its lines go out
# as comments, its status is returned.
nc_run() {
	local out rc

	out=$("$NC" "$@" 2>&1)
	rc=$?
	[ -n "$out" ] && diag <<< "$out"
	return $rc
}
nc_tcp() { nc_run "$SYSD_TCP_EP" tcp "$@"; }
nc_rdma() { nc_run "$SYSD_RDMA_EP" rdma "$@"; }

# names_sizes: "NAME LENGTH" per named region (rmemctl --json names), sorted.
names_sizes() {
	"$SYSD_RMEMCTL" --json names 2> /dev/null | python3 -c 'import json, sys
for n in sorted(json.load(sys.stdin)["names"], key=lambda n: n["name"]):
    print(n["name"], n["length"])'
}

# metric NAME: its value on the metrics page (the default listen.metrics).
metric() {
	python3 - "$METRICS_URL" "$1" << 'PY'
import sys, urllib.request
page = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
for line in page.splitlines():
    if line.split(" ")[0] == sys.argv[2]:
        print(line.split(" ")[1])
        sys.exit(0)
sys.exit(1)
PY
}

# journal_mark / journal_new: the unit's journal lines (this boot) logged
# after the mark, into $tmp/new.
journal_mark() {
	JMARK=$(journalctl -b -u "$UNIT" --no-pager -o cat 2> /dev/null | wc -l)
}
journal_new() {
	journalctl -b -u "$UNIT" --no-pager -o cat 2> /dev/null | tail -n +$((JMARK + 1)) > "$tmp/new"
}

# The restored line of the new process: "restored from the fd store: ...".
# Waits a little: journald may log it after the unit became active.
restored_line() {
	local i

	for ((i = 0; i < 20; i++)); do
		journal_new
		grep -m1 'restored from the fd store' "$tmp/new" && return 0
		sleep 0.5
	done
	return 1
}

# same_names WHEN: rmemctl names lists the names and sizes of $tmp/names.
same_names() {
	names_sizes > "$tmp/names.after"
	if cmp -s "$tmp/names" "$tmp/names.after"; then
		ok 0 "$1: rmemctl --json names lists the same $(wc -l < "$tmp/names") names with the same sizes"
	else
		ok 1 "$1: rmemctl --json names lists the same names with the same sizes"
		diff "$tmp/names" "$tmp/names.after" | diag
	fi
}

# verify_all WHEN: a fresh client opens every name read-only and checks
# every byte, over the transport each was created on.
verify_all() {
	nc_tcp verify "${TCP_SPECS[@]}"
	ok $? "$1: a fresh TCP client verifies every byte of ${#TCP_SPECS[@]} names"
	nc_rdma verify "${RDMA_SPECS[@]}"
	ok $? "$1: a fresh RDMA client verifies every byte of ${#RDMA_SPECS[@]} names"
}

# wait_new_main OLDPID: polls until the unit is active with a main PID other
# than OLDPID (systemd noticed the kill, waited RestartSec= and started a new
# rmemd), at most 120 s: right after a kill the unit may still say active
# with the dead PID.
wait_new_main() {
	local end=$((SECONDS + 120))

	while [ "$SECONDS" -lt "$end" ]; do
		unit_props ActiveState MainPID
		[ "${PROP[ActiveState]-}" = active ] && [ "${PROP[MainPID]:-0}" != 0 ] &&
			[ "${PROP[MainPID]}" != "$1" ] && return 0
		sleep 0.2
	done
	sysd_journal 30
	return 1
}

sysd_install
ok $? "make install into the VM's root, ldconfig, systemctl daemon-reload"
unit_props FileDescriptorStoreMax Restart
[ "${PROP[FileDescriptorStoreMax]-}" -ge 17 ] 2> /dev/null && [ "${PROP[Restart]-}" = on-failure ]
ok $? "systemd sees FileDescriptorStoreMax=${PROP[FileDescriptorStoreMax]-} (16 pools + the state) and Restart=${PROP[Restart]-}"
systemd-analyze verify "$SYSD_UNIT_FILE" > "$tmp/verify" 2>&1 &&
	! grep -E "rmemd|$SYSD_UNIT_FILE" "$tmp/verify" > /dev/null
ok $? "systemd-analyze verify is silent about the unit with its fd store settings"

# ---- named regions, then systemctl restart -----------------------------------------
sysd_conf 256M
journal_mark
sysd_start
ok $? "systemctl start rmemd"
journal_new
grep -q 'fd store: nothing to restore' "$tmp/new"
ok $? "the first start is fresh: $(grep -m1 'fd store' "$tmp/new")"
nc_tcp create "${TCP_SPECS[@]}"
ok $? "a TCP client creates ${#TCP_SPECS[@]} named regions, fills them, and reads them back (also read-only)"
nc_rdma create "${RDMA_SPECS[@]}"
ok $? "an RDMA client creates ${#RDMA_SPECS[@]} named regions, fills them, and reads them back (also read-only)"
# A client that holds read-only handles across the restart: its session and
# handles are in the state, and come back detached for resume.
mkfifo "$tmp/hold"
"$NC" "$SYSD_TCP_EP" tcp hold "${TCP_SPECS[0]}" "${TCP_SPECS[1]}" < "$tmp/hold" > "$tmp/hold.out" 2>&1 &
holder=$!
exec 7> "$tmp/hold"
for ((i = 0; i < 100; i++)); do
	grep -q '^holding' "$tmp/hold.out" && break
	sleep 0.1
done
grep -q '^holding' "$tmp/hold.out"
ok $? "a client holds read-only handles on two of them"
names_sizes > "$tmp/names"
[ "$(wc -l < "$tmp/names")" -eq $((${#TCP_SPECS[@]} + ${#RDMA_SPECS[@]})) ]
ok $? "rmemctl --json names lists the $((${#TCP_SPECS[@]} + ${#RDMA_SPECS[@]})) names"
diag < "$tmp/names"
v=$(metric rmem_restarts_restored_total)
[ "$v" = 0 ]
ok $? "rmem_restarts_restored_total is ${v:-missing} after a fresh start"

# Written and freed just before the restart: over RDMA the range still waits
# in the quarantine when rmemd stops, which leaves its bytes for the restore
# to zero (lazily, daemon/scrub.c).
out=$(rwcheck "$SYSD_RDMA_EP" rdma $((8 << 20)) 2>&1)
ok $? "before the restart: 8 MiB over RDMA read as zeros, written and freed ($out)"
pid=$(unit_prop MainPID)
journal_mark
systemctl restart "$UNIT"
ok $? "systemctl restart $UNIT"
out=$(rwcheck "$SYSD_RDMA_EP" rdma $((8 << 20)) 2>&1)
ok $? "after systemctl restart: a new 8 MiB region over RDMA reads as zeros ($out)"
out=$(rwcheck "$SYSD_TCP_EP" tcp $((8 << 20)) 2>&1)
ok $? "after systemctl restart: a new 8 MiB region over TCP reads as zeros ($out)"
unit_props ActiveState MainPID
[ "${PROP[ActiveState]-}" = active ] && [ "${PROP[MainPID]-0}" != 0 ] && [ "${PROP[MainPID]}" != "$pid" ]
ok $? "the unit is active again with a new main PID (${PROP[MainPID]-} after $pid)"
line=$(restored_line)
ok $? "the journal says: ${line:-no 'restored from the fd store' line}"
[[ $line =~ ([0-9]+)\ session\(s\)\ detached ]] && [ "${BASH_REMATCH[1]}" -ge 1 ]
ok $? "the holder's session came back detached for resume"
same_names "after systemctl restart"
verify_all "after systemctl restart"
nc_tcp write restart/t1:4096:111 && nc_tcp verify restart/t1:4096:111
ok $? "after systemctl restart: a TCP write lands (a new pattern, read back by another client)"
nc_rdma write restart/r1:65536:121 && nc_rdma verify restart/r1:65536:121
ok $? "after systemctl restart: an RDMA write lands"
TCP_SPECS[0]=restart/t1:4096:111
RDMA_SPECS[0]=restart/r1:65536:121
v=$(metric rmem_restarts_restored_total)
[ "$v" = 1 ]
ok $? "rmem_restarts_restored_total is ${v:-missing} on $METRICS_URL"
exec 7>&-
wait "$holder" 2> /dev/null

# ---- kill -9: systemd restarts it (Restart=on-failure) -----------------------------
unit_props MainPID NRestarts
pid=${PROP[MainPID]-0} nrestarts=${PROP[NRestarts]-0}
journal_mark
kill -9 "$pid"
ok $? "kill -9 $pid (the main PID)"
wait_new_main "$pid"
ok $? "systemd restarted it and the unit is active again"
unit_props MainPID NRestarts
[ "${PROP[MainPID]-0}" != 0 ] && [ "${PROP[MainPID]}" != "$pid" ] &&
	[ "${PROP[NRestarts]-0}" -eq $((nrestarts + 1)) ]
ok $? "a new main PID (${PROP[MainPID]-}), NRestarts ${PROP[NRestarts]-} (was $nrestarts)"
end=$(sysd_last_end)
[[ $end =~ code=killed\ status=(9|KILL)$ ]]
ok $? "systemd saw it killed by signal 9 (${end:-no rmem-test-end line})"
line=$(restored_line)
ok $? "the journal says: ${line:-no 'restored from the fd store' line}"
grep -E 'code=killed, status=9' "$tmp/new" | head -n 1 | diag
same_names "after kill -9"
verify_all "after kill -9"
nc_tcp write restart/t2:1048576:112 && nc_tcp verify restart/t2:1048576:112
ok $? "after kill -9: a TCP write lands"
TCP_SPECS[1]=restart/t2:1048576:112
v=$(metric rmem_restarts_restored_total)
[ "$v" = 1 ]
ok $? "rmem_restarts_restored_total is ${v:-missing} in the new process"

# ---- acknowledged right before a crash ---------------------------------------------
# The slot is written before the reply (docs/architecture.md): a create the
# client saw acknowledged, and the bytes it wrote, survive a kill -9 at once.
pid=$(unit_prop MainPID)
journal_mark
nc_tcp create crash/t:123457:77 && nc_rdma create crash/r:65537:78 && kill -9 "$pid"
ok $? "two names created and acknowledged (TCP, RDMA), then kill -9 $pid at once"
wait_new_main "$pid"
ok $? "systemd restarted it"
line=$(restored_line)
ok $? "the journal says: ${line:-no 'restored from the fd store' line}"
nc_tcp verify crash/t:123457:77
ok $? "the name acknowledged over TCP right before the crash is there, every byte"
nc_rdma verify crash/r:65537:78
ok $? "the name acknowledged over RDMA right before the crash is there, every byte"
verify_all "after the second kill -9"

# ---- stop, then start: fresh ------------------------------------------------------
systemctl stop "$UNIT"
ok $? "systemctl stop $UNIT"
end=$(sysd_last_end)
[ "$end" = "result=success code=exited status=0" ]
ok $? "rmemd exited by itself with status 0 (${end:-no rmem-test-end line})"
journal_mark
sysd_start
ok $? "systemctl start $UNIT"
journal_new
line=$(grep -m1 'fd store' "$tmp/new")
[[ $line == *'nothing to restore'* ]] && ! grep -q 'restored from the fd store' "$tmp/new"
ok $? "a start after a stop is fresh: ${line:-no 'fd store' line}"
names_sizes > "$tmp/names.after"
[ ! -s "$tmp/names.after" ]
ok $? "rmemctl --json names lists no name"
nc_tcp absent "${TCP_SPECS[@]}" crash/t:1:1 && nc_rdma absent "${RDMA_SPECS[@]}" crash/r:1:1
ok $? "opening any of the old names gives ENOENT"
v=$(metric rmem_restarts_restored_total)
[ "$v" = 0 ]
ok $? "rmem_restarts_restored_total is ${v:-missing} after the fresh start"
systemctl stop "$UNIT"

# ---- the pause of a systemctl restart, a 256 MiB pool -------------------------------
# The whole pool is pinned (and, in the new process, pinned again) inside the
# VM's RAM.  256 MiB, not 1 GiB (issue 31): under TCG every page of it is
# faulted in and registered twice, minutes of the guest, and the pause's
# figures by pool size are bench-restart's (docs/benchmarks.md); what this
# checks is that systemd's restart of a pool larger than the others keeps
# the held bytes.  RMEM_SYSD_PAUSE_POOL=1G measures the larger one here.
mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
PAUSE_POOL=${RMEM_SYSD_PAUSE_POOL:-256M}
HELD=$((64 << 20))
sysd_conf "$PAUSE_POOL"
ts=$(date +%s%N)
sysd_start
ok $? "systemctl start with a $PAUSE_POOL pool (guest RAM $((mem_kb >> 10)) MiB)"
echo "# for comparison, a fresh systemctl start of the $PAUSE_POOL pool took $((($(date +%s%N) - ts) / 1000000)) ms"
nc_tcp create pause/a:$HELD:5
ok $? "a named region of 64 MiB, filled"
"$NC" "$SYSD_TCP_EP" tcp wait pause/a:$HELD:5 > "$tmp/wait" 2> "$tmp/wait.err" &
waiter=$!
sleep 2
t0=$(date +%s%N)
systemctl restart "$UNIT"
rc=$?
t1=$(date +%s%N)
ok $rc "systemctl restart $UNIT with the $PAUSE_POOL pool"
wait "$waiter"
ok $? "a client polling every 10 ms (connect, open, read 64 KiB, compare) got its bytes back"
diag < "$tmp/wait.err"
up=$(sed -n 's/^up //p' "$tmp/wait")
if [ -n "$up" ]; then
	echo "# pause of systemctl restart, $PAUSE_POOL pool (64 MiB held), TCP client, under TCG:" \
		"$(((up - t0) / 1000000)) ms from the restart command to the first verified read" \
		"(systemctl restart returned after $(((t1 - t0) / 1000000)) ms)"
fi
# Where the pause goes: the journal's lines of the restart, in ms after the
# restart command (systemd's own lines included).
journalctl -b -u "$UNIT" --no-pager -o short-unix --since "@$((t0 / 1000000000))" 2> /dev/null |
	awk -v t0="$t0" '/stopping|Stopped|Starting|pinned|restored from the fd store|ready|Started/ {
		ts = $1; $1 = ""; printf "%+6d ms %s\n", (ts * 1000) - (t0 / 1000000), $0 }' | diag
nc_tcp verify pause/a:$HELD:5
ok $? "every byte of the 64 MiB named region after the restart"
sysd_stop
ok $? "systemctl stop"

[ "$nfail" -eq 0 ] || sysd_journal 40
tap_done
