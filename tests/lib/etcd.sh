# etcd.sh - a real 3-member etcd cluster on loopback for rmem's cluster tests
# (Debian's etcd-server, spoken to with its etcdctl).  Sourced (bash), after
# tests/lib/tap.sh, with $tmp set (rmemd_setup makes it):
#
#   . tests/lib/etcd.sh
#   etcd_setup                  skips (77) only where etcd cannot be had
#   etcd_start 3                members 0..2; $ETCD_ENDPOINTS "http://...,..."
#                               ("https://...": ETCD_TLS_DIR, below)
#   free_ports 6                six free ports, for the cluster's rmemd
#   etcdctl_ get --prefix /rmem/      etcdctl on every member
#   etcd_leader                 index of the member that leads now
#   etcd_kill I / etcd_restart I
#   etcd_stop                   (also from the exit trap: etcd_cleanup)
#
# TLS, opt-in (tests/func/test_etcd_tls.sh): etcd_tls_certs DIR makes a
# private CA and certificates in DIR (openssl); with ETCD_TLS_DIR=DIR set
# before etcd_start the members serve clients over https:// only with
# DIR/server.pem (IP 127.0.0.1) and --client-cert-auth (a client certificate
# signed by DIR/ca.pem, or no answer), $ETCD_ENDPOINTS are https:// and
# etcdctl_ presents DIR/client.pem.  Unset (the default), nothing changes.
#
# Each member has its own data dir under $tmp/etcd/mI, its own client and
# peer ports (free now), and fast raft timing (heartbeat 50 ms, election
# 500 ms: a lost leader is replaced in about a second, and leases can be as
# short as 1 s; 250/2500 in the test VM; ETCD_HEARTBEAT_MS and
# ETCD_ELECTION_MS override them).  Members log to $tmp/etcd/mI.log.

ETCD_BIN=${ETCD_BIN:-etcd}
ETCDCTL_BIN=${ETCDCTL_BIN:-etcdctl}
ETCD_N=0
ETCD_ENDPOINTS=
ETCD_TLS_DIR=${ETCD_TLS_DIR:-}
etcd_pids=()
etcd_cports=()
etcd_pports=()

# etcd_setup: scripts/install-deps (which `make test` runs first) installs
# etcd-server and etcd-client, so once it has run their absence is a failure,
# not a skip.  The test skips only where neither etcd is installed nor
# install-deps has run, i.e. dpkg has no etcd-server at all.
etcd_setup() {
	if command -v "$ETCD_BIN" > /dev/null && command -v "$ETCDCTL_BIN" > /dev/null; then
		return 0
	fi
	if dpkg-query -W -f='${Status}' etcd-server etcd-client 2> /dev/null | grep -q ' installed'; then
		echo "not ok 1 - etcd-server/etcd-client are installed but etcd or etcdctl is" \
			"not on PATH"
		echo "1..1"
		exit 1
	fi
	skip_all "etcd is not installed and scripts/install-deps has not run" \
		"(it installs etcd-server and etcd-client)"
}

