/*
 * daemon.h - a real rmemd for a test, started the way systemd would start it
 * (NOTIFY_SOCKET, READY=1), with a config written into a private mkdtemp
 * directory and ports nobody else uses, so that several test programs may
 * run at once.  Where it listens and what its config adds are parameters;
 * policy (which address, which transport) stays with the caller
 * (tests/func/harness.c, tests/rdma/test_rdma_keys.c).
 *
 *   struct rmemd d;
 *   struct rmemd_opts o;
 *   rmemd_opts_init(&o);
 *   o.host = "10.77.0.1";  o.listen_rdma = true;  o.pool_size = "256M";
 *   if (rmemd_start_opts(&d, &o) < 0)
 *           ...;
 *   ... d.host_port, d.rdma_port, d.admin_path ...
 *   ok(rmemd_stop(&d) == 0, "rmemd exits 0 on SIGTERM");
 *   rmemd_cleanup(&d);
 *
 * Messages go to stdout as TAP comments (diag()); assertions stay with the
 * tests.  A thin caller of tests/lib/rmemd_start.py, the one starter of the
 * C, shell and Python tests: it writes the config, runs rmemd under the one
 * fd-store emulator (tests/lib/fdstore.py) and waits for READY=1.  The
 * starter is a child of the test and rmemd its child: both die with the
 * test (PR_SET_PDEATHSIG).
 */
#ifndef RMEM_TESTS_DAEMON_H
#define RMEM_TESTS_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rmemd_opts {
	const char *host;         /* numeric IPv4 or IPv6 address of listen.tcp (and .rdma) */
	bool listen_rdma;         /* listen.rdma on host at a port of its own; else "" */
	const char *rdma_group;   /* written as "rdma = { <rdma_group> };", or NULL */
	const char *pool_size;    /* of pool "default", e.g. "128M" */
	/* Appended verbatim at top level, or NULL.  An extra that names
	 * "limits" replaces the default limits group. */
	const char *extra;
	int lease_timeout_ms;     /* limits.lease_timeout_ms of the default limits */
	int ready_timeout_ms;     /* how long to wait for READY=1 */
	const char *ep_scheme;    /* prefix of tcp_ep: "", "rdma://" or "tls://" */
	const char *ep_query;     /* appended to tcp_ep ("?tls_ca=..."), or NULL */
	/* "CERT,KEY[,CA[,require]]": listen.tls on listen.tcp (rmemd_start.py
	 * --listen-tls), or NULL */
	const char *listen_tls;
	bool metrics;             /* listen.metrics on host at a port of its own; else "" */
};

struct rmemd {
	pid_t pid;                /* rmemd's; 0 once stopped.  Not our child. */
	char dir[64];             /* private mkdtemp directory, removed by rmemd_cleanup */
	char conf_path[128];
	char log_path[128];       /* the daemon's stdout and stderr */
	char admin_path[128];     /* the Unix admin socket */
	char notify_path[128];    /* its NOTIFY_SOCKET */
	char addr[64];            /* opts.host */
	char host_port[48];       /* "HOST:PORT" of listen.tcp ("[HOST]:PORT" for IPv6) */
	char tcp_ep[512];         /* the network endpoint: ep_scheme + host_port + ep_query */
	char unix_ep[136];        /* "unix:" admin_path */
	uint16_t port;            /* listen.tcp */
	uint16_t rdma_port;       /* listen.rdma; 0 when off */
	uint16_t metrics_port;    /* listen.metrics; 0 when off */
	char metrics_host_port[48]; /* "HOST:PORT" of listen.metrics, or "" */
	/* The starter (tests/lib/rmemd_start.py), our child: it runs rmemd under
	 * the emulated fd store and answers a line for each command line. */
	pid_t sup_pid;
	int sup_in;               /* its stdin, or -1 */
	void *sup_out;            /* FILE * of its stdout */
};

/* Defaults: 127.0.0.1, no RDMA, no metrics, "64M", lease 10 s, READY within
 * 30 s. */
void rmemd_opts_init(struct rmemd_opts *o);

/* The directory holding rmemd, rmemctl and librmem: $RMEM_BUILD or "build". */
const char *rmemd_build_dir(void);

/*
 * Writes the config and starts $RMEM_BUILD/rmemd -c on it; waits for READY=1
 * on a private NOTIFY_SOCKET.  A port taken between our probe and the
 * daemon's bind is tried again with others.  Returns 0, or a negative errno:
 * -ENOENT when there is no rmemd to run, -ECHILD when it exited (the log
 * tail is printed and everything is cleaned up).
 */
int rmemd_start_opts(struct rmemd *d, const struct rmemd_opts *o);

/*
 * SIGTERM, then waits up to 30 s (SIGKILL after that).  Returns the exit code
 * (0..255), 128 + signal when a signal ended it, or -ETIMEDOUT when it had to
 * be killed.  Prints the log tail when the result is not 0.  Keeps the temp
 * dir so the log can still be searched.
 */
int rmemd_stop(struct rmemd *d);

/*
 * Restart without loss (docs/architecture.md): ends the daemon with sig
 * (SIGTERM: systemctl restart; SIGKILL: a crash) and starts it again on the
 * same config and ports with the fd store's descriptors (LISTEN_FDS,
 * LISTEN_FDNAMES, LISTEN_PID), as systemd does; waits for READY=1.  0, or a
 * negative errno as rmemd_start_opts.
 */
int rmemd_restart(struct rmemd *d, int sig, int ready_timeout_ms);

/* SIGKILL, and waits until it is gone; the fd store keeps what it had. */
void rmemd_kill(struct rmemd *d);
/* How many fds the emulated fd store keeps, or a negative errno. */
int rmemd_store_count(struct rmemd *d);
/* Empties the store, as if systemd had lost it: the next start is fresh. */
void rmemd_store_drop(struct rmemd *d);

/* Kills the daemon if it still runs and removes the temp dir.  Idempotent. */
void rmemd_cleanup(struct rmemd *d);

/* True when the daemon's log (stderr) contains needle. */
bool rmemd_log_contains(const struct rmemd *d, const char *needle);
/* How many lines of the daemon's log contain needle. */
int rmemd_log_count(const struct rmemd *d, const char *needle);
/* True when one sd_notify line received since the last start equals line
 * (e.g. "STOPPING=1"). */
bool rmemd_notified(struct rmemd *d, const char *line);
/* Prints the last lines of the daemon's log as TAP comments. */
void rmemd_log_tail(const struct rmemd *d, int lines);

#endif /* RMEM_TESTS_DAEMON_H */
