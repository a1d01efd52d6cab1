/*
 * router_redund_post.c - posted reads and writes on redundant regions
 * (docs/architecture.md, "Redundancy", posted calls).
 *
 * A posted read is split into parts, one per data piece it touches (its
 * contiguous range of that piece), which router_poll.c posts on the
 * pieces' clients at once, so that many reads in flight overlap as plain
 * ones do.  A part lands in a buffer of the call's own, or straight in the
 * caller's when the read lies within one chunk.  When the last part has
 * ended (inside rmem_poll), a part whose piece was lost or marked out
 * meanwhile is rebuilt from any K pieces, under the writer mutex as a
 * synchronous read's rebuild is, and the parts are gathered into the
 * caller's buffer: the completion is success with the right bytes, or an
 * error, never wrong bytes.
 *
 * A posted write's partial stripes at each end are made when it is
 * posted, by router_redund.c's synchronous write (parity by delta needs
 * the old bytes).  Its whole stripes are encoded into a buffer of the
 * call's own, one part per piece (K data, R parity), and every part is
 * posted under the region's writer mutex: each server serves a connection
 * in order, so the next write's old bytes and parity, and a rebuild's
 * survivors, are read after this write on every piece, with no wait for
 * its completions.  A part that fails puts its piece out: at once when
 * its post fails (under the mutex), else when its completion is taken.
 * Until then a read may still go to that piece, but what fails a posted
 * write on a connection (the server lost, the resume failed, the region
 * gone or revoked) fails a read behind it on the same connection too, so
 * the read is made around it, or fails: never the piece's old bytes.  The
 * call's end tells the record of pieces out, as a synchronous write does
 * before it returns.
 *
 * Calls downward only: router_redund.c, router_members.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "router_int.h"
#include "router_redund.h"

struct rpost_part {
	unsigned j;           /* the data piece */
	uint64_t lo, hi;      /* its range */
	unsigned char *buf;   /* where the range lands: in runs when spaced */
	bool spaced;          /* in the caller's buffer, a chunk at a time */
	unsigned char *own;   /* else a buffer of the part's own, or NULL */
	size_t own_cap;
	int st;               /* the part's status */
	bool rebuilt;         /* its bytes were rebuilt from other pieces */
	struct piece_ref ref; /* the piece it was posted on (a copy) */
};

struct rpost {
	struct rmem_region r; /* the handle, looked up again at the end */
	uint64_t cookie, off;
	unsigned char *buf;   /* the caller's */
	size_t len;
	bool write;
	struct rset *wlocked; /* a write's, whose wmu it holds while posting */
	int err;              /* a write's outcome, or a read's refusal */
	unsigned nparts;
	unsigned left;        /* shares not ended: parts, and the poster's */
	unsigned char *block; /* a write's parts, one piece's bytes after another */
	size_t block_cap;
	struct rpost_part part[STRIPE_N_MAX];
};

/* A buffer of len bytes: the smallest kept one that is large enough (its
 * size in *cap), else a new one.  NULL for want of memory. */
static unsigned char *block_take(struct router *cl, size_t len, size_t *cap)
{
	unsigned char *p = NULL;
	size_t best = 0;

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->red_nkept; i++)
		if (cl->red_kept[i].len >= len &&
		    (!p || cl->red_kept[i].len < cl->red_kept[best].len)) {
			p = cl->red_kept[i].p;
			best = i;
		}
	if (p) {
		*cap = cl->red_kept[best].len;
		cl->red_kept_bytes -= *cap;
		cl->red_kept[best] = cl->red_kept[--cl->red_nkept];
	}
	pthread_mutex_unlock(&cl->mu);
	if (!p) {
		p = malloc(len ? len : 1);
		*cap = len;
	}
	return p;
}

/* p (cap bytes) kept for the next call, or freed when enough are kept. */
static void block_give(struct router *cl, unsigned char *p, size_t cap)
{
	if (!p)
		return;
	pthread_mutex_lock(&cl->mu);
	if (cl->red_nkept < RPOST_KEEP && cl->red_kept_bytes + cap <= RPOST_KEEP_BYTES) {
		cl->red_kept[cl->red_nkept].p = p;
		cl->red_kept[cl->red_nkept++].len = cap;
		cl->red_kept_bytes += cap;
		p = NULL;
	}
	pthread_mutex_unlock(&cl->mu);
	free(p);
}

