#!/bin/bash
# The map of the tree (README.md's file lines, docs/architecture.md's module
# tables and blocks) and the sections test programs announce agree with the
# tree (scripts/check-map).  First the checker meets a copy of the tree with
# each way a map goes stale planted in it (a file added, a file removed, a
# test helper removed, an opening comment changed, a function renamed, a
# module added to common/, a section added to a test program, a module
# others depend on removed), and must fail on each, naming it; then --write
# must mend what is generated and nothing else; then it judges the real
# tree, each of its rules one assertion.
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/lib/tap.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say() { # say STATUS TEXT [FILE whose lines to show on failure]
	ok "$1" "$2" || [ -z "${3:-}" ] || diag < "$3"
}

# A pristine copy of what the checker reads: the code, the docs, the tests.
mkdir -p "$tmp/orig"
tar -C . --exclude='./build*' --exclude='./.git' --exclude='./tests/fuzz/corpus' -cf - . |
	tar -C "$tmp/orig" -xf -

# fresh: a new copy in $tmp/t, to plant one fault in.
fresh() { rm -rf "$tmp/t"; cp -a "$tmp/orig" "$tmp/t"; }

# planted NAME PATTERN...: the checker fails on the copy and its output holds
# every PATTERN (grep -E), each on a "not ok" line or its "#" detail.
planted() {
	local what=$1 p rc; shift
	scripts/check-map "$tmp/t" > "$tmp/out" 2>&1
	rc=$?
	local good=0
	[ $rc -eq 1 ] || good=1
	for p in "$@"; do
		grep -Eq "$p" "$tmp/out" || { good=1; echo "(no line matches: $p)" >> "$tmp/out"; }
	done
	say $good "the checker fails on $what" "$tmp/out"
}

fresh
scripts/check-map "$tmp/t" > "$tmp/out" 2>&1
say $? "a copy of the tree passes as the tree does" "$tmp/out"

fresh
printf '/*\n * dummy.c - a module nobody put on the map.\n */\n' > "$tmp/t/daemon/dummy.c"
planted "a daemon file without its lines" \
	'^not ok .* README.md: every module of daemon/ has its line' \
	'^# daemon/dummy.c has no line' \
	'^not ok .* docs/architecture.md: every module of daemon/ has a row' \
	'^# daemon/dummy has no row'
scripts/check-map --write "$tmp/t" > /dev/null 2>&1
scripts/check-map "$tmp/t" > "$tmp/out" 2>&1
rc=$?
if [ $rc -eq 1 ] && ! grep -q '^not ok .* README.md' "$tmp/out" &&
	grep -q '^not ok .* docs/architecture.md: every module of daemon/ has a row' "$tmp/out" &&
	grep -q '^| `dummy.c` | a module nobody put on the map |$' "$tmp/t/README.md"; then
	say 0 "--write adds README.md's line from the comment; architecture.md's row stays to write"
else
	say 1 "--write adds README.md's line from the comment; architecture.md's row stays to write" "$tmp/out"
fi

fresh
rm "$tmp/t/client-lib/pollfd.c"
planted "a library file removed while the map still names it" \
	'^not ok .* README.md: no line for a file client-lib/ no longer has' \
	'^# client-lib/pollfd.c is gone' \
	'^not ok .* every file client-lib/.s table names exists' \
	'^not ok .* every name in the block under "The library, who calls whom"' \
	'^# pollfd is no module'

fresh
rm "$tmp/t/daemon/slots.c" "$tmp/t/daemon/slots.h"
planted "a daemon module removed that others' rows depend on" \
	"^not ok .* docs/architecture.md: daemon/'s table depends only on modules" \
	'^# `tenant.c` depends on slots, no module' \
	'^# daemon/slots.\[ch\] is gone'

fresh
rm "$tmp/t/tests/lib/fdstore.py"
planted "a test helper removed while architecture.md still names it" \
	'^not ok .* docs/architecture.md: every file it names exists' \
	'^# docs/architecture.md:[0-9]+: tests/lib/fdstore.py'

fresh
sed -i 's/^ \* lease.h - the daemon.s one timer for the deadlines of its connections\./ * lease.h - a timer wheel./' \
	"$tmp/t/daemon/lease.h"
planted "an opening comment that no longer says what the map says" \
	"^not ok .* README.md: daemon/'s lines say what the files' opening comments say" \
	'^# daemon/lease.\[ch\]: the line differs'

fresh
sed -i 's/\bmember_stop\b/member_halt/g' "$tmp/t/daemon/member.c" "$tmp/t/daemon/member.h" \
	"$tmp/t/daemon/main.c" "$tmp/t/tests/unit/test_map.sh"   # (this script names it too)
planted "a function renamed under the prose that names it" \
	'^not ok .* docs/architecture.md: every identifier it names in backticks is in the code' \
	'^# docs/architecture.md:[0-9]+: member_stop'

fresh
printf '/*\n * ring.h - a ring.\n */\n' > "$tmp/t/common/ring.h"
planted "a common/ module the layers block leaves out" \
	'^not ok .* the block under "Layers" names every module of common/' \
	'^# common/ring is not named there'

fresh
sed -i 's|^\t{ "device", section_device, NULL, 0 },$|&\n\t{ "extra", section_device, NULL, 0 },|' \
	"$tmp/t/tests/rdma/test_rdma_keys.c"
planted "a section that its program's usage line and the docs do not name" \
	'^not ok .*/test_rdma_keys.c: its usage line names the sections main runs' \
	'^not ok .*/test_rdma_keys.c: its opening comment describes every section' \
	'^# section "extra" is not described' \
	'^not ok .* the docs that list its sections list all 10' \
	'leaves out extra'

fresh
sed -i 's/ \*   test_rdma_keys \[none|region-mr|/ *   test_rdma_keys [none|/' "$tmp/t/tests/rdma/test_rdma_keys.c"
sed -i 's/`test_rdma_keys restart`/`test_rdma_keys reboot`/' "$tmp/t/docs/architecture.md"
planted "a usage line short of a section, a doc naming one that is none" \
	'^# the usage line names auto\|device\|named\|none\|restart\|stop\|tenants\|window; main runs' \
	'`test_rdma_keys reboot` is no section'

scripts/check-map > "$tmp/real" 2>&1
tap_relay "$tmp/real"
tap_done
