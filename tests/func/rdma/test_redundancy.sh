#!/bin/sh
# run-tests-alone: a 3-member etcd in a TCG guest misses its raft deadlines beside another program.
# test_redundancy.sh over RDMA: erasure-coded redundant regions with every
# client's data on rdma:// (never TCP), in its light form: 2+1 on three rmemd
# of the test VM's one rxe device (the host runs 4+2 on six), anonymous and
# named regions, a writer going while a server is killed -9, every byte read
# after, then a fourth server started and every region repaired onto it with
# rmem_repair over RDMA, one more death read around by the rebuilt pieces,
# and a death past R -EHOSTDOWN.  Run in the Soft-RoCE VM by tests/vm/suite
# (make test); outside the VM it skips.  The six-server 4+2 form took 508 s
# under TCG, this one a third of the servers' CPU.
# run-tests-timeout: 1200
root=$(cd "$(dirname "$0")/../../.." && pwd) || exit 1
exec env RMEM_TEST_TRANSPORT=rdma RMEM_TEST_REDUNDANCY=2+1 RMEM_TEST_SPARE=1 RMEM_TEST_LIGHT=1 \
	"$root/tests/func/test_redundancy.sh" "$@"
