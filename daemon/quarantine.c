/*
 * quarantine.c - see quarantine.h.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "quarantine.h"

/* One waiting range. */
struct quarantined {
	uint32_t pool;
	uint64_t offset, length;
	uint64_t due_ns;
	const struct config_tenant *tenant; /* whose quota the bytes still count in */
	struct quarantined *next;
};

struct quarantine {
	struct quarantined *first, *last; /* oldest first */
	struct event *timer;
	uint64_t wait_ns;
	quarantine_return_fn *give_back;
	void *arg;
};

static void arm(struct quarantine *q, uint64_t now)
{
	uint64_t wait = q->first->due_ns > now ? q->first->due_ns - now : 0;
	struct timeval tv = { .tv_sec = (time_t)(wait / 1000000000u),
			      .tv_usec = (suseconds_t)(wait % 1000000000u / 1000u) };

	evtimer_add(q->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct quarantine *q = arg;
	uint64_t now = (uint64_t)clock_mono_ns();

	(void)fd;
	(void)what;
	quarantine_reap(q, now);
	if (q->first)
		arm(q, now);
}

struct quarantine *quarantine_new(struct event_base *base, uint64_t wait_ns,
				  quarantine_return_fn *give_back, void *arg)
{
	struct quarantine *q = calloc(1, sizeof *q);

	if (!q)
		return NULL;
	q->wait_ns = wait_ns;
	q->give_back = give_back;
	q->arg = arg;
	q->timer = evtimer_new(base, on_timer, q);
	if (!q->timer) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	return q;
}

/* Unlinks and gives back the oldest range. */
static void pop(struct quarantine *q)
{
	struct quarantined *r = q->first;

	q->first = r->next;
	if (!q->first)
		q->last = NULL;
	q->give_back(q->arg, r->pool, r->offset, r->length, r->tenant);
	free(r);
}

void quarantine_free(struct quarantine *q)
{
	if (!q)
		return;
	while (q->first)
		pop(q);
	event_free(q->timer);
	free(q);
}

/* Every range waits the same time, so appending keeps the list in due
 * order and the timer only ever needs the head's time. */
int quarantine_add(struct quarantine *q, uint32_t pool, uint64_t offset, uint64_t length,
		   const struct config_tenant *tenant, uint64_t now)
{
	struct quarantined *r = malloc(sizeof *r);

	if (!r)
		return -ENOMEM;
	*r = (struct quarantined){ .pool = pool, .offset = offset, .length = length,
				   .tenant = tenant, .due_ns = now + q->wait_ns };
	if (q->last)
		q->last->next = r;
	else
		q->first = r;
	q->last = r;
	if (q->first == r)
		arm(q, now);
	return 0;
}

unsigned quarantine_reap(struct quarantine *q, uint64_t now)
{
	unsigned n = 0;

	while (q->first && q->first->due_ns <= now) {
		pop(q);
		n++;
	}
	return n;
}

bool quarantine_next_due(const struct quarantine *q, uint64_t *due_ns)
{
	if (!q->first)
		return false;
	*due_ns = q->first->due_ns;
	return true;
}

void quarantine_held_by_pool(const struct quarantine *q, uint64_t *held, uint32_t npools)
{
	for (const struct quarantined *r = q->first; r; r = r->next)
		if (r->pool < npools)
			held[r->pool] += r->length;
}

uint64_t quarantine_held_by_tenant(const struct quarantine *q, const struct config_tenant *tenant)
{
	uint64_t n = 0;

	for (const struct quarantined *r = q->first; r; r = r->next)
		n += r->tenant == tenant ? r->length : 0;
	return n;
}
