/*
 * router_redund.c - redundant regions on a cluster client
 * (docs/architecture.md, "Redundancy"): a region of K data and R parity
 * pieces, each a plain region on its own server, coded by stripe.c.
 *
 * Reads go to the data pieces a read touches, one call per piece; a piece
 * that is out (its server lost: members_err's -EHOSTDOWN, or a timeout) is
 * marked so for good and rebuilt, inside the same call, from any K pieces
 * still in.  Writes take the region's writer mutex, and for each data piece
 * they touch: the old bytes (read or rebuilt), delta = old XOR new, the new
 * bytes written, the delta added into every parity piece still in (read,
 * update, write).  The delta is known before any piece is touched, so every
 * piece that took the write holds the new bytes and every piece that missed
 * it is marked out: what is left decodes to the new bytes.
 *
 * A named one's pieces are named regions "<name>~<gen>.<i>" on their
 * servers; its layout is the name's record in etcd (cluster_layout.h),
 * which router_names.c reads and writes: this file makes, opens and
 * unlinks the pieces it names.
 *
 * Calls downward only: router_members.c, the single-server calls, stripe.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "router.h"
#include "router_int.h"
#include "cluster_layout.h"
#include "single.h"
#include "stripe.h"

/* Piece bytes handled at once per piece: bounds the scratch memory of a
 * large read or write (K+R+2 buffers of this) whatever its length. */
#define REDUND_SEG (256u * 1024)

enum piece_state { PIECE_IN, PIECE_OUT };

struct rset {
	/* One writer at a time, and rebuilds under it too, so a rebuild
	 * never mixes the new data of one piece with the old parity of
	 * another (docs/architecture.md: writer rule). */
	pthread_mutex_t wmu;
	struct stripe_code code;
	uint64_t id, length, piece_len;
	unsigned n;
	struct rmem_region piece[STRIPE_N_MAX]; /* tagged with their slot */
	uint32_t slot[STRIPE_N_MAX];
	uint8_t state[STRIPE_N_MAX];            /* under the router's mu */
	bool named;                             /* a free closes handles, frees nothing */
	/* A named one's record: which pieces it already says are not
	 * healthy, and how to tell it of more (router_names.c's, given
	 * through redund_named: this file never calls up). */
	char name[RMEM_NAME_MAX + 1];
	uint32_t recorded_out;
	redund_mark_fn mark;
	redund_release_fn release; /* the writer key, when this handle holds it */
	void *release_arg;
};

int redund_is(const struct rmem_region *r)
{
	return r && r->reserved[0] >> 32 == REDUND_REGION_TAG;
}

static int rset_of(struct router *cl, const struct rmem_region *r, struct rset **out)
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

/* ---- one piece ---------------------------------------------------------------- */

static bool piece_in(struct router *cl, struct rset *rs, unsigned i)
{
	bool in;

	pthread_mutex_lock(&cl->mu);
	in = rs->state[i] == PIECE_IN;
	pthread_mutex_unlock(&cl->mu);
	return in;
}

/* One call on piece i: 0, -EHOSTDOWN when the piece is (now) out, or
 * another error of the call.  A lost server, a timeout and an outcome
 * unknown all put the piece out: it may have missed this write, so it is
 * never read again (until repair rebuilds it). */
static int piece_io(struct router *cl, struct rset *rs, unsigned i, bool write, uint64_t off,
		    void *buf, size_t len)
{
	rmem_client *c;
	int err;

	if (!piece_in(cl, rs, i))
		return -EHOSTDOWN;
	err = members_client(cl, rs->slot[i], &c);
	if (!err)
		err = members_err(cl, rs->slot[i],
				  write ? single_write(c, &rs->piece[i], off, buf, len) :
					  single_read(c, &rs->piece[i], off, buf, len));
	if (err == -EHOSTDOWN || err == -ETIMEDOUT || err == -ECONNABORTED) {
		pthread_mutex_lock(&cl->mu);
		rs->state[i] = PIECE_OUT;
		pthread_mutex_unlock(&cl->mu);
		err = -EHOSTDOWN;
	}
	return err;
}

/* Piece want's bytes [off, off+len) rebuilt from any K pieces in, into
 * out (len <= REDUND_SEG).  -EHOSTDOWN with fewer than K in. */
