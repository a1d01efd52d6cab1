# cluster.sh - rmemd servers in an rmem cluster on etcd, for the cluster
# tests (tests/func/test_cluster.sh, test_cluster_lib.sh).  Sourced (bash)
# after tests/lib/etcd.sh, with $tmp set and etcd started:
#
#   read -r -a ports <<< "$(free_ports 6)"              (etcd.sh)
#   cluster_conf I NAME HOST:PORT RDMA LEASE_MS LEVEL   writes $tmp/rI.conf
#   cluster_registered NAME I TRIES                     waits for sI's key
#   cluster_keeper_start I                              rmemd sI under the fd store
#   cluster_keeper DIR I CMD                            its keeper does CMD

# cluster_conf I NAME HOST:PORT RDMA LEASE_MS LEVEL: $tmp/rI.conf, rmemd sI
# of cluster NAME on $ETCD_ENDPOINTS: 64 MiB, TCP on HOST:PORT, RDMA on RDMA
# ("": off), admin socket $tmp/rI.sock, metrics off (tests that run at once
# never meet on the default port), log level LEVEL.
cluster_conf() {
	cat > "$tmp/r$1.conf" << EOC
listen = { tcp = "$3"; rdma = "$4"; admin = "$tmp/r$1.sock"; metrics = ""; };
pools = ( { name = "default"; size = "64M"; hugepages = "off"; alignment = 64; } );
limits = { lease_timeout_ms = 60000; };
log = { level = "$6"; };
cluster = { etcd = "$ETCD_ENDPOINTS"; name = "$2"; id = "s$1"; lease_ms = $5; };
EOC
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

# cluster_keeper_start I: rmemd sI ($tmp/rI.conf, log $tmp/rI.log) under the
# fd store emulator (tests/func/cluster_keeper.py), so that a test can
# restart it without loss; rmemd's pid in $tmp/pids/rmemdI, the keeper's in
# $tmp/pids/keeperI, commands through $tmp/kI.fifo (cluster_keeper).
cluster_keeper_start() {
	mkfifo "$tmp/k$1.fifo"
	python3 tests/func/cluster_keeper.py "$tmp/store$1" "$RMEMD" "$tmp/r$1.conf" \
		"$tmp/r$1.log" "$tmp/pids/rmemd$1" "$tmp/k$1.fifo" "$tmp/k$1.ack" \
		>> "$tmp/keeper$1.log" 2>&1 < /dev/null &
	echo $! > "$tmp/pids/keeper$1"
}

# cluster_keeper DIR I CMD: server I's keeper, started with $tmp = DIR, does
# CMD (kill, start, fresh...: cluster_keeper.py); 0 if ok, 1 if it failed or
# did not answer within 60 s.
cluster_keeper() {
	local seq=$RANDOM$RANDOM _
	echo "$3 $seq" > "$1/k$2.fifo"
	for _ in $(seq 600); do
		grep -q "^$seq ok" "$1/k$2.ack" 2> /dev/null && return 0
		grep -q "^$seq fail" "$1/k$2.ack" 2> /dev/null && return 1
		sleep 0.1
	done
	return 1
}
