/*
 * router_poll.c - posted calls on a cluster client, and rmem_poll over
 * every server they went to.
 *
 * Each posted operation goes to its server's client under a cookie of the
 * router's own (its index in cl->pend), so that completions from many
 * servers can be told apart whatever cookies the application chose, and so
 * that a posted alloc's region can be tagged with its server when it
 * completes.  rmem_poll takes what has arrived from every server with
 * operations in flight; it waits on the one server that has any, or, when
 * several have, on all of them at once with one poll() over their
 * clients' descriptors (single_wait_fd()), or, when one of them has none
 * (RDMA transfers in flight), a millisecond on each in turn.
 *
 * Completions keep the order of their server (rmem_poll(3)); there is no
 * order between servers.  A posted alloc goes to a server chosen as
 * rmem_alloc chooses; one that answers -ENOMEM or -EDQUOT sends it on to
 * the next server it has not tried, from inside rmem_poll, and only the
 * last answer is the completion (as rmem_alloc returns the last).  A
 * server lost for good completes what was posted to it with -EHOSTDOWN.
 *
 * On a redundant region a posted read is several parts, one per data
 * piece, each posted here under an entry that names the call
 * (router_redund_post.c); their completions go to rpost_end, and the one
 * that ends the call gives the application's.  A call that ended outside
 * rmem_poll (a posted write is made when posted) waits in a queue that
 * rmem_poll hands out first.  No order holds among a redundant region's
 * completions.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <time.h>

#include "router.h"
#include "router_int.h"
#include "single.h"

/* A free entry of the table for slot (PEND_UNPLACED: none yet; a posted
 * alloc's size): 0 and its index, or -ENOMEM. */
static int pend_new(struct router *cl, uint32_t slot, uint64_t cookie,
		    struct rmem_region *out, uint64_t size, uint64_t *idx)
{
	size_t i;
	int err = 0;

	pthread_mutex_lock(&cl->mu);
	for (i = 0; i < cl->npend && cl->pend[i].used; i++)
		;
	if (i == cl->npend) {
		size_t n = cl->npend ? cl->npend * 2 : 64;
		struct router_pend *p = realloc(cl->pend, n * sizeof(*p));

		if (!p) {
			err = -ENOMEM;
		} else {
			memset(p + cl->npend, 0, (n - cl->npend) * sizeof(*p));
			cl->pend = p;
			cl->npend = n;
		}
	}
	if (!err) {
		cl->pend[i] = (struct router_pend){ .cookie = cookie, .out = out, .size = size,
						     .slot = slot, .used = true };
		if (slot != PEND_UNPLACED)
			cl->members[slot].inflight++;
		*idx = i;
	}
	pthread_mutex_unlock(&cl->mu);
	return err;
}

/* The entry's completion as the application sees it; the entry is free. */
static struct rmem_completion pend_done(struct router *cl, uint64_t idx, int status)
{
	struct rmem_completion c = { .status = status };
	struct router_pend *p;

	pthread_mutex_lock(&cl->mu);
	p = &cl->pend[idx];
	c.cookie = p->cookie;
	if (p->slot != PEND_UNPLACED) {
		if (p->out && status == 0)
			members_tag(p->out, p->slot);
		if (cl->members[p->slot].inflight)
			cl->members[p->slot].inflight--;
	}
	p->used = false;
	pthread_mutex_unlock(&cl->mu);
	return c;
}

/* Posts to slot's client with post(); the entry goes if the post fails. */
#define POST(cl, slot, cookie, out, call)                                         \
	do {                                                                          \
		rmem_client *c_;                                                      \
		uint64_t idx_;                                                        \
		err = members_client((cl), (slot), &c_);                               \
		if (!err)                                                             \
			err = pend_new((cl), (slot), (cookie), (out), 0, &idx_);      \
		if (!err) {                                                           \
			err = members_err((cl), (slot), call);                        \
			if (err)                                                      \
				pend_done((cl), idx_, err);                           \
		}                                                                     \
	} while (0)

/* Entry idx is part p of rp (router_redund_post.c). */
static void pend_part(struct router *cl, uint64_t idx, struct rpost *rp, unsigned p)
{
	pthread_mutex_lock(&cl->mu);
	cl->pend[idx].rp = rp;
	cl->pend[idx].part = p;
	pthread_mutex_unlock(&cl->mu);
}

/* Entry idx, an operation in flight on slot: 1 when it is a part of a
 * redundant region's posted call (freed here, *rp and *p set), 0 when it
 * is the application's own, -1 when it is no longer in flight there
 * (another thread took it: a part must never be ended twice). */
