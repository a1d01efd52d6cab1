/*
 * client.c - one chaos client process: allocates regions of random sizes,
 * checks each is all zero when fresh, fills it with data from its own seed,
 * reads it back; keeps some, re-reads them later, frees others.  Its session
 * may vanish under it (frozen past its lease): every call then fails with
 * -ECONNRESET, and it reconnects, forgets what it held and checks that the
 * old regions are out of its reach.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos.h"
#include "harness.h"

#define MAX_HELD     16
#define MAX_BYTES    (256u << 10)
/* Connect and per-call timeout: generous, the machine may be busy. */
#define CALL_MS      20000
/* Connection attempts in a row before the client gives up. */
#define MAX_CONNECT_FAILS 50

struct held {
	struct rmem_region r;
	uint64_t seed;
};

struct client {
	const struct chaos_client_arg *arg;
	rmem_client *c;
	struct held held[MAX_HELD];
	unsigned nheld;
	/* The regions of the session before the last reset, to probe after it. */
	struct rmem_region lost;
	bool have_lost;
	uint64_t rng;
	uint8_t *want, *got;
	struct chaos_report rep;
};

static bool told_to_stop(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

/* Mostly small regions, some large: many calls, and some long streams. */
static uint64_t pick_size(struct client *cl)
{
	uint64_t r = chaos_rand(&cl->rng) % 100;

	if (r < 55)
		return chaos_between(&cl->rng, 1, 4096);
	if (r < 90)
		return chaos_between(&cl->rng, 4097, 64 << 10);
	return chaos_between(&cl->rng, (64 << 10) + 1, MAX_BYTES);
}

static int reconnect(struct client *cl)
{
	for (int fails = 0;; fails++) {
		int rc;

		if (told_to_stop(cl->arg->stop_fd))
			return -ECANCELED;
		rc = client_connect(cl->arg->endpoint, CALL_MS, &cl->c);
		if (rc == 0)
			return 0;
		cl->c = NULL;
		cl->rep.connect_fails++;
		if (fails >= MAX_CONNECT_FAILS)
			return rc;
		sleep_ms(20);
	}
}

/* A failed call: -ECONNRESET says the session is gone (a lease that ran
 * out), anything else is an error.  Either way the client starts afresh. */
static int failed(struct client *cl, int rc)
{
	if (rc == -ECONNRESET) {
		cl->rep.resets++;
	} else {
		cl->rep.errors++;
		cl->rep.last_error = rc;
	}
	if (cl->nheld) {
		cl->lost = cl->held[0].r;
		cl->have_lost = true;
	}
	cl->nheld = 0;
	rmem_close(cl->c);
	cl->c = NULL;
	rc = reconnect(cl);
	if (rc < 0)
		return rc;
	cl->rep.reconnects++;
	/* A region of the dead session must be out of reach of the new one. */
	if (cl->have_lost) {
		if (rmem_read(cl->c, &cl->lost, 0, cl->got, 1) == 0)
			cl->rep.foreign++;
		cl->have_lost = false;
	}
	return 0;
}

/* Reads h back whole and compares it with what was written. */
static int verify(struct client *cl, const struct held *h)
{
	size_t len = (size_t)h->r.length;
	int rc = rmem_read(cl->c, &h->r, 0, cl->got, len);

	if (rc < 0)
		return rc;
	cl->rep.ops++;
	fill_random(cl->want, len, h->seed);
	if (memcmp(cl->want, cl->got, len) != 0)
		cl->rep.mismatches++;
	else
		cl->rep.verified += len;
	return 0;
}

static int add_region(struct client *cl)
{
	struct held *h = &cl->held[cl->nheld];
	uint64_t size = pick_size(cl);
	size_t len;
	int rc = rmem_alloc(cl->c, size, 0, &h->r);

	if (rc == -ENOMEM) {
		cl->rep.enomem++;
		return 0;
	}
	if (rc < 0)
		return rc;
	cl->rep.ops++;
	cl->nheld++;
	/* Regions are rounded up; the client writes every byte it got. */
	len = h->r.length <= MAX_BYTES ? (size_t)h->r.length : MAX_BYTES;
	h->r.length = len;
	rc = rmem_read(cl->c, &h->r, 0, cl->got, len);
	if (rc < 0)
		return rc;
	if (!all_zero(cl->got, len))
		cl->rep.foreign++;
	h->seed = chaos_rand(&cl->rng);
	fill_random(cl->want, len, h->seed);
	rc = rmem_write(cl->c, &h->r, 0, cl->want, len);
	if (rc < 0)
		return rc;
	cl->rep.ops++;
	return verify(cl, h);
}

static int drop_region(struct client *cl, unsigned i)
{
	int rc = rmem_free(cl->c, &cl->held[i].r);

	if (rc < 0)
		return rc;
	cl->rep.ops++;
	cl->held[i] = cl->held[--cl->nheld];
	return 0;
}

static int step(struct client *cl)
{
	uint64_t dice = chaos_rand(&cl->rng) % 10;
	unsigned i;

	if (cl->nheld == 0 || (dice < 5 && cl->nheld < MAX_HELD))
		return add_region(cl);
	i = (unsigned)(chaos_rand(&cl->rng) % cl->nheld);
	if (dice < 8)
		return verify(cl, &cl->held[i]);
	return drop_region(cl, i);
}

static int run(struct client *cl)
{
	int rc = reconnect(cl);

	if (rc < 0)
		return rc == -ECANCELED ? 0 : rc;
	while (!told_to_stop(cl->arg->stop_fd)) {
		rc = step(cl);
		if (rc < 0) {
			rc = failed(cl, rc);
			if (rc == -ECANCELED)
				break;
			if (rc < 0 && !cl->c)
				return rc;
		}
	}
	/* A client thawed just before the end may not have called since: one
	 * last call shows whether its session outlived the freeze. */
	if (cl->c) {
		struct rmem_stats st;

		rc = rmem_stats(cl->c, &st);
		if (rc == -ECONNRESET) {
			cl->rep.resets++;
			cl->nheld = 0;
			rmem_close(cl->c);
			cl->c = NULL;
		} else if (rc < 0) {
			cl->rep.errors++;
			cl->rep.last_error = rc;
		}
	}
	/* Half the survivors free what they hold, half leave it to the daemon. */
	if (cl->c && chaos_rand(&cl->rng) % 2) {
		while (cl->nheld && drop_region(cl, 0) == 0)
			;
	}
	rmem_close(cl->c);
	cl->c = NULL;
	return 0;
}

int chaos_client_main(int wfd, void *arg)
{
	struct client *cl = calloc(1, sizeof *cl);
	int rc;

	if (!cl)
		return 3;
	cl->arg = arg;
	cl->rng = cl->arg->seed;
	cl->want = malloc(MAX_BYTES);
	cl->got = malloc(MAX_BYTES);
	if (!cl->want || !cl->got)
		return 3;
	rc = run(cl);
	if (rc < 0) {
		cl->rep.errors++;
		cl->rep.last_error = rc;
	}
	if (write(wfd, &cl->rep, sizeof cl->rep) != (ssize_t)sizeof cl->rep)
		return 4;
	free(cl->want);
	free(cl->got);
	free(cl);
	return 0;
}
