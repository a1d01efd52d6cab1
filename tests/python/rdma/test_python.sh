#!/bin/sh
# run-tests-timeout: 900
# The Python binding's pytest suite over RDMA (RMEM_TEST_TRANSPORT=rdma):
# the network client of every test is rdma://, in the Soft-RoCE test VM
# (tests/vm/suite runs it; Makefile RDMA_BINS).  Outside the VM: skipped.
if [ -z "${RMEM_VM_RDMA_ADDR:-}" ]; then
	echo "1..0 # SKIP needs the Soft-RoCE VM (RMEM_VM_RDMA_ADDR, tests/vm)"
	exit 77
fi
exec env RMEM_TEST_TRANSPORT=rdma "$(dirname "$0")/../test_python.sh" "$@"
