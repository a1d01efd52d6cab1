#!/bin/bash
# bringup.sh - make bench-bringup: how long rmemd takes from start to READY=1
# with one pool of each size in BRINGUP_SIZES (default 1G), with 4 KiB pages
# and with 2 MiB hugepages.  Hugepages are reserved through /proc/sys/vm/nr_hugepages for the
# hugepage runs only and the old value is put back at once (and on any exit).
# A size is skipped when the machine lacks the memory for it.  A benchmark: it
# asserts nothing.
#   BRINGUP_SIZES="1G 16G" BRINGUP_RUNS=3 BRINGUP_BIG_RUNS=1 bench/bringup.sh [--json-to FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
B=build
SIZES=${BRINGUP_SIZES:-1G}
RUNS=${BRINGUP_RUNS:-3}
BIG_RUNS=${BRINGUP_BIG_RUNS:-1}	# pools over 4 GiB: few runs, the machine is shared
json_to=
[ "${1:-}" = "--json-to" ] && json_to=$2

make -s "$B/rmemd" "$B/bench/bringup"

nr=/proc/sys/vm/nr_hugepages
old_nr=$(cat "$nr")
restore() { echo "$old_nr" > "$nr" 2>/dev/null || true; }
trap restore EXIT

mib_of() {	# 512M, 1G, 16G -> MiB
	local n=${1%%[KMGTP]*} u=${1##*[0-9]}
	case ${u%%i*} in
	M*) echo "$n" ;; G*) echo $((n * 1024)) ;; T*) echo $((n * 1048576)) ;; *) echo 0 ;;
	esac
}
avail_mib() { awk '/MemAvailable/ {print int($2 / 1024)}' /proc/meminfo; }

record() {
	if [ -n "$json_to" ]; then tee -a "$json_to"; else cat; fi
}

show() {	# JSON lines -> the table's rows
	python3 -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print("%-6s %-9s %4d %10.3f %10.3f %10.3f %10.3f %8.3f" % (r["size"], r["hugepages"],
          r["runs"], r["ready_s"], r["ready_min_s"], r["ready_max_s"], r["pin_start_s"],
          r["stop_s"]))'
}

"$B/bench/bringup" --header
for size in $SIZES; do
	mib=$(mib_of "$size")
	runs=$RUNS
	[ "$mib" -gt 4096 ] && runs=$BIG_RUNS
	if [ "$mib" -eq 0 ] || [ $((mib + 3072)) -gt "$(avail_mib)" ]; then
		echo "$size: skipped ($(avail_mib) MiB available)" >&2
		continue
	fi
	"$B/bench/bringup" -d "$B/rmemd" -s "$size" -H off -r "$runs" --json | record |
		show
	pages=$(((mib + 1) / 2))
	if [ -w "$nr" ]; then
		echo $((old_nr + pages)) > "$nr" || true
		free_pages=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
		if [ "$free_pages" -ge "$pages" ]; then
			"$B/bench/bringup" -d "$B/rmemd" -s "$size" -H on -r "$runs" --json | record |
				show
		else
			echo "$size on: skipped (only $free_pages of $pages hugepages could be reserved)" >&2
		fi
		restore
	else
		echo "$size on: skipped (cannot write $nr)" >&2
	fi
done
