/*
 * client.h - librmem internals: the session behind the opaque rmem_client.
 *
 * The library is layered, each layer calling only the ones below it:
 *   api        client.c (connect, session calls), io.c (transfers, posted
 *              operations, atomics, rmem_poll), membuf.c, compat.c,
 *              version.c, strerror.c; auth.c (the tenant handshake) and
 *              keepalive.c (the lease thread) beside them
 *   engine     engine.c (the in-order request engine on the stream),
 *              datapath.c (reads, writes and atomics on the NIC or the stream)
 *   transport  tcp.c (TCP and Unix sockets) | nic_conn.c, nic_post.c,
 *              nic_regcache.c (RDMA verbs; calls up only through the
 *              callbacks it was given)
 *   common     proto.c (the wire codec), endpoint.c; lock.c; op.h (a record)
 *
 * Locking: every public call that touches a client holds c->lock (lock.h)
 * from start to end, including its waits on the socket.  So the engine and
 * everything below it are only ever used by one thread at a time.
 */
#ifndef RMEM_CLIENT_H
#define RMEM_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "lock.h"
#include "rmem.h"

#define CLIENT_DEFAULT_TIMEOUT_MS 10000

struct keepalive;

struct rmem_client {
	struct fair_lock lock;
	struct engine eng;
	/* static string: "tcp" or "unix", the stream; rmem_transport() says
	 * "rdma" while the data goes on the queue pair */
	const char *stream;
	uint64_t session_id;
	struct keepalive *keepalive; /* NULL when no thread runs */
};

/* ---- io.c --------------------------------------------------------------------- */

/* rmem_post_alloc, for a caller whose struct rmem_region is out_size bytes
 * (compat.c: programs built against older headers). */
int client_post_alloc(rmem_client *c, uint64_t size, uint32_t flags, void *out,
		      size_t out_size, uint64_t cookie);

#endif /* RMEM_CLIENT_H */
