#!/bin/bash
# run-tests-timeout: 600
# test_python.sh - the Python binding's pytest suite (tests/python/test_*.py)
# as one TAP program for tests/run-tests: tap_plugin.py writes one TAP line
# per result pytest counts, on descriptor 3; pytest's own output becomes
# "#" comments.  Over RDMA with RMEM_TEST_TRANSPORT=rdma (tests/python/rdma,
# in the test VM).
#
# Exit status: pytest's, except that "no tests collected" (5) and a usage
# or internal error are failures with a "not ok" line of their own
# (tap_plugin.py), and any exit other than 0 and 1 stays a failure in
# run-tests' eyes ("exit status N").
set -u
cd "$(dirname "$0")/../.." || exit 1
B=${RMEM_BUILD:-build}
case $B in /*) ;; *) B=$PWD/$B ;; esac
PYTHON=${PYTHON:-/usr/bin/python3}
ext=$B/python/rmem/_rmem.abi3.so
if [ ! -e "$ext" ]; then
	# make test builds it (all): its absence is a failure, not a skip.
	echo "not ok 1 - $ext is built (make python)"
	echo "1..1"
	exit 1
fi
if ! "$PYTHON" -c 'import pytest' 2> /dev/null; then
	echo "not ok 1 - $PYTHON has pytest (scripts/install-deps: python3-pytest)"
	echo "1..1"
	exit 1
fi
# A sanitized build's extension links ASan, which must come first in the
# process: preload it into the (unsanitized) interpreter.  Python's own
# allocations are not ours to report: no leak check.
if ldd "$ext" 2> /dev/null | grep -q libasan; then
	asan=$(${CC:-cc} -print-file-name=libasan.so)
	ubsan=$(${CC:-cc} -print-file-name=libubsan.so)
	export LD_PRELOAD="$asan $ubsan"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
fi
# A ThreadSanitizer build's (build-tsan, tests/unit/test_tsan.sh) likewise:
# TSan must be in the process from its start to see every thread.
if ldd "$ext" 2> /dev/null | grep -q libtsan; then
	export LD_PRELOAD=$(${CC:-cc} -print-file-name=libtsan.so)
fi
export RMEM_BUILD=$B PYTHONPATH=$B/python:$PWD/tests/python PYTHONDONTWRITEBYTECODE=1
exec 3>&1
"$PYTHON" -m pytest -p tap_plugin -p no:cacheprovider -rfEs --color=no --durations=8 \
	tests/python "$@" 3>&3 2>&1 | sed -u -e 's/^/# /'
rc=${PIPESTATUS[0]}
[ "$rc" = 5 ] && rc=1
exit "$rc"