/* Room for one more completion in the queue, for a call now alive.  A
 * call that ended keeps its room until rmem_poll takes its completion, so
 * the room counts those queued too: calls that end when posted (a partial
 * stripe's write) pile up there between two polls, and a completion that
 * found no room was lost, its caller waiting for it for ever (seen: the
 * nbdkit plugin's 32 posted 4 KiB writes on a 2+1 disk). */
static int alive_add(struct router *cl)
{
	int err = 0;

	pthread_mutex_lock(&cl->mu);
	if (cl->red_alive + cl->red_ndone + 1 > cl->red_cap) {
		size_t n = cl->red_cap ? cl->red_cap * 2 : 16;
		struct rmem_completion *v = realloc(cl->red_done, n * sizeof(*v));

		if (v) {
			cl->red_done = v;
			cl->red_cap = n;
		} else {
			err = -ENOMEM;
		}
	}
	if (!err)
		cl->red_alive++;
	pthread_mutex_unlock(&cl->mu);
	return err;
}

static void alive_sub(struct router *cl)
{
	pthread_mutex_lock(&cl->mu);
	cl->red_alive--;
	pthread_mutex_unlock(&cl->mu);
}

/* The parts of a read of [off, off+len): one per data piece touched,
 * each landing straight in the caller's buffer: in one run when the read
 * lies within one chunk, else a chunk at a time (a spaced read, whose
 * runs lie K chunks apart), or, where a piece's client cannot (RDMA),
 * in a buffer of its own gathered at the end (rpost_part_own). */
static void read_plan(struct rset *rs, struct rpost *rp)
{
	const uint64_t C = STRIPE_CHUNK, W = (uint64_t)rs->code.k * C;

	for (unsigned j = 0; j < rs->code.k; j++) {
		struct rpost_part *p = &rp->part[rp->nparts];

		if (!redund_piece_range(rs, j, rp->off, rp->off + rp->len, &p->lo, &p->hi))
			continue;
		p->j = j;
		/* The region offset of the part's first byte. */
		p->buf = rp->buf + (p->lo / C * W + j * C + p->lo % C - rp->off);
		rp->nparts++;
	}
	if (rp->nparts > 1 || (rp->nparts == 1 && rp->part[0].hi - rp->part[0].lo != rp->len))
		for (unsigned x = 0; x < rp->nparts; x++)
			rp->part[x].spaced = true;
}

/*
 * A write: its partial stripes at each end made now by the synchronous
 * write (parity by delta needs the old bytes); its whole stripes encoded
 * here into the call's own buffer, one part per piece, which the caller
 * posts under the writer mutex, taken here and let go by rpost_end of the
 * poster's share.  0 with parts planned (wmu held when there are), or the
 * write's error.
 */
static int write_plan(struct router *cl, struct rset *rs, struct rpost *rp)
{
	const uint64_t C = STRIPE_CHUNK, W = (uint64_t)rs->code.k * C;
	uint64_t end = rp->off + rp->len, fs = (rp->off + W - 1) / W * W, fe = end / W * W;
	unsigned char *bufs[STRIPE_N_MAX];
	size_t plen;
	int err = 0;

	if (fe <= fs)
		return redund_write(cl, &rp->r, rp->off, rp->buf, rp->len);
	if (fs > rp->off)
		err = redund_write(cl, &rp->r, rp->off, rp->buf, (size_t)(fs - rp->off));
	if (!err && end > fe)
		err = redund_write(cl, &rp->r, fe, rp->buf + (fe - rp->off), (size_t)(end - fe));
	if (err)
		return err;
	plen = (size_t)((fe - fs) / W * C);
	if (!(rp->block = block_take(cl, plen * rs->n, &rp->block_cap)))
		return -ENOMEM;
	for (unsigned i = 0; i < rs->n; i++) {
		bufs[i] = rp->block + plen * i;
		rp->part[i] = (struct rpost_part){ .j = i, .lo = fs / W * C, .hi = fe / W * C,
						   .buf = bufs[i] };
	}
	for (unsigned j = 0; j < rs->code.k; j++)
		redund_piece_copy(rs, j, fs / W * C, fe / W * C, bufs[j], rp->buf + (fs - rp->off),
				  fs, false);
	stripe_encode(&rs->code, plen, bufs, bufs + rs->code.k);
	redund_count(cl, &cl->parity_updates, (uint64_t)rs->code.r * (plen / STRIPE_CHUNK));
	rp->nparts = rs->n;
	/* Every part goes out before another write of the region starts, so
	 * that each piece's server, which serves its connection in order,
	 * sees this client's writes in one order on every piece: a later
	 * write's old bytes and old parity are this one's new ones. */
	pthread_mutex_lock(&rs->wmu);
	/* Freed meanwhile by another thread: nothing is posted; nor by a
	 * writer whose right is lost. */
	err = redund_dead(cl, rs) ? -EINVAL : redund_may_write(cl, rs);
	if (err) {
		pthread_mutex_unlock(&rs->wmu);
		return err;
	}
	__atomic_store_n(&rp->wlocked, rs, __ATOMIC_RELEASE);
	return 0;
}

