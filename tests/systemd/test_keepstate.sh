#!/bin/bash
# test_keepstate.sh - a kept state that cannot be restored is kept, under real
# systemd (in the test VM; docs/architecture.md, "Upgrade and rollback"):
# with a named region in the store, a config whose pool is smaller makes
# `systemctl restart rmemd` end in a unit that is active, says the refusal in
# its status text, serves nothing, and still holds both fds in its store
# (NFileDescriptorStore); the store survives a second `systemctl restart` and
# a kill -9 of the refused process that systemd restarts; a config that grows
# the pool then restores every byte; `systemctl stop` empties the store (the
# explicit discard under the shipped unit).  The host tier tests the same
# causes in detail through the fd store emulator (tests/func/test_keepstate.py).
# run-tests-timeout: 900
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/systemd/lib.sh
sysd_setup

NC=$B/tests/systemd/namedcheck
[ -x "$NC" ] || skip_all "$NC is not built"
SPEC=keep/t1:1048577:31

nc_tcp() {
	local out rc

	out=$("$NC" "$SYSD_TCP_EP" tcp "$@" 2>&1)
	rc=$?
	[ -n "$out" ] && diag <<< "$out"
	return $rc
}

journal_mark() {
	JMARK=$(journalctl -b -u "$UNIT" --no-pager -o cat 2> /dev/null | wc -l)
}

# journal_wait TEXT: the unit's lines since the mark into $tmp/new, until
# one holds TEXT (journald may log it after the unit became active), at
# most 10 s; 0 when one does.
journal_wait() {
	local i

	for ((i = 0; i < 20; i++)); do
		journalctl -b -u "$UNIT" --no-pager -o cat 2> /dev/null |
			tail -n +$((JMARK + 1)) > "$tmp/new"
		grep -q -- "$1" "$tmp/new" && return 0
		sleep 0.5
	done
	return 1
}

# refused WHEN: the unit active, its status text the refusal, nothing
# served, both fds still in the store.
refused() {
	unit_props ActiveState StatusText NFileDescriptorStore
	[ "${PROP[ActiveState]-}" = active ]
	ok $? "$1: the unit is active (${PROP[ActiveState]-}), not failed"
	[[ ${PROP[StatusText]-} == 'refused to restore, serving nothing, memory kept: '*'never shrink'* ]]
	ok $? "$1: its status says why: ${PROP[StatusText]-}"
	journal_wait 'not restoring'
	ok $? "$1: the journal says so: $(grep -m1 'not restoring' "$tmp/new" | cut -c1-160)"
	! nc_tcp verify "$SPEC" > /dev/null 2>&1
	ok $? "$1: nothing is served over TCP"
	[ "${PROP[NFileDescriptorStore]-}" = 2 ]
	ok $? "$1: the fd store still holds the pool and the state (${PROP[NFileDescriptorStore]-})"
}

sysd_install
ok $? "make install into the VM's root, ldconfig, systemctl daemon-reload"

sysd_conf 64M
sysd_start
ok $? "systemctl start rmemd"
nc_tcp create "$SPEC"
ok $? "a TCP client creates a named region and fills it"

# ---- refused, kept -----------------------------------------------------------------
sysd_conf 32M
journal_mark
systemctl restart "$UNIT"
ok $? "systemctl restart with the pool shrunk in the config returns"
refused "a shrunk pool"
journal_mark
systemctl restart "$UNIT"
ok $? "systemctl restart of the refused rmemd"
refused "restarted while refused"
old=$(unit_prop MainPID)
journal_mark
kill -9 "$old"
end=$((SECONDS + 120))
while [ "$SECONDS" -lt "$end" ]; do
	unit_props ActiveState MainPID
	[ "${PROP[ActiveState]-}" = active ] && [ "${PROP[MainPID]:-0}" != 0 ] &&
		[ "${PROP[MainPID]}" != "$old" ] && break
	sleep 0.2
done
refused "the refused rmemd killed -9 and restarted by systemd"

# ---- the cause fixed: a grown pool, every byte -------------------------------------
sysd_conf 128M
journal_mark
systemctl restart "$UNIT"
ok $? "systemctl restart with the pool grown to 128M"
journal_wait 'restored from the fd store'
ok $? "restored: $(grep -m1 'restored from the fd store' "$tmp/new" | cut -c1-120)"
grep -q 'grown from 67108864 to 134217728 bytes' "$tmp/new"
ok $? "the journal says the pool grew"
nc_tcp verify "$SPEC"
ok $? "every byte of the named region is there"

# ---- refused again, then the explicit discard: stop ----------------------------------
sysd_conf 32M
journal_mark
systemctl restart "$UNIT"
refused "shrunk again"
systemctl stop "$UNIT"
ok $? "systemctl stop of the refused rmemd"
n=$(unit_prop NFileDescriptorStore)
[ "$n" = 0 ]
ok $? "the stop emptied the store ($n): the discard an operator asks for"
journal_mark
sysd_start
ok $? "systemctl start"
journal_wait 'nothing to restore'
ok $? "the start after the stop is fresh, at the config's 32M"
sysd_stop
tap_done
