#!/bin/sh
# test_python_threads.sh - the Python binding's threaded pytest cases alone
# (16 threads on one client, a read waiting while another thread runs, close
# racing calls, the keepalive and another thread taking a completion): what
# tests/func/test_tsan.sh runs under ThreadSanitizer.  TAP, as
# test_python.sh's (it passes -k to it).
# run-tests-timeout: 300
exec "$(dirname "$0")/test_python.sh" -k "thread or keepalive" "$@"
