#!/bin/bash
# test_analyze.sh - the installed rmemd.service as systemd-analyze sees it
# (in the test VM under systemd): `verify` finds nothing to say about it, and
# `security` gives its exposure score, printed here and kept in
# docs/operations.md; the score must not get worse than what the docs say.
# TAP output.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/systemd/lib.sh
sysd_setup

# docs/operations.md, "Hardening": update both together.
MAX_EXPOSURE=$(sed -n 's/^Overall exposure level for rmemd.service: \([0-9.]*\).*/\1/p' \
	docs/operations.md | head -n 1)

sysd_install
ok $? "make install into the VM's root, systemctl daemon-reload"

systemd-analyze verify "$SYSD_UNIT_FILE" > "$tmp/verify" 2>&1
rc=$?
ok $rc "systemd-analyze verify $SYSD_UNIT_FILE exits 0"
# verify also loads what the unit refers to; nothing may be about ours.
! grep -E "rmemd|$SYSD_UNIT_FILE" "$tmp/verify" > "$tmp/ours"
ok $? "and has nothing to say about it"
diag < "$tmp/verify"

systemd-analyze security --no-pager "$UNIT" > "$tmp/security" 2>&1
ok $? "systemd-analyze security $UNIT exits 0"
score=$(sed -n 's/.*Overall exposure level for rmemd.service: \([0-9.]*\) \(.*\)/\1 \2/p' \
	"$tmp/security")
[ -n "$score" ]
ok $? "exposure score: ${score:-none}"
echo "# systemd-analyze security $UNIT: ${score:-?}; the settings not OK:"
# Lines with a check mark are OK; the others (✗ and the unrated) are shown.
grep -v -e '✓' -e '^ *NAME' "$tmp/security" | grep -v -e '^$' -e '^→ Overall' | diag
[ -n "$MAX_EXPOSURE" ] && [ -n "$score" ] &&
	awk -v s="${score%% *}" -v m="$MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }'
ok $? "no worse than docs/operations.md records (${MAX_EXPOSURE:-missing})"

tap_done
