/*
 * harness.h - what rmem's functional tests share beyond tests/lib: where
 * their rmemd listens (the environment's choice of host and transport), the
 * raw wire client pointed at it, librmem clients and child client processes.
 *
 * Depends on tests/lib (libtest.a) and librmem.  Messages go to stdout as
 * TAP comments ("# ..."); assertions stay with the tests (tap.h).
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

#include "daemon.h"
#include "proto.h"
#include "raw.h"
#include "tap.h"
#include "util.h"

/* ---- the daemon ------------------------------------------------------------ */

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
/*
 * "tls": tcp_ep is "tls://HOST:PORT?tls_ca=..." and rmemd has listen.tls,
 * with the certificates in $RMEM_TEST_TLS_DIR (tests/func/tls/over-tls
 * makes them with tests/lib/tlscerts.sh).
 */
bool harness_tls(void);
/* "rdma", "tcp", or under tls $RMEM_TEST_TLS_KIND ("tls" unset: user-space
 * TLS): what rmem_transport() says of a client of tcp_ep. */
const char *harness_transport(void);

/*
 * rmemd_start_opts() (tests/lib/daemon.h) with pool "default" of pool_size
 * (e.g. "128M") and extra appended verbatim at top level (may be NULL; an
 * extra that names "limits" replaces the default limits group), listening
 * where the environment says: RMEM_TEST_HOST (an IPv4 address) replaces
 * 127.0.0.1 in listen.tcp; RMEM_TEST_RDMA=1 sets listen.rdma to
 * RMEM_TEST_HOST:a free port (else listen.rdma is "", unless
 * RMEM_TEST_TRANSPORT=rdma); see harness_rdma().  Returns 0, or a negative
 * errno (-ENOENT: no rmemd built).
 */
int rmemd_start(struct rmemd *d, const char *pool_size, const char *extra);
/* The options rmemd_start() uses, for a test that adds its own (then
 * rmemd_start_opts()).  0, or -EINVAL for an unknown transport. */
int harness_opts(struct rmemd_opts *o, const char *pool_size, const char *extra);

/*
 * The opening of most tests: rmemd_start(), the whole program skipped when
 * there is no rmemd to run, and one assertion that it started.  True when it
 * did.
 */
bool harness_start(struct rmemd *d, const char *pool_size, const char *extra);
/* The closing: one assertion that rmemd exits 0 on SIGTERM, the cleanup,
 * and the plan; main's return value. */
int harness_finish(struct rmemd *d);
/* The whole of a test program with one daemon: harness_start(), fn(d),
 * harness_finish(); main's return value. */
int harness_main(const char *pool_size, const char *extra, void (*fn)(const struct rmemd *d));
/* fn(endpoint, transport) on d's network endpoint (harness_transport()),
 * then on its Unix socket ("unix"): for what must hold on both. */
void harness_both(const struct rmemd *d, void (*fn)(const char *ep, const char *transport));

/* close(2)s fd when it is one (>= 0): the cleanup of a descriptor that may
 * not have been opened. */
void close_fd(int fd);

/* Reads a "VmRSS:"-style field of /proc/PID/status, in KiB. */
int proc_status_kb(pid_t pid, const char *field, uint64_t *kb);

/* ---- tenants' key files ---------------------------------------------------- */

struct harness_key {
	const char *name;	/* the file's name in the directory */
	const char *secret;	/* what it holds */
	mode_t mode;		/* 0600; looser for a file rmemd must refuse */
	char path[128];		/* set by harness_keys_make() */
};

/*
 * A new directory from the mkdtemp(3) template dir, with a file a key:
 * keys[i].name holding keys[i].secret with keys[i].mode, its path in
 * keys[i].path.  0, or a negative errno (-EIO: a file not written).
 */
int harness_keys_make(char *dir, struct harness_key *keys, size_t n);
/* Removes the files and the directory. */
void harness_keys_remove(const char *dir, const struct harness_key *keys, size_t n);

/* ---- clients ------------------------------------------------------------- */

