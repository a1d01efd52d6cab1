# cluster_test.sh - the frame of a shell test of an rmem cluster: the TAP,
# rmemd, etcd and cluster libraries, its $tmp (rmemd_setup PREFIX) and
# etcd's binaries found (etcd_setup; skips the test without them).  Sourced
# from the repository root, after anything the test must set first:
#
#   . tests/lib/cluster_test.sh rmem-nbd-cluster
. tests/lib/tap.sh
. tests/lib/rmemd.sh
. tests/lib/etcd.sh
. tests/lib/cluster.sh
rmemd_setup "$1"
etcd_setup
