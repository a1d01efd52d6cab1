/*
 * nbdkit-rmem-plugin - an NBD disk in rmem's remote memory.
 *
 *   nbdkit rmem url=tcp://HOST:PORT [name=NAME] [size=SIZE] [create=never] ...
 *
 * This file: nbdkit's side (parameters, callbacks, errors); lanes.c: the
 * sessions with rmemd; poller.c: the requests of a session in flight
 * together, one of them polling for all.  Uses only the public library.
 * docs/man/nbdkit-rmem-plugin.1 is the user's account; docs/nbd.md has the
 * swap recipe.
 *
 * Meaning of flush and FUA: a write completes when rmemd's memory holds it
 * (the daemon's reply on TCP, the RDMA WRITE's completion on RDMA), so it is
 * then as durable as this disk can be; flush has nothing left to do and FUA
 * is native.  Every connection sees the same region, so multi-conn is safe.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rmem.h>

#define NBDKIT_API_VERSION 2
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
#include <nbdkit-plugin.h>

#include "lanes.h"

#ifndef PR_SET_IO_FLUSHER
#define PR_SET_IO_FLUSHER 57 /* Linux 5.6 */
#endif

/* One lane keeps any number of requests in flight (poller.h), and on 2
 * cores it costs the least CPU per request: in four side-by-side runs, 4
 * KiB reads and writes at 16 in flight took 0-23 % (median 13 %) less of
 * the servers' CPU than lanes=2, and lanes=4 more again
 * (docs/benchmarks.md, NBD).  More lanes for more cores. */
#define DEFAULT_LANES 1

static struct lanes_cfg cfg = {
	.size = -1, .timeout_ms = -1, .resume_ms = -1, .nlanes = DEFAULT_LANES,
};
static bool swap_mode;
static struct lanes disk;
static bool disk_open;
/* One chunk of zeros: zero and trim write it again and again. */
static void *zeros;

/* Strings nbdkit hands to .config live only during the call. */
static int keep(const char **slot, const char *value)
{
	char *copy = strdup(value);

	if (!copy) {
		nbdkit_error("rmem: out of memory");
		return -1;
	}
	free((char *)*slot);
	*slot = copy;
	return 0;
}

