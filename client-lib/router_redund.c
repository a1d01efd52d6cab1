/*
 * router_redund.c - redundant regions on a cluster client
 * (docs/architecture.md, "Redundancy"): a region of K data and R parity
 * pieces, each a plain region on its own server, coded by stripe.c.
 *
 * Reads go to the data pieces a read touches, one call per piece, all of
 * a step's calls at once (pieces_io: one round trip, not one per piece);
 * a piece that is out (its server lost: members_err's -EHOSTDOWN, or a
 * timeout) is marked so for good and rebuilt, inside the same call, from
 * any K pieces still in (gathered at once too).  Writes take the region's
 * writer mutex, and for each data piece they touch: the old bytes (read or
 * rebuilt) and the old parity, together; delta = old XOR new added into
 * every parity piece still in; the new bytes and the new parity written,
 * together.  The delta is known before any piece is touched, so every
 * piece that took the write holds the new bytes and every piece that
 * missed it is marked out: what is left decodes to the new bytes.
 *
 * Making, opening and freeing them is router_redund_make.c's.
 *
 * Calls downward only: router_members.c, the single-server calls, stripe.c,
 * and router_watch.c's names watch (started, and its buckets loaded).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router.h"
#include "router_int.h"
#include "router_redund.h"
#include "clock.h"
#include "single.h"
#include "stripe.h"

int redund_is(const struct rmem_region *r)
{
	return r && r->reserved[0] >> 32 == REDUND_REGION_TAG;
}

int redund_rset_of(struct router *cl, const struct rmem_region *r, struct rset **out)
{
	uint64_t idx;
	int err = -EINVAL;

	if (!redund_is(r))
		return -EINVAL;
	idx = r->reserved[0] & 0xffffffffu;
	pthread_mutex_lock(&cl->mu);
	if (idx < cl->nrsets && cl->rsets[idx] && cl->rsets[idx]->id == r->reserved[1]) {
		*out = cl->rsets[idx];
		err = 0;
	}
	pthread_mutex_unlock(&cl->mu);
	return err;
}

/* n buffers of REDUND_SEG bytes in one block: the router's kept one when
 * free and large enough, else a new one.  NULL for want of memory. */
static unsigned char *scratch_take(struct router *cl, unsigned n)
{
	size_t len = (size_t)n * REDUND_SEG;
	unsigned char *b = NULL;

	pthread_mutex_lock(&cl->mu);
	if (cl->red_scratch && cl->red_scratch_len >= len) {
		b = cl->red_scratch;
		cl->red_scratch = NULL;
	}
	pthread_mutex_unlock(&cl->mu);
	return b ? b : malloc(len);
}

/* Gives b (n buffers) back: kept when the router keeps none or a smaller
 * one; freed otherwise. */
static void scratch_give(struct router *cl, unsigned char *b, unsigned n)
{
	size_t len = (size_t)n * REDUND_SEG;

	if (!b)
		return;
	pthread_mutex_lock(&cl->mu);
	if (!cl->red_scratch || cl->red_scratch_len < len) {
		unsigned char *old = cl->red_scratch;

		cl->red_scratch = b;
		cl->red_scratch_len = len;
		b = old;
	}
	pthread_mutex_unlock(&cl->mu);
	free(b);
}

/* ---- one piece ---------------------------------------------------------------- */

bool redund_piece_in(struct router *cl, struct rset *rs, unsigned i)
{
	bool in;

	pthread_mutex_lock(&cl->mu);
	in = rs->state[i] == PIECE_IN;
	pthread_mutex_unlock(&cl->mu);
	return in;
}

bool redund_piece_take(struct router *cl, struct rset *rs, unsigned i, struct piece_ref *p)
{
	bool in;

	pthread_mutex_lock(&cl->mu);
	in = rs->state[i] == PIECE_IN;
	p->h = rs->piece[i];
	p->slot = rs->slot[i];
	p->gen = rs->gen[i];
	pthread_mutex_unlock(&cl->mu);
	return in;
}

void redund_piece_lost(struct router *cl, struct rset *rs, unsigned i, uint32_t gen)
{
	pthread_mutex_lock(&cl->mu);
	if (rs->gen[i] == gen)
		redund_piece_out_locked(rs, i);
	pthread_mutex_unlock(&cl->mu);
}