int rpost_new(struct router *cl, const struct rmem_region *r, bool write, uint64_t off,
	      void *buf, size_t len, uint64_t cookie, struct rpost **out, unsigned *nparts)
{
	struct rpost *rp = NULL;
	struct rset *rs;
	int err = redund_rset_of(cl, r, &rs);

	/* What a plain posted call refuses at once is refused at once. */
	if (!err)
		err = redund_check_range(rs, off, buf, len);
	if (!err && write && r->flags && !(r->flags & RMEM_WRITE))
		err = -EACCES;
	if (!err && !(rp = calloc(1, sizeof(*rp))))
		err = -ENOMEM;
	if (err)
		return err;
	*rp = (struct rpost){ .r = *r, .cookie = cookie, .off = off, .buf = buf, .len = len,
			      .write = write };
	err = alive_add(cl);
	if (err) {
		free(rp);
		return err;
	}
	if (write)
		/* A refusal from here on is the completion's. */
		rp->err = write_plan(cl, rs, rp);
	else
		read_plan(rs, rp);
	if (rp->err)
		rp->nparts = 0;
	rp->left = rp->nparts + 1;
	*nparts = rp->nparts;
	*out = rp;
	return 0;
}

int rpost_part(struct router *cl, struct rpost *rp, unsigned p, uint32_t *slot,
	       const struct rmem_region **piece, uint64_t *off, void **buf, size_t *len,
	       uint32_t *seg, uint32_t *gap, uint32_t *phase)
{
	struct rpost_part *pt = &rp->part[p];
	struct rset *rs;
	int err = redund_rset_of(cl, &rp->r, &rs);

	if (err)
		return err;
	/* The part's own copy: a swap meanwhile changes nothing under it. */
	if (!redund_piece_take(cl, rs, pt->j, &pt->ref))
		return -EHOSTDOWN;
	*slot = pt->ref.slot;
	*piece = &pt->ref.h;
	*off = pt->lo;
	*buf = pt->buf;
	*len = (size_t)(pt->hi - pt->lo);
	*seg = *gap = *phase = 0;
	if (pt->spaced) {
		*seg = STRIPE_CHUNK;
		*gap = (rs->code.k - 1) * STRIPE_CHUNK;
		*phase = (uint32_t)(pt->lo % STRIPE_CHUNK);
	}
	return 0;
}

int rpost_part_own(struct router *cl, struct rpost *rp, unsigned p, void **buf)
{
	struct rpost_part *pt = &rp->part[p];

	pt->own = block_take(cl, (size_t)(pt->hi - pt->lo), &pt->own_cap);
	if (!pt->own)
		return -ENOMEM;
	pt->spaced = false;
	*buf = pt->own;
	return 0;
}

/* A part's status that says its piece is gone (or may have missed a
 * write): as router_redund.c's piece_io() takes them. */
static bool lost(int st)
{
	return st == -EHOSTDOWN || st == -ETIMEDOUT || st == -ECONNABORTED || st == -ECONNRESET;
}

/* Part pt's bytes rebuilt from K other pieces into where they go (its
 * own buffer, or the caller's through a buffer taken for it).  Under
 * wmu. */
static int part_rebuild(struct router *cl, struct rset *rs, struct rpost *rp,
			struct rpost_part *pt)
{
	size_t len = (size_t)(pt->hi - pt->lo), cap = 0;
	unsigned char *to = pt->own ? pt->own : pt->spaced ? block_take(cl, len, &cap) : pt->buf;
	int err = to ? 0 : -ENOMEM;

