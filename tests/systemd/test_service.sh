#!/bin/bash
# test_service.sh - rmemd.service under real systemd (in the test VM): the
# unit installed by `make install` starts, is active only once rmemd said
# READY=1 (STATUS= shows the pinning meanwhile), serves rmemctl on its admin
# socket and RDMA and TCP clients under the unit's hardening, and stops
# cleanly.  TAP output.
# run-tests-timeout: 600
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1

. tests/lib/tap.sh
. tests/systemd/lib.sh
sysd_setup

# Large enough that pinning it takes seconds under TCG, so that the unit is
# seen activating with the progress in STATUS=; small enough for the VM's RAM.
POOL=${RMEM_SYSD_POOL:-768M}
POOL_BYTES=$((768 << 20))
[ "$POOL" = 768M ] || POOL_BYTES=$(numfmt --from=iec "$POOL")

sysd_install
ok $? "make install into the VM's root, ldconfig, systemctl daemon-reload"
[ -x "$SYSD_RMEMD" ] && [ -f "$SYSD_UNIT_FILE" ] &&
	grep -qx "ExecStart=$SYSD_RMEMD" "$SYSD_UNIT_FILE"
ok $? "$SYSD_UNIT_FILE runs the installed $SYSD_RMEMD"
unit_props LoadState FragmentPath
[ "${PROP[LoadState]-}" = loaded ]
ok $? "systemd loaded $UNIT (${PROP[LoadState]-}, ${PROP[FragmentPath]-})"

# ---- start: activating while pinning, active only after READY=1 -----------------
sysd_conf "$POOL"
systemctl reset-failed "$UNIT" 2> /dev/null
# tcp_listening PORT: something listens on 0.0.0.0:PORT (bash builtins only:
# under TCG every program started costs a second).
tcp_listening() {
	local want line

	want=$(printf ':%04X ' "$1")
	while read -r line; do
		# local_address rem_address st: 0A is LISTEN.
		[[ $line == *"$want"*" 0A "* ]] && return 0
	done < /proc/net/tcp
	return 1
}

# Polls the unit while it starts: one line per change of (state, substate,
# status), with whether the admin socket and the TCP port were there at that
# moment.  systemctl show itself takes about a second under TCG.
watch_start() {
	local state sub status last='' sock port i

	for ((i = 0; i < 300; i++)); do
		unit_props ActiveState SubState StatusText
		state=${PROP[ActiveState]:-} sub=${PROP[SubState]:-} status=${PROP[StatusText]:-}
		sock=no port=no
		[ -S "$SYSD_SOCK" ] && sock=yes
		tcp_listening "$SYSD_PORT" && port=yes
		if [ "$state|$sub|$status|$sock|$port" != "$last" ]; then
			printf '%s|%s|%s|%s|%s\n' "$state" "$sub" "$status" "$sock" "$port"
			last="$state|$sub|$status|$sock|$port"
		fi
		case $state in
		active | failed) return 0 ;;
		inactive) [ "$i" -gt 2 ] && return 0 ;;
		esac
		sleep 0.1
	done
	return 1
}
started=$SECONDS
systemctl start --no-block "$UNIT"
ok $? "systemctl start --no-block $UNIT"
watch_start > "$tmp/states"
ok $? "the unit left activating within 300 polls ($((SECONDS - started)) s)"
diag < "$tmp/states"
grep -Eq '^activating\|start\|pinning pool default 1/1 \([0-9]+%\)\|' "$tmp/states"
ok $? "while activating, STATUS= shows the pinning progress (pinning pool default 1/1 (N%))"
# What is-active says is ActiveState: it never said active while pinning.
! grep -Eq '^active\|[^|]*\|pinning' "$tmp/states"
ok $? "never active while STATUS= said pinning"
last=$(tail -n 1 "$tmp/states")
[ "$last" = "active|running|serving|yes|yes" ]
ok $? "then active with STATUS=serving, admin socket and TCP port already there ($last)"
state=$(systemctl is-active "$UNIT")
ok $? "systemctl is-active $UNIT says $state"
unit_props Type NRestarts MainPID
[ "${PROP[Type]-}" = notify ] && [ "${PROP[NRestarts]-}" = 0 ]
ok $? "Type=notify, no restart so far"
pid=${PROP[MainPID]-}
[ -n "$pid" ] && [ "$pid" != 0 ] && [ "$(readlink "/proc/$pid/exe")" = "$SYSD_RMEMD" ]
ok $? "MainPID $pid is the installed rmemd"
# LimitMEMLOCK=infinity and CAP_IPC_LOCK: the whole pool is locked.
lck=$(awk '/^VmLck:/ {print $2}' "/proc/$pid/status" 2> /dev/null)
[ -n "$lck" ] && [ "$lck" -ge $((POOL_BYTES >> 10)) ]
ok $? "the pool is locked in RAM under the unit (VmLck ${lck:-?} kB)"
grep -Eq 'pool default: [0-9]+ bytes pinned' < <(journalctl -b -u "$UNIT" --no-pager -o cat)
ok $? "journald has rmemd's log (pool default pinned)"
journalctl -b -u "$UNIT" --no-pager -o cat | grep -E 'ready:|device|rdma' | diag

