/*
 * server.h - the state of one running rmemd, owned by main.c and handed to
 * every module that serves requests.  Single-threaded: everything here is
 * touched only from the libevent loop.
 */
#ifndef RMEMD_SERVER_H
#define RMEMD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "counters.h"
#include "identity.h"
#include "pool.h"
#include "tenant_books.h"

struct event_base;
struct region_table;
struct session;
struct listeners;
struct conn;
struct tls_ctx;
struct tls_pending;
struct nic;
struct key_ops;
struct event;
struct quarantine;
struct names;
struct member;
struct repair_agent;
struct metrics;
struct slots;
struct persist_after;

struct server {
	struct config cfg;
	struct event_base *base;
	struct pool pools[CONFIG_MAX_POOLS];
	uint32_t npools;
	struct region_table *regions;
	struct names *names;     /* named regions' objects and handles (names.c) */
	struct session *sessions_first, *sessions_last; /* by session id */
	uint64_t next_session_id;
	uint64_t clients;        /* sessions past HELLO */
	uint64_t used_bytes;
	uint64_t peak_used;
	uint64_t allocs, frees;
	struct listeners *listeners;
	struct conn *conns;          /* open connections (conn.c) */
	/* listen.tls (tlsaccept.c): the context, NULL when off, and the
	 * handshakes in progress. */
	struct tls_ctx *tls;
	struct tls_pending *tls_pending;   /* newest first */
	uint32_t tls_pending_n;
	struct nic *nic;             /* the RDMA side (nic_*.c); NULL: TCP only */
	/* What session.c and ctl.c know of the NIC, set by nic_open: the ops
	 * that make and drop a session's keys (NULL: no RDMA), the rdma_cm port
	 * and the key mode (enum proto_key_mode) that HELLO reports. */
	const struct key_ops *keys;
	uint16_t nic_port;
	uint8_t key_mode;
	/* Ranges whose NIC key is dead, waiting before they are zeroed and
	 * returned (quarantine.h, made by session.c); NULL before
	 * session_quarantine_init.  Their bytes count in used_bytes. */
	struct quarantine *quarantine;
	/* Ranges that a TCP or Unix transfer names right now (session.h,
	 * struct range_hold): none of them goes back to a pool before its
	 * last hold is released. */
	struct range_hold *holds;
	/* What each tenant holds: tenant.c's, read through tenant.h. */
	struct tenant_books tenants;
	struct event *lease_timer;   /* the connections' deadlines (lease.c) */
	struct member *cluster;     /* membership on etcd (member.c); NULL: none */
	struct repair_agent *repair; /* repair_agent.c's; NULL: none */
	struct counters counters;    /* for the metrics, bumped where things happen */
	struct metrics *metrics;     /* the listen.metrics endpoint (metrics.c), or NULL */
	/* enum member_state (member.h) as the loop last saw it: member.c's
	 * timer copies it from the agent, so readers on the loop need no atomic.
	 * 0 (MEMBER_OFF) without a cluster. */
	int member_state;
	/* Whether an operator drains this member (member.c copies it from its
	 * agent, which reads /rmem/<cluster>/drain/<id>): ALLOC and CREATE are
	 * refused with -ESHUTDOWN (ctl.c), so no client, raw or not, puts a
	 * new region here.  false without a cluster. */
	bool draining;
	/* Restart without loss (persist.c, slots.c): the state memfd's writer
	 * (NULL: persistence off, outside systemd's fd store), how many
	 * sessions the last restore brought back (0: started fresh; for
	 * rmem_restarts_restored_total), and what runs after a restore's READY
	 * (persist.c's own: its timers). */
	struct slots *slots;
	uint64_t restored;
	struct persist_after *after_restore;
	bool keep_state;             /* shutting down for a restart: leave pool bytes as they are */
	/* The server's identity in a cluster as the state memfd carries it
	 * (identity.h: who draws it, who takes it back). */
	struct identity identity;
};

#endif /* RMEMD_SERVER_H */
