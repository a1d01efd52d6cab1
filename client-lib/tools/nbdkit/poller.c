/*
 * poller.c - a lane's poller thread (poller.h says why).
 */
#include <errno.h>
#include <poll.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "poller.h"

/* Longest wait in rmem_poll while chunks are in flight: a request queued
 * meanwhile is posted at the next completion or after this, whichever
 * comes first (replies on loopback come every few microseconds under
 * load; a 1 MiB chunk's may take a millisecond). */
#define POLLER_WAIT_MS 1

/* One request, on the stack of the nbdkit thread that waits for it.  The
 * queue fields are the lane's (under its mutex); the rest is the
 * poller's from the time it takes the request until it posts done. */
struct lane_req {
	struct lane_req *next;
	bool write, same_buf;
	char *buf;
	uint64_t count, off;
	uint64_t posted;    /* bytes posted so far */
	unsigned inflight;  /* chunks posted and not completed */
	int first;          /* the first failure: the request's outcome */
	sem_t done;
};

static void wake(int fd)
{
	uint64_t one = 1;

	/* Only fails when the counter would overflow, and then it is
	 * readable already: the poller wakes either way. */
	(void)!write(fd, &one, sizeof one);
}

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

/* Sleeps, with nothing in flight, until a request is queued or the stop. */
static void nap(struct lane *l)
{
	struct pollfd pfd = { .fd = l->wakefd, .events = POLLIN };
	uint64_t n;
	bool idle;

	pthread_mutex_lock(&l->mu);
	idle = !l->queue;
	l->sleeping = idle;
	pthread_mutex_unlock(&l->mu);
	if (!idle)
		return;
	(void)poll(&pfd, 1, -1);
	pthread_mutex_lock(&l->mu);
	l->sleeping = false;
	pthread_mutex_unlock(&l->mu);
	(void)!read(l->wakefd, &n, sizeof n); /* non-blocking: resets the count */
}

static unsigned inflight(const struct lane_req *q)
{
	unsigned n = 0;

	for (; q; q = q->next)
		n += q->inflight;
	return n;
}

static void *poller_main(void *arg)
{
	struct lane *l = arg;
	struct lane_req *active = NULL, **tail = &active, **pp, *q;

	while (!atomic_load(&l->stop)) {
		bool more = false;

		/* New requests join the end of the active list. */
		pthread_mutex_lock(&l->mu);
		*tail = l->queue;
		if (l->queue)
			tail = l->queue_tail;
		l->queue = NULL;
		l->queue_tail = &l->queue;
		pthread_mutex_unlock(&l->mu);

		for (q = active; q; q = q->next)
			post_more(l, q);
		/* Sends what was posted, takes what has come back. */
		reap(l, inflight(active) ? POLLER_WAIT_MS : 0);
		/* The semaphore is the last of a request the poller touches:
		 * once posted, the request returns and its memory is gone
		 * (glibc's sem_post allows that since 2.21: after the count
		 * it only wakes the futex, by address). */
		for (pp = &active; (q = *pp);) {
			if (finished(q)) {
				*pp = q->next;
				sem_post(&q->done);
			} else {
				more |= !q->first && q->posted < q->count &&
					q->inflight < LANE_DEPTH;
				pp = &q->next;
			}
		}
		for (tail = &active; *tail; tail = &(*tail)->next)
			;
		if (!more && !inflight(active))
			nap(l);
	}
	return NULL;
}

int poller_start(struct lane *l)
{
	int rc;

	l->queue = NULL;
	l->queue_tail = &l->queue;
	l->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->wakefd < 0)
		return -errno;
	if ((rc = pthread_create(&l->thread, NULL, poller_main, l)) != 0)
		return -rc;
	l->polled = true;
	return 0;
}

void poller_stop(struct lane *l)
{
	if (l->polled) {
		atomic_store(&l->stop, true);
		wake(l->wakefd);
		pthread_join(l->thread, NULL);
		l->polled = false;
	}
	if (l->wakefd >= 0)
		close(l->wakefd);
	l->wakefd = -1;
}

int poller_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count,
	      uint64_t off)
{
	struct lane_req q = {
		.write = write, .same_buf = same_buf, .buf = buf, .count = count, .off = off,
	};
	bool kick;

	if (sem_init(&q.done, 0, 0) < 0)
		return -errno;
	pthread_mutex_lock(&l->mu);
	*l->queue_tail = &q;
	l->queue_tail = &q.next;
	kick = l->sleeping;
	l->sleeping = false;
	pthread_mutex_unlock(&l->mu);
	/* A poller at work takes the queue before it sleeps again. */
	if (kick)
		wake(l->wakefd);
	while (sem_wait(&q.done) < 0 && errno == EINTR)
		;
	sem_destroy(&q.done);
	return q.first;
}
