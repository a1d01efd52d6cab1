#!/bin/bash
# test_tls.sh (ktls) - tests/func/test_tls.sh in the test VM, whose Debian
# kernel has the tls module (tests/vm/setup loads it), with RMEM_TLS_KERNEL=1:
# every session must be sealed by the kernel (rmem_transport() "ktls" or
# "ktls-tx"), and the recording of the stream must still hold no region
# byte.  The host's kernel here has no tls module, so only the VM runs the
# kernel TLS path: `make check-ktls`.  Not in make test yet, because it
# fails: with tls.ko loaded (tcp_available_ulp "mptcp tls") every session
# is still sealed in user space, and strace shows OpenSSL 3.0.19 never
# setting TCP_ULP on the socket (issue 33, the closing note of 2026-12-03).
# run-tests-timeout: 600
RMEM_TLS_KERNEL=1 exec "$(dirname "$0")/../test_tls.sh" "$@"
