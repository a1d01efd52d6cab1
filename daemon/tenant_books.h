/*
 * tenant_books.h - what each tenant holds now: tenant.c's books.
 *
 * Kept inside struct server by value (srv->tenants), so that a server
 * needs no set-up for them and a zeroed one holds nothing; but they are
 * tenant.c's alone: only its calls (tenant.h) write them, and the other
 * modules read them through tenant_usage() and tenant_slots_used().
 * Apart from tenant.h so that server.h can hold them without including
 * tenant.h (whose tenant.c includes server.h).
 */
#ifndef RMEMD_TENANT_BOOKS_H
#define RMEMD_TENANT_BOOKS_H

#include <stdint.h>

#include "config.h"

/* What one tenant holds now. */
struct tenant_use {
	uint64_t bytes;   /* until they are back in a pool */
	uint64_t regions; /* until they leave the region table */
	/* State slots of its records: one per anonymous region and handle
	 * held, two per named object it created; and its sessions past
	 * HELLO, each with a slot of the sessions' part. */
	uint64_t slots;
	uint64_t sessions;
};

struct tenant_books {
	/* By tenant, in cfg.tenants order; the last is the anonymous
	 * clients' (tenant.c, use_index). */
	struct tenant_use use[CONFIG_MAX_TENANTS + 1];
	/* The records' slots charged to tenants, of those tenant.c shares out
	 * (tenant_slots_total: the state memfd's, or limits.state_slots
	 * without one). */
	uint64_t slots_charged;
	/* The sessions among srv->clients that took an admin seat
	 * (CONFIG_ADMIN_SESSIONS). */
	uint64_t admin_clients;
};

#endif /* RMEMD_TENANT_BOOKS_H */
