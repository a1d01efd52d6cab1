/*
 * inproc.h - rmemd's server in the test's own process, for the tests that
 * drive the daemon's modules by direct calls (tests/unit/test_session.c)
 * and the fuzzers (tests/fuzz/fuzz_dispatch.c, fuzz_restore.c): the config
 * defaults with one pool (opened, or left for the restore to open), at
 * most one tenant, an event base, the region table, the names and the
 * quarantine.  No listener, no NIC, no connection: what a test adds (stub
 * keys, a socketpair through conn_accept()) is its own, and so is closing
 * its connections before inproc_free().
 *
 *   struct inproc_opts o;
 *   inproc_opts_init(&o, "unit", 1u << 20);
 *   srv = inproc_new(&o, err, sizeof err);   NULL: err says why
 *   ... session_new(srv, ...), ctl_dispatch(srv, ...) ...
 *   inproc_free(srv);
 *
 * Built with -Idaemon; links against the daemon's objects the test names.
 */
#ifndef RMEM_TESTS_INPROC_H
#define RMEM_TESTS_INPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct server;

struct inproc_opts {
	const char *pool_name;      /* of the one pool */
	uint64_t pool_size;         /* bytes */
	bool open_pool;             /* false: configured only (restore_run opens it) */
	const char *tenant;         /* the one tenant's name, or NULL: none */
	const char *tenant_secret;  /* its secret, or NULL */
	uint64_t tenant_quota;      /* 0: none */
	uint32_t tenant_max_regions; /* 0: none */
	int log_level;              /* syslog level for log_set_level() */
};

/* One pool of pool_size bytes named pool_name, opened; no tenant; LOG_ERR. */
void inproc_opts_init(struct inproc_opts *o, const char *pool_name, uint64_t pool_size);

/* A server as described; NULL (err says why) when something cannot be had. */
struct server *inproc_new(const struct inproc_opts *o, char *err, size_t errlen);

/* Frees what inproc_new() made and what the modules hung on it since (the
 * quarantine, names, regions, pools, slots).  NULL is fine. */
void inproc_free(struct server *srv);

#endif /* RMEM_TESTS_INPROC_H */