static int parse_ms(const char *key, const char *value, int *out)
{
	uint32_t v;

	if (nbdkit_parse_uint32_t(key, value, &v) < 0)
		return -1;
	if (v > INT32_MAX) {
		nbdkit_error("rmem: %s=%s is too large", key, value);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int rmem_config(const char *key, const char *value)
{
	int b;

	if (strcmp(key, "url") == 0)
		return keep(&cfg.url, value);
	if (strcmp(key, "name") == 0)
		return keep(&cfg.name, value);
	if (strcmp(key, "tenant") == 0)
		return keep(&cfg.tenant, value);
	if (strcmp(key, "transport") == 0)
		return keep(&cfg.transport, value);
	if (strcmp(key, "tcp-congestion") == 0)
		return keep(&cfg.tcp_congestion, value);
	if (strcmp(key, "secret-file") == 0) {
		/* nbdkit changes directory to / when it becomes a daemon. */
		char *abs = nbdkit_absolute_path(value);

		if (!abs)
			return -1;
		free((char *)cfg.secret_file);
		cfg.secret_file = abs;
		return 0;
	}
	if (strcmp(key, "size") == 0) {
		cfg.size = nbdkit_parse_size(value);
		if (cfg.size < 0)
			return -1;
		if (cfg.size == 0) {
			nbdkit_error("rmem: size must be more than 0");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "create") == 0) {
		if (strcmp(value, "never") == 0)
			cfg.create = LANES_CREATE_NEVER;
		else if (strcmp(value, "always") == 0)
			cfg.create = LANES_CREATE_ALWAYS;
		else if (strcmp(value, "auto") == 0)
			cfg.create = LANES_CREATE_AUTO;
		else {
			nbdkit_error("rmem: create must be auto, never or always, not '%s'", value);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "timeout") == 0)
		return parse_ms(key, value, &cfg.timeout_ms);
	if (strcmp(key, "resume") == 0)
		return parse_ms(key, value, &cfg.resume_ms);
	if (strcmp(key, "lanes") == 0)
		return nbdkit_parse_unsigned(key, value, &cfg.nlanes);
	if (strcmp(key, "swap") == 0) {
		if ((b = nbdkit_parse_bool(value)) < 0)
			return -1;
		swap_mode = b;
		return 0;
	}
	nbdkit_error("rmem: unknown parameter '%s'", key);
	return -1;
}

static int rmem_config_complete(void)
{
	if (!cfg.url) {
		nbdkit_error("rmem: url= is required (tcp://, rdma://, unix: or etcd://)");
		return -1;
	}
	if (!cfg.tenant != !cfg.secret_file) {
		nbdkit_error("rmem: tenant= and secret-file= go together");
		return -1;
	}
	if (!cfg.name && cfg.size <= 0) {
		nbdkit_error("rmem: an anonymous disk (no name=) needs size=");
		return -1;
	}
	if (!cfg.name && cfg.create == LANES_CREATE_NEVER) {
		nbdkit_error("rmem: create=never needs name=");
		return -1;
	}
	if (cfg.nlanes < 1 || cfg.nlanes > LANES_MAX) {
		nbdkit_error("rmem: lanes must be 1 to %d", LANES_MAX);
		return -1;
	}
	return 0;
}

/*
 * After nbdkit became a daemon (librmem's threads would not survive the
 * fork), before any connection.  Swap over this disk must not deadlock:
 * as an I/O flusher this process (and the threads it starts from now on,
 * librmem's among them) allocates without recursing into reclaim, and with
 * its memory locked it never waits for its own pages to come back from swap.
 */
static int rmem_after_fork(void)
{
	char err[256] = "";
	int rc;

	if (prctl(PR_SET_IO_FLUSHER, 1, 0, 0, 0) < 0) {
		if (swap_mode) {
			nbdkit_error("rmem: swap=true: prctl(PR_SET_IO_FLUSHER): %m "
				     "(needs CAP_SYS_RESOURCE)");
			return -1;
		}
		nbdkit_debug("rmem: prctl(PR_SET_IO_FLUSHER): %m; not fit for swap");
	}
	/* MCL_ONFAULT: what was never touched is not swapped either, and
	 * locking it would commit every reservation (thread stacks, a
	 * sanitizer's shadow) up front.  The system call itself: the
	 * sanitizers' runtimes make mlockall(3) a silent no-op, and a
	 * sanitized build must lock as the real one does. */
	if (swap_mode && syscall(SYS_mlockall, MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) < 0) {
		nbdkit_error("rmem: swap=true: mlockall: %m (RLIMIT_MEMLOCK, or CAP_IPC_LOCK)");
		return -1;
	}
	if (posix_memalign(&zeros, 4096, LANE_CHUNK) != 0) {
		nbdkit_error("rmem: out of memory");
		return -1;
	}
	memset(zeros, 0, LANE_CHUNK);
	rc = lanes_open(&disk, &cfg, err, sizeof err);
	if (rc < 0) {
		nbdkit_error("rmem: %s", err);
		return -1;
	}
	disk_open = true;
	nbdkit_debug("rmem: %s region %s of %" PRIu64 " bytes over %s, %u lanes, %s calls",
		     cfg.name ? "named" : "anonymous", cfg.name ? cfg.name : "-", disk.size,
		     rmem_transport(disk.lane[0].c), disk.n,
		     disk.lane[0].sync ? "synchronous" : "posted");
	return 0;
}

static void rmem_cleanup(void)
{
	if (disk_open)
		lanes_close(&disk);
	disk_open = false;
}

static void rmem_unload(void)
{
	free((char *)cfg.url);
	free((char *)cfg.name);
	free((char *)cfg.tenant);
	free((char *)cfg.secret_file);
	free((char *)cfg.transport);
	free((char *)cfg.tcp_congestion);
	free(zeros);
}

/* Every connection shares the one disk: the handle carries nothing. */
static void *rmem_open_conn(int readonly)
{
	(void)readonly;
	return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t rmem_get_size(void *h)
{
	(void)h;
	return (int64_t)disk.size;
}

static int rmem_yes(void *h)
{
	(void)h;
	return 1;
}

static int rmem_no(void *h)
{
	(void)h;
	return 0;
}

static int rmem_fua_native(void *h)
{
	(void)h;
	return NBDKIT_FUA_NATIVE;
}

/* A failed request is an error to the NBD client, never other bytes. */
static int fail(const char *what, uint64_t count, uint64_t off, int rc)
{
	nbdkit_error("rmem: %s of %" PRIu64 " bytes at %" PRIu64 ": %s", what, count, off,
		     rmem_strerror(rc));
	switch (-rc) {
	case ENOMEM: nbdkit_set_error(ENOMEM); break;
	case EDQUOT: nbdkit_set_error(ENOSPC); break;
	default: nbdkit_set_error(EIO); break;
	}
	return -1;
}

static int io(const char *what, bool write, void *buf, bool same_buf, uint64_t count,
	      uint64_t off)
{
	int rc = lane_io(lane_get(&disk), write, buf, same_buf, count, off);

	return rc < 0 ? fail(what, count, off, rc) : 0;
}

static int rmem_pread(void *h, void *buf, uint32_t count, uint64_t off, uint32_t flags)
{
	(void)h;
	(void)flags;
	return io("read", false, buf, false, count, off);
}

static int rmem_pwrite(void *h, const void *buf, uint32_t count, uint64_t off, uint32_t flags)
{
	(void)h;
	(void)flags; /* FUA: a completed write is already in rmemd's memory */
	return io("write", true, (void *)buf, false, count, off);
}

static int rmem_flush(void *h, uint32_t flags)
{
	(void)h;
	(void)flags;
	return 0;
}

/* rmemd has no zeroing request: zeros are written, which is not fast. */
static int rmem_zero(void *h, uint32_t count, uint64_t off, uint32_t flags)
{
	(void)h;
	if (flags & NBDKIT_FLAG_FAST_ZERO) {
		nbdkit_set_error(ENOTSUP);
		return -1;
	}
	return io("zero", true, zeros, true, count, off);
}

/* Trimmed bytes read back as zeros: a trimmed swap slot leaks nothing. */
static int rmem_trim(void *h, uint32_t count, uint64_t off, uint32_t flags)
{
	(void)h;
	(void)flags;
	return io("trim", true, zeros, true, count, off);
}

static struct nbdkit_plugin plugin = {
	.name = "rmem",
	.longname = "nbdkit rmem plugin",
	.version = RMEM_VERSION_STRING,
	.description = "An NBD disk in rmem's remote memory",
	.config = rmem_config,
	.config_complete = rmem_config_complete,
	.config_help =
		"url=<ENDPOINT>     (required) tcp://, rdma://, unix: or etcd:// endpoint\n"
		"name=<NAME>        named region (default: an anonymous one)\n"
		"size=<SIZE>        disk size (to create, or checked on open)\n"
		"create=auto|never|always  create a missing name (default auto)\n"
		"tenant=<TENANT>    tenant to authenticate as\n"
		"secret-file=<FILE> the tenant's secret\n"
		"transport=auto|tcp|rdma  timeout=<MS> resume=<MS> tcp-congestion=<CC>\n"
		"lanes=<N>          rmem sessions the requests share (default 1)\n"
		"swap=true          be fit for swap: I/O flusher, memory locked",
	.after_fork = rmem_after_fork,
	.cleanup = rmem_cleanup,
	.unload = rmem_unload,
	.open = rmem_open_conn,
	.get_size = rmem_get_size,
	.can_write = rmem_yes,
	.can_flush = rmem_yes,
	.is_rotational = rmem_no,
	.can_trim = rmem_yes,
	.can_zero = rmem_yes,
	.can_fast_zero = rmem_yes,
	.can_fua = rmem_fua_native,
	.can_multi_conn = rmem_yes,
	.pread = rmem_pread,
	.pwrite = rmem_pwrite,
	.flush = rmem_flush,
	.zero = rmem_zero,
	.trim = rmem_trim,
	.errno_is_preserved = 0,
};

/* The macro defines plugin_init, nbdkit's entry point, without a prototype. */
struct nbdkit_plugin *plugin_init(void);
NBDKIT_REGISTER_PLUGIN(plugin)
