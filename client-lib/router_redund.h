/*
 * router_redund.h - what router_redund.c (reads and writes) and
 * router_redund_make.c (alloc, free, create, open, unlink) share: a
 * redundant region's state.  Internal to the router.
 */
#ifndef RMEM_ROUTER_REDUND_H
#define RMEM_ROUTER_REDUND_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "router_int.h"
#include "cluster_layout.h"
#include "stripe.h"

/* n more of a figure of the router's (&cl->degraded_reads...), under mu. */
void redund_count(struct router *cl, uint64_t *figure, uint64_t n);

/* Piece bytes handled at once per piece: bounds the scratch memory of a
 * large read or write (K+R+2 buffers of this) whatever its length. */
#define REDUND_SEG (256u * 1024)

enum piece_state { PIECE_IN, PIECE_OUT };

/* One redundant region, anonymous or named. */
struct rset {
	/* One writer at a time, and rebuilds under it too, so a rebuild
	 * never mixes the new data of one piece with the old parity of
	 * another (docs/architecture.md: writer rule). */
	pthread_mutex_t wmu;
	struct stripe_code code;
	uint64_t id, length, piece_len;
	unsigned n;
	/* Written under the router's mu and wmu both (a swap: put_piece),
	 * so read under either; a call without wmu copies a piece under mu
	 * (redund_piece_take) and holds no pointer into these. */
	struct rmem_region piece[STRIPE_N_MAX]; /* tagged with their slot */
	uint32_t slot[STRIPE_N_MAX];
	uint32_t gen[STRIPE_N_MAX];             /* swaps of each, so far */
	uint8_t state[STRIPE_N_MAX];            /* under the router's mu */
	int64_t out_ms[STRIPE_N_MAX];           /* when each went out (mu) */
	int64_t auto_ms;                        /* the last repair a call made (wmu) */
	bool named;                             /* a free closes handles, frees nothing */
	/* A named one's record: which pieces it already says are not
	 * healthy, and how to tell it of more (router_names.c's, given
	 * through redund_named: this file never calls up). */
	char name[RMEM_NAME_MAX + 1];
	uint32_t recorded_out;
	const struct redund_record_ops *rec; /* NULL: anonymous */
	/* A named one's: each piece as the record named it when this handle
	 * took it (a repair elsewhere moves it: redund_refresh), the access
	 * new pieces are opened with, when the record was last looked at. */
	struct cluster_piece recp[STRIPE_N_MAX];
	uint32_t access;
	int64_t refreshed_ms;
	/* A named one's: each piece's server's membership epoch
	 * (members_epoch_locked) when this handle last checked the piece
	 * against the record; once it moved, the piece is not trusted
	 * before the record is read again (redund_validate).  Under the
	 * router's mu. */
	uint64_t seen[STRIPE_N_MAX];
	/* A named one opened read-only: its name's bucket of the names
	 * watch (router_watch.c), and the revision as of which this handle
	 * looked at its record (-1: look again before trusting a read).  A
	 * bucket past it means the record changed (a writer that timed out
	 * on a piece whose server stayed a member marked it stale; a repair
	 * moved one): redund_validate reads it again.  Under the router's
	 * mu; nlook_failed (the last such look could not read the record:
	 * the next waits a second) under wmu. */
	bool watched, nlook_failed;
	unsigned nbucket;
	int64_t nseen;
	redund_release_fn release; /* the writer key, when this handle holds it */
	void *release_arg;
	/* Freed (rmem_free): set under mu with wmu held; then the rset waits
	 * as a retiree for the calls that may still hold it.  A call that
	 * takes wmu and finds it set makes nothing on a server. */
	bool dead;
	struct retiree retiree;
	/* The write right is lost for good: the key's renewal is older than
	 * its TTL, or a server fenced this handle (another writer opened the
	 * name).  Under wmu. */
	bool fenced;
	/* Opening fenced another writer's handles: its last write may have
	 * left a stripe half-written, so the parity is encoded afresh
	 * (redund_resync) before the handle is handed out. */
	bool resync;
};

