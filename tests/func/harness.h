/*
 * harness.h - what rmem's functional tests share: a real rmemd on private
 * paths, raw protocol frames for the tests that must misbehave on purpose,
 * child client processes and deterministic test data.
 *
 * Depends on libc and librmem only.  Messages go to stdout as TAP comments
 * ("# ..."); assertions stay with the tests (tap.h).
 *
 *   struct rmemd d;
 *   if (rmemd_start(&d, "128M", NULL) < 0)
 *           tap_skip_all("rmemd did not start");
 *   ... rmem_connect(d.tcp_ep, ...) / rmem_connect(d.unix_ep, ...) ...
 *   ok(rmemd_stop(&d) == 0, "rmemd exits 0 on SIGTERM");
 *   rmemd_cleanup(&d);
 */
#ifndef RMEM_TESTS_HARNESS_H
#define RMEM_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rmem.h>

#include "proto.h"

/* ---- the daemon ------------------------------------------------------------ */

struct rmemd {
	pid_t pid;                /* 0 once stopped */
	char dir[64];             /* private mkdtemp directory, removed by rmemd_cleanup */
	char conf_path[128];
	char log_path[128];       /* the daemon's stdout and stderr */
	char admin_path[128];     /* the Unix admin socket */
	char notify_path[128];    /* our NOTIFY_SOCKET */
	char tcp_ep[48];          /* the network endpoint: "HOST:PORT", or "rdma://HOST:PORT"
	                             when harness_rdma() */
	char host_port[32];       /* "HOST:PORT" of listen.tcp, whatever the transport */
	char unix_ep[136];        /* "unix:" admin_path */
	uint16_t port;
	int notify_fd;
	char notify_msgs[8192];   /* every sd_notify datagram, one per line */
	size_t notify_len;
};

/* The directory holding rmemd, rmemctl and librmem: $RMEM_BUILD or "build". */
const char *harness_build_dir(void);

/*
 * The transport of the network endpoint (tcp_ep), from RMEM_TEST_TRANSPORT:
 * "tcp" (unset, empty or "tcp") or "rdma".  Under "rdma" tcp_ep is
 * "rdma://HOST:PORT" (PORT is the control port; the data path is the queue
 * pair attached through the port named in HELLO), HOST defaults to
 * $RMEM_VM_RDMA_ADDR and listen.rdma is on; a program run that way without
 * an address (outside the test VM) skips as a whole at rmemd_start().
 * Another value makes rmemd_start() fail.
 */
bool harness_rdma(void);
/* "rdma" or "tcp": what rmem_transport() says of a client of tcp_ep. */
const char *harness_transport(void);

/*
 * Writes a config (pool "default" of pool_size, e.g. "128M"; extra appended
 * verbatim at top level, may be NULL; an extra that names "limits" replaces
 * the harness's limits group) into a fresh temp dir, starts
 * $RMEM_BUILD/rmemd -c on it and waits up to 30 s for READY=1 on a private
 * NOTIFY_SOCKET.  Returns 0, or a negative errno (the daemon's log tail is
 * printed and everything is cleaned up).
 * Environment: RMEM_TEST_HOST (an IPv4 address) replaces 127.0.0.1 in
 * listen.tcp; RMEM_TEST_RDMA=1 sets listen.rdma to RMEM_TEST_HOST:a free port
 * (else listen.rdma is "", unless RMEM_TEST_TRANSPORT=rdma); see harness_rdma().
 */
int rmemd_start(struct rmemd *d, const char *pool_size, const char *extra);

/*
 * SIGTERM, then waits up to 30 s (SIGKILL after that).  Returns the exit code
 * (0..255), 128 + signal when a signal ended it, or -ETIMEDOUT when it had to
 * be killed.  Prints the log tail when the result is not 0.  Keeps the temp
 * dir so the log can still be searched.
 */
int rmemd_stop(struct rmemd *d);

/* Kills the daemon if it still runs and removes the temp dir.  Idempotent. */
void rmemd_cleanup(struct rmemd *d);

/* True when the daemon's log (stderr) contains needle. */
bool rmemd_log_contains(const struct rmemd *d, const char *needle);
/* How many lines of the daemon's log contain needle. */
int rmemd_log_count(const struct rmemd *d, const char *needle);
/* True when one sd_notify line received so far equals line (e.g. "STOPPING=1"). */
bool rmemd_notified(struct rmemd *d, const char *line);
/* Prints the last lines of the daemon's log as TAP comments. */
void rmemd_log_tail(const struct rmemd *d, int lines);

