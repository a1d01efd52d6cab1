/*
 * client.h - librmem internals: the session behind the opaque rmem_client.
 *
 * The library is layered, each layer calling only the ones below it:
 *   entry      api.c: the public calls that take a client, handing a
 *              single-server client to single.h's calls (below) and a
 *              cluster client (etcd://, c->router set) to the router,
 *              router.h, which uses single.h on its servers' clients
 *   api        client.c (connect, session calls), io.c (transfers, posted
 *              operations, atomics, rmem_poll), named.c (named regions:
 *              it uses client.c's request steps below), membuf.c, compat.c,
 *              version.c, strerror.c; auth.c (the tenant handshake),
 *              reclaim.c (taking the session back after a daemon restart,
 *              new keys) and keepalive.c (the lease thread) beside them
 *   engine     engine.c (the in-order request engine on the stream),
 *              datapath.c (reads, writes and atomics on the NIC or the stream)
 *   transport  tcp.c (TCP and Unix sockets) | verbs_conn.c, verbs_post.c,
 *              verbs_regcache.c (RDMA verbs; calls up only through the
 *              callbacks it was given)
 *   common     proto.c (the wire codec), endpoint.c; lock.c; op.h (a record)
 *
 * Locking: every public call that touches a client holds c->lock (lock.h)
 * from start to end, including its waits on the socket.  So the engine and
 * everything below it are only ever used by one thread at a time.
 */
#ifndef RMEM_CLIENT_H
#define RMEM_CLIENT_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "lock.h"
#include "reclaim.h"
#include "rmem.h"
#include "single.h"

#define CLIENT_DEFAULT_TIMEOUT_MS 10000
#define CLIENT_DEFAULT_RESUME_MS  5000

struct keepalive;

struct router;

struct rmem_client {
	/* Not NULL: an etcd:// cluster client, whose every call goes to the
	 * router (router.h) and which uses nothing below; api.c tells. */
	struct router *router;
	struct fair_lock lock;
	struct engine eng;
	/* static string: "tcp" or "unix", the stream; rmem_transport() says
	 * "rdma" while the data goes on the queue pair */
	const char *stream;
	uint64_t session_id;
	struct keepalive *keepalive; /* NULL when no thread runs */
	/* What a resume needs and keeps (reclaim.c): where, which data path,
	 * as whom, the token, the map of new keys. */
	struct reclaim rs;
	/* rmem_fd()'s descriptors (pollfd.c), made by its first call; NULL
	 * until then, and then client_release() keeps them armed. */
	struct client_pollfd *pollfd;
};

/* The client of an engine: for the engine's callbacks that act for the
 * client (a posted ALLOC's reply). */
#define client_of_engine(e) \
	((struct rmem_client *)((char *)(e) - offsetof(struct rmem_client, eng)))

/* ---- calls that take the client (client.c) ------------------------------------ */

/* Takes the client's lock for a call; when the connection was lost and
 * the client may resume, resumes first (reclaim.c), so the call runs on a
 * working session or finds the client broken. */
void client_hold(struct rmem_client *c);
void client_release(struct rmem_client *c);
/* After a call under the lock failed with err: true when err came from
 * losing the connection and the client has just resumed.  The caller then
 * sends an idempotent request again, and says -ECONNABORTED (outcome
 * unknown) for any other. */
bool client_recovered(struct rmem_client *c, int err);

/* ---- rmem_fd (pollfd.c) ------------------------------------------------------------ */

/* rmem_fd() of a single-server client: an epoll descriptor, readable when
 * single_poll(c, .., 0) has something to do.  Takes the client. */
int single_fd(struct rmem_client *c);
/* Under the client's lock, before it goes: makes the descriptor readable
 * or not for the engine's state now (a no-op without rmem_fd). */
void pollfd_arm(struct rmem_client *c);
/* Closes the descriptors (single_close). */
void pollfd_free(struct rmem_client *c);
/* How many times a call sends an idempotent request again after resumes
 * before it gives up with the last error. */
#define CLIENT_RETRIES 3
/*
 * The one retry rule of every call that may run again after a resume:
 * true when an attempt that failed with err may be made again (fewer
 * than CLIENT_RETRIES made again so far, counted in *tries, which starts
 * at 0, and the client has just resumed from the lost connection that
 * err came from).  Used as
 *	int tries = 0;
 *	do err = attempt(); while (client_again(c, &tries, err));
 * for an attempt that is idempotent and built anew each time.
 */