bool redund_dead(struct router *cl, struct rset *rs)
{
	bool dead;

	pthread_mutex_lock(&cl->mu);
	dead = rs->dead;
	pthread_mutex_unlock(&cl->mu);
	return dead;
}

/* One call on piece i: 0, -EHOSTDOWN when the piece is (now) out, or
 * another error of the call.  A lost server, a timeout and an outcome
 * unknown all put the piece out: it may have missed this write, so it is
 * never read again (until repair rebuilds it).  The piece is the call's
 * own copy: a repair or a refresh that swaps it meanwhile changes nothing
 * under the call, and the handle it replaced is given back only once the
 * call has left (members_retire), so the call never meets it freed. */
static int piece_io(struct router *cl, struct rset *rs, unsigned i, bool write, uint64_t off,
		    void *buf, size_t len)
{
	struct piece_ref p;
	rmem_client *c;
	int err;

	if (!redund_piece_take(cl, rs, i, &p))
		return -EHOSTDOWN;
	err = members_client(cl, p.slot, &c);
	if (!err)
		err = members_err(cl, p.slot,
				  write ? single_write(c, &p.h, off, buf, len) :
					  single_read(c, &p.h, off, buf, len));
	if (err == -EHOSTDOWN || err == -ETIMEDOUT || err == -ECONNABORTED) {
		redund_piece_lost(cl, rs, i, p.gen);
		err = -EHOSTDOWN;
	}
	return err;
}

/* One call of a step, on its own piece. */
struct piece_call {
	unsigned i;
	bool write;
	uint64_t off;
	void *buf;
	size_t len;
	int err; /* as piece_io()'s */
};

void redund_count(struct router *cl, uint64_t *figure, uint64_t n)
{
	pthread_mutex_lock(&cl->mu);
	*figure += n;
	pthread_mutex_unlock(&cl->mu);
}

void redund_piece_out_locked(struct rset *rs, unsigned i)
{
	if (rs->state[i] == PIECE_IN)
		rs->out_ms[i] = clock_mono_ms();
	rs->state[i] = PIECE_OUT;
}

void redund_piece_out(struct router *cl, struct rset *rs, unsigned i)
{
	pthread_mutex_lock(&cl->mu);
	redund_piece_out_locked(rs, i);
	pthread_mutex_unlock(&cl->mu);
}

/*
 * The n calls of one step (each on a different piece) at once: every one
 * started on its piece's client, then every one waited for, so the step
 * costs one round trip, not n.  Their clients are taken in slot order
 * (single_start() holds each until its single_finish()), so that two
 * steps on other threads never wait on each other in a circle; nothing
 * else is locked meanwhile but the router's mu, briefly.  Each call's err
 * is then as piece_io()'s: a call that failed with a connection broken
 * (or any error but a loss) is made once more by piece_io() itself, which
 * resumes the client and sends it again as a lone call would.
 */
static void pieces_io(struct router *cl, struct rset *rs, struct piece_call *pc, unsigned n)
{
	struct single_io io[STRIPE_N_MAX];
	struct piece_ref ref[STRIPE_N_MAX];
	unsigned order[STRIPE_N_MAX];
	bool started[STRIPE_N_MAX] = { false }, in[STRIPE_N_MAX];

	/* Each piece as it is now, copied: the step's calls hold these. */
	for (unsigned x = 0; x < n; x++)
		in[x] = redund_piece_take(cl, rs, pc[x].i, &ref[x]);
	for (unsigned x = 0; x < n; x++) {
		unsigned y = x;

		/* Insertion sort by slot: n <= STRIPE_N_MAX. */
		for (; y > 0 && ref[order[y - 1]].slot > ref[x].slot; y--)
			order[y] = order[y - 1];
		order[y] = x;
	}
	for (unsigned y = 0; y < n; y++) {
		struct piece_call *p = &pc[order[y]];
		rmem_client *c;

		if (!in[order[y]]) {
			p->err = -EHOSTDOWN;
			continue;
		}
		p->err = members_client(cl, ref[order[y]].slot, &c);
		if (p->err)
			continue; /* piece_io() below tells what that means */
		io[order[y]] = (struct single_io){ .c = c, .r = &ref[order[y]].h, .off = p->off,
						   .buf = p->buf, .len = p->len, .write = p->write };
		single_start(&io[order[y]]);
		started[order[y]] = true;
	}
	for (unsigned x = 0; x < n; x++)
		if (started[x])
			pc[x].err = single_finish(&io[x]);
	for (unsigned x = 0; x < n; x++) {
		int err = pc[x].err;

		if (!err || !in[x])
			continue;
		if (err == -ETIMEDOUT || err == -ECONNABORTED) {
			/* Already waited out: not a second time. */
			redund_piece_lost(cl, rs, pc[x].i, ref[x].gen);
			pc[x].err = -EHOSTDOWN;
			continue;
		}
		pc[x].err = piece_io(cl, rs, pc[x].i, pc[x].write, pc[x].off, pc[x].buf, pc[x].len);
	}
}

