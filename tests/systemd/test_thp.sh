#!/bin/bash
# test_thp.sh - transparent hugepages for the pools, under real systemd (in
# the test VM): the tmpfiles.d snippet `make install` ships
# (rmemd-thp.conf) sets shmem_enabled to "advise"; then the pool of 4 KiB
# pages that rmemd.service pins is mapped with 2 MiB pages (ShmemPmdMapped in
# the main process's smaps), and again after `systemctl restart` adopts it
# from the fd store, with every byte of a named region kept.  With
# shmem_enabled "never" a fresh start maps no 2 MiB page and the journal
# says what to change.  Restart speed itself is make bench-restart's (the VM
# is TCG: no timing here).  TAP output.
# run-tests-timeout: 600
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/systemd/lib.sh
sysd_setup

THP=/sys/kernel/mm/transparent_hugepage/shmem_enabled
[ -w "$THP" ] || skip_all "$THP is not there or not writable"
NC=$B/tests/systemd/namedcheck
[ -x "$NC" ] || skip_all "$NC is not built"
was=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP")
trap 'echo "$was" > "$THP"; sysd_cleanup' EXIT

# pool_pmd_kb: kB of the main process's pool mapping (the memfd
# "rmem-pool-default") mapped with 2 MiB pages.
pool_pmd_kb() {
	local pid

	pid=$(unit_prop MainPID)
	awk '/^[0-9a-f]+-[0-9a-f]+ / { inpool = ($0 ~ /memfd:rmem-pool-default/) }
	     inpool && /^ShmemPmdMapped:/ { kb += $2 } END { print kb + 0 }' "/proc/$pid/smaps"
}

# pool_pages OP WHAT: the assertion WHAT that the pool's kB in 2 MiB pages
# compares with 0 by OP (-gt, -eq).
pool_pages() {
	local kb

	kb=$(pool_pmd_kb)
	[ "$kb" "$1" 0 ]
	ok $? "$2 ($kb kB ShmemPmdMapped)"
}

journal_since() {
	journalctl -b -u "$UNIT" --no-pager -o cat --since "@$1" 2> /dev/null
}

sysd_install
ok $? "make install into the VM's root"
echo never > "$THP"
systemd-tmpfiles --create rmemd-thp.conf
ok $? "systemd-tmpfiles --create rmemd-thp.conf (the installed snippet) succeeds"
now=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP")
[ "$now" = advise ]; ok $? "it sets shmem_enabled to advise ($now)"

sysd_conf 64M
t0=$(date +%s)
sysd_start; ok $? "rmemd.service starts with a 64M pool of 4 KiB pages"
pool_pages -gt "the pool is mapped with 2 MiB pages"
journal_since "$t0" | grep -q 'pool default: .*4096-byte pages (transparent 2 MiB)'
ok $? "the journal says the pool has transparent 2 MiB pages"
"$NC" "$SYSD_TCP_EP" tcp create thp/n1:3000001:41 2>&1 | diag
ok "${PIPESTATUS[0]}" "a named region written with a pattern"

t0=$(date +%s)
systemctl restart "$UNIT" && sysd_wait_active
ok $? "systemctl restart: active again"
journal_since "$t0" | grep -q '(transparent 2 MiB), alignment [0-9]* (kept in the fd store)'
ok $? "the adopted pool has transparent 2 MiB pages"
pool_pages -gt "and is mapped with them after the restart"
"$NC" "$SYSD_TCP_EP" tcp verify thp/n1:3000001:41 2>&1 | diag
ok "${PIPESTATUS[0]}" "the named region's bytes survived the restart"
sysd_stop

echo never > "$THP"
t0=$(date +%s)
sysd_start; ok $? "with shmem_enabled never: rmemd.service starts fresh"
pool_pages -eq "no 2 MiB page in the pool"
journal_since "$t0" | grep -q 'no transparent hugepages (shmem_enabled: never).*shmem_enabled makes it cost what clients hold'
ok $? "the journal names the setting to change"
sysd_stop
tap_done