static inline bool client_again(struct rmem_client *c, int *tries, int err)
{
	return (*tries)++ < CLIENT_RETRIES && client_recovered(c, err);
}
/* For a request that is not idempotent and so never sent again: err, or
 * -ECONNABORTED (outcome unknown) when it failed from a lost connection
 * that the client has just resumed. */
static inline int client_once(struct rmem_client *c, int err)
{
	return client_recovered(c, err) ? -ECONNABORTED : err;
}
/* err = expr, evaluated again while client_again says so: the loop above
 * for a call whose attempt is one expression. */
#define CLIENT_RETRY(c, err, expr)                                               \
	for (int client_try_ = 0; ((err) = (expr)), client_again((c), &client_try_, (err));)

/* The region as the daemon knows it now: *r itself before any resume (one
 * predictable branch) and for regions handed out since the last one;
 * otherwise *r is pointed at tmp, filled with the region's new addr and
 * rkey (REKEY on its first use since the resume, reclaim.c).  Under the
 * lock.  0 or a negative errno (-ENOENT: the region is gone). */
static inline int client_region_now(struct rmem_client *c, const struct rmem_region **r,
				    struct rmem_region *tmp)
{
	if (__builtin_expect(__atomic_load_n(&c->rs.epoch, __ATOMIC_RELAXED) == 0, 1) ||
	    (*r)->id >= c->rs.stale_below)
		return 0;
	return reclaim_region(&c->rs, r, tmp);
}

/* A region handed to the application (ALLOC, CREATE, OPEN): the resume
 * needs the highest id. */
static inline void client_saw_region(struct rmem_client *c, uint64_t id)
{
	if (id > c->rs.max_id)
		c->rs.max_id = id;
}

/* ---- client.c: request steps shared by the calls of client.c, io.c and named.c -- */

struct proto_region;

/* What ALLOC (and CREATE) accept: -EINVAL for a NULL c or out, size 0 or
 * flags other than 0. */
int client_check_alloc(const rmem_client *c, uint64_t size, uint32_t flags, const void *out);
/* A region reply (ALLOC, CREATE, OPEN) as the caller sees it. */
void client_region_fill(struct rmem_region *out, const struct proto_region *reg);
/* One request answered with a region (ALLOC, CREATE, OPEN): 0 and *out
 * filled, or the daemon's status, or the engine's error.  Under c->lock. */
int client_region_call(struct rmem_client *c, uint16_t opcode, const void *req, size_t len,
		       struct rmem_region *out);
/* One request answered with a status alone (FREE, UNLINK).  Under c->lock. */
int client_status_call(struct rmem_client *c, uint16_t opcode, const void *req, size_t len);

/* Listings.  client_check_list: -EINVAL for a NULL c, or a NULL out with
 * max > 0.  client_list_call (under c->lock): sends a listing request and
 * checks the reply; on success *count (<= limit) records of reclen bytes
 * follow the list header in c->eng.rx, and client_list_record() is the
 * i-th.  client_page_call: the same for a paged listing (REGIONS, CLIENTS,
 * NAMES) of at most max records after id after. */
int client_check_list(const rmem_client *c, const void *out, size_t max);
int client_list_call(struct rmem_client *c, uint16_t opcode, const void *req, size_t req_len,
		     size_t reclen, uint32_t limit, uint32_t *count);
int client_page_call(struct rmem_client *c, uint16_t opcode, uint64_t after, size_t max,
		     size_t reclen, uint32_t *count);
const uint8_t *client_list_record(const struct rmem_client *c, size_t reclen, uint32_t i);
/* What a listing call asks: up to max entries into out, after id after
 * (the paged ones); REGIONS: entries of stride bytes (the caller's struct
 * rmem_region_info), named: REGIONS_NAMED. */
struct client_list_ask {
	uint64_t after;
	void *out;
	size_t max, stride;
	bool named;
};
/* A listing call as the application makes it: client_check_list, then
 * page(c, a) under c->lock, retried over a resume (never called for max 0):
 * page's count, 0, or a negative errno. */
int client_listing(struct rmem_client *c, const struct client_list_ask *a,
		   int (*page)(struct rmem_client *c, const struct client_list_ask *a));
/* rmem_regions for a caller whose struct rmem_region_info is stride bytes
 * (compat.c); named: ask for the named records (RMEM_1.2's fields). */
int client_regions(struct rmem_client *c, uint64_t after, void *out, size_t stride,
		   size_t max, bool named);

/* ---- io.c --------------------------------------------------------------------- */

/* rmem_post_alloc, for a caller whose struct rmem_region is out_size bytes
 * (compat.c: programs built against older headers). */
int client_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, void *out,
		      size_t out_size, uint64_t cookie);

#endif /* RMEM_CLIENT_H */