	for (uint64_t s = pt->lo; s < pt->hi && !err; s += REDUND_SEG) {
		size_t n = (size_t)(pt->hi - s < REDUND_SEG ? pt->hi - s : REDUND_SEG);

		err = redund_piece_rebuild(cl, rs, pt->j, s, n, to + (s - pt->lo));
	}
	if (!err && pt->spaced)
		redund_piece_copy(rs, pt->j, pt->lo, pt->hi, to, rp->buf, rp->off, true);
	if (cap)
		block_give(cl, to, cap);
	return err;
}

/* Whether part pt's bytes are its piece's, served as they landed: not
 * when the part failed, was rebuilt, or its piece is out now (a write
 * missed it, or the record calls it stale) or another one (a repair moved
 * it). */
static bool part_good(struct router *cl, struct rset *rs, const struct rpost_part *pt)
{
	struct piece_ref now;

	return !pt->st && !pt->rebuilt && redund_piece_take(cl, rs, pt->j, &now) &&
	       now.gen == pt->ref.gen;
}

/* Every part that is not good rebuilt from K pieces in: true when any
 * was.  *err the first rebuild's failure. */
static bool read_mend(struct router *cl, struct rset *rs, struct rpost *rp, int *err)
{
	bool locked = false;

	for (unsigned x = 0; x < rp->nparts && !*err; x++) {
		struct rpost_part *pt = &rp->part[x];

		if (part_good(cl, rs, pt))
			continue;
		if (pt->st != -EOPNOTSUPP && pt->st)
			redund_piece_lost(cl, rs, pt->j, pt->ref.gen);
		if (!locked) {
			/* Rebuilds hold the writer mutex (router_redund.c). */
			pthread_mutex_lock(&rs->wmu);
			locked = true;
		}
		*err = part_rebuild(cl, rs, rp, pt);
		pt->rebuilt = true;
	}
	if (locked)
		pthread_mutex_unlock(&rs->wmu);
	return locked;
}

/* Every part rebuilt when lost, then gathered: the call's status. */
static int read_finish(struct router *cl, struct rpost *rp)
{
	struct rset *rs;
	bool mended = false, followed = false;
	int err = redund_rset_of(cl, &rp->r, &rs); /* freed meanwhile: -EINVAL */

	/* An error that no rebuild mends ends the call before any rebuild.
	 * (-EOPNOTSUPP: a spaced read sent again after a resume found the
	 * client on RDMA; the piece is not at fault, its bytes are rebuilt.) */
	for (unsigned x = 0; x < rp->nparts && !err; x++) {
		int st = rp->part[x].st;

		/* A named piece unlinked under the call: a drain moved it
		 * (docs/architecture.md, "Drain") when the record names
		 * another now, followed here; the part is then rebuilt from
		 * the pieces in, the new one among them. */
		if (st == -ENOENT && rs->rec && !followed)
			followed = redund_followed(cl, rs);
		if (st && !lost(st) && st != -EOPNOTSUPP && !(st == -ENOENT && followed))
			err = st;
	}
	/* Every part has landed: a piece whose server moved since the
	 * handle checked it is checked against the record now (as a
	 * synchronous read's, router_redund.c), and what a rebuild read is
	 * checked again, until nothing moved. */
	if (!err)
		(void)redund_validate(cl, rs);
	while (!err && read_mend(cl, rs, rp, &err)) {
		mended = true;
		if (err || !redund_validate(cl, rs))
			break;
	}
	if (mended)
		redund_count(cl, &cl->degraded_reads, 1);
	for (unsigned x = 0; x < rp->nparts && !err; x++)
		if (rp->part[x].own)
			redund_piece_copy(rs, rp->part[x].j, rp->part[x].lo, rp->part[x].hi,
					  rp->part[x].own, rp->buf, rp->off, true);
	return err;
}

/* A part's status that says the piece fenced this handle (its handle
 * revoked: another writer opened the name), not that the piece is lost. */
static bool fence_sign(int st)
{
	return st == -ENOENT || st == -ECANCELED || st == -EACCES;
}

/* A posted write's end: its bytes are on K pieces, or -EHOSTDOWN; the
 * pieces that missed it are in the record before it is acknowledged (as
 * a synchronous write's). */
static int write_finish(struct router *cl, struct rpost *rp)
{
	struct rset *rs;
	int err = rp->err, rc;

	if (err || rp->nparts == 0)
		return err;
	err = redund_rset_of(cl, &rp->r, &rs);
	if (err)
		return err;
	pthread_mutex_lock(&rs->wmu);
	for (unsigned x = 0; x < rp->nparts && !err; x++)
		if (fence_sign(rp->part[x].st))
			err = rp->part[x].st;
	if (err && (err = redund_write_err(rs, err)) == -EACCES) {
		pthread_mutex_unlock(&rs->wmu);
		return err; /* fenced: nothing of the record is ours to say */
	}
	err = redund_pieces_in(cl, rs) < rs->code.k ? -EHOSTDOWN : 0;
	rc = redund_record_out(cl, rs);
	pthread_mutex_unlock(&rs->wmu);
	return err ? err : rc;
}

