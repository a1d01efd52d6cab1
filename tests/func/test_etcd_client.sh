#!/bin/bash
# test_etcd_client.sh - runs test_etcd_client (the etcd client's calls,
# failover and watch) against a real 3-member etcd on loopback
# (tests/lib/etcd.sh).  TAP output: the program's.
#
#   RMEM_BUILD=build tests/func/test_etcd_client.sh
set -u
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/lib/rmemd.sh
. tests/lib/etcd.sh
rmemd_setup rmem-etcd-client
etcd_setup
PROG=$B/tests/test_etcd_client
[ -x "$PROG" ] || skip_all "$PROG is not built"
trap 'etcd_cleanup; rmemd_cleanup' EXIT

if ! etcd_start 3; then
	echo "not ok 1 - a 3-member etcd cluster starts"
	echo "1..1"
	exit 1
fi
"$PROG" "$ETCD_ENDPOINTS"
