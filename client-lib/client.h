/*
 * client.h - librmem internals: the session behind the opaque rmem_client.
 *
 * Only the stream path (TCP, Unix socket) exists in this build.  The RDMA
 * path will add its own connection state here and take over READ/WRITE data
 * movement; control requests keep using the framed protocol either way.
 */
#ifndef RMEM_CLIENT_H
#define RMEM_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "proto.h"
#include "rmem.h"

/* Transfers split into chunks of max_io bytes; this many may be in flight at
 * once so that the daemon never waits for the next request. */
#define CLIENT_IO_WINDOW 4

#define CLIENT_DEFAULT_TIMEOUT_MS 10000

struct rmem_client {
	int fd;
	int timeout_ms;          /* each wait for progress; <= 0 waits forever */
	/* Set when the stream state is unknown (timeout, garbage, EOF): every
	 * later call fails with -ECONNRESET without touching the socket. */
	bool broken;
	const char *transport;   /* static string: "tcp" or "unix" */
	uint64_t next_req_id;
	uint64_t session_id;
	uint32_t max_io;         /* min(daemon's max_io, PROTO_MAX_IO), > 0 */
	uint8_t rx[PROTO_MAX_CTL]; /* payload of the last control reply */
};

#endif /* RMEM_CLIENT_H */
