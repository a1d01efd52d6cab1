/*
 * keepalive.h - the thread that keeps a client's lease with the daemon
 * alive (keepalive.c).  It sees the client as its lock and its engine only.
 */
#ifndef RMEM_KEEPALIVE_H
#define RMEM_KEEPALIVE_H

#include <stdint.h>

#include "engine.h"
#include "lock.h"

struct keepalive;

/* Starts the keepalive thread of a connected client whose lease is
 * lease_ms (0: nothing to do, *out NULL).  lock and e must outlive it.
 * 0 or a negative errno. */
int keepalive_start(struct keepalive **out, struct fair_lock *lock, struct engine *e,
		    uint32_t lease_ms);

/* Stops and joins the thread.  No call may be running on the client.
 * Accepts NULL. */
void keepalive_stop(struct keepalive *ka);

#endif /* RMEM_KEEPALIVE_H */