static int pend_is_part(struct router *cl, uint64_t idx, uint32_t slot, struct rpost **rp,
			unsigned *p)
{
	int rc = -1;

	pthread_mutex_lock(&cl->mu);
	if (idx < cl->npend && cl->pend[idx].used && cl->pend[idx].slot == slot) {
		*rp = cl->pend[idx].rp;
		*p = cl->pend[idx].part;
		rc = *rp != NULL;
	}
	if (rc == 1) {
		if (cl->members[slot].inflight)
			cl->members[slot].inflight--;
		cl->pend[idx].used = false;
		cl->pend[idx].rp = NULL;
	}
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

/*
 * A posted read or write on a redundant region: the call's parts (a
 * read's data pieces, a write's K+R pieces) posted at once, each under an entry of its own that
 * names the call; a part whose piece is out is ended as lost at once (the
 * end of the call rebuilds it).  The poster's own share ends last here, so
 * that no rmem_poll on another thread ends the call before every part went
 * out; a call that ends here (a write of partial stripes only; a read
 * that needed no post) is queued for the next rmem_poll.  A part refused
 * for another reason stops the posting: with nothing posted the call is
 * refused, else its completion carries the error.
 */
static int post_redund(struct router *cl, const struct rmem_region *r, bool write,
		       uint64_t off, void *buf, size_t len, uint64_t cookie)
{
	struct rmem_completion done;
	struct rpost *rp;
	unsigned n = 0, posted = 0;
	int err = rpost_new(cl, r, write, off, buf, len, cookie, &rp, &n), perr = 0;

	if (err)
		return err;
	for (unsigned p = 0; p < n; p++) {
		const struct rmem_region *pr;
		uint64_t poff;
		void *pbuf;
		size_t plen;
		uint32_t slot, seg, gap, phase;
		bool tried = false;

		err = perr ? perr : rpost_part(cl, rp, p, &slot, &pr, &poff, &pbuf, &plen, &seg,
					       &gap, &phase);
		if (!err && seg) {
			/* Straight into the caller's buffer, a chunk at a time;
			 * an RDMA client cannot: then a buffer of the part's. */
			POST(cl, slot, 0, NULL,
			     (pend_part(cl, idx_, rp, p),
			      single_post_read_spaced(c_, pr, poff, pbuf, plen, seg, gap, phase, idx_)));
			tried = err != -EOPNOTSUPP;
			if (!tried)
				err = rpost_part_own(cl, rp, p, &pbuf);
		}
		if (!err && !tried)
			POST(cl, slot, 0, NULL,
			     (pend_part(cl, idx_, rp, p),
			      write ? single_post_write(c_, pr, poff, pbuf, plen, idx_) :
				      single_post_read(c_, pr, poff, pbuf, plen, idx_)));
		if (!err) {
			posted++;
			continue;
		}
		if (err != -EHOSTDOWN && !perr)
			perr = err;
		rpost_end(cl, rp, p, err, &done); /* (never the last share) */
	}
	if (rpost_end(cl, rp, n, 0, &done)) {
		if (perr && posted == 0)
			return perr;
		rpost_queue(cl, &done);
	}
	return 0;
}

int router_post_read(struct router *cl, const struct rmem_region *r, uint64_t off, void *buf,
		      size_t len, uint64_t cookie)
{
	uint32_t slot;
	int err;

	if (redund_is(r))
		return post_redund(cl, r, false, off, buf, len, cookie);
	err = members_slot_of(cl, r, &slot);
	if (!err)
		POST(cl, slot, cookie, NULL, single_post_read(c_, r, off, buf, len, idx_));
	return err;
}

int router_post_write(struct router *cl, const struct rmem_region *r, uint64_t off,
		       const void *buf, size_t len, uint64_t cookie)
{
	uint32_t slot;
	int err;

	/* (A write only reads buf: the cast keeps one posting path.) */
	if (redund_is(r))
		return post_redund(cl, r, true, off, (void *)buf, len, cookie);
	err = members_slot_of(cl, r, &slot);
	if (!err)
		POST(cl, slot, cookie, NULL, single_post_write(c_, r, off, buf, len, idx_));
	return err;
}

int router_post_free(struct router *cl, const struct rmem_region *r, uint64_t cookie)
{
	uint32_t slot;
	/* Redundant regions: synchronous calls only, for now. */
	int err = redund_is(r) ? -EOPNOTSUPP : members_slot_of(cl, r, &slot);

	if (!err)
		POST(cl, slot, cookie, NULL, single_post_free(c_, r, idx_));
	if (!err)
		members_placed(cl, slot, r->length, 1);
	return err;
}

/* Entry idx (a posted alloc) goes to slot, having tried what tried says. */
static void pend_move(struct router *cl, uint64_t idx, uint32_t slot, const uint64_t *tried)
{
	struct router_pend *p;

	pthread_mutex_lock(&cl->mu);
	p = &cl->pend[idx];
	if (p->slot != PEND_UNPLACED && cl->members[p->slot].inflight)
		cl->members[p->slot].inflight--;
	cl->members[slot].inflight++;
	p->slot = slot;
	memcpy(p->tried, tried, sizeof(p->tried));
	pthread_mutex_unlock(&cl->mu);
}

/* Posts entry idx's alloc to the next server it has not tried (a server
 * that cannot be reached now is passed over): 0, or the last post's error
 * (-ENOMEM when no server is left). */
static int alloc_post_next(struct router *cl, uint64_t idx, uint64_t size,
			   struct rmem_region *out, uint64_t *tried)
{
	uint32_t slot;
	int err;

	while ((err = members_pick(cl, size, tried, &slot)) == 0) {
		rmem_client *c;

		tried[slot / 64] |= 1ull << (slot % 64);
		err = members_client(cl, slot, &c);
		if (!err) {
			pend_move(cl, idx, slot, tried);
			err = members_err(cl, slot, single_post_alloc(c, size, 0, out, idx));
		}
		if (!err) {
			members_placed(cl, slot, size, 0);
			return 0;
		}
		if (err != -EHOSTDOWN)
			return err;
	}
	return err;
}

int router_post_alloc(struct router *cl, uint64_t size, uint32_t flags,
		       struct rmem_region *out, uint64_t cookie)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	uint64_t idx;
	int err;

	if (!out || size == 0 || flags != 0)
		return -EINVAL;
	if (cl->red_k)
		return -EOPNOTSUPP; /* redundant regions: rmem_alloc, for now */
	/* The entry first, on no server: alloc_post_next places it. */
	err = pend_new(cl, PEND_UNPLACED, cookie, out, size, &idx);
	if (!err) {
		err = alloc_post_next(cl, idx, size, out, tried);
		if (err)
			pend_done(cl, idx, err);
	}
	return err == -ENOMEM ? -EHOSTDOWN : err;
}

