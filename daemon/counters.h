/*
 * counters.h - what rmemd counts for its metrics: plain fields inside
 * struct server (srv->counters), each bumped by the module that owns the
 * event and read only by metrics.c, which formats them with the figures the
 * daemon keeps anyway (pools, regions, names, tenants' use).
 *
 *   session.c    quarantine_bytes
 *   ctl.c        alloc_failures, auth_failures (the handlers see the answer)
 *   conn.c       stream_bytes, requests (service time), lease_expiries,
 *                frame_timeouts
 *   nic_conn.c   rdma_attaches, rdma_reattaches
 *   (restore)    restarts_restored: bumped once by a start that took its
 *                state back (nothing does yet)
 *   member.c    cluster: the membership agent's figures, which its thread
 *                counts in atomics of its own and the loop's publish timer
 *                copies here (every 100 ms)
 *
 * No locks and no atomics: every one of them is touched only on the
 * event-loop thread (the pinning threads at start count nothing), so the
 * cost on the hot path is one add to memory that thread owns.  Nothing here
 * calls anything: a header of data, so that the modules below metrics.c
 * never call up into it.
 */
#ifndef RMEMD_COUNTERS_H
#define RMEMD_COUNTERS_H

#include <errno.h>
#include <stdint.h>

#include "proto.h"

/* The errno label of rmem_alloc_failures_total: ALLOC and CREATE refused. */
enum counters_errno {
	COUNTERS_ENOMEM,
	COUNTERS_EDQUOT,
	COUNTERS_EINVAL,
	COUNTERS_EEXIST,
	COUNTERS_EMFILE,         /* CREATE past limits.max_handles */
	COUNTERS_EOTHER,         /* anything else (EIO of a NIC key, ...) */
	COUNTERS_NERRNO
};

/* The reason label of rmem_auth_failures_total. */
enum counters_auth {
	COUNTERS_AUTH_TENANT,    /* AUTH_BEGIN named no configured tenant */
	COUNTERS_AUTH_MAC,       /* AUTH with a wrong MAC (wrong secret, replay) */
	COUNTERS_AUTH_ANONYMOUS, /* HELLO of a network client that did not authenticate */
	COUNTERS_NAUTH
};

/* The op label of rmem_stream_bytes_total: data of READ and WRITE. */
enum counters_io { COUNTERS_READ, COUNTERS_WRITE, COUNTERS_NIO };

/*
 * Upper bounds of rmem_request_duration_seconds' buckets, in nanoseconds;
 * the last bucket is +Inf.  A request on the stream path is served in a
 * microsecond or two, so most buckets sit below a millisecond.
 */
#define COUNTERS_BUCKET_NS { 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, \
			     500000, 1000000, 10000000, 100000000 }
#define COUNTERS_NBUCKETS 13 /* the bounds above and +Inf */

/* One histogram.  bucket[i] counts observations in (bound[i-1], bound[i]],
 * not cumulative: metrics.c adds them up when it writes them. */
struct counters_hist {
	uint64_t bucket[COUNTERS_NBUCKETS];
	uint64_t count;
	uint64_t sum_ns;
};

/* The cluster agent's conversation with etcd (member.c), as of the last
 * copy.  All 0 without a cluster. */
struct counters_cluster {
	uint64_t registrations;      /* keys created under a new lease (the first included) */
	uint64_t leases_lost;        /* keepalives or puts that found the lease gone */
	uint64_t renewals;           /* keepalives etcd answered */
	uint64_t renewal_failures;   /* keepalives that got no answer or an error */
	uint64_t record_writes;      /* the figures put again (they moved by a step) */
	uint64_t unreachable;        /* times etcd became unreachable (logged once each) */
	int64_t last_ok_ms;          /* clock_mono_ms() of etcd's last answer; 0: none yet */
	uint8_t registered;          /* the key is there under a live lease */
	uint8_t etcd_reachable;      /* etcd answered since it was last declared unreachable */
};

/* The repair agent's (repair_agent.c), copied by the loop. */
struct counters_repair {
	uint64_t pieces;             /* pieces rebuilt and put in place */
	uint64_t bytes;              /* their bytes */
	uint64_t failures;           /* regions whose repair failed (tried again) */
	uint64_t scans;              /* looks at every record, while leading */
	uint64_t given_back;         /* this member's pieces no record names, unlinked */
	uint64_t healthy, degraded;  /* redundant regions at the last scan (leader's) */
	uint64_t repairing;          /* regions being repaired now */
	uint8_t on;                  /* the agent runs (cluster.repair_grace_ms) */
	uint8_t leading;             /* this member leads repair */
};

struct counters {
	uint64_t alloc_failures[COUNTERS_NERRNO];
	uint64_t auth_failures[COUNTERS_NAUTH];
	/* [enum session_transport][enum counters_io]: region bytes moved by
	 * READ and WRITE on the stream (TCP or Unix socket) path */
	uint64_t stream_bytes[2][COUNTERS_NIO];
	uint64_t rdma_attaches;      /* queue pairs accepted for a session */
	uint64_t rdma_reattaches;    /* a session's queue pair replaced */
	uint64_t lease_expiries;     /* sessions ended by limits.lease_timeout_ms */
	uint64_t frame_timeouts;     /* connections ended by limits.frame_timeout_ms */
	uint64_t restarts_restored;  /* starts that took their state back */
	uint64_t quarantine_bytes;   /* a gauge: bytes waiting in the quarantine */
	struct counters_cluster cluster;
	struct counters_repair repair;
	/* Service time per opcode (conn.c): from the complete request to its
	 * reply queued; a WRITE from its header, so its data's arrival counts. */
	struct counters_hist requests[PROTO_OP_COUNT];
};

static inline enum counters_errno counters_errno_of(int rc)
{
	switch (rc) {
	case -ENOMEM: return COUNTERS_ENOMEM;
	case -EDQUOT: return COUNTERS_EDQUOT;
	case -EINVAL: return COUNTERS_EINVAL;
	case -EEXIST: return COUNTERS_EEXIST;
	case -EMFILE: return COUNTERS_EMFILE;
	default:      return COUNTERS_EOTHER;
	}
}

static inline void counters_observe(struct counters_hist *h, uint64_t ns)
{
	static const uint64_t bound[COUNTERS_NBUCKETS - 1] = COUNTERS_BUCKET_NS;
	unsigned i = 0;

	while (i < COUNTERS_NBUCKETS - 1 && ns > bound[i])
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum_ns += ns;
}

#endif /* RMEMD_COUNTERS_H */