/* Piece want's bytes [off, off+len) rebuilt from any K pieces in, into
 * out (len <= REDUND_SEG).  -EHOSTDOWN with fewer than K in. */
int redund_piece_rebuild(struct router *cl, struct rset *rs, unsigned want, uint64_t off,
			 size_t len, unsigned char *out)
{
	unsigned char *in[STRIPE_K_MAX] = { NULL };
	unsigned have[STRIPE_K_MAX], k = rs->code.k;
	int err = 0;

	for (unsigned i = 0; i < k && !err; i++)
		if (!(in[i] = malloc(len ? len : 1)))
			err = -ENOMEM;
	while (!err) {
		struct piece_call pc[STRIPE_K_MAX];
		unsigned nh = 0;
		bool again = false;

		/* Data pieces first: with only data lost, parity rows are
		 * few and the others are read as a healthy read would. */
		for (unsigned i = 0; i < rs->n && nh < k; i++)
			if (i != want && redund_piece_in(cl, rs, i))
				have[nh++] = i;
		if (nh < k) {
			err = -EHOSTDOWN;
			break;
		}
		/* The K survivors gathered at once. */
		for (unsigned i = 0; i < k; i++)
			pc[i] = (struct piece_call){ .i = have[i], .off = off, .buf = in[i], .len = len };
		pieces_io(cl, rs, pc, k);
		for (unsigned i = 0; i < k && !err; i++) {
			if (pc[i].err == -EHOSTDOWN)
				again = true; /* marked out: choose again */
			else
				err = pc[i].err;
		}
		if (!again && !err) {
			err = stripe_rebuild(&rs->code, len, have, in, &want, 1, &out);
			break;
		}
	}
	for (unsigned i = 0; i < k; i++)
		free(in[i]);
	return err;
}

/* Piece j's bytes [off, off+len), read or rebuilt. */
static int piece_get(struct router *cl, struct rset *rs, unsigned j, uint64_t off, size_t len,
		     unsigned char *out, bool *locked)
{
	int err = piece_io(cl, rs, j, false, off, out, len);

	if (err != -EHOSTDOWN)
		return err;
	/* Rebuilds hold the writer mutex (a reader's, taken here once). */
	if (!*locked) {
		pthread_mutex_lock(&rs->wmu);
		*locked = true;
	}
	return redund_piece_rebuild(cl, rs, j, off, len, out);
}

/* ---- mapping: the region's bytes of one data piece ------------------------------------ */

/* The range [*plo, *phi) of piece j that holds the region's bytes of
 * [a, b); false when piece j holds none of them.  A piece's share of a
 * region range is one range of the piece: whole chunks between a partial
 * first and a partial last. */
bool redund_piece_range(const struct rset *rs, unsigned j, uint64_t a, uint64_t b,
			uint64_t *plo, uint64_t *phi)
{
	const uint64_t C = STRIPE_CHUNK, W = (uint64_t)rs->code.k * C;
	uint64_t s, cs, first, last;

	if (a >= b)
		return false;
	s = a / W;
	cs = s * W + j * C;
	first = a < cs + C ? (a > cs ? a : cs) : (s + 1) * W + j * C;
	s = (b - 1) / W;
	cs = s * W + j * C;
	if (b - 1 >= cs)
		last = b - 1 < cs + C - 1 ? b - 1 : cs + C - 1;
	else if (s == 0)
		return false;
	else
		last = (s - 1) * W + j * C + C - 1;
	if (first >= b || last < a || last < first)
		return false;
	*plo = first / W * C + first % C;
	*phi = last / W * C + last % C + 1;
	return true;
}

