/*
 * member.h - rmemd's membership in a cluster of memory servers on etcd
 * (rmemd.conf's cluster block; docs/architecture.md, "Cluster").
 *
 * With cluster.etcd set, an agent thread holds an etcd lease and one key,
 * /rmem/<name>/servers/<id>, whose value (cluster_rec.h) says where this
 * server is and how much memory it has free.  The loop publishes its
 * figures into atomics on a timer of its own; the agent reads them and
 * talks to etcd.  Neither waits for the other: etcd is never on the data
 * path, the alloc path or the loop.  Only main.c calls this module; it calls
 * only downward (the pools' allocators, the etcd client).
 */
#ifndef RMEMD_MEMBER_H
#define RMEMD_MEMBER_H

#include <stdint.h>

struct server;

/* What the agent is doing, for the log and (later) the metrics. */
enum member_state {
	MEMBER_OFF = 0,        /* no cluster.etcd */
	MEMBER_JOINING,        /* granting a lease and writing the key */
	MEMBER_REGISTERED,     /* the key is there under a live lease */
	MEMBER_UNREACHABLE,    /* no etcd endpoint answers; serving on */
};

/*
 * Starts the agent (after the pools, the NIC and the listeners, so that
 * what it advertises is true).  Nothing happens without cluster.etcd.
 * 0, or a negative errno when the thread or the timer cannot be had; etcd
 * being down is never an error here (the agent keeps trying).
 */
int member_start(struct server *srv);

/* Stops the agent: it revokes its lease (so the key goes at once, not at
 * the lease's end) within a bounded time, and the thread is joined.  When
 * srv->keep_state is set (a restart under the fd store: persist_keep ran
 * first) the lease is not revoked: the next start, with the same id and
 * generation from the state memfd, takes it over, so the server never
 * leaves the set.  Accepts a server whose start failed or never ran. */
void member_stop(struct server *srv);

/* The agent's state now (MEMBER_OFF without a cluster). */
enum member_state member_state(const struct server *srv);
/* The id this member has in etcd ("" without a cluster), and the
 * generation of its memory. */
const char *member_id(const struct server *srv);
uint64_t member_generation(const struct server *srv);

/* When a change of the free figures is worth a write to etcd: at least
 * max(1 MiB, pool_bytes / 64).  Exposed for the tests. */
uint64_t member_refresh_step(uint64_t pool_bytes);

#endif /* RMEMD_MEMBER_H */
