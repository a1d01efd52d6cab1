/*
 * op.h - one operation of librmem, as the engine (engine.c, datapath.c) and
 * the NIC transport (verbs*.c) both see it: a plain record, no calls.  It
 * sits below both so that neither includes the other for it.
 *
 * A posted READ/WRITE (async, its own allocation, freed when its
 * completion is queued), or a synchronous call (on its caller's stack).  An
 * operation is made of one or more frames (or RDMA work requests); it ends
 * once it is sealed (no more frames will be sent) and every frame sent has
 * been answered.
 */
#ifndef RMEM_OP_H
#define RMEM_OP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct engine;
struct rmem_region;

struct eng_op {
	uint64_t cookie;
	int status;       /* the first error of any frame, else 0 */
	uint32_t frames;  /* frames sent whose reply has not been handled */
	uint32_t sent;    /* frames ever sent (queued) for it */
	uint32_t rx_len;  /* control reply: payload bytes now in e->rx */
	bool async;
	bool sealed;
	bool done;        /* synchronous: ended */
	/* RDMA: not done on the queue pair, which has failed for good: its
	 * caller sends it on the stream (an atomic; verbs_post.c). */
	bool on_stream;
	/* Posted control request (rmem_post_alloc/free): turns its reply
	 * payload, now in e->rx, into *status (and its result) before the next
	 * reply overwrites e->rx.  0, or -EPROTO when the payload is garbage. */
	int (*decode)(struct engine *e, struct eng_op *op, size_t len, int *status);
	struct rmem_region *region; /* posted ALLOC: where its region goes */
	size_t region_size;         /* ...and how many bytes of it the caller has */
	/* A posted READ or WRITE (io.opcode != 0): what it moves, kept so
	 * that it can be sent again after a resume (reclaim.c), in full since
	 * both are idempotent.  The region by id: its key may change. */
	struct {
		uint16_t opcode;
		uint64_t region_id, off;
		uint8_t *buf;
		size_t len;
		uint32_t seg, gap, phase; /* a spaced READ's (datapath.h) */
	} io;
	/* Parked by a lost connection, waiting for the resume (engine.h). */
	struct eng_op *next_parked;
};

#endif /* RMEM_OP_H */