/* Copies between piece j's bytes [p0, p1) (in tmp) and the region's bytes
 * at buf (whose byte 0 is region offset a): to buf when out, else from. */
void redund_piece_copy(const struct rset *rs, unsigned j, uint64_t p0, uint64_t p1,
		       unsigned char *tmp, unsigned char *buf, uint64_t a, bool out)
{
	const uint64_t C = STRIPE_CHUNK, W = (uint64_t)rs->code.k * C;

	for (uint64_t p = p0; p < p1;) {
		uint64_t end = (p / C + 1) * C < p1 ? (p / C + 1) * C : p1;
		uint64_t x = p / C * W + j * C + p % C;

		if (out)
			memcpy(buf + (x - a), tmp + (p - p0), end - p);
		else
			memcpy(tmp + (p - p0), buf + (x - a), end - p);
		p = end;
	}
}

/* ---- the calls -------------------------------------------------------------------- */

int redund_check_range(const struct rset *rs, uint64_t off, const void *buf, size_t len)
{
	if (!buf && len > 0)
		return -EINVAL;
	if (len > rs->length || off > rs->length - len)
		return -ERANGE;
	return 0;
}

void redund_watched(struct router *cl, struct rset *rs, int64_t rev)
{
	int covered = names_watch_ensure(cl, rev);

	pthread_mutex_lock(&cl->mu);
	rs->watched = covered >= 0;
	rs->nbucket = names_bucket(rs->name);
	rs->nseen = covered > 0 ? rev : -1;
	pthread_mutex_unlock(&cl->mu);
}

bool redund_validate(struct router *cl, struct rset *rs)
{
	bool moved = false, named = false;
	int64_t nrev = 0;
	int err;

	if (!rs->rec)
		return false; /* anonymous: this client's writes alone, which mark out */
	pthread_mutex_lock(&cl->mu);
	for (unsigned i = 0; i < rs->n && !moved; i++)
		moved = rs->state[i] == PIECE_IN &&
			members_epoch_locked(cl, rs->slot[i]) != rs->seen[i];
	if (rs->watched) {
		nrev = names_rev(cl, rs->nbucket);
		named = nrev > rs->nseen;
	}
	pthread_mutex_unlock(&cl->mu);
	if (!moved && !named)
		return false;
	pthread_mutex_lock(&rs->wmu);
	/* A look that could not read the record is tried again a second
	 * later, not at every read: etcd away must not stall the reads. */
	if (redund_dead(cl, rs) ||
	    (!moved && rs->nlook_failed && clock_mono_ms() - rs->refreshed_ms < 1000)) {
		pthread_mutex_unlock(&rs->wmu);
		return false;
	}
	/* Another thread looked since (at nrev or later): its look may have
	 * put out a piece this read took, so the read is made again, but
	 * the record need not be read twice. */
	pthread_mutex_lock(&cl->mu);
	named = named && nrev > rs->nseen;
	pthread_mutex_unlock(&cl->mu);
	if (!moved && !named) {
		pthread_mutex_unlock(&rs->wmu);
		return true;
	}
	err = redund_recheck(cl, rs);
	if (named) {
		/* nrev was taken before the record was read: a change since
		 * raises the bucket past it again. */
		rs->nlook_failed = err != 0;
		pthread_mutex_lock(&cl->mu);
		if (!err && nrev > rs->nseen)
			rs->nseen = nrev;
		pthread_mutex_unlock(&cl->mu);
	}
	pthread_mutex_unlock(&rs->wmu);
	return moved || !err;
}

