# lib.sh - what the tests of rmemd.service under real systemd share.  They
# run inside the test VM booted with systemd as PID 1 (tests/systemd/suite,
# tests/vm/run-in-vm --systemd), never on a host: they install into / and
# start the unit.  Sourced (bash), after tests/lib/tap.sh:
#
#   . tests/lib/tap.sh
#   . tests/systemd/lib.sh
#   sysd_setup                     skips unless in the VM under systemd; $tmp
#   sysd_install || skip_all ...   make install + daemon-reload, once a boot
#   sysd_conf 256M                 /etc/rmemd/rmemd.conf: one pool of 256M
#   sysd_start                     systemctl start rmemd; 0 once active
#   ... $SYSD_TCP_EP $SYSD_RDMA_EP $SYSD_SOCK, rwcheck, unit_prop ...
#   sysd_stop                      systemctl stop rmemd
#
# Here systemd itself is the starter: the host tests' one starter
# (tests/lib/rmemd_start.py) and its fd store emulator stand in for what
# these tests use for real, so this file keeps only what is systemd's (the
# unit, systemctl, the installed paths and the journal).
#
# The exit trap stops rmemd (a test leaves the unit stopped for the next one)
# and removes $tmp.  Every test file starts rmemd itself: test_*.sh files do
# not depend on each other's order.

# shellcheck disable=SC2034  # the names below are for the tests that source this
B=${RMEM_BUILD:-build}
UNIT=rmemd.service
# Where `make install` puts things with the Makefile's defaults.
SYSD_PREFIX=/usr/local
SYSD_RMEMD=$SYSD_PREFIX/sbin/rmemd
SYSD_RMEMCTL=$SYSD_PREFIX/bin/rmemctl
SYSD_UNIT_FILE=/lib/systemd/system/$UNIT
SYSD_CONF=/etc/rmemd/rmemd.conf
SYSD_SOCK=/run/rmemd/rmemd.sock
SYSD_ADDR=${RMEM_VM_RDMA_ADDR:-}
SYSD_PORT=7470
SYSD_RDMA_PORT=7471
SYSD_TCP_EP=tcp://$SYSD_ADDR:$SYSD_PORT
# Control over TCP, then the data path on a queue pair through listen.rdma.
SYSD_RDMA_EP=rdma://$SYSD_ADDR:$SYSD_PORT
RWCHECK=$B/tests/systemd/rwcheck
tmp=

sysd_cleanup() {
	if [ "$(systemctl show -P ActiveState "$UNIT" 2> /dev/null)" != inactive ]; then
		systemctl stop "$UNIT" 2> /dev/null
	fi
	systemctl reset-failed "$UNIT" 2> /dev/null
	[ -n "$tmp" ] && rm -rf "$tmp"
}

# sysd_setup: skips the whole test outside the systemd VM; makes $tmp.
sysd_setup() {
	local pid1

	read -r pid1 < /proc/1/comm 2> /dev/null
	if [ "${RMEM_IN_VM:-0}" != 1 ] || [ "$pid1" != systemd ] || [ -z "$SYSD_ADDR" ]; then
		skip_all "not inside the test VM under systemd (tests/vm/run-in-vm --systemd)"
	fi
	[ -x "$RWCHECK" ] || skip_all "$RWCHECK is not built"
	tmp=$(mktemp -d /tmp/rmem-sysd.XXXXXX) || exit 1
	trap sysd_cleanup EXIT
}

# A stopped unit that nothing refers to is unloaded at once: systemctl show
# then has no ExecMainStatus to give.  This runtime drop-in (in the VM's /run
# only) has systemd log how each run of rmemd ended, for sysd_last_end.
SYSD_DROPIN=/run/systemd/system/$UNIT.d/rmem-test-end.conf

