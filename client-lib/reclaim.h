/*
 * reclaim.h - taking a session back after the daemon restarted (reclaim.c;
 * docs/protocol.md 7.13, librmem(7) RESUME).
 *
 * With opts.resume_ms > 0 the client asks HELLO for the session's resume
 * token.  When its connection is lost, the next call (or the keepalive
 * thread) reconnects with backoff for up to resume_ms: a new stream to the
 * same endpoint, the tenant handshake again, RESUME; a new queue pair with
 * the new attach token where the client was on RDMA.  Every key of the
 * session is new then, and every address may be: the client learns each
 * region's with REKEY on the region's first use after the resume, into a
 * small map from region id to (addr, rkey), through which every call that
 * takes a struct rmem_region translates (client_region_now, client.h), so
 * the application's values stay valid.  Posted reads and writes that the
 * loss ended were parked by the engine and are sent again; other posted
 * requests in flight (alloc, free) end with -ECONNABORTED.
 *
 * Everything here runs under the client's lock.
 */
#ifndef RMEM_RECLAIM_H
#define RMEM_RECLAIM_H

#include <stdbool.h>
#include <stdint.h>

#include "endpoint.h"
#include "proto.h"
#include "rmem.h"

struct engine;

/* Which data path the client asked for, narrowed at connect (client.c):
 * a resume keeps to it (rdma:// never moves to TCP). */
enum transport_choice {
	CHOICE_AUTO,
	CHOICE_TCP,
	CHOICE_RDMA,
};

/* A region's key and address since the last resume. */
struct resume_key {
	uint64_t id;      /* 0: empty slot (region ids start at 1) */
	uint64_t addr;
	uint32_t rkey;
};

struct reclaim {
	int resume_ms;             /* 0: off */
	struct engine *eng;        /* the client's */
	struct endpoint ep;        /* where to connect again */
	char tcp_cc[16];           /* and how: TCP_CONGESTION, "" the system's (tcp_cc.h) */
	struct tls_ctx *tls;       /* ep.tls: the TLS context (common/tls.h), owned */
	enum transport_choice choice;
	char *tenant, *secret_file; /* copies; NULL: anonymous */
	uint64_t session_id;
	uint8_t token[PROTO_RESUME_TOKEN_LEN];
	bool dead;                 /* a resume failed: the client is broken for good */
	/* Resumes so far; 0: the fast path everywhere.  Written under the
	 * client's lock, by __atomic stores, so that the router may read it
	 * without the lock (single_resumes). */
	uint32_t epoch;
	uint64_t max_id;           /* highest region id handed to the application */
	/* Regions with ids below this were handed out before the last resume:
	 * their keys (and addresses) are in the map, or REKEY fetches them. */
	uint64_t stale_below;
	struct resume_key *map;    /* open addressing, map_cap a power of two */
	uint32_t map_cap, map_used;
};

/* Readies rs for the client whose engine is e, connected to ep with
 * choice: copies tenant and secret_file (either may be NULL).  The session
 * id and token are filled in at HELLO.  0 or -ENOMEM. */
int reclaim_init(struct reclaim *rs, struct engine *e, const struct endpoint *ep,
		enum transport_choice choice, int resume_ms, const char *tenant,
		const char *secret_file);
/* Frees what rs holds; accepts a zeroed or half-built one. */
void reclaim_fini(struct reclaim *rs);

/* A new stream to rs->ep within timeout_ms: the socket, and over TLS (rs->tls)
 * its handshake done, the session in *tls (NULL for clear text).  The
 * socket, or a negative errno (tcp.h's, and tls.h's for TLS). */
struct tls_conn;
int reclaim_dial(const struct reclaim *rs, int timeout_ms, struct tls_conn **tls);

/*
 * Takes the session back after the stream broke, within rs.resume_ms:
 * 0 (the engine works again, parked reads and writes are on their way),
 * or -ECONNRESET: the daemon did not come back in time, refused the
 * session (ENOENT: nothing restored; EACCES: wrong token or tenant), or
 * the stream broke for a reason a new one would not cure (garbage); the
 * client is then broken for good and parked operations end with
 * -ECONNRESET.  Under the client's lock.
 */
int reclaim_run(struct reclaim *rs);

/* client_region_now()'s slow path: *r translated through the map into tmp
 * (REKEY on a miss).  0 or a negative errno. */
int reclaim_region(struct reclaim *rs, const struct rmem_region **r, struct rmem_region *tmp);

/* The engine's recover hook (ctx: the struct reclaim), for the keepalive
 * thread. */
int reclaim_hook(void *ctx);

#endif /* RMEM_RECLAIM_H */