bool redund_followed(struct router *cl, struct rset *rs)
{
	uint32_t gen[STRIPE_N_MAX];
	bool moved = false;
	int err = 0;

	pthread_mutex_lock(&rs->wmu);
	if (!redund_dead(cl, rs)) {
		pthread_mutex_lock(&cl->mu);
		memcpy(gen, rs->gen, sizeof gen);
		pthread_mutex_unlock(&cl->mu);
		err = redund_recheck(cl, rs);
		pthread_mutex_lock(&cl->mu);
		for (unsigned i = 0; i < rs->n && !moved; i++)
			moved = rs->gen[i] != gen[i];
		pthread_mutex_unlock(&cl->mu);
	}
	pthread_mutex_unlock(&rs->wmu);
	if (moved || !err || err == -ENOENT || err == -ESTALE || err == -EPROTO)
		return moved;
	/* The record could not be read: not a word that nothing moved. */
	nanosleep(&(struct timespec){ .tv_nsec = REDUND_MOVE_PAUSE_MS * 1000000L }, NULL);
	return true;
}

/* One read of [off, off+len) into buf, as the pieces in are now. */
static int read_once(struct router *cl, struct rset *rs, uint64_t off, void *buf, size_t len)
{
	unsigned char *tmp[STRIPE_K_MAX] = { NULL }, *block = NULL;
	uint64_t lo[STRIPE_K_MAX], hi[STRIPE_K_MAX];
	bool has[STRIPE_K_MAX] = { false };
	bool locked = false;
	unsigned k = rs->code.k, np = 0, last = 0;
	int err = 0;

	for (unsigned j = 0; !err && j < k; j++)
		if ((has[j] = redund_piece_range(rs, j, off, off + len, &lo[j], &hi[j]))) {
			np++;
			last = j;
		}
	/* Within one chunk (a page read): straight into buf. */
	if (!err && np == 1 && hi[last] - lo[last] == len) {
		err = piece_get(cl, rs, last, lo[last], len, buf, &locked);
		goto out;
	}
	if (!err && !(block = scratch_take(cl, k)))
		err = -ENOMEM;
	for (unsigned j = 0; !err && j < k; j++)
		tmp[j] = block + (size_t)j * REDUND_SEG;
	/* Segment by segment, each piece's segment read at once; a piece
	 * out is then rebuilt (its survivors gathered at once too). */
	for (uint64_t s = 0; !err; s += REDUND_SEG) {
		struct piece_call pc[STRIPE_K_MAX];
		unsigned n = 0;

		for (unsigned j = 0; j < k; j++) {
			uint64_t p = lo[j] + s;

			if (!has[j] || p >= hi[j])
				continue;
			pc[n++] = (struct piece_call){
				.i = j, .off = p, .buf = tmp[j],
				.len = (size_t)(hi[j] - p < REDUND_SEG ? hi[j] - p : REDUND_SEG) };
		}
		if (n == 0)
			break;
		pieces_io(cl, rs, pc, n);
		for (unsigned x = 0; x < n && !err; x++) {
			err = pc[x].err;
			if (err == -EHOSTDOWN) {
				if (!locked) {
					/* Rebuilds hold the writer mutex. */
					pthread_mutex_lock(&rs->wmu);
					locked = true;
				}
				err = redund_piece_rebuild(cl, rs, pc[x].i, pc[x].off, pc[x].len, pc[x].buf);
			}
			if (!err)
				redund_piece_copy(rs, pc[x].i, pc[x].off, pc[x].off + pc[x].len, pc[x].buf, buf,
					   off, true);
		}
	}
out:
	if (locked) {
		pthread_mutex_unlock(&rs->wmu);
		redund_count(cl, &cl->degraded_reads, 1);
	}
	scratch_give(cl, block, k);
	return err;
}

