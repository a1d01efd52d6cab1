/*
 * lease.c - see lease.h.
 *
 * Scanning every connection on each tick costs O(connections) a few times a
 * second, which is nothing next to serving them, and needs no bookkeeping on
 * the hot path beyond a timestamp.  What a deadline means for one
 * connection is conn.c's business (conn_check_deadlines).
 */
#include <errno.h>
#include <event2/event.h>

#include "clock.h"
#include "conn.h"
#include "lease.h"
#include "server.h"

uint32_t lease_tick_ms(uint32_t lease_ms, uint32_t frame_ms)
{
	uint32_t shorter = lease_ms < frame_ms ? lease_ms : frame_ms;
	uint32_t tick = shorter / 4;

	if (tick < LEASE_TICK_MIN_MS)
		return LEASE_TICK_MIN_MS;
	return tick > LEASE_TICK_MAX_MS ? LEASE_TICK_MAX_MS : tick;
}

static void on_lease_timer(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;
	uint64_t now = (uint64_t)clock_mono_ns();
	struct conn *c, *next;

	(void)fd;
	(void)what;
	/* A check may free its connection: step on before it can. */
	for (c = srv->conns; c; c = next) {
		next = c->next;
		conn_check_deadlines(c, now);
	}
}

int lease_init(struct server *srv)
{
	uint32_t tick = lease_tick_ms(srv->cfg.lease_timeout_ms, srv->cfg.frame_timeout_ms);
	struct timeval tv = { .tv_sec = tick / 1000, .tv_usec = (tick % 1000) * 1000 };

	srv->lease_timer = event_new(srv->base, -1, EV_PERSIST, on_lease_timer, srv);
	if (!srv->lease_timer || event_add(srv->lease_timer, &tv) < 0) {
		lease_fini(srv);
		return -ENOMEM;
	}
	return 0;
}

void lease_fini(struct server *srv)
{
	if (srv->lease_timer)
		event_free(srv->lease_timer);
	srv->lease_timer = NULL;
}