/* A piece as a call holds it: copied under the router's mu, so that a
 * swap (repair, refresh) never changes a piece under a call; gen tells
 * whether it is still the rset's piece. */
struct piece_ref {
	struct rmem_region h;
	uint32_t slot, gen;
};

/* Piece i into *p: whether it is in (when not, *p says nothing). */
bool redund_piece_take(struct router *cl, struct rset *rs, unsigned i, struct piece_ref *p);
/* The call on piece i as it was at gen met its loss: out, unless it was
 * swapped since (the piece now there is another's to judge). */
void redund_piece_lost(struct router *cl, struct rset *rs, unsigned i, uint32_t gen);
/* Whether rs was freed (a call that overlaps the free returns -EINVAL). */
bool redund_dead(struct router *cl, struct rset *rs);

/* The region r's handle names: 0 and *out, or -EINVAL (not one, or freed). */
int redund_rset_of(struct router *cl, const struct rmem_region *r, struct rset **out);

/* Piece i is out for good (its server lost, or it missed a write); under
 * the router's mu for the second. */
void redund_piece_out(struct router *cl, struct rset *rs, unsigned i);
void redund_piece_out_locked(struct rset *rs, unsigned i);
/* Repair with rs->wmu held (redund_repair's work): every piece that is
 * out rebuilt elsewhere, and every piece in on a server that drains moved
 * (docs/architecture.md, "Drain"). */
int redund_repair_locked(struct router *cl, struct rset *rs);
/* Whether this handle has a piece in on a draining server, and may move
 * it (an anonymous region's, or a named one's writer). */
bool redund_moving(struct router *cl, struct rset *rs);
/* A call that finds pieces to move moves them at most this often. */
#define REDUND_MOVE_RETRY_MS 1000
/* A call on a region this client may write repairs it first once a piece
 * has been out for the router's repair_grace_ms (at most once a grace),
 * and moves its pieces off draining servers at once (at most once
 * REDUND_MOVE_RETRY_MS): the call that does is slower by the repair.
 * Under wmu. */
void redund_repair_due(struct router *cl, struct rset *rs);
/* Piece i on a server none of tried (bits by slot) has, into *piece and
 * *slot; named pname when not NULL: 0, -ENOSPC, or the call's error. */
int redund_place(struct router *cl, struct rset *rs, uint64_t *tried, const char *pname,
		 struct rmem_region *piece, uint32_t *slot);
/* Piece p's server: its slot, if that server is in the set and of the
 * piece's generation; -EHOSTDOWN (it lost the piece), -ENOENT. */
int redund_piece_slot(struct router *cl, const struct cluster_piece *p, uint32_t *slot);
/* A named region's handle catching up with its record, at most once a
 * second (router_redund_repair.c): pieces a repair elsewhere moved are
 * opened where they are now; pieces it calls stale are out.  Under wmu. */
void redund_refresh(struct router *cl, struct rset *rs);
/* A named region's handle checking its record now, whatever the time
 * (router_redund_repair.c): as redund_refresh, and each piece's seen is
 * its server's epoch from before the record was read.  A piece whose
 * server's epoch moved is put out when the record cannot be read (nothing
 * vouches for it).  0, or why the record could not be read or followed
 * (refresh_now's error).  Under wmu. */
int redund_recheck(struct router *cl, struct rset *rs);
/* Each piece's seen, its server's epoch now.  Under the router's mu. */
void redund_seen_locked(struct router *cl, struct rset *rs);
/* A piece declared stale is never served (docs/architecture.md,
 * invariants): after a read of a named region, whether the server of any
 * piece in moved since the handle checked that piece (its key left etcd,
 * a new process, a new connection, a resumed session: it may have missed
 * a write, and come back with the old bytes); if so, the record is read
 * again (redund_recheck, under wmu, which the caller must not hold) and
 * true: the caller reads again.  The same when the record changed since the
 * handle looked (its bucket of the names watch, redund_watched).  false,
 * and nothing done, when nothing moved: a few loads under the router's mu
 * and one atomic load, no etcd. */