int redund_read(struct router *cl, const struct rmem_region *r, uint64_t off, void *buf,
		size_t len)
{
	struct rset *rs = NULL;
	int err = redund_rset_of(cl, r, &rs);

	if (err)
		return err;
	err = redund_check_range(rs, off, buf, len);
	if (err)
		return redund_dead(cl, rs) ? -EINVAL : err;
	/* Degraded: a repair elsewhere may have moved the lost pieces, or it
	 * is time this client repaired a region it may write. */
	if (redund_pieces_in(cl, rs) < rs->n || redund_moving(cl, rs)) {
		pthread_mutex_lock(&rs->wmu);
		if (!redund_dead(cl, rs)) {
			redund_refresh(cl, rs);
			redund_repair_due(cl, rs);
		}
		pthread_mutex_unlock(&rs->wmu);
	}
	/* Checked after the read: a piece's server that came back through
	 * a resume did so before its reply (the epoch moved first), so bytes
	 * it served are never trusted without the record's word. */
	for (unsigned moves = 0;;) {
		err = read_once(cl, rs, off, buf, len);
		if (!err && redund_validate(cl, rs))
			continue;
		/* A piece unlinked under this handle: a drain moved it (the
		 * record names the new one: followed), or the name was
		 * unlinked with revoke (the read fails -ENOENT).  A few
		 * looks: each move is one swap in the record. */
		if (err == -ENOENT && rs->rec && moves++ < REDUND_MOVE_LOOKS && redund_followed(cl, rs))
			continue;
		break;
	}
	/* Freed by another thread meanwhile (its pieces with it): the
	 * handle is stale, as for a call made after the free. */
	return err && redund_dead(cl, rs) ? -EINVAL : err;
}

/* Pieces in now. */
unsigned redund_pieces_in(struct router *cl, struct rset *rs)
{
	unsigned n = 0;

	for (unsigned i = 0; i < rs->n; i++)
		n += redund_piece_in(cl, rs, i);
	return n;
}

/* One segment of one data piece: [p0, p1) of piece j from buf. */
static int write_seg(struct router *cl, struct rset *rs, unsigned j, uint64_t p0, uint64_t p1,
		     const void *buf, uint64_t a, unsigned char **scratch)
{
	unsigned char *delta = scratch[0], *new = scratch[1], *par[STRIPE_R_MAX];
	unsigned k = rs->code.k, r = rs->code.r;
	size_t len = (size_t)(p1 - p0);
	struct piece_call pc[1 + STRIPE_R_MAX];
	bool locked = true; /* the caller holds wmu */
	int err;

	/* Old data and old parity at once; a data piece out is rebuilt. */
	pc[0] = (struct piece_call){ .i = j, .off = p0, .buf = delta, .len = len };
	for (unsigned p = 0; p < r; p++) {
		par[p] = scratch[2 + p];
		pc[1 + p] = (struct piece_call){ .i = k + p, .off = p0, .buf = par[p], .len = len };
	}
	pieces_io(cl, rs, pc, 1 + r);
	err = pc[0].err == -EHOSTDOWN ? piece_get(cl, rs, j, p0, len, delta, &locked) : pc[0].err;
	for (unsigned p = 0; p < r && !err; p++)
		if (pc[1 + p].err != -EHOSTDOWN)
			err = pc[1 + p].err;
	if (err)
		return err;
	redund_piece_copy(rs, j, p0, p1, new, (unsigned char *)buf, a, false);
	for (size_t i = 0; i < len; i++)
		delta[i] ^= new[i];
	/* Every parity piece in: its bytes, plus the delta's share (a piece
	 * out has its buffer updated for nothing: it is not written). */
	stripe_delta(&rs->code, len, j, delta, par);
	/* Each parity chunk the segment's chunks touch, once per chunk. */
	redund_count(cl, &cl->parity_updates,
		     (uint64_t)r * ((p1 - 1) / STRIPE_CHUNK - p0 / STRIPE_CHUNK + 1));
	/* New data and new parity at once. */
	pc[0] = (struct piece_call){ .i = j, .write = true, .off = p0, .buf = new, .len = len };
	for (unsigned p = 0; p < r; p++)
		pc[1 + p] = (struct piece_call){ .i = k + p, .write = true, .off = p0, .buf = par[p],
						 .len = len };
	pieces_io(cl, rs, pc, 1 + r);
	for (unsigned x = 0; x < 1 + r && !err; x++)
		if (pc[x].err != -EHOSTDOWN)
			err = pc[x].err;
	if (err)
		return err;
	/* Fewer than K pieces took it: no K pieces rebuild these bytes. */
	return redund_pieces_in(cl, rs) < k ? -EHOSTDOWN : 0;
}