# free_ports N: N distinct TCP ports on 127.0.0.1 that nothing listens on
# now (etcd's, and the cluster tests' rmemd).
free_ports() {
	python3 -c 'import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# Raft's timing: fast on the host; in the test VM (TCG, everything ten
# times slower) a 50 ms heartbeat is a third of a vCPU for three idle
# members and a 500 ms election is missed under load, so there 250/2500
# (test_cluster.sh asks for its own).
etcd_heartbeat_ms=50 etcd_election_ms=500
[ -n "${RMEM_IN_VM:-}" ] && etcd_heartbeat_ms=250 etcd_election_ms=2500
# The members' client URLs' scheme, and etcd's TLS flags (ETCD_TLS_DIR).
etcd_scheme() { if [ -n "$ETCD_TLS_DIR" ]; then echo https; else echo http; fi; }
etcd_tls_flags() {
	[ -n "$ETCD_TLS_DIR" ] || return 0
	echo --cert-file "$ETCD_TLS_DIR/server.pem" --key-file "$ETCD_TLS_DIR/server.key" \
		--trusted-ca-file "$ETCD_TLS_DIR/ca.pem" --client-cert-auth
}
etcdctl_tls_flags() {
	[ -n "$ETCD_TLS_DIR" ] || return 0
	echo --cacert "$ETCD_TLS_DIR/ca.pem" --cert "$ETCD_TLS_DIR/client.pem" \
		--key "$ETCD_TLS_DIR/client.key"
}

# The certificates of tests/lib/tlscerts.sh, under the names the etcd tests
# know them by.
. tests/lib/tlscerts.sh
etcd_tls_cert() { tls_cert "$@"; }
etcd_tls_certs() { tls_certs "$@"; }

etcd_member_start() {
	local i=$1 cluster=$2 state=$3 sch
	sch=$(etcd_scheme)
	# shellcheck disable=SC2046
	"$ETCD_BIN" --name "m$i" --data-dir "$tmp/etcd/m$i" \
		--listen-client-urls "$sch://127.0.0.1:${etcd_cports[$i]}" \
		--advertise-client-urls "$sch://127.0.0.1:${etcd_cports[$i]}" $(etcd_tls_flags) \
		--listen-peer-urls "http://127.0.0.1:${etcd_pports[$i]}" \
		--initial-advertise-peer-urls "http://127.0.0.1:${etcd_pports[$i]}" \
		--initial-cluster "$cluster" --initial-cluster-state "$state" \
		--initial-cluster-token "rmem-test-$$" \
		--heartbeat-interval "${ETCD_HEARTBEAT_MS:-$etcd_heartbeat_ms}" \
		--election-timeout "${ETCD_ELECTION_MS:-$etcd_election_ms}" \
		--snapshot-count 10000 --quota-backend-bytes $((64 << 20)) \
		--log-level warn --logger zap \
		>> "$tmp/etcd/m$i.log" 2>&1 &
	etcd_pids[$i]=$!
}

# etcd_start N: starts N members and waits (up to 20 s) until every one
# says it is healthy.  0 when it is.
etcd_start() {
	local n=$1 ports i cluster=
	ETCD_N=$n
	mkdir -p "$tmp/etcd"
	read -r -a ports <<< "$(free_ports $((2 * n)))" # N client, N peer
	for ((i = 0; i < n; i++)); do
		etcd_cports[$i]=${ports[$i]}
		etcd_pports[$i]=${ports[$((n + i))]}
		cluster+="${cluster:+,}m$i=http://127.0.0.1:${etcd_pports[$i]}"
	done
	ETCD_CLUSTER=$cluster
	ETCD_ENDPOINTS=
	for ((i = 0; i < n; i++)); do
		ETCD_ENDPOINTS+="${ETCD_ENDPOINTS:+,}$(etcd_scheme)://127.0.0.1:${etcd_cports[$i]}"
		etcd_member_start "$i" "$cluster" new
	done
	etcd_wait_healthy 20
}

# etcd_wait_healthy SECONDS: every running member answers `endpoint health`.
etcd_wait_healthy() {
	local deadline=$((SECONDS + $1))
	while ((SECONDS < deadline)); do
		if etcdctl_ endpoint health > /dev/null 2>&1; then
			return 0
		fi
		sleep 0.2
	done
	etcdctl_ endpoint health 2>&1 | diag
	return 1
}

# etcdctl_ ARGS...: etcdctl (API 3) on the members that run.
etcdctl_() {
	local eps= i
	for ((i = 0; i < ETCD_N; i++)); do
		[ -n "${etcd_pids[$i]}" ] &&
			eps+="${eps:+,}$(etcd_scheme)://127.0.0.1:${etcd_cports[$i]}"
	done
	# shellcheck disable=SC2046
	ETCDCTL_API=3 "$ETCDCTL_BIN" --endpoints="$eps" --dial-timeout=2s \
		--command-timeout=3s $(etcdctl_tls_flags) "$@"
}

# etcd_leader: the index of the member that leads now (empty if none).
etcd_leader() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		[ -n "${etcd_pids[$i]}" ] || continue
		# shellcheck disable=SC2046
		if ETCDCTL_API=3 "$ETCDCTL_BIN" $(etcdctl_tls_flags) \
			--endpoints="$(etcd_scheme)://127.0.0.1:${etcd_cports[$i]}" \
			--dial-timeout=2s endpoint status -w fields 2> /dev/null |
			grep -q '"Leader" : \([0-9]*\)$' &&
			[ "$(ETCDCTL_API=3 "$ETCDCTL_BIN" $(etcdctl_tls_flags) \
				--endpoints="$(etcd_scheme)://127.0.0.1:${etcd_cports[$i]}" --dial-timeout=2s \
				endpoint status -w fields 2> /dev/null |
				sed -n -e 's/^"MemberID" : //p' -e 's/^"Leader" : //p' | uniq | wc -l)" = 1 ]; then
			echo "$i"
			return 0
		fi
	done
	return 1
}

# etcd_kill I [SIGNAL]: stops member I (SIGKILL by default).
etcd_kill() {
	local i=$1
	[ -n "${etcd_pids[$i]}" ] || return 0
	kill -"${2:-KILL}" "${etcd_pids[$i]}" 2> /dev/null
	wait "${etcd_pids[$i]}" 2> /dev/null
	etcd_pids[$i]=
}

# etcd_restart I: member I again, with its data (it rejoins the cluster).
etcd_restart() {
	etcd_member_start "$1" "$ETCD_CLUSTER" existing
}

etcd_stop() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		etcd_kill "$i" TERM
	done
}

etcd_cleanup() {
	local i
	for ((i = 0; i < ETCD_N; i++)); do
		[ -n "${etcd_pids[$i]}" ] && kill -KILL "${etcd_pids[$i]}" 2> /dev/null
	done
	return 0
}