# sysd_install: `make install` of the plain build (tests/systemd/suite built
# it on the host: here it only copies) into the VM's overlay, ldconfig for
# /usr/local/lib, the drop-in above and systemctl daemon-reload; once per
# boot, the first test file that asks does it.  Its output in
# /run/rmem-sysd/install.log.
sysd_install() {
	local log=/run/rmem-sysd/install.log

	mkdir -p /run/rmem-sysd "${SYSD_DROPIN%/*}"
	if [ ! -e /run/rmem-sysd/installed ]; then
		cat > "$SYSD_DROPIN" <<- 'DROPIN'
			[Service]
			ExecStopPost=/bin/echo "rmem-test-end: result=${SERVICE_RESULT} code=${EXIT_CODE} status=${EXIT_STATUS}"
		DROPIN
		{ make -s SANITIZE= install && ldconfig && systemctl daemon-reload; } > "$log" 2>&1 ||
			{ tail -n 30 "$log" | diag; return 1; }
		: > /run/rmem-sysd/installed
	fi
	return 0
}

# sysd_last_end: how the last run of rmemd ended, as systemd saw it
# ("result=success code=exited status=0"), from the journal; waits up to
# about 10 s for the line.  Fails when there is none.
sysd_last_end() {
	local line i

	for ((i = 0; i < 20; i++)); do
		line=$(journalctl -b -u "$UNIT" --no-pager -o cat 2> /dev/null |
			grep '^rmem-test-end: ' | tail -n 1)
		if [ -n "$line" ]; then
			echo "${line#rmem-test-end: }"
			return 0
		fi
		sleep 0.5
	done
	return 1
}

# sysd_conf POOLSIZE [EXTRA]: the config the unit reads, listening on every
# address (TCP $SYSD_PORT, RDMA $SYSD_RDMA_PORT, the default admin socket),
# one pool of POOLSIZE, EXTRA appended at top level.
sysd_conf() {
	cat > "$SYSD_CONF" << CONF
listen = { tcp = "0.0.0.0:$SYSD_PORT"; rdma = "0.0.0.0:$SYSD_RDMA_PORT"; admin = "$SYSD_SOCK"; };
pools = ( { name = "default"; size = "$1"; hugepages = "off"; alignment = 64; } );
rdma = { device = "${RMEM_VM_RDMA_DEV:-rxe0}"; keys = "auto"; };
log = { level = "info"; };
${2:-}
CONF
}

# unit_prop NAME: one property of the unit, as systemctl show -P prints it.
unit_prop() {
	systemctl show -P "$1" "$UNIT"
}

# unit_props NAME...: the unit's properties into the associative array PROP
# (PROP[ActiveState]...), in one systemctl call: each costs about a second
# under TCG.  systemctl prints them in its own order, not the one asked.
declare -A PROP
unit_props() {
	local name line
	local -a args=()

	PROP=()
	for name in "$@"; do
		args+=(-p "$name")
	done
	while IFS= read -r line; do
		PROP[${line%%=*}]=${line#*=}
	done < <(systemctl show "${args[@]}" "$UNIT")
}

# sysd_start: systemctl start (waits for READY=1 or the failure); 0 when the
# unit is active.  The journal's end goes out as comments when not.
sysd_start() {
	systemctl start "$UNIT" && [ "$(unit_prop ActiveState)" = active ] && return 0
	sysd_journal 30
	return 1
}

# sysd_wait_active [SECS]: polls until the unit is active (again: after a
# kill and Restart=on-failure, for instance), at most SECS (120) seconds;
# 0 once it is.  Each poll is a systemctl call (about a second under TCG).
sysd_wait_active() {
	local end=$((SECONDS + ${1:-120}))

	while [ "$SECONDS" -lt "$end" ]; do
		[ "$(unit_prop ActiveState)" = active ] && return 0
		sleep 0.2
	done
	sysd_journal 30
	return 1
}

# sysd_stop: systemctl stop; its status.
sysd_stop() {
	systemctl stop "$UNIT"
}

# sysd_journal [N]: the last N (30) lines this boot logged for the unit, as
# comments.
sysd_journal() {
	journalctl -b -u "$UNIT" --no-pager -n "${1:-30}" 2>&1 | diag
}

# rwcheck ENDPOINT TRANSPORT [SIZE]: one client's alloc, write, read back,
# compare and free (tests/systemd/rwcheck.c); its line on stdout.
rwcheck() {
	"$RWCHECK" "$@"
}