/* A posted alloc that slot's server refused for room or quota (st) goes
 * on to the next server it has not tried: true when it was posted there
 * (its completion will come from that server). */
static bool alloc_moved(struct router *cl, uint64_t idx, uint32_t from, int st)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64], size;
	struct rmem_region *out;

	if (!members_refused_room(st))
		return false;
	pthread_mutex_lock(&cl->mu);
	out = cl->pend[idx].out;
	size = cl->pend[idx].size;
	memcpy(tried, cl->pend[idx].tried, sizeof(tried));
	pthread_mutex_unlock(&cl->mu);
	if (!out)
		return false;
	members_placed(cl, from, size, st);
	return alloc_post_next(cl, idx, size, out, tried) == 0;
}

/* ---- rmem_poll ---------------------------------------------------------------------- */

/* The slots with operations in flight: how many (up to max). */
static size_t busy_slots(struct router *cl, uint32_t *slots, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->nmembers && n < max; i++)
		if (cl->members[i].inflight)
			slots[n++] = (uint32_t)i;
	pthread_mutex_unlock(&cl->mu);
	return n;
}

/* A lost server's operations, up to max, complete with -EHOSTDOWN. */
static int drain_lost(struct router *cl, uint32_t slot, struct rmem_completion *out, int max)
{
	int n = 0;
	uint64_t idx[64];
	int k = 0;

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->npend && k < max && k < 64; i++)
		if (cl->pend[i].used && cl->pend[i].slot == slot)
			idx[k++] = i;
	pthread_mutex_unlock(&cl->mu);
	for (int i = 0; i < k; i++) {
		struct rpost *rp;
		unsigned p;

		int part = pend_is_part(cl, idx[i], slot, &rp, &p);

		if (part == 1)
			n += rpost_end(cl, rp, p, -EHOSTDOWN, &out[n]);
		else if (part == 0)
			out[n++] = pend_done(cl, idx[i], -EHOSTDOWN);
	}
	return n;
}

/* What slot's server has completed, up to max, without waiting longer
 * than timeout_ms: how many. */
