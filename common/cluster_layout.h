/*
 * cluster_layout.h - the record of a redundant named region in etcd,
 * /rmem/<cluster>/names/<tenant>/<name> (docs/architecture.md,
 * "Redundancy"): its code, size, layout generation and, per piece, the
 * server, the piece's region id there, that server's generation and the
 * piece's state.  Written by librmem's cluster client
 * (client-lib/router_names.c), read by it (and, later, by repair and
 * rmemctl).
 *
 * JSON, one object: {"redundancy": "4+2", "size": N, "chunk": 4096,
 * "layout_gen": N, "pieces": [{"server": "s1", "region": N, "generation":
 * N, "made": N, "state": "healthy"|"stale"|"lost"}, ...]} with K+R pieces.  It has no
 * "server" field on purpose: a reader that knows only cluster_name.h's
 * record refuses it (-EPROTO) instead of opening one piece as the region,
 * or dropping the record because no server holds the name itself.
 * Readers ignore fields they do not know.  Pure, like cluster_name.h.
 */
#ifndef RMEM_CLUSTER_LAYOUT_H
#define RMEM_CLUSTER_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_rec.h"

#define CLUSTER_LAYOUT_PIECES_MAX 20 /* K+R at most: stripe.h's 16 + 4 */

enum cluster_piece_state { PIECE_HEALTHY, PIECE_STALE, PIECE_LOST };

struct cluster_piece {
	char server[CLUSTER_ID_MAX];
	uint64_t region;      /* the piece's handle id on that server */
	uint64_t generation;  /* that server's when the piece was made */
	uint64_t made;        /* the layout_gen that made it: its name there is
				 "<name>~<made>.<i>" */
	enum cluster_piece_state state;
};

struct cluster_layout {
	unsigned k, r;        /* 1..16, 1..4 */
	uint64_t size, chunk, layout_gen;
	struct cluster_piece pieces[CLUSTER_LAYOUT_PIECES_MAX]; /* k + r of them */
};

/* 0 and a malloc'd text; -EINVAL (K, R out of bounds, a bad server id, a
 * number >= 2^63), -ENOMEM. */
int cluster_layout_encode(const struct cluster_layout *l, char **out);
/* 0, or -EPROTO (anything malformed: not K+R pieces, an unknown state...),
 * -ENOMEM. */
int cluster_layout_decode(const char *text, size_t len, struct cluster_layout *l);

/*
 * A piece's name on its server: "<base>~<made>.<i>", made 1..2^63-1 and i
 * below CLUSTER_LAYOUT_PIECES_MAX, both decimal without a leading zero.
 * The one spelling of it: librmem makes pieces under it, rmemd accepts a
 * CREATE marked as a piece only under it (daemon/names.c), and its repair
 * agent and rmemctl's sweep split it.
 *
 * cluster_piece_name: 0 and out (out_len bytes, NUL-terminated), or
 * -ENAMETOOLONG when it does not fit.
 * cluster_piece_split: whether name[0..len) is a piece's name; then the
 * length of its base (at least 1), made and i.
 */
int cluster_piece_name(const char *base, uint64_t made, unsigned i, char *out, size_t out_len);
bool cluster_piece_split(const char *name, size_t len, size_t *base_len, uint64_t *made,
			 unsigned *i);

#endif /* RMEM_CLUSTER_LAYOUT_H */
