/*
 * verbs_int.h - what the verbs*.c files share inside the NIC transport: the
 * connection and its ring of slots.  Nothing outside verbs*.c includes it.
 *
 * One send queue, one completion queue, one slot per send queue entry.  A
 * slot holds everything needed to issue its request again, because a
 * request flushed by another one's error is posted again on the queue pair
 * of the re-attach, or sent over the stream when the re-attach fails (see
 * verbs.h).  Slots form a ring in posting order; a slot is freed once it and
 * every slot before it are done.
 *
 * What a re-attach replaces is only the rdma_cm id, its event channel and
 * its queue pair: the protection domain, completion queue, bounce slots and
 * registrations of the slots in flight stay, so the slots' lkeys stay
 * valid.
 */
#ifndef RMEM_VERBS_INT_H
#define RMEM_VERBS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "verbs.h"
#include "verbs_regcache.h"

/*
 * Work requests in flight on the queue pair.  At least perftest's default TX
 * depth (128), so that rmem_post_*() with that many operations in flight
 * keeps them all on the wire instead of waiting here for room.
 */
#define SQ_DEPTH       256u       /* power of two, < REGCACHE_MAX */
#define SQ_MASK        (SQ_DEPTH - 1)

_Static_assert((SQ_DEPTH & SQ_MASK) == 0, "SQ_DEPTH must be a power of two");
_Static_assert(SQ_DEPTH < REGCACHE_MAX, "each posted request may hold a registration");

enum slot_state {
	SLOT_FREE,
	SLOT_POSTED,   /* its completion is due */
	SLOT_FLUSHED,  /* flushed by another request's error: send it again */
	SLOT_DONE,     /* completed; freed once the slots before it are */
};

struct verbs_slot {
	enum slot_state state;
	struct eng_op *op;
	enum ibv_wr_opcode opcode;
	uint64_t raddr;
	uint32_t rkey;
	uint32_t len;
	uint64_t region_id, offset;   /* the same request for the stream */
	uint8_t *local;               /* the caller's bytes */
	struct regcache_entry *reg;   /* NULL: bounce slot (or inline) */
	bool inlined;
	uint64_t compare_add, swap;   /* atomics */
	uint64_t *old;                /* atomics: where the old value goes */
};

struct verbs_conn {
	struct verbs_events ev;         /* how we report upward */
	struct regcache_kept *kept;   /* the client's registered ranges */
	int timeout_ms;
	struct rdma_event_channel *cm_ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *comp_ch;
	struct ibv_cq *cq;
	bool qp_made;
	bool connected;
	bool degraded;                /* the queue pair failed: data goes on the stream */
	uint32_t max_msg;
	uint32_t max_inline;
	uint8_t *bounce;              /* SQ_DEPTH slots of NIC_BOUNCE_MAX bytes */
	struct ibv_mr *bounce_mr;
	struct regcache cache;
	struct verbs_slot slot[SQ_DEPTH];
	uint32_t head, count;         /* the ring, in posting order */
	uint32_t posted;              /* SLOT_POSTED slots */
	bool qp_error;                /* recover once nothing is posted */
	/* Stall detection: progress counts posts onto an idle queue and
	 * completions; only a waiter about to sleep reads the clock, when it
	 * sees the count moved (two clock reads per operation are dear in a
	 * round trip of a few microseconds). */
	uint64_t progress, progress_seen;
	int64_t last_progress_ms;
	/* What a re-attach needs: the same target, session and token. */
	char *host;
	uint16_t port;
	uint64_t session_id, token;
	uint8_t depth;                /* initiator depth of the connect */
};

/* verbs_conn.c: replaces the broken queue pair (see there).  Nothing may be
 * posted.  0 or a negative errno. */
int verbs_reattach(struct verbs_conn *n);

static inline uint8_t *verbs_bounce_of(struct verbs_conn *n, uint32_t i)
{
	return n->bounce + (size_t)i * NIC_BOUNCE_MAX;
}

#endif /* RMEM_VERBS_INT_H */
