#!/bin/sh
# run-tests-alone: a 3-member etcd in a TCG guest misses its raft deadlines beside another program.
# test_cluster.sh over RDMA: tests/func/test_cluster.sh with
# RMEM_TEST_TRANSPORT=rdma, so that its three rmemd listen on the test VM's
# one rxe device (each with an RDMA port of its own), advertise their RDMA
# endpoints in etcd, and its clients do their I/O over rdma://.  Run in the
# Soft-RoCE VM by tests/vm/suite (make test) and make check-rdma; outside
# the VM it skips.  Slow under TCG (814 s on a loaded machine, against 45 s
# for the whole TCP test on the host), hence the timeout.
# run-tests-timeout: 1500
root=$(cd "$(dirname "$0")/../../.." && pwd) || exit 1
exec env RMEM_TEST_TRANSPORT=rdma "$root/tests/func/test_cluster.sh" "$@"