/* Reads a "VmRSS:"-style field of /proc/PID/status, in KiB. */
int proc_status_kb(pid_t pid, const char *field, uint64_t *kb);

/* ---- clients ------------------------------------------------------------- */

/* True when c's data path is RDMA right now (rmem_transport() says "rdma"):
 * the NIC, not the daemon, then checks keys and bounds, and a transfer of 0
 * bytes checks nothing. */
bool client_on_rdma(const rmem_client *c);

/* rmem_connect() with transport "auto" and the given timeout. */
int client_connect(const char *endpoint, int timeout_ms, rmem_client **out);

/*
 * Polls rmem_stats() until used_bytes == used and regions == regions, for up
 * to timeout_ms.  Returns 0, -ETIMEDOUT (last figures in *last) or the error
 * of rmem_stats().
 */
int stats_wait(rmem_client *c, uint64_t used, uint64_t regions, int timeout_ms,
	       struct rmem_stats *last);

/*
 * Allocates every free byte of the daemon (largest_free again and again),
 * reads it all back and frees it.  Returns 0 when it all read zero (bytes
 * covered in *swept), -EILSEQ when some did not, or an rmem error.
 */
int sweep_free_memory(rmem_client *c, uint64_t *swept);

/* Same bytes for the same seed, every run. */
void fill_random(void *buf, size_t len, uint64_t seed);
/* True when len bytes at buf are all zero. */
bool all_zero(const void *buf, size_t len);

uint64_t now_ms(void);
void sleep_ms(int ms);

/* ---- raw frames -------------------------------------------------------------- */

/* To the daemon's host (RMEM_TEST_HOST, see harness_rdma()) at port. */
int raw_connect_tcp(uint16_t port);
int raw_connect_unix(const char *path);
/* A listener (backlog 16) on 127.0.0.1, port chosen by the kernel. */
int raw_listen_tcp(uint16_t *port);
int raw_listen_unix(const char *path);
/* A port on 127.0.0.1 where nothing listens (right now). */
uint16_t free_tcp_port(void);

/* Sends all of buf (MSG_NOSIGNAL).  0 or -errno. */
int raw_send(int fd, const void *buf, size_t len);
/* Receives exactly len bytes.  0, -ETIMEDOUT, -ECONNRESET (EOF or reset). */
int raw_recv(int fd, void *buf, size_t len, int timeout_ms);
/* Reads and drops whatever comes until EOF: 0 on EOF or reset, -ETIMEDOUT. */
int raw_wait_closed(int fd, int timeout_ms);

/* Encodes a header with the given fields (magic always PROTO_MAGIC). */
void raw_hdr(uint8_t out[PROTO_HDR_LEN], uint16_t version, uint16_t opcode, uint16_t flags,
	     uint32_t length, uint64_t req_id);

struct raw_reply {
	uint32_t magic;
	uint16_t version, opcode, flags, reserved;
	uint32_t length;
	uint64_t req_id;
	int32_t status;      /* first 4 payload bytes as on the wire (positive errno) */
	uint8_t *payload;    /* malloc'ed, length bytes; free it */
};
/* Receives one frame (header, then a payload of at most max bytes).
 * 0, -ETIMEDOUT, -ECONNRESET, -EMSGSIZE (payload above max). */
int raw_recv_reply(int fd, struct raw_reply *r, size_t max, int timeout_ms);
void raw_reply_release(struct raw_reply *r);

/* Sends one request frame with a payload and returns its reply in *r. */
int raw_call(int fd, uint16_t opcode, uint64_t req_id, const void *payload, uint32_t len,
	     struct raw_reply *r, size_t max, int timeout_ms);
/* HELLO; returns the reply's wire status (0 on success) or a negative errno. */
int raw_hello(int fd, uint64_t req_id);

/* ---- child processes ------------------------------------------------------- */

struct child {
	pid_t pid;
	int rfd;     /* reads what the child writes to its wfd */
};

/*
 * Forks; the child runs fn(wfd, arg) and _exit()s with its return value.  The
 * child must not print TAP lines.  0 or -errno.
 */
int child_spawn(struct child *ch, int (*fn)(int wfd, void *arg), void *arg);
/* Sends sig (if > 0) and reaps it.  Returns the exit code or 128 + signal. */
int child_end(struct child *ch, int sig);

#endif /* RMEM_TESTS_HARNESS_H */
