/*
 * quarantine.h - ranges held back after their NIC key died unconfirmed.
 *
 * A range whose NIC key died without a completion that confirms it
 * (keys.h, KEY_UNCONFIRMED) waits a fixed time before it is zeroed and
 * returned, so that an access already on the wire can never land in the
 * next owner's region.  This module keeps the waiting ranges in due order
 * and runs the one timer; what "returning" a range means (zeroing, the
 * pool, the tenant's quota) belongs to whoever made it, through the
 * callback given to quarantine_new.  It knows nothing of struct server.
 * Single-threaded: everything runs on the libevent loop.
 */
#ifndef RMEMD_QUARANTINE_H
#define RMEMD_QUARANTINE_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct config_tenant;
struct quarantine;

/* Gives one range back once its wait is over, or at quarantine_free;
 * tenant is the one whose quota its bytes still count in (NULL:
 * anonymous).  Called from the loop, never from quarantine_add. */
typedef void quarantine_return_fn(void *arg, uint32_t pool, uint64_t offset, uint64_t length,
				  const struct config_tenant *tenant);

/* An empty quarantine whose ranges wait wait_ns on base's loop; NULL with
 * errno set on failure. */
struct quarantine *quarantine_new(struct event_base *base, uint64_t wait_ns,
				  quarantine_return_fn *give_back, void *arg);
/* Gives every waiting range back at once (at shutdown, when no queue pair
 * is left to write into them) and frees q.  q may be NULL. */
void quarantine_free(struct quarantine *q);

/* Holds [offset, +length) of pool until now + wait_ns (now: clock_mono_ns).
 * 0, or -ENOMEM: the caller must give the range back itself. */
int quarantine_add(struct quarantine *q, uint32_t pool, uint64_t offset, uint64_t length,
		   const struct config_tenant *tenant, uint64_t now);
/* Gives back every range due by now; how many. */
unsigned quarantine_reap(struct quarantine *q, uint64_t now);

/* When the oldest range is due; false when none waits. */
bool quarantine_next_due(const struct quarantine *q, uint64_t *due_ns);
/* Adds the waiting bytes of each pool below npools to held[pool]. */
void quarantine_held_by_pool(const struct quarantine *q, uint64_t *held, uint32_t npools);
/* The waiting bytes that count in tenant's quota. */
uint64_t quarantine_held_by_tenant(const struct quarantine *q, const struct config_tenant *tenant);

#endif /* RMEMD_QUARANTINE_H */
