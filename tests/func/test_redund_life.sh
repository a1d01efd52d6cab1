#!/bin/bash
# test_redund_life.sh - redundant regions against their client's threads (issue 30)
# What it checks is at the top of tests/func/test_redund_life.c.  The five
# rmemd (s0..s4, 64 MiB, lease_ms 3000, under starters and fd stores; their
# repair agents off, so that only the test's writer repairs) are killed -9
# and started fresh by the program through this script's hook
# (tests/lib/redund_hook.sh).
#
#   RMEM_BUILD=build-san tests/run-tests tests/func/test_redund_life.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1
NSRV=5
. tests/lib/redund_hook.sh

# ---- the hook: test_redund_life runs "$0 --hook DIR CMD ARGS" ------------------------
hook_cmd() {
	case $cmd in
	made) # the layout generation that made piece $2 of name $1
		record "$1" | python3 -c '
import json, sys
print(json.load(sys.stdin)["pieces"][int(sys.argv[1])]["made"])' "$2" ;;
	*) hook_common "$@" ;;
	esac
}
redund_hook "$@"

. tests/lib/cluster_prog.sh rmem-redund-life test_redund_life
NAME=rl$$
redund_up 3000,0 info
redund_run