bool redund_validate(struct router *cl, struct rset *rs);
/* A named handle's read met -ENOENT on a piece: the record read again
 * (redund_recheck, under wmu, which the caller must not hold); true when
 * a piece moved (a drain's move, docs/architecture.md "Drain": the caller
 * reads again, from the new piece), or when the record could not be read
 * (etcd slow or away: after a pause, the caller tries again); false when
 * nothing moved (the name was unlinked with revoke, its record gone or
 * another's: the caller's -ENOENT stands). */
bool redund_followed(struct router *cl, struct rset *rs);
/* How many such looks one read makes at most, and the pause after a look
 * that could not read the record. */
#define REDUND_MOVE_LOOKS 4
#define REDUND_MOVE_PAUSE_MS 100
/* "<name>~<made>.<i>": 0, or -ENAMETOOLONG. */
int redund_piece_name(const char *name, uint64_t made, unsigned i, char *out);

/* Piece bytes handled at once per piece: bounds the scratch memory of a
 * large read, write or repair whatever its length. */
#define REDUND_SEG (256u * 1024)
/* What router_redund_post.c (posted calls) uses of router_redund.c. */
/* 0, -EINVAL (no buffer), -ERANGE (past the end). */
int redund_check_range(const struct rset *rs, uint64_t off, const void *buf, size_t len);
/* Whether piece i is in (may be read); piece i marked out for good. */
bool redund_piece_in(struct router *cl, struct rset *rs, unsigned i);
/* The range [*plo, *phi) of data piece j holding region bytes [a, b);
 * false when it holds none. */
bool redund_piece_range(const struct rset *rs, unsigned j, uint64_t a, uint64_t b,
			uint64_t *plo, uint64_t *phi);
/* Between piece j's bytes [p0, p1) in tmp and the region's at buf (byte
 * 0 is region offset a): to buf when out, else from it. */
void redund_piece_copy(const struct rset *rs, unsigned j, uint64_t p0, uint64_t p1,
		       unsigned char *tmp, unsigned char *buf, uint64_t a, bool out);
/* How many pieces are in now. */
unsigned redund_pieces_in(struct router *cl, struct rset *rs);
/* 0 when this handle may write now; -EACCES once its write right is lost
 * (docs/architecture.md, "Writer rule"): a named region's writer whose
 * key's last confirmed renewal is older than its TTL, or whom a server
 * fenced.  Under wmu. */
int redund_may_write(struct router *cl, struct rset *rs);
/* A write's error as the application sees it: a piece that refused a
 * writer's call as no longer its own (-ENOENT: its handle revoked;
 * -ECANCELED: a WRITE in flight dropped) has fenced it: -EACCES, now and
 * for every write after.  Under wmu. */
int redund_write_err(struct rset *rs, int err);
/* Every stripe's parity encoded afresh from the K data pieces (after an
 * open fenced another writer); nothing done with a data piece out.  Under
 * wmu.  0, or the error of a piece that is not a loss. */
int redund_resync(struct router *cl, struct rset *rs);
/* Tells a named region's record of pieces out that it does not yet call
 * so (a write's last step, before it is acknowledged).  Under wmu. */
int redund_record_out(struct router *cl, struct rset *rs);
/* Piece want's bytes [off, off+len) rebuilt from any K pieces in, into
 * out; the caller holds rs->wmu.  -EHOSTDOWN with fewer than K in. */
int redund_piece_rebuild(struct router *cl, struct rset *rs, unsigned want, uint64_t off,
			 size_t len, unsigned char *out);

#endif /* RMEM_ROUTER_REDUND_H */
