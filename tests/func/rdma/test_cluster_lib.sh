#!/bin/sh
# run-tests-alone: a 3-member etcd in a TCG guest misses its raft deadlines beside another program.
# test_cluster_lib.sh over RDMA: librmem's etcd:// cluster client end to end
# (placement, 150 MiB through one client, names across servers, racing
# creators, kill -9 -> -EHOSTDOWN, the etcd leader killed under I/O) with
# its three rmemd on the test VM's one rxe device and every client's data
# on rdma:// (never TCP).  Run in the Soft-RoCE VM by tests/vm/suite (make
# test) and make check-rdma; outside the VM it skips.  247-353 s under TCG
# on a loaded machine.
# run-tests-timeout: 1200
root=$(cd "$(dirname "$0")/../../.." && pwd) || exit 1
exec env RMEM_TEST_TRANSPORT=rdma "$root/tests/func/test_cluster_lib.sh" "$@"
