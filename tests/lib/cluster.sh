# cluster.sh - rmemd servers in an rmem cluster on etcd, for the cluster
# tests (tests/func/test_cluster.sh, test_cluster_lib.sh...).  Sourced (bash)
# after tests/lib/rmemd.sh and tests/lib/etcd.sh, with $tmp set and etcd
# started.  Each server runs through the tests' one starter
# (tests/lib/rmemd_start.py, rmemd.sh's rmemd_starter) under its emulated fd
# store, so that a test can restart it without loss, as under systemd:
#
#   read -r -a ports <<< "$(free_ports 6)"              (etcd.sh)
#   cluster_conf I NAME HOST:PORT RDMA LEASE_MS LEVEL [ID]   writes $tmp/rI.conf
#   cluster_start I                                     rmemd sI, READY=1
#   cluster_registered NAME I TRIES                     waits for sI's key
#   cluster_keeper DIR I CMD                            its starter does CMD
#   cluster_back I                                      start again, registered
#   cluster_joins I / cluster_joined I N                its registrations

# The hook of a test program sources this alone.
declare -F rmemd_ctl > /dev/null || . tests/lib/rmemd.sh

# cluster_conf I NAME HOST:PORT RDMA LEASE_MS LEVEL [ID]: $tmp/rI.conf, rmemd
# sI of cluster NAME on $ETCD_ENDPOINTS: 64 MiB, TCP on HOST:PORT, RDMA on
# RDMA (HOST:PORT on the same host; "": off), admin socket $tmp/rI.sock,
# metrics off (tests that run at once never meet on the default port), log
# level LEVEL, cluster.id ID (default sI; "": none, the server draws one);
# with CLUSTER_TLS="CA,CERT,KEY" set, cluster.etcd_ca, etcd_cert, etcd_key.
cluster_conf() {
	local rdma=() id=${7-s$1} tls=()
	[ -n "$4" ] && rdma=(--rdma-port "${4##*:}")
	[ -n "${CLUSTER_TLS:-}" ] && tls=(--cluster-tls "$CLUSTER_TLS")
	python3 "$STARTER" --write-only --conf "$tmp/r$1.conf" --host "${3%:*}" \
		--port "${3##*:}" "${rdma[@]}" --admin "$tmp/r$1.sock" --metrics-addr "" \
		--pool 64M --max-clients 1024 --lease-ms 60000 --log-level "$6" \
		--cluster "${ETCD_ENDPOINTS//,/;},$2,$id,$5" "${tls[@]}"
}

# cluster_registered NAME I TRIES: 0 once server sI's key is in etcd, asked
# up to TRIES times 0.1 s apart (each ask an etcdctl: slow in the test VM).
cluster_registered() {
	local _
	for _ in $(seq "$3"); do
		[ -n "$(etcdctl_ get "/rmem/$1/servers/s$2" --print-value-only 2> /dev/null)" ] &&
			return 0
		sleep 0.1
	done
	return 1
}

# cluster_start I [ARGS...]: rmemd sI ($tmp/rI.conf, log $tmp/rI.log) through
# its starter in $tmp/sI (a former one there ends first; ARGS are the
# starter's: --no-store runs it as by hand, no fd store); rmemd's pid in
# $tmp/pids/rmemdI and $dpid, the starter's in $tmp/pids/keeperI (on
# SIGTERM it ends its rmemd).  0 once READY=1 came.
cluster_start() {
	local sp i=$1
	shift
	mkdir -p "$tmp/pids"
	sp=$(cat "$tmp/pids/keeper$i" 2> /dev/null)
	if [ -n "$sp" ] && kill -0 "$sp" 2> /dev/null; then
		rmemd_ctl "$tmp/s$i" quit
		wait "$sp" 2> /dev/null
	fi
	rmemd_starter "$tmp/s$i" --conf "$tmp/r$i.conf" --log "$tmp/r$i.log" "$@"
	sp=$?
	echo "$spid" > "$tmp/pids/keeper$i"
	echo "$dpid" > "$tmp/pids/rmemd$i"
	return $sp
}

# cluster_keeper_start I: cluster_start, for the tests that say so.
cluster_keeper_start() { cluster_start "$@"; }

# cluster_back I: server sI started again from its store (cluster_keeper
# start), 0 once it registered anew (cluster_joined, up to 30 s).  Its key
# in etcd says nothing: a server killed -9 leaves its old key under the dead
# process's lease, which may end only after the new one came up, and the
# key is away until the new process registers.
cluster_back() {
	local n
	n=$(cluster_joins "$1")
	cluster_keeper "$tmp" "$1" start && cluster_joined "$1" "$n"
}
# cluster_joins I: how many times server sI's log says it registered.
cluster_joins() { grep -c "cluster: registered" "$tmp/r$1.log"; }
# cluster_joined I N: 0 once sI registered more than N times (up to 30 s).
cluster_joined() {
	local _
	for _ in $(seq 300); do
		[ "$(cluster_joins "$1")" -gt "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# cluster_keeper DIR I CMD: server I's starter, of a test whose $tmp is
# DIR, does CMD: kill (-9; the store keeps its memory), start (again, from
# the store: restart without loss), restart (SIGTERM, as systemctl restart,
# then start), fresh (the store forgets, then start).  0 if ok.
cluster_keeper() {
	local d=$1/s$2
	case $3 in
	kill) rmemd_ctl "$d" "stop KILL" ;;
	start) rmemd_ctl "$d" start ;;
	restart) rmemd_ctl "$d" "restart TERM" ;;
	fresh) rmemd_ctl "$d" drop && rmemd_ctl "$d" start ;;
	*) return 1 ;;
	esac || return 1
	case $REPLY in
	"exit "*) return 0 ;;
	"ready "*) rmemd_field pid > "$1/pids/rmemd$2" ;;
	*) return 1 ;;
	esac
}
