# nbd.sh - nbdkit with rmem's plugin for the shell tests (tests/func/test_nbd.sh,
# test_nbd_cluster.sh, tests/func/rdma/test_nbd_dev.sh).  Sourced (bash)
# after tests/lib/rmemd.sh:
#
#   nbd_setup                       skips without nbdkit or the plugin; $PLUGIN
#   nbd_start SOCK LOG ARGS...      nbdkit -U SOCK with the plugin; $npid
#   nbd_stop                        SIGTERM, reaped; its status
#   nbd_uri SOCK                    the NBD URI of that socket
#   okl STATUS LOG TEXT             ok, and LOG's end when it failed
#
# A sanitized plugin is loaded into nbdkit, which is not: the sanitizer
# runtimes are preloaded, and leaks are not checked (nbdkit's own are not
# ours; the library's are covered by its own tests).  With them preloaded,
# nbdkit's exit() sometimes hangs after the plugin has unloaded, in
# libp11-kit's destructor (freelocale waiting on glibc's locale lock;
# libcurl, which librmem links for etcd, brings p11-kit in; nbdkit 1.32, gcc
# 12's ASan).  There, nbd_stop counts the plugin's unload in nbdkit's log as
# the clean end and kills what is left; an unsanitized run checks the
# status nbdkit exits with.

PLUGIN=$B/nbdkit-rmem-plugin.so
npid=
nlog=

nbd_setup() {
	command -v nbdkit > /dev/null || skip_all "nbdkit is missing (scripts/install-deps)"
	[ -e "$PLUGIN" ] || skip_all "$PLUGIN is not built (nbdkit-plugin-dev missing?)"
	NBD_PRELOAD=
	if nm -D "$PLUGIN" 2> /dev/null | grep -q ' U __asan_'; then
		NBD_PRELOAD="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
	elif nm -D "$PLUGIN" 2> /dev/null | grep -q ' U __tsan_'; then
		# ThreadSanitizer's build (build-tsan, tests/func/test_tsan.sh)
		NBD_PRELOAD=$(cc -print-file-name=libtsan.so)
	fi
}

# okl STATUS LOG TEXT: ok, with the end of LOG as comments when it failed.
okl() {
	ok "$1" "$3"
	[ "$1" -eq 0 ] || tail -20 "$2" | diag
}

nbd_uri() {
	echo "nbd+unix:///?socket=$1"
}

# nbd_start SOCK LOG ARGS...: 0 once nbdkit answers an NBD client, 1 when it
# exited first (the reason in LOG).  The pid file comes before the plugin's
# after_fork, where the disk is opened: a client's answer is what counts.
nbd_start() {
	local sock=$1 log=$2
	shift 2
	nlog=$log
	rm -f "$sock" "$sock.pid"
	LD_PRELOAD=$NBD_PRELOAD ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 \
		nbdkit -f -v -U "$sock" -P "$sock.pid" "$PLUGIN" "$@" > "$log" 2>&1 &
	npid=$!
	for _ in $(seq 600); do
		# The plugin's refusal ends nbdkit (see above for a hung exit).
		if grep -q '^nbdkit: error:' "$log"; then
			sleep 0.5
			nbd_kill
			return 1
		fi
		if [ -S "$sock" ] && timeout 20 nbdinfo --size "$(nbd_uri "$sock")" > /dev/null 2>&1; then
			kill -0 "$npid" 2> /dev/null && return 0
		fi
		kill -0 "$npid" 2> /dev/null || { wait "$npid"; npid=; return 1; }
		sleep 0.05
	done
	return 1
}

# nbd_kill: nbdkit killed and reaped, after the plugin has said its piece
# (a refusal, or its unload: see above for a hung exit).
nbd_kill() {
	kill -KILL "$npid" 2> /dev/null
	wait "$npid" 2> /dev/null
	npid=
}

# nbd_stop: the status nbdkit exits with after SIGTERM.
nbd_stop() {
	local rc log=$nlog
	[ -n "$npid" ] || return 0
	kill -TERM "$npid" 2> /dev/null
	if [ -n "$NBD_PRELOAD" ]; then
		for _ in $(seq 200); do
			kill -0 "$npid" 2> /dev/null || break
			if grep -q 'debug: rmem: unload plugin' "$log"; then
				sleep 1
				nbd_kill
				return 0
			fi
			sleep 0.05
		done
	fi
	wait "$npid"
	rc=$?
	npid=
	return $rc
}
