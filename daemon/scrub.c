/*
 * scrub.c - see scrub.h.
 *
 * The dirty set is an array of spans sorted by offset.  Spans only shrink:
 * a take trims a head or a tail, or empties a span in place (its length 0,
 * left where it is), so offsets and ends stay in order and a binary search
 * finds where a range begins.  Only a take from the middle of a span splits
 * it (one insertion); the worker always takes from the head of the first.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "scrub.h"

/* What the worker takes at a time: short enough that an allocation which
 * meets it waits little (2 MiB zeroes in well under a millisecond here). */
#define SCRUB_CHUNK (2ull << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23	/* Linux 5.14 */
#endif

struct scrub {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint8_t *base;
	uint64_t page;
	struct scrub_span *sp;
	size_t n, cap, first;	/* spans before first are empty */
	struct scrub_span busy;	/* the worker's chunk (len 0: none) */
	uint64_t total, left;
	int64_t start_ms, took_ms;
	bool stop, done;
	pthread_t tid;
};

static bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return alen && blen && a < b + blen && b < a + alen;
}

/* The first span whose end is past off (n when none). */
static size_t find(const struct scrub *s, uint64_t off)
{
	size_t lo = s->first, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->sp[mid].off + s->sp[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Splits span i at [a, b), strictly inside it: i keeps the head, a new
 * span after it the tail.  false for want of memory. */
static bool split(struct scrub *s, size_t i, uint64_t a, uint64_t b)
{
	uint64_t end = s->sp[i].off + s->sp[i].len;

	if (s->n == s->cap) {
		size_t cap = s->cap * 2 + 16;
		struct scrub_span *sp = realloc(s->sp, cap * sizeof *sp);

		if (!sp)
			return false;
		s->sp = sp;
		s->cap = cap;
	}
	memmove(&s->sp[i + 2], &s->sp[i + 1], (s->n - i - 1) * sizeof *s->sp);
	s->n++;
	s->sp[i].len = a - s->sp[i].off;
	s->sp[i + 1] = (struct scrub_span){ b, end - b };
	return true;
}

void scrub_take(struct scrub *s, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	while (overlaps(s->busy.off, s->busy.len, off, len))
		pthread_cond_wait(&s->cv, &s->mu);
	for (size_t i = find(s, off); i < s->n && s->sp[i].off < end; i++) {
		struct scrub_span *p = &s->sp[i];
		uint64_t pend = p->off + p->len;
		uint64_t a = off > p->off ? off : p->off, b = end < pend ? end : pend;

		if (a >= b)
			continue;
		memset(s->base + a, 0, b - a);
		s->left -= b - a;
		if (a == p->off) {
			p->off = b;
			p->len = pend - b;
		} else if (b == pend) {
			p->len = a - p->off;
		} else if (!split(s, i, a, b)) {
			/* No memory for one more span: the tail is zeroed
			 * now too, so what leaves the set is all of it. */
			memset(s->base + b, 0, pend - b);
			s->left -= pend - b;
			p->len = a - p->off;
		}
	}
	pthread_mutex_unlock(&s->mu);
}

/* The next chunk out of the set, into busy; false when none is left or
 * the worker must stop.  Under the lock. */
static bool next_chunk(struct scrub *s)
{
	while (s->first < s->n && !s->sp[s->first].len)
		s->first++;
	if (s->stop || s->first == s->n)
		return false;
	s->busy.off = s->sp[s->first].off;
	s->busy.len = s->sp[s->first].len < SCRUB_CHUNK ? s->sp[s->first].len : SCRUB_CHUNK;
	s->sp[s->first].off += s->busy.len;
	s->sp[s->first].len -= s->busy.len;
	return true;
}

/* Faults the chunk's pages in (and so locks them: the pool is locked on
 * fault) in one call, then zeroes its bytes.  Populating rounds out to whole
 * pages, which may hold a region's bytes too: faulting a page in changes
 * none of them. */
static void zero_chunk(const struct scrub *s, struct scrub_span c)
{
	uint64_t a = c.off / s->page * s->page;
	uint64_t b = (c.off + c.len + s->page - 1) / s->page * s->page;

	syscall(SYS_madvise, s->base + a, b - a, MADV_POPULATE_WRITE);
	memset(s->base + c.off, 0, c.len);
}

static void *worker(void *arg)
{
	struct scrub *s = arg;

	pthread_mutex_lock(&s->mu);
	while (next_chunk(s)) {
		struct scrub_span c = s->busy;

		pthread_mutex_unlock(&s->mu);
		zero_chunk(s, c);
		pthread_mutex_lock(&s->mu);
		s->left -= c.len;
		s->busy.len = 0;
		pthread_cond_broadcast(&s->cv);
	}
	if (!s->stop) {
		s->done = true;
		s->took_ms = clock_mono_ms() - s->start_ms;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

struct scrub *scrub_start(uint8_t *base, uint32_t page_size, const struct scrub_span *sp,
			  size_t n)
{
	struct scrub *s = calloc(1, sizeof *s);
	sigset_t all, old;
	int rc;

	if (!s)
		return NULL;
	s->sp = malloc((n + 16) * sizeof *s->sp);
	if (!s->sp) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->cap = n + 16;
	for (size_t i = 0; i < n; i++) {
		if (!sp[i].len)
			continue;
		s->sp[s->n++] = sp[i];
		s->total += sp[i].len;
	}
	s->left = s->total;
	s->base = base;
	s->page = page_size;
	s->start_ms = clock_mono_ms();
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	/* Signals are the loop's: the worker blocks them all. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&s->tid, NULL, worker, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
		free(s->sp);
		free(s);
		errno = rc;
		return NULL;
	}
	return s;
}

bool scrub_progress(struct scrub *s, uint64_t *total, uint64_t *left, int64_t *ms)
{
	bool done;

	pthread_mutex_lock(&s->mu);
	*total = s->total;
	*left = s->left;
	*ms = s->took_ms;
	done = s->done;
	pthread_mutex_unlock(&s->mu);
	return done;
}

void scrub_stop(struct scrub *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->tid, NULL);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s->sp);
	free(s);
}

void scrub_zero_now(uint8_t *base, const struct scrub_span *sp, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (sp[i].len)
			memset(base + sp[i].off, 0, sp[i].len);
}