static int poll_one(struct router *cl, uint32_t slot, struct rmem_completion *out, int max,
		    int timeout_ms)
{
	rmem_client *c;
	int n, kept = 0, err = members_client(cl, slot, &c);

	if (err)
		return drain_lost(cl, slot, out, max);
	n = single_poll(c, out, max, timeout_ms);
	if (n < 0) {
		/* The server's client is broken: what it still held is lost. */
		members_err(cl, slot, -ECONNRESET);
		return drain_lost(cl, slot, out, max);
	}
	for (int i = 0; i < n; i++) {
		uint64_t idx = out[i].cookie;
		int st = out[i].status, part;
		struct rpost *rp;
		unsigned p;

		if (st == -ECONNRESET)
			st = -EHOSTDOWN;
		/* An operation already completed for a server found lost
		 * (drain_lost) is not reported twice.  (out[kept] is written
		 * only once out[i] is read: kept <= i.) */
		part = pend_is_part(cl, idx, slot, &rp, &p);
		if (part == 1)
			kept += rpost_end(cl, rp, p, st, &out[kept]);
		else if (part == 0 && !alloc_moved(cl, idx, slot, st))
			out[kept++] = pend_done(cl, idx, st);
	}
	return kept;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* How long poll_all() looks before it sleeps (as engine.c's ENG_SPIN_US). */
#define CLUSTER_SPIN_US 50

/*
 * What every busy slot has, waiting up to wait_ms on all of them at once:
 * one poll() over their clients' descriptors (single_wait_fd(), which sends
 * their queued posts first), then completions taken from the ready ones
 * only, so that a look costs one system call, not one per server.  A slot
 * without a descriptor to wait on (lost, completions queued, RDMA
 * transfers in flight) is always looked at, and then nothing waits here:
 * *nofd says so, and the caller waits on each slot in turn.  How many.
 */
static int poll_all(struct router *cl, const uint32_t *slots, size_t nb,
		    struct rmem_completion *out, int max, int wait_ms, bool *nofd)
{
	struct pollfd pfd[CLUSTER_MAX_SERVERS];
	bool take[CLUSTER_MAX_SERVERS];
	size_t nfd = 0;
	int n = 0, rc = 0;

	*nofd = false;
	for (size_t i = 0; i < nb; i++) {
		rmem_client *c;

		take[i] = members_client(cl, slots[i], &c) || single_wait_fd(c, &pfd[i]) != 1;
		if (take[i]) {
			pfd[i] = (struct pollfd){ .fd = -1 }; /* poll() skips it */
			*nofd = true;
		} else {
			nfd++;
		}
	}
	if (*nofd)
		wait_ms = 0;
	/* Like a single server's client (engine.c), look for a moment before
	 * sleeping, yielding the CPU to the servers meanwhile: replies to a
	 * batch of small requests come within that, without a wake-up. */
	for (int64_t end = now_us() + CLUSTER_SPIN_US; nfd;) {
		rc = poll(pfd, nb, 0);
		if (rc != 0 || wait_ms == 0 || now_us() >= end)
			break;
		sched_yield();
	}
	while (nfd && rc == 0 && wait_ms > 0) {
		rc = poll(pfd, nb, wait_ms);
		if (rc >= 0 || errno != EINTR)
			break;
		rc = 0;
	}
	/* (A failed poll() is taken as a look that saw nothing.) */
	for (size_t i = 0; i < nb && n < max; i++)
		if (take[i] || (rc > 0 && pfd[i].revents))
			n += poll_one(cl, slots[i], out + n, max - n, 0);
	return n;
}

int router_poll(struct router *cl, struct rmem_completion *out, int max, int timeout_ms)
{
	int64_t start = now_ms(), deadline = timeout_ms > 0 ? start + timeout_ms : 0;
	uint32_t slots[CLUSTER_MAX_SERVERS];
	unsigned turn = 0;
	bool first = true;

	if (!out || max <= 0)
		return -EINVAL;
	for (;;) {
		size_t nb = busy_slots(cl, slots, CLUSTER_MAX_SERVERS);
		bool nofd = false;
		int n = rpost_take(cl, out, max), wait = 0;

		/* Redundant regions' calls that ended outside rmem_poll. */
		if (n)
			return n;
		if (nb == 0)
			return 0;
		/* First what has arrived anywhere, without waiting; then
		 * waits in slices of at most 100 ms, so that posts to other
		 * servers made meanwhile by other threads are seen. */
		if (!first) {
			wait = 100;
			if (timeout_ms > 0 && deadline - now_ms() < wait)
				wait = (int)(deadline - now_ms());
			if (wait < 0)
				wait = 0;
		}
		/* One server: in its own way (its client's spin before
		 * sleeping included).  Several: sleep on all of them at once.
		 * Spinning over them (as this once did for a millisecond) took
		 * the CPU the servers needed when they share it with the
		 * client, and a wait on one server in turn left the others'
		 * replies waiting. */
		if (nb == 1)
			n = poll_one(cl, slots[0], out, max, wait);
		else
			n = poll_all(cl, slots, nb, out, max, wait, &nofd);
		if (n || timeout_ms == 0)
			return n;
		if (timeout_ms > 0 && now_ms() >= deadline)
			return 0;
		/* Some server cannot be waited on by descriptor: a
		 * millisecond on each in turn. */
		if (nofd && !first) {
			n = poll_one(cl, slots[turn++ % nb], out, max, wait < 1 ? wait : 1);
			if (n)
				return n;
		}
		first = false;
	}
}
