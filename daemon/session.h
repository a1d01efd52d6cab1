/*
 * session.h - one client of rmemd: who it is, what it may do and the regions
 * it holds.  A session lives exactly as long as its connection; destroying it
 * returns every region it still holds (keys die first, then bytes are zeroed,
 * then the range goes back to the allocator).
 *
 * The region operations here are the only place that decides whether a
 * client may touch a range: owner, key and bounds are checked on every call.
 */
#ifndef RMEMD_SESSION_H
#define RMEMD_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "region.h"

struct server;

enum session_transport { SESSION_TCP, SESSION_UNIX };

struct session {
	uint64_t id;
	enum session_transport transport;
	bool admin;            /* may use admin requests (Unix socket, trusted uid) */
	bool hello_done;
	char peer[64];
	uint64_t started_ns, last_ns;
	uint64_t used_bytes;
	uint64_t nregions;
	struct region_list regions;
	struct session *prev, *next;
};

struct session *session_new(struct server *srv, enum session_transport transport,
			    bool admin, const char *peer);
/* Frees every region of s, then s.  Accepts NULL. */
void session_destroy(struct server *srv, struct session *s);

/* HELLO: counts the session as a client; -EUSERS past limits.max_clients,
 * -EINVAL when repeated. */
int session_hello(struct server *srv, struct session *s);

/* remote_malloc: best fit over the pools.  -EINVAL, -ENOMEM. */
int session_alloc(struct server *srv, struct session *s, uint64_t size, uint32_t flags,
		  const struct region **out);
/* remote_free: -ENOENT, -EACCES. */
int session_free(struct server *srv, struct session *s, uint64_t id, uint32_t key);
/*
 * Checks a read or write of [off, off + len) of region id with key and
 * returns where those bytes live in the pool: -ENOENT, -EACCES, -ERANGE.
 */
int session_io(struct server *srv, struct session *s, uint64_t id, uint32_t key,
	       uint64_t off, uint64_t len, uint8_t **where);

uint64_t session_now_ns(void);

#endif /* RMEMD_SESSION_H */
