#!/bin/bash
# test_fuzzers.sh - every libFuzzer target builds with clang and fuzzes.
# For each tests/fuzz/fuzz_*.c, one check: build-fuzz/NAME (built by make
# check and make test, as make fuzz builds it) exists, and a short run of
# it from its corpus (tests/fuzz/corpus/NAME without the fuzz_, read only)
# executes inputs and finds nothing.  The replay tests (fuzz_*_replay) run
# the corpora under gcc; this keeps the clang build and the fuzzing itself
# from rotting unseen, as make fuzz once did.
#   FUZZ_TEST_SECONDS (default 3): the run of each target.
# TAP output.
set -uo pipefail
cd "$(dirname "$0")/../.."

. tests/lib/tap.sh

command -v clang > /dev/null ||
	skip_all "no clang here (scripts/install-deps installs clang and libclang-rt-dev)"

secs=${FUZZ_TEST_SECONDS:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rmem-fuzzers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

for src in tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	bin=build-fuzz/$name
	if [ ! -x "$bin" ]; then
		ok 1 "$name: $bin is built (make $bin)"
		continue
	fi
	corpus=tests/fuzz/corpus/${name#fuzz_}
	mkdir -p "$tmp/$name"
	# New inputs go to the scratch directory, crashes into it as crash-*.
	timeout $((secs + 60)) "$bin" -max_total_time="$secs" -print_final_stats=1 \
		-artifact_prefix="$tmp/$name/" "$tmp/$name" $([ -d "$corpus" ] && echo "$corpus") \
		> "$tmp/$name.log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/$name.log")
	found=$(ls "$tmp/$name" | grep -E '^(crash|leak|timeout|oom)-' | head -n 1)
	[ $rc -eq 0 ] && [ "${runs:-0}" -gt 0 ] && [ -z "$found" ]
	ok $? "$name: ${runs:-no} inputs in ${secs} s, exit $rc${found:+, found $found}"
	[ $rc -eq 0 ] || tail -n 30 "$tmp/$name.log" | diag
done

tap_done
