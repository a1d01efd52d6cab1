/*
 * server.h - the state of one running rmemd, owned by main.c and handed to
 * every module that serves requests.  Single-threaded: everything here is
 * touched only from the libevent loop.
 */
#ifndef RMEMD_SERVER_H
#define RMEMD_SERVER_H

#include <stdint.h>

#include "config.h"
#include "pool.h"

struct event_base;
struct region_table;
struct session;
struct listeners;
struct conn;
struct rdma;
struct event;
struct quarantined;

/* What one tenant holds now (tenant.c); index as in cfg.tenants. */
struct tenant_use {
	uint64_t bytes;   /* until they are back in a pool */
	uint64_t regions; /* until they leave the region table */
};

struct server {
	struct config cfg;
	struct event_base *base;
	struct pool pools[CONFIG_MAX_POOLS];
	uint32_t npools;
	struct region_table *regions;
	struct session *sessions_first, *sessions_last; /* by session id */
	uint64_t next_session_id;
	uint64_t clients;        /* sessions past HELLO */
	uint64_t used_bytes;
	uint64_t peak_used;
	uint64_t allocs, frees;
	struct listeners *listeners;
	struct conn *conns;          /* open connections (ctl.c) */
	struct rdma *rdma;           /* the RDMA side (rdma.c); NULL: TCP only */
	/* Ranges whose NIC key is dead, waiting before they are zeroed and
	 * returned (session.c); oldest first.  Their bytes count in used_bytes. */
	struct quarantined *quarantine_first, *quarantine_last;
	struct event *quarantine_timer;
	struct tenant_use tenant_use[CONFIG_MAX_TENANTS];
	struct event *lease_timer;   /* the connections' deadlines (lease.c) */
};

/*
 * Ends session s from outside its connection (its queue pair disconnected or
 * failed): the connection gets an ERROR frame and closes, which destroys the
 * session.  Safe to call from any callback but s's own connection's (ctl.c).
 */
void server_end_session(struct server *srv, struct session *s, int status, const char *why);

#endif /* RMEMD_SERVER_H */
