/*
 * lease.h - the daemon's one timer for the deadlines of its connections.
 *
 * Every connection holds a lease that each byte it sends us (or takes from
 * us) renews; one whose peer stays silent for limits.lease_timeout_ms is
 * ended exactly as a disconnect ends it: its session's keys die, its regions
 * go through the quarantine back to the pools, its queue pair is destroyed.
 * A connection that stops in the middle of a frame is dropped sooner, after
 * limits.frame_timeout_ms.  A single periodic timer scans the connections;
 * no connection owns a timer of its own.
 */
#ifndef RMEMD_LEASE_H
#define RMEMD_LEASE_H

#include <stdint.h>

struct server;

/* Makes and arms the timer (after srv->base and srv->cfg are set).
 * 0 or -ENOMEM. */
int lease_init(struct server *srv);
/* Stops and frees the timer.  Accepts a server whose init failed or never ran. */
void lease_fini(struct server *srv);

/* How often the timer looks: a quarter of the shorter deadline, within
 * [LEASE_TICK_MIN_MS, LEASE_TICK_MAX_MS], so that a deadline is acted on at
 * most that late. */
#define LEASE_TICK_MIN_MS 10u
#define LEASE_TICK_MAX_MS 1000u
uint32_t lease_tick_ms(uint32_t lease_ms, uint32_t frame_ms);

#endif /* RMEMD_LEASE_H */
