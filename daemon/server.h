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
};

#endif /* RMEMD_SERVER_H */