int redund_may_write(struct router *cl, struct rset *rs)
{
	if (!rs->rec || !rs->release)
		return 0; /* anonymous: this client's alone */
	if (!rs->fenced && !rs->rec->held(cl, rs->release_arg))
		rs->fenced = true;
	return rs->fenced ? -EACCES : 0;
}

int redund_write_err(struct rset *rs, int err)
{
	if (rs->rec && rs->release && (err == -ENOENT || err == -ECANCELED || err == -EACCES))
		rs->fenced = true;
	return rs->fenced ? -EACCES : err;
}

int redund_resync(struct router *cl, struct rset *rs)
{
	unsigned k = rs->code.k, r = rs->code.r;
	unsigned char *block, *bufs[STRIPE_N_MAX];
	int err = 0;

	for (unsigned j = 0; j < k; j++)
		if (!redund_piece_in(cl, rs, j))
			return 0; /* only the parity rebuilds it: left as it is */
	if (!(block = scratch_take(cl, rs->n)))
		return -ENOMEM;
	for (unsigned i = 0; i < rs->n; i++)
		bufs[i] = block + (size_t)i * REDUND_SEG;
	for (uint64_t off = 0; off < rs->piece_len && !err; off += REDUND_SEG) {
		size_t len = (size_t)(rs->piece_len - off < REDUND_SEG ? rs->piece_len - off :
									 REDUND_SEG);
		struct piece_call pc[STRIPE_N_MAX];

		for (unsigned j = 0; j < k; j++)
			pc[j] = (struct piece_call){ .i = j, .off = off, .buf = bufs[j], .len = len };
		pieces_io(cl, rs, pc, k);
		for (unsigned j = 0; j < k && !err; j++)
			err = pc[j].err;
		if (err == -EHOSTDOWN) {
			err = 0; /* a data piece went meanwhile: stop here */
			break;
		}
		if (err)
			break;
		stripe_encode(&rs->code, len, bufs, bufs + k);
		for (unsigned p = 0; p < r; p++)
			pc[p] = (struct piece_call){ .i = k + p, .write = true, .off = off,
						     .buf = bufs[k + p], .len = len };
		/* A parity piece that misses it is out (pieces_io), and the
		 * record is told before the handle is used. */
		pieces_io(cl, rs, pc, r);
		for (unsigned p = 0; p < r && !err; p++)
			err = pc[p].err == -EHOSTDOWN ? 0 : pc[p].err;
	}
	if (!err)
		err = redund_record_out(cl, rs);
	scratch_give(cl, block, rs->n);
	return err;
}

/* A piece out that the record still calls healthy may have missed this
 * write: the record must say so before a server that comes back with its
 * state can serve the piece to a fresh opener.  Under wmu. */
int redund_record_out(struct router *cl, struct rset *rs)
{
	uint32_t mask = 0;
	int err;

	if (!rs->rec)
		return 0;
	for (unsigned i = 0; i < rs->n; i++)
		if (!redund_piece_in(cl, rs, i) && !(rs->recorded_out & (1u << i)))
			mask |= 1u << i;
	if (!mask)
		return 0;
	/* A writer whose right is lost tells the record nothing: the pieces
	 * are the new writer's to judge. */
	err = redund_may_write(cl, rs);
	if (!err)
		err = rs->rec->mark(cl, rs->name, rs->release_arg, mask);
	if (!err)
		rs->recorded_out |= mask;
	return err;
}

/* Whole stripes [s0, s1): parity encoded from the new data alone, every
 * piece written, nothing read (a 1 MiB write at 4+2 moves 1.5 MiB, where
 * the delta path reads 2.25 MiB and writes 1.5). */