int rpost_end(struct router *cl, struct rpost *rp, unsigned p, int status,
	      struct rmem_completion *done)
{
	if (p < rp->nparts) {
		rp->part[p].st = status;
		/* A piece that may have missed a write is out before anything
		 * else can read it: at once, under the writer mutex when the
		 * part never went out (the poster holds it), else as soon as
		 * its completion comes. */
		if (rp->write && status) {
			struct rset *rs;

			/* (While the poster holds wmu no swap can come between:
			 * a part refused before it took its piece is out too.)
			 * But a piece that refused a named region's writer as
			 * fenced is in: the new writer's (write_finish). */
			if (!redund_rset_of(cl, &rp->r, &rs) &&
			    !(fence_sign(status) && rs->rec && rs->release)) {
				if (__atomic_load_n(&rp->wlocked, __ATOMIC_ACQUIRE))
					redund_piece_out(cl, rs, rp->part[p].j);
				else
					redund_piece_lost(cl, rs, rp->part[p].j, rp->part[p].ref.gen);
			}
		}
	} else if (rp->wlocked) {
		/* Every part went out: the next write may start. */
		struct rset *rs = rp->wlocked;

		__atomic_store_n(&rp->wlocked, NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&rs->wmu);
	}
	/* The part's status is seen by whoever ends the call. */
	if (__atomic_sub_fetch(&rp->left, 1, __ATOMIC_ACQ_REL) != 0)
		return 0;
	*done = (struct rmem_completion){
		.cookie = rp->cookie,
		.status = rp->write ? write_finish(cl, rp) : rp->err ? rp->err : read_finish(cl, rp) };
	alive_sub(cl);
	block_give(cl, rp->block, rp->block_cap);
	for (unsigned x = 0; x < rp->nparts; x++)
		block_give(cl, rp->part[x].own, rp->part[x].own_cap);
	free(rp);
	return 1;
}

void rpost_queue(struct router *cl, const struct rmem_completion *done)
{
	pthread_mutex_lock(&cl->mu);
	/* (alive_add kept room: red_alive + red_ndone <= red_cap, and this
	 * call was one of red_alive.) */
	if (cl->red_ndone < cl->red_cap) {
		cl->red_done[cl->red_ndone] = *done;
		__atomic_store_n(&cl->red_ndone, cl->red_ndone + 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&cl->mu);
}

int rpost_take(struct router *cl, struct rmem_completion *out, int max)
{
	size_t n;

	/* (Looked at without the lock first: every rmem_poll comes here,
	 * and on a client without redundant calls the queue stays empty.) */
	if (!__atomic_load_n(&cl->red_ndone, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&cl->mu);
	n = cl->red_ndone < (size_t)max ? cl->red_ndone : (size_t)max;
	if (n == 0) {
		pthread_mutex_unlock(&cl->mu);
		return 0;
	}
	memcpy(out, cl->red_done, n * sizeof(*out));
	memmove(cl->red_done, cl->red_done + n, (cl->red_ndone - n) * sizeof(*out));
	__atomic_store_n(&cl->red_ndone, cl->red_ndone - n, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cl->mu);
	return (int)n;
}

void rpost_fini(struct router *cl)
{
	/* Each call still in flight has one entry per part not ended; the
	 * poster's share ended when rmem_post_read returned. */
	for (size_t i = 0; i < cl->npend; i++) {
		struct rpost *rp = cl->pend[i].rp;

		if (!cl->pend[i].used || !rp)
			continue;
		cl->pend[i].used = false;
		if (--rp->left == 0) {
			free(rp->block);
			for (unsigned x = 0; x < rp->nparts; x++)
				free(rp->part[x].own);
			free(rp);
		}
	}
	for (size_t i = 0; i < cl->red_nkept; i++)
		free(cl->red_kept[i].p);
	cl->red_nkept = cl->red_kept_bytes = 0;
	free(cl->red_done);
	cl->red_done = NULL;
	cl->red_ndone = cl->red_cap = cl->red_alive = 0;
}
