#!/bin/bash
# The include graph of daemon/, client-lib/ and common/ has no cycle and keeps
# its layers (scripts/check-layers; docs/architecture.md).  First the checker
# is shown a small tree with a cycle and a layering breach, to prove it can
# fail; then it judges the real tree, each of its rules one assertion.
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/lib/tap.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/daemon" "$tmp/common" "$tmp/client-lib/include" "$tmp/client-lib/tools"
printf '#include "b.h"\n' > "$tmp/daemon/a.c"
printf '#include "a.h"\n' > "$tmp/daemon/b.c"
: > "$tmp/daemon/a.h"; : > "$tmp/daemon/b.h"
printf '#include "x.h"\n' > "$tmp/common/y.c"
: > "$tmp/common/x.h"
: > "$tmp/common/y.h"
printf '#include "client.h"\n' > "$tmp/client-lib/tools/tool.c"
: > "$tmp/client-lib/client.h"
scripts/check-layers "$tmp" > "$tmp/out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q 'cycle: daemon/a -> daemon/b -> daemon/a\|cycle: daemon/b -> daemon/a -> daemon/b' "$tmp/out" &&
	grep -q '^not ok .* the tools include only rmem.h' "$tmp/out" &&
	grep -q '^ok .* no include cycle among common/' "$tmp/out"
ok $? "the checker finds a planted cycle and a tool that looks inside the library" ||
	diag < "$tmp/out"

scripts/check-layers > "$tmp/real" 2>&1
tap_relay "$tmp/real"
tap_done
