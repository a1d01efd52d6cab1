# tap.sh - TAP for rmem's shell tests; tests/run-tests counts the lines.
# Sourced (bash):
#
#   . tests/lib/tap.sh
#   test -x "$prog" || skip_all "not built"
#   [ "$x" = 1 ]; ok $? "what was checked"
#   some_command 2>&1 | diag            stdin as "# " comment lines
#   skip_one "why"
#   tap_relay FILE                      FILE's TAP lines as assertions of ours
#   tap_done                            the plan; false when anything failed

t=0
nfail=0

# ok STATUS TEXT...: one assertion; STATUS 0 passes.  Returns STATUS.
ok() {
	local rc=$1
	shift
	t=$((t + 1))
	if [ "$rc" -eq 0 ]; then
		echo "ok $t - $*"
	else
		echo "not ok $t - $*"
		nfail=$((nfail + 1))
	fi
	return "$rc"   # so that `ok $? "what" || diag < log` shows why
}

diag() {
	sed -e 's/^/# /'
}

skip_one() {
	t=$((t + 1))
	echo "ok $t # SKIP $*"
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit 77
}

# tap_relay FILE: each "ok"/"not ok" line of FILE (another program's TAP
# output) becomes one assertion here, numbered anew; its "#" lines pass on.
tap_relay() {
	local line st
	while IFS= read -r line; do
		case $line in
		"ok "*|"not ok "*)
			st=${line%% [0-9]*}
			[ "$st" = ok ]
			ok $? "${line#* - }" ;;
		"#"*) echo "$line" ;;
		esac
	done < "$1"
}

tap_done() {
	echo "1..$t"
	[ "$nfail" -eq 0 ]
}