# ---- rmemctl over the admin socket ----------------------------------------------
"$SYSD_RMEMCTL" stats > "$tmp/stats" 2> "$tmp/err"
ok $? "rmemctl stats (default socket $SYSD_SOCK) exits 0"
grep -Eq "^pool_bytes: +$POOL_BYTES( |\$)" "$tmp/stats"
ok $? "it shows the pool: $(grep pool_bytes "$tmp/stats")"
cat "$tmp/err" >> "$tmp/stats"
diag < "$tmp/stats"
"$SYSD_RMEMCTL" -s "$SYSD_SOCK" --json stats > "$tmp/json" 2> "$tmp/err" &&
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["stats"]
sys.exit(not (d["pool_bytes"] == int(sys.argv[2]) and d["regions"] == 0))' "$tmp/json" "$POOL_BYTES"
ok $? "rmemctl -s $SYSD_SOCK --json stats: pool_bytes $POOL_BYTES, no region"
# stats is served to everyone on the socket (mode 0666 whatever UMask=).
out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$SYSD_RMEMCTL" stats 2>&1)
ok $? "rmemctl stats as user nobody ($(stat -c %a "$SYSD_SOCK") $SYSD_SOCK)"
"$SYSD_RMEMCTL" pools > "$tmp/pools" 2>&1
ok $? "rmemctl pools (an admin listing) exits 0"
diag < "$tmp/pools"

# ---- clients under the unit's hardening -----------------------------------------
# RDMA: the unit's DevicePolicy/DeviceAllow, RestrictAddressFamilies and
# capabilities must let rmemd open rxe0, listen with rdma_cm and register.
out=$(rwcheck "$SYSD_RDMA_EP" rdma $((4 << 20)) 2>&1)
ok $? "an RDMA client ($SYSD_RDMA_EP): $out"
out=$(rwcheck "$SYSD_TCP_EP" tcp $((4 << 20)) 2>&1)
ok $? "a TCP client ($SYSD_TCP_EP): $out"
out=$(rwcheck "unix:$SYSD_SOCK" auto 65536 2>&1)
ok $? "a client on the Unix socket: $out"
out=$("$SYSD_PREFIX/bin/rmem-perf" -e "$SYSD_RDMA_EP" -t rdma --op write -s 65536 -n 500 -q 8 2>&1)
ok $? "installed rmem-perf: 500 RDMA writes of 64 KiB, 8 in flight"
tail -n 2 <<< "$out" | diag
out=$("$SYSD_PREFIX/bin/rmem-perf" -e "$SYSD_TCP_EP" -t tcp --op alloc -n 500 2>&1)
ok $? "installed rmem-perf: 500 allocs and frees over TCP"
tail -n 2 <<< "$out" | diag
"$SYSD_RMEMCTL" --json stats > "$tmp/json" 2> /dev/null &&
	python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["stats"]
sys.exit(not (d["regions"] == 0 and d["used_bytes"] == 0 and d["allocs"] >= 3 and
              d["allocs"] == d["frees"]))' "$tmp/json"
ok $? "afterwards rmemd holds no region, every alloc was freed"
unit_props ActiveState MainPID NRestarts
[ "${PROP[ActiveState]-}" = active ] && [ "${PROP[MainPID]-}" = "$pid" ] &&
	[ "${PROP[NRestarts]-}" = 0 ]
ok $? "the unit is still active with the same MainPID, never restarted"
# SystemCallErrorNumber=EPERM: a call the filter denies fails quietly.
journalctl -b -u "$UNIT" --no-pager -o cat > "$tmp/journal"
! grep -Ei 'operation not permitted|permission denied|EPERM' "$tmp/journal" > "$tmp/eperm"
ok $? "no EPERM in rmemd's log (the unit's sandbox and syscall filter denied nothing)"
diag < "$tmp/eperm"

# ---- stop -------------------------------------------------------------------------
systemctl stop "$UNIT"
ok $? "systemctl stop $UNIT exits 0"
# systemctl show prints properties in its own order, not the one asked.
# code=exited: rmemd returned from main (a SIGTERM it did not handle would
# be "killed", which systemd also counts as a success).
end=$(sysd_last_end)
[ "$end" = "result=success code=exited status=0" ]
ok $? "systemd saw rmemd exit by itself with status 0 (${end:-no rmem-test-end line})"
unit_props ActiveState MainPID
[ "${PROP[ActiveState]-}" = inactive ] && [ "${PROP[MainPID]-}" = 0 ]
ok $? "the unit is inactive, no main PID"
! kill -0 "$pid" 2> /dev/null
ok $? "the old main PID $pid is gone"
! systemctl is-failed --quiet "$UNIT"
ok $? "not in a failed state"
journalctl -b -u "$UNIT" --no-pager -o cat | grep -q 'signal 15: stopping'
ok $? "rmemd logged that SIGTERM stopped it"
[ ! -e "$SYSD_SOCK" ]
ok $? "RuntimeDirectory /run/rmemd went with it"
[ "$nfail" -eq 0 ] || sysd_journal 40

tap_done
