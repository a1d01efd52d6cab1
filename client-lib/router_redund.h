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
#include "stripe.h"

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

/* The region r's handle names: 0 and *out, or -EINVAL (not one, or freed). */
int redund_rset_of(struct router *cl, const struct rmem_region *r, struct rset **out);

#endif /* RMEM_ROUTER_REDUND_H */