static int write_full(struct router *cl, struct rset *rs, uint64_t s0, uint64_t s1,
		      const void *buf, uint64_t a, unsigned char **bufs)
{
	const uint64_t C = STRIPE_CHUNK, per = REDUND_SEG / STRIPE_CHUNK;
	struct piece_call pc[STRIPE_N_MAX];
	unsigned k = rs->code.k;
	int err = 0;

	for (uint64_t s = s0; s < s1 && !err; s += per) {
		uint64_t e = s1 - s < per ? s1 : s + per;
		size_t len = (size_t)((e - s) * C);

		for (unsigned j = 0; j < k; j++)
			redund_piece_copy(rs, j, s * C, e * C, bufs[j], (unsigned char *)buf, a, false);
		stripe_encode(&rs->code, len, bufs, bufs + k);
		redund_count(cl, &cl->parity_updates, (uint64_t)rs->code.r * (e - s));
		/* Every piece written at once. */
		for (unsigned i = 0; i < rs->n; i++)
			pc[i] = (struct piece_call){ .i = i, .write = true, .off = s * C, .buf = bufs[i],
						     .len = len };
		pieces_io(cl, rs, pc, rs->n);
		for (unsigned i = 0; i < rs->n && !err; i++)
			if (pc[i].err != -EHOSTDOWN)
				err = pc[i].err;
		if (err)
			return err;
		err = redund_pieces_in(cl, rs) < k ? -EHOSTDOWN : 0;
	}
	return err;
}

/* [a, b) of the region, within partial stripes: by delta, piece by piece. */
static int write_delta(struct router *cl, struct rset *rs, uint64_t a, uint64_t b,
		       const void *buf, uint64_t off, unsigned char **scratch)
{
	int err = 0;

	for (unsigned j = 0; !err && j < rs->code.k; j++) {
		uint64_t plo, phi;

		if (!redund_piece_range(rs, j, a, b, &plo, &phi))
			continue;
		for (uint64_t p = plo; p < phi && !err; p += REDUND_SEG) {
			uint64_t e = phi - p < REDUND_SEG ? phi : p + REDUND_SEG;

			err = write_seg(cl, rs, j, p, e, (const unsigned char *)buf + (a - off), a,
					scratch);
		}
	}
	return err;
}

int redund_write(struct router *cl, const struct rmem_region *r, uint64_t off,
		 const void *buf, size_t len)
{
	unsigned char *scratch[STRIPE_N_MAX + 2] = { NULL }, *block = NULL;
	uint64_t W, fs, fe, end = off + len;
	unsigned nbufs = 0;
	struct rset *rs;
	int err = redund_rset_of(cl, r, &rs);

	if (!err)
		err = redund_check_range(rs, off, buf, len);
	if (!err && r->flags && !(r->flags & RMEM_WRITE))
		err = -EACCES;
	if (err)
		return err;
	nbufs = rs->n > 2 + rs->code.r ? rs->n : 2 + rs->code.r;
	if (!(block = scratch_take(cl, nbufs)))
		err = -ENOMEM;
	for (unsigned i = 0; i < nbufs && !err; i++)
		scratch[i] = block + (size_t)i * REDUND_SEG;
	/* Whole stripes [fs, fe) are encoded afresh; the ends, by delta. */
	W = (uint64_t)rs->code.k * STRIPE_CHUNK;
	fs = (off + W - 1) / W * W;
	fe = end / W * W;
	pthread_mutex_lock(&rs->wmu);
	/* Freed while this call waited for the mutex: nothing is written. */
	if (!err && redund_dead(cl, rs))
		err = -EINVAL;
	/* Never after the right is lost: another writer may hold it now. */
	if (!err)
		err = redund_may_write(cl, rs);
	if (!err && (redund_pieces_in(cl, rs) < rs->n || redund_moving(cl, rs)))
		redund_repair_due(cl, rs);
	if (!err && fe > fs) {
		err = write_delta(cl, rs, off, fs, buf, off, scratch);
		if (!err)
			err = write_full(cl, rs, fs / W, fe / W, (const unsigned char *)buf + (fs - off),
					 fs, scratch);
		if (!err)
			err = write_delta(cl, rs, fe, end, buf, off, scratch);
	} else if (!err) {
		err = write_delta(cl, rs, off, end, buf, off, scratch);
	}
	/* The bytes are on K pieces; an error here means the record could
	 * not be told which missed them (tried again at the next write). */
	if (!err || err == -EHOSTDOWN) {
		int rc = redund_record_out(cl, rs);

		err = err ? err : rc;
	}
	err = redund_write_err(rs, err);
	pthread_mutex_unlock(&rs->wmu);
	scratch_give(cl, block, nbufs);
	return err;
}
