#!/bin/bash
# test_cluster_tenants.sh - librmem's etcd:// cluster client as a tenant: a
# real 3-member etcd on loopback (tests/lib/etcd.sh) and two rmemd of 64 MiB
# with tenants "ml" (quota 8 MiB) and "web", then
# $B/tests/test_cluster_tenants, whose TAP stream this is (what it checks is
# at its top).  TCP only: the tenant handshake is the control channel's.
#
#   RMEM_BUILD=build tests/func/test_cluster_tenants.sh
# run-tests-timeout: 300
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/cluster_prog.sh rmem-cluster-tenants test_cluster_tenants

NAME=ct$$
mkdir -p "$tmp/keys"

# Secrets: 32 random bytes, hex; rmemd refuses a file others may read.
for k in ml web bad; do
	(umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$tmp/keys/$k.key")
done

cluster_etcd_up

read -r -a ports <<< "$(free_ports 2)"
for i in 0 1; do
	cluster_conf "$i" "$NAME" "127.0.0.1:${ports[$i]}" "" 3000 info
	cat >> "$tmp/r$i.conf" << EOC
tenants = (
	{ name = "ml"; secret_file = "$tmp/keys/ml.key"; quota = "8M"; },
	{ name = "web"; secret_file = "$tmp/keys/web.key"; }
);
EOC
	cluster_start "$i" --no-store || fail_setup "rmemd s$i did not get ready: $REPLY"
done
for i in 0 1; do
	cluster_registered "$NAME" "$i" 150 || fail_setup "rmemd s$i did not register in etcd"
done

RMEM_CLUSTER_URL=$(cluster_url "$NAME") RMEM_TENANT_DIR="$tmp/keys" "$PROG"
rc=$?
for i in 0 1; do
	grep -i "asan\|runtime error" "$tmp/r$i.log" | head -3 | diag
done
exit $rc
