/*
 * poller.c - the requests of one lane, in flight together (poller.h says
 * why).
 *
 * One of the requests waiting on a lane is its poller, the only thread
 * that calls on the lane's client; the others sleep on their semaphores.
 * The poller posts what the others queued, takes the completions, wakes
 * each request that has finished, and when its own has finished hands the
 * role to a request still waiting (or leaves the lane without one when
 * none is).  Alone on the lane (one request in flight), a request posts and
 * polls for itself and nobody is woken: a synchronous round trip.  Many,
 * and one wake-up of the poller returns every reply that has come.
 */
#include <errno.h>
#include <semaphore.h>

#include "poller.h"

/* Longest wait in rmem_poll while chunks are in flight: a request queued
 * meanwhile is posted at the next completion or after this, whichever
 * comes first (on loopback replies come every few microseconds under
 * load; a 1 MiB chunk's may take a millisecond). */
#define POLLER_WAIT_MS 1

/* One request, on the stack of the nbdkit thread that waits for it.  next
 * is the lane's (under its mutex) while queued, then the poller's; the
 * rest is the poller's from the time it takes the request until it posts
 * done. */
struct lane_req {
	struct lane_req *next;
	bool write, same_buf;
	char *buf;
	uint64_t count, off;
	uint64_t posted;    /* bytes posted so far */
	unsigned inflight;  /* chunks posted and not completed */
	int first;          /* the first failure: the request's outcome */
	bool lead;          /* woken to be the poller, not because it finished */
	sem_t done;
};

/* Posts what the request may have in flight.  A post refused at once
 * (a broken session: -ECONNRESET) ends the request's posting. */
static void post_more(struct lane *l, struct lane_req *q)
{
	while (!q->first && q->posted < q->count && q->inflight < LANE_DEPTH) {
		uint64_t left = q->count - q->posted;
		size_t len = left > LANE_CHUNK ? LANE_CHUNK : (size_t)left;
		char *p = q->buf + (q->same_buf ? 0 : q->posted);
		int rc = q->write ? rmem_post_write(l->c, &l->r, q->off + q->posted, p, len,
						    (uintptr_t)q)
				  : rmem_post_read(l->c, &l->r, q->off + q->posted, p, len,
						   (uintptr_t)q);

		if (rc < 0) {
			q->first = rc;
			return;
		}
		q->inflight++;
		q->posted += len;
	}
}

static bool finished(const struct lane_req *q)
{
	return q->inflight == 0 && (q->first || q->posted == q->count);
}

/* Takes every completion the client has, waiting up to wait_ms for the
 * first.  A broken session completes all it had in flight with
 * -ECONNRESET, then refuses every later post at once: nothing is left to
 * do about it here. */
static void reap(struct lane *l, int wait_ms)
{
	struct rmem_completion done[LANE_REAP];
	int n, i;

	while ((n = rmem_poll(l->c, done, LANE_REAP, wait_ms)) > 0) {
		wait_ms = 0;
		for (i = 0; i < n; i++) {
			struct lane_req *q = (struct lane_req *)(uintptr_t)done[i].cookie;

			if (done[i].status < 0 && !q->first)
				q->first = done[i].status;
			q->inflight--;
		}
	}
}

/* Wakes q (another request's thread): it has finished, or is to lead.
 * The semaphore is the last of q this thread touches: once posted, the
 * request may return and its memory be gone (glibc's sem_post allows
 * that since 2.21: after the count it only wakes the futex, by address). */
static void wake(struct lane_req *q, bool lead)
{
	q->lead = lead;
	sem_post(&q->done);
}

/* The poller's work, until its own request (me) has finished. */
static void lead(struct lane *l, struct lane_req *me)
{
	struct lane_req **pp, *q;

	for (;;) {
		bool mine = false, inflight = false;

		/* Requests queued since join the end of the active list. */
		pthread_mutex_lock(&l->mu);
		for (pp = &l->active; *pp; pp = &(*pp)->next)
			;
		*pp = l->queue;
		l->queue = NULL;
		l->queue_tail = &l->queue;
		pthread_mutex_unlock(&l->mu);

		for (q = l->active; q; q = q->next) {
			post_more(l, q);
			inflight |= q->inflight > 0;
		}
		/* Sends what was posted, takes what has come back. */
		reap(l, inflight ? POLLER_WAIT_MS : 0);
		for (pp = &l->active; (q = *pp);) {
			if (!finished(q)) {
				pp = &q->next;
				continue;
			}
			*pp = q->next;
			if (q == me)
				mine = true;
			else
				wake(q, false);
		}
		if (!mine)
			continue;
		/* Done: the role goes to a request still waiting, if any. */
		pthread_mutex_lock(&l->mu);
		q = l->active ? l->active : l->queue;
		if (q)
			wake(q, true);
		else
			l->leading = false;
		pthread_mutex_unlock(&l->mu);
		return;
	}
}

int poller_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count,
	      uint64_t off)
{
	struct lane_req q = {
		.write = write, .same_buf = same_buf, .buf = buf, .count = count, .off = off,
	};
	bool leader;

	if (sem_init(&q.done, 0, 0) < 0)
		return -errno;
	pthread_mutex_lock(&l->mu);
	*l->queue_tail = &q;
	l->queue_tail = &q.next;
	leader = !l->leading;
	l->leading = true;
	pthread_mutex_unlock(&l->mu);
	if (!leader) {
		while (sem_wait(&q.done) < 0 && errno == EINTR)
			;
		leader = q.lead;
	}
	if (leader)
		lead(l, &q);
	sem_destroy(&q.done);
	return q.first;
}