static int piece_rebuild(struct router *cl, struct rset *rs, unsigned want, uint64_t off,
			 size_t len, unsigned char *out)
{
	unsigned char *in[STRIPE_K_MAX] = { NULL };
	unsigned have[STRIPE_K_MAX], k = rs->code.k;
	int err = 0;

	for (unsigned i = 0; i < k && !err; i++)
		if (!(in[i] = malloc(len ? len : 1)))
			err = -ENOMEM;
	while (!err) {
		unsigned nh = 0;
		bool again = false;

		/* Data pieces first: with only data lost, parity rows are
		 * few and the others are read as a healthy read would. */
		for (unsigned i = 0; i < rs->n && nh < k; i++)
			if (i != want && piece_in(cl, rs, i))
				have[nh++] = i;
		if (nh < k) {
			err = -EHOSTDOWN;
			break;
		}
		for (unsigned i = 0; i < k && !again && !err; i++) {
			err = piece_io(cl, rs, have[i], false, off, in[i], len);
			if (err == -EHOSTDOWN) {
				err = 0;
				again = true; /* marked out: choose again */
			}
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
	return piece_rebuild(cl, rs, j, off, len, out);
}

/* ---- mapping: the region's bytes of one data piece ------------------------------------ */

/* The range [*plo, *phi) of piece j that holds the region's bytes of
 * [a, b); false when piece j holds none of them.  A piece's share of a
 * region range is one range of the piece: whole chunks between a partial
 * first and a partial last. */
static bool piece_range(const struct rset *rs, unsigned j, uint64_t a, uint64_t b,
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
static void piece_copy(const struct rset *rs, unsigned j, uint64_t p0, uint64_t p1,
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

static int check_range(const struct rset *rs, uint64_t off, const void *buf, size_t len)
{
	if (!buf && len > 0)
		return -EINVAL;
	if (len > rs->length || off > rs->length - len)
		return -ERANGE;
	return 0;
}

int redund_read(struct router *cl, const struct rmem_region *r, uint64_t off, void *buf,
		size_t len)
{
	unsigned char *tmp = NULL;
	struct rset *rs;
	bool locked = false;
	int err = rset_of(cl, r, &rs);

	if (!err)
		err = check_range(rs, off, buf, len);
	for (unsigned j = 0; !err && j < rs->code.k; j++) {
		uint64_t plo, phi;

		if (!piece_range(rs, j, off, off + len, &plo, &phi))
			continue;
		/* Within one chunk (a page read): straight into buf. */
		if (phi - plo == len) {
			err = piece_get(cl, rs, j, plo, len, buf, &locked);
			break;
		}
		if (!tmp && !(tmp = malloc(REDUND_SEG))) {
			err = -ENOMEM;
			break;
		}
		for (uint64_t p = plo; p < phi && !err; p += REDUND_SEG) {
			uint64_t e = phi - p < REDUND_SEG ? phi : p + REDUND_SEG;

			err = piece_get(cl, rs, j, p, e - p, tmp, &locked);
			if (!err)
				piece_copy(rs, j, p, e, tmp, buf, off, true);
		}
	}
	if (locked)
		pthread_mutex_unlock(&rs->wmu);
	free(tmp);
	return err;
}

/* Pieces in now. */
static unsigned pieces_in(struct router *cl, struct rset *rs)
{
	unsigned n = 0;

	for (unsigned i = 0; i < rs->n; i++)
		n += piece_in(cl, rs, i);
	return n;
}

/* One segment of one data piece: [p0, p1) of piece j from buf. */
static int write_seg(struct router *cl, struct rset *rs, unsigned j, uint64_t p0, uint64_t p1,
		     const void *buf, uint64_t a, unsigned char **scratch)
{
	unsigned char *delta = scratch[0], *new = scratch[1], *par[STRIPE_R_MAX];
	unsigned k = rs->code.k, r = rs->code.r;
	size_t len = (size_t)(p1 - p0);
	bool locked = true; /* the caller holds wmu */
	int err;

	for (unsigned p = 0; p < r; p++)
		par[p] = scratch[2 + p];
	err = piece_get(cl, rs, j, p0, len, delta, &locked);
	if (err)
		return err;
	piece_copy(rs, j, p0, p1, new, (unsigned char *)buf, a, false);
	for (size_t i = 0; i < len; i++)
		delta[i] ^= new[i];
	/* Every parity piece in: its bytes, plus the delta's share. */
	for (unsigned p = 0; p < r; p++) {
		err = piece_io(cl, rs, k + p, false, p0, par[p], len);
		if (err && err != -EHOSTDOWN)
			return err;
	}
	stripe_delta(&rs->code, len, j, delta, par);
	err = piece_io(cl, rs, j, true, p0, new, len);
	for (unsigned p = 0; p < r && (!err || err == -EHOSTDOWN); p++)
		err = piece_io(cl, rs, k + p, true, p0, par[p], len);
	if (err && err != -EHOSTDOWN)
		return err;
	/* Fewer than K pieces took it: no K pieces rebuild these bytes. */
	return pieces_in(cl, rs) < k ? -EHOSTDOWN : 0;
}

/* A piece out that the record still calls healthy may have missed this
 * write: the record must say so before a server that comes back with its
 * state can serve the piece to a fresh opener.  Under wmu. */
static int record_out(struct router *cl, struct rset *rs)
{
	uint32_t mask = 0;
	int err;

	if (!rs->mark)
		return 0;
	for (unsigned i = 0; i < rs->n; i++)
		if (!piece_in(cl, rs, i) && !(rs->recorded_out & (1u << i)))
			mask |= 1u << i;
	if (!mask)
		return 0;
	err = rs->mark(cl, rs->name, mask);
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
	unsigned k = rs->code.k;
	int err = 0;

	for (uint64_t s = s0; s < s1 && !err; s += per) {
		uint64_t e = s1 - s < per ? s1 : s + per;
		size_t len = (size_t)((e - s) * C);

		for (unsigned j = 0; j < k; j++)
			piece_copy(rs, j, s * C, e * C, bufs[j], (unsigned char *)buf, a, false);
		stripe_encode(&rs->code, len, bufs, bufs + k);
		for (unsigned i = 0; i < rs->n && (!err || err == -EHOSTDOWN); i++)
			err = piece_io(cl, rs, i, true, s * C, bufs[i], len);
		if (err && err != -EHOSTDOWN)
			return err;
		err = pieces_in(cl, rs) < k ? -EHOSTDOWN : 0;
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

		if (!piece_range(rs, j, a, b, &plo, &phi))
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
	unsigned char *scratch[STRIPE_N_MAX + 2] = { NULL };
	uint64_t W, fs, fe, end = off + len;
	unsigned nbufs = 0;
	struct rset *rs;
	int err = rset_of(cl, r, &rs);

	if (!err)
		err = check_range(rs, off, buf, len);
	if (!err && r->flags && !(r->flags & RMEM_WRITE))
		err = -EACCES;
	if (err)
		return err;
	nbufs = rs->n > 2 + rs->code.r ? rs->n : 2 + rs->code.r;
	for (unsigned i = 0; i < nbufs && !err; i++)
		if (!(scratch[i] = malloc(REDUND_SEG)))
			err = -ENOMEM;
	/* Whole stripes [fs, fe) are encoded afresh; the ends, by delta. */
	W = (uint64_t)rs->code.k * STRIPE_CHUNK;
	fs = (off + W - 1) / W * W;
	fe = end / W * W;
	pthread_mutex_lock(&rs->wmu);
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
		int rc = record_out(cl, rs);

		err = err ? err : rc;
	}
	pthread_mutex_unlock(&rs->wmu);
	for (unsigned i = 0; i < nbufs; i++)
		free(scratch[i]);
	return err;
}

/* ---- alloc and free ------------------------------------------------------------------ */

static void pieces_free(struct router *cl, struct rset *rs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		rmem_client *c;

		/* A piece whose server is gone went with it; one never
		 * opened has no handle. */
		if (rs->piece[i].reserved[0] >> 32 == CLUSTER_REGION_TAG &&
		    members_client(cl, rs->slot[i], &c) == 0 &&
		    members_err(cl, rs->slot[i], single_free(c, &rs->piece[i])) == 0 && !rs->named)
			members_placed(cl, rs->slot[i], rs->piece_len, 1);
	}
}

/* A piece's name on its server: 0, or -ENAMETOOLONG. */
static int piece_name(const char *name, uint64_t gen, unsigned i, char *out)
{
	int n = snprintf(out, RMEM_NAME_MAX + 1, "%s~%llu.%u", name, (unsigned long long)gen, i);

	return n < 0 || n > RMEM_NAME_MAX ? -ENAMETOOLONG : 0;
}

/* Piece i on a server holding none of the others (tried has them); named
 * "pname" when not NULL (then a name left there is -EEXIST: the next). */
static int piece_place(struct router *cl, struct rset *rs, unsigned i, uint64_t *tried,
		       const char *pname)
{
	int last = -ENOSPC;
	uint32_t slot;

	while (members_pick(cl, rs->piece_len, tried, &slot) == 0) {
		rmem_client *c;
		int err;

		tried[slot / 64] |= 1ull << (slot % 64);
		err = members_client(cl, slot, &c);
		if (!err)
			err = members_err(cl, slot,
					  pname ? single_create(c, pname, rs->piece_len, 0, &rs->piece[i]) :
						  single_alloc(c, rs->piece_len, 0, &rs->piece[i]));
		members_placed(cl, slot, rs->piece_len, err);
		if (!err) {
			members_tag(&rs->piece[i], slot);
			rs->slot[i] = slot;
			rs->state[i] = PIECE_IN;
			return 0;
		}
		if (err != -ENOMEM && err != -EHOSTDOWN && err != -EDQUOT && err != -EEXIST)
			return err;
		if (err == -EDQUOT)
			last = err;
	}
	/* Too few servers (present, or able to hold a piece): -ENOSPC, not
	 * -ENOMEM, since memory need not be what is short. */
	return last;
}

/* Enters rs in the table: 0 and its index, or -ENOMEM. */
static int rset_enter(struct router *cl, struct rset *rs, size_t *idx)
{
	size_t i;
	int err = 0;

	pthread_mutex_lock(&cl->mu);
	for (i = 0; i < cl->nrsets && cl->rsets[i]; i++)
		;
	if (i == cl->nrsets) {
		size_t n = cl->nrsets ? cl->nrsets * 2 : 16;
		struct rset **t = n <= UINT32_MAX ? realloc(cl->rsets, n * sizeof(*t)) : NULL;

		if (!t) {
			err = -ENOMEM;
		} else {
			memset(t + cl->nrsets, 0, (n - cl->nrsets) * sizeof(*t));
			cl->rsets = t;
			cl->nrsets = n;
		}
	}
	if (!err) {
		cl->rsets[i] = rs;
		rs->id = ++cl->rset_ids;
		*idx = i;
	}
	pthread_mutex_unlock(&cl->mu);
	return err;
}

static void handle_of(const struct rset *rs, size_t idx, uint32_t flags, struct rmem_region *out)
{
	memset(out, 0, sizeof(*out));
	out->id = rs->id;
	out->length = rs->length;
	out->flags = flags;
	out->reserved[0] = (uint64_t)REDUND_REGION_TAG << 32 | idx;
	out->reserved[1] = rs->id;
}

int redund_alloc(struct router *cl, uint64_t size, struct rmem_region *out)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	struct rset *rs = calloc(1, sizeof(*rs));
	unsigned placed = 0;
	size_t idx;
	int err = rs ? 0 : -ENOMEM;

	if (!err)
		err = stripe_code_init(&rs->code, cl->red_k, cl->red_r);
	if (!err && members_present(cl) < cl->red_k + cl->red_r)
		err = -ENOSPC;
	if (!err) {
		rs->n = cl->red_k + cl->red_r;
		rs->length = size;
		rs->piece_len = stripe_piece_len(&rs->code, size);
		pthread_mutex_init(&rs->wmu, NULL);
	}
	while (!err && placed < rs->n) {
		err = piece_place(cl, rs, placed, tried, NULL);
		if (!err)
			placed++;
	}
	if (!err)
		err = rset_enter(cl, rs, &idx);
	if (err) {
		if (rs && rs->n) {
			pieces_free(cl, rs, placed);
			pthread_mutex_destroy(&rs->wmu);
		}
		free(rs);
		return err;
	}
	handle_of(rs, idx, 0, out);
	return 0;
}

int redund_free(struct router *cl, const struct rmem_region *r)
{
	struct rset *rs;
	int err = rset_of(cl, r, &rs);

	if (err)
		return err;
	pthread_mutex_lock(&cl->mu);
	cl->rsets[r->reserved[0] & 0xffffffffu] = NULL;
	pthread_mutex_unlock(&cl->mu);
	pieces_free(cl, rs, rs->n);
	if (rs->release)
		rs->release(cl, rs->release_arg);
	pthread_mutex_destroy(&rs->wmu);
	free(rs);
	return 0;
}

void redund_fini(struct router *cl)
{
	for (size_t i = 0; i < cl->nrsets; i++)
		if (cl->rsets[i]) {
			if (cl->rsets[i]->release)
				cl->rsets[i]->release(cl, cl->rsets[i]->release_arg);
			pthread_mutex_destroy(&cl->rsets[i]->wmu);
			free(cl->rsets[i]);
		}
	free(cl->rsets);
	cl->rsets = NULL;
	cl->nrsets = 0;
}

/* ---- named redundant regions --------------------------------------------------------- */

static struct rset *rset_new(struct router *cl, unsigned k, unsigned r, uint64_t size, int *err)
{
	struct rset *rs = calloc(1, sizeof(*rs));

	*err = rs ? stripe_code_init(&rs->code, k, r) : -ENOMEM;
	if (*err) {
		free(rs);
		return NULL;
	}
	(void)cl;
	rs->named = true;
	rs->n = k + r;
	rs->length = size;
	rs->piece_len = stripe_piece_len(&rs->code, size);
	pthread_mutex_init(&rs->wmu, NULL);
	return rs;
}

static void rset_free(struct rset *rs)
{
	if (rs) {
		pthread_mutex_destroy(&rs->wmu);
		free(rs);
	}
}

/* Unlinks pieces [0, n) of a layout-to-be on their servers (rollback). */
static void pieces_unlink(struct router *cl, struct rset *rs, const char *name, unsigned n)
{
	char pname[RMEM_NAME_MAX + 1];

	for (unsigned i = 0; i < n; i++) {
		rmem_client *c;

		if (piece_name(name, 1, i, pname) == 0 && members_client(cl, rs->slot[i], &c) == 0 &&
		    single_unlink2(c, pname, RMEM_UNLINK_REVOKE) == 0)
			members_placed(cl, rs->slot[i], rs->piece_len, 1);
	}
}

int redund_create(struct router *cl, const char *name, uint64_t size,
		  struct cluster_layout *lay, struct rset **out)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	char pname[RMEM_NAME_MAX + 1];
	unsigned placed = 0;
	struct rset *rs;
	int err = piece_name(name, 1, STRIPE_N_MAX, pname);

	*out = NULL;
	if (err)
		return err;
	if (members_present(cl) < cl->red_k + cl->red_r)
		return -ENOSPC;
	rs = rset_new(cl, cl->red_k, cl->red_r, size, &err);
	while (!err && placed < rs->n) {
		err = piece_name(name, 1, placed, pname);
		if (!err)
			err = piece_place(cl, rs, placed, tried, pname);
		if (!err)
			placed++;
	}
	if (err) {
		if (rs)
			pieces_unlink(cl, rs, name, placed);
		rset_free(rs);
		return err;
	}
	memset(lay, 0, sizeof(*lay));
	lay->k = rs->code.k;
	lay->r = rs->code.r;
	lay->size = size;
	lay->chunk = STRIPE_CHUNK;
	lay->layout_gen = 1;
	pthread_mutex_lock(&cl->mu);
	for (unsigned i = 0; i < rs->n; i++) {
		const struct member *m = &cl->members[rs->slot[i]];

		memcpy(lay->pieces[i].server, m->rec.id, sizeof(lay->pieces[i].server));
		lay->pieces[i].generation = m->rec.generation;
		lay->pieces[i].region = rs->piece[i].id;
		lay->pieces[i].made = 1;
		lay->pieces[i].state = PIECE_HEALTHY;
	}
	pthread_mutex_unlock(&cl->mu);
	*out = rs;
	return 0;
}

void redund_create_undo(struct router *cl, const char *name, struct rset *rs)
{
	pieces_unlink(cl, rs, name, rs->n);
	rset_free(rs);
}

void redund_named(struct rset *rs, const char *name, redund_mark_fn mark,
		  redund_release_fn release, void *arg)
{
	snprintf(rs->name, sizeof rs->name, "%s", name);
	rs->mark = mark;
	rs->release = release;
	rs->release_arg = arg;
}

int redund_enter(struct router *cl, struct rset *rs, uint32_t flags, struct rmem_region *out)
{
	size_t idx;
	int err = rset_enter(cl, rs, &idx);

	if (err) {
		pieces_free(cl, rs, rs->n);
		if (rs->release)
			rs->release(cl, rs->release_arg);
		rset_free(rs);
		return err;
	}
	handle_of(rs, idx, flags, out);
	return 0;
}

/* Piece i of lay on its server: its slot, if that server is in the set
 * and of the piece's generation (else it lost the piece). */
static int piece_slot(struct router *cl, const struct cluster_piece *p, uint32_t *slot)
{
	int err = members_find(cl, p->server, slot);

	if (!err) {
		pthread_mutex_lock(&cl->mu);
		if (!cl->members[*slot].present ||
		    cl->members[*slot].rec.generation != p->generation)
			err = -EHOSTDOWN;
		pthread_mutex_unlock(&cl->mu);
	}
	return err;
}

int redund_open(struct router *cl, const char *name, const struct cluster_layout *lay,
		uint32_t access, struct rset **rsp)
{
	char pname[RMEM_NAME_MAX + 1];
	unsigned in = 0, gone = 0;
	struct rset *rs;
	int err = 0;

	if (lay->chunk != STRIPE_CHUNK)
		return -EPROTO;
	rs = rset_new(cl, lay->k, lay->r, lay->size, &err);
	if (err)
		return err == -EINVAL ? -EPROTO : err;
	for (unsigned i = 0; i < rs->n && !err; i++) {
		rmem_client *c;
		int rc = lay->pieces[i].state == PIECE_HEALTHY ? 0 : -EHOSTDOWN;

		rs->state[i] = PIECE_OUT;
		if (rc)
			rs->recorded_out |= 1u << i;
		if (!rc)
			rc = piece_name(name, lay->pieces[i].made, i, pname);
		if (!rc)
			rc = piece_slot(cl, &lay->pieces[i], &rs->slot[i]);
		if (!rc)
			rc = members_client(cl, rs->slot[i], &c);
		if (!rc)
			rc = members_err(cl, rs->slot[i], single_open(c, pname, access, &rs->piece[i]));
		if (rc == 0) {
			members_tag(&rs->piece[i], rs->slot[i]);
			rs->state[i] = PIECE_IN;
			in++;
		} else if (rc == -ENOENT) {
			gone++;
		} else if (rc != -EHOSTDOWN && rc != -ENOENT && rc != -ETIMEDOUT) {
			err = rc; /* -EACCES, -ENOMEM...: the caller's answer */
		}
	}
	if (!err && in < rs->code.k)
		/* More pieces unknown to their live servers than parity can
		 * cover: the region is gone (unlinked meanwhile). */
		err = gone > rs->code.r ? -ENOENT : -EHOSTDOWN;
	if (err) {
		pieces_free(cl, rs, rs->n);
		rset_free(rs);
		return err;
	}
	*rsp = rs;
	return 0;
}

int redund_unlink(struct router *cl, const char *name, const struct cluster_layout *lay,
		  uint32_t flags)
{
	char pname[RMEM_NAME_MAX + 1];
	int err = 0;

	for (unsigned i = 0; i < lay->k + lay->r; i++) {
		rmem_client *c;
		uint32_t slot;
		int rc = piece_name(name, lay->pieces[i].made, i, pname);

		if (!rc)
			rc = piece_slot(cl, &lay->pieces[i], &slot);
		if (!rc)
			rc = members_client(cl, slot, &c);
		if (!rc)
			rc = members_err(cl, slot, single_unlink2(c, pname, flags));
		/* A piece on a server gone stays there; a sweep reclaims it. */
		if (rc && rc != -EHOSTDOWN && rc != -ENOENT && !err)
			err = rc;
	}
	return err;
}