/* True when c's data path is RDMA right now (rmem_transport() says "rdma"):
 * the NIC, not the daemon, then checks keys and bounds, and a transfer of 0
 * bytes checks nothing. */
bool client_on_rdma(const rmem_client *c);

/* A worker thread's client and region, and what went wrong there (a count,
 * or an error: the test says which). */
struct client_region {
	rmem_client *c;
	struct rmem_region r;
	int err;
};

/* rmem_connect() with transport "auto" and the given timeout. */
int client_connect(const char *endpoint, int timeout_ms, rmem_client **out);
/* rmem_connect() to d's network endpoint as tenant, its secret in key_file. */
int client_connect_as(const struct rmemd *d, const char *tenant, const char *key_file,
		      rmem_client **out);

/*
 * Polls rmem_stats() until used_bytes == used and regions == regions, for up
 * to timeout_ms.  Returns 0, -ETIMEDOUT (last figures in *last) or the error
 * of rmem_stats().
 */
int stats_wait(rmem_client *c, uint64_t used, uint64_t regions, int timeout_ms,
	       struct rmem_stats *last);

/* rmem_alloc() again every 20 ms while it says -EDQUOT, for up to timeout_ms:
 * freed bytes come back to a tenant's quota once they are back in the pool
 * (after the quarantine on RDMA).  What the last call returned. */
int alloc_quota_wait(rmem_client *c, uint64_t size, struct rmem_region *r, int timeout_ms);

/*
 * Allocates every free byte of the daemon (largest_free again and again),
 * reads it all back and frees it.  Returns 0 when it all read zero (bytes
 * covered in *swept), -EILSEQ when some did not, or an rmem error.
 */
int sweep_free_memory(rmem_client *c, uint64_t *swept);

/* region_pattern() makes len bytes that depend on seed and on each byte's
 * offset; region_fill() writes them to r at 0, region_check() reads them
 * back: 0 when r holds them, 1 when it differs, or the rmem error (-ENOMEM
 * for want of a buffer). */
void region_pattern(uint8_t *buf, size_t len, uint64_t seed);
int region_fill(rmem_client *c, const struct rmem_region *r, size_t len, uint64_t seed);
int region_check(rmem_client *c, const struct rmem_region *r, size_t len, uint64_t seed);

/* ---- raw frames (tests/lib/raw.h) ------------------------------------------------ */

/* A READ reply r (its opcode checked by the caller) for len bytes: its
 * status, with the bytes copied to out when that is 0; -EBADMSG when a
 * status 0 comes with another length. */
int reply_read_data(const struct raw_reply *r, void *out, uint32_t len);
/* To the daemon's host (RMEM_TEST_HOST, see harness_rdma()) at port. */
int raw_connect_tcp(uint16_t port);
/* A connection to d that has said HELLO (over its admin socket when
 * over_unix, else TCP): the fd, or a negative errno (the refusal's). */
int raw_session(const struct rmemd *d, bool over_unix);

/* ---- the metrics page (listen.metrics) ------------------------------------------ */

/*
 * One HTTP/1.0 request (method, path) to d's metrics port, waiting wait_ms at
 * most: 0 with *text the whole reply (headers included, NUL-terminated, 1 MiB
 * at most; free it) and *status its HTTP status, or a negative errno with
 * *text NULL (-EBADMSG: no status line).
 */
int metrics_request(const struct rmemd *d, const char *method, const char *path, int wait_ms,
		    char **text, int *status);
/* The value of the one sample named series ("name" or "name{labels}") on
 * page, or -1 when it is not there. */
double metrics_sample(const char *page, const char *series);

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
/*
 * For a child_spawn() fn that must exec: this program again
 * (/proc/self/exe) with args (NULL-terminated, args[0] its name) and then
 * the number of a copy of wfd that survives the exec.  Returns only on
 * failure: 4 when wfd could not be copied, else 127.
 */
int child_reexec(int wfd, const char *const *args);

#endif /* RMEM_TESTS_HARNESS_H */
