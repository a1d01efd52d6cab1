/*
 * session.h - one client of rmemd: who it is, what it may do and the regions
 * it holds.  A session lives exactly as long as its connection; destroying it
 * returns every region it still holds (keys die first, then bytes are zeroed,
 * then the range goes back to the allocator) and releases its handles of
 * named regions, which outlive it.
 *
 * The region operations here are the only place that decides whether a
 * client may touch a range: owner, key and bounds are checked on every call.
 */
#ifndef RMEMD_SESSION_H
#define RMEMD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "region.h"
#include "tenant.h"

struct server;
struct range_hold;
struct nic_peer;
struct config_tenant;

enum session_transport { SESSION_TCP, SESSION_UNIX };

struct session {
	uint64_t id;
	enum session_transport transport;
	bool admin;            /* may use admin requests (Unix socket, trusted uid) */
	bool hello_done;
	bool admin_seat;       /* its HELLO took an admin seat (tenant_session_take) */
	char peer[64];
	const char *tls_kind;  /* "tls", "ktls"... (common/tls.h, tls_kind), NULL: clear text */
	uint64_t started_ns, last_ns;
	uint64_t used_bytes;
	uint64_t nregions;
	uint32_t nhandles;       /* of named regions, in nregions too (limits.max_handles) */
	struct region_list regions;
	uint64_t attach_token;   /* the secret that ties a queue pair to us (HELLO) */
	struct nic_peer *nic;    /* our attached queue pair (nic_conn.c), or NULL */
	/* tenants (tenant.c) */
	const struct config_tenant *tenant;  /* proven by AUTH; NULL: anonymous */
	bool cert_tenant;                    /* proven by the TLS client certificate
						(listen.tls.cert_tenants) instead */
	struct tenant_auth auth;             /* the handshake in progress */
	struct session *prev, *next;
	/* Restart without loss (docs/protocol.md 7.13): the secret that takes
	 * the session back (drawn at HELLO, kept in the state memfd); restored:
	 * brought back by a restore; detached: restored and not resumed yet
	 * (no connection holds it). */
	uint8_t resume_token[16];
	bool restored, detached;
};

struct session *session_new(struct server *srv, enum session_transport transport,
			    bool admin, const char *peer);
/* Frees every region of s, then s: the queue pair stops first, then each
 * key dies, then the queue pair goes.  Accepts NULL. */
void session_destroy(struct server *srv, struct session *s);
/* Takes s out of srv's list of sessions (its links are cleared). */
void session_unlist(struct server *srv, struct session *s);

/* HELLO: counts the session as a client and draws its attach token;
 * -EUSERS past limits.max_clients, -EINVAL when repeated. */
int session_hello(struct server *srv, struct session *s);

/* The session past HELLO with this id, or NULL (for the RDMA attach). */
struct session *session_find(struct server *srv, uint64_t id);
/* Whether token is s's attach token, in time independent of where they differ. */
bool session_token_ok(const struct session *s, uint64_t token);

/* remote_malloc: best fit over the pools.  A session with a queue pair gets
 * a key the NIC enforces (srv->keys->key_new's errors too); others a random
 * key.  Ranges of the quarantine that are due are returned first when the
 * pools have no room.
 * -EINVAL, -ENOMEM, -EDQUOT (past the tenant's quota or max_regions). */
int session_alloc(struct server *srv, struct session *s, uint64_t size, uint32_t flags,
		  const struct region **out);
/* remote_free: -ENOENT, -EACCES.  A region with a NIC key loses it first and
 * its range waits in the quarantine before it is zeroed and reused. */
int session_free(struct server *srv, struct session *s, uint64_t id, uint32_t key);
/*
 * Checks an access of [off, off + len) of region id with key that needs the
 * rights need (PROTO_ACCESS_READ for READ, PROTO_ACCESS_WRITE for WRITE,
 * CAS and FAA) and returns where those bytes live in the pool: -ENOENT,
 * -EACCES (not s's region, a wrong key, or a named handle without those
 * rights), -ERANGE.
 */
int session_io(struct server *srv, struct session *s, uint64_t id, uint32_t key, uint32_t need,
	       uint64_t off, uint64_t len, uint8_t **where, struct range_hold *hold);

/*
 * A range in flight (docs/architecture.md, "Invariant: a range in flight is
 * never reused").  A TCP or Unix transfer that outlives the call that
 * checked it (a WRITE whose data is still arriving, a READ reply queued by
 * reference to the pool) holds its region's range: session_io() takes the
 * hold when it succeeds with hold non-NULL.  Whatever ends the region
 * meanwhile (free, revoke, unlink, a session's end, its lease's), the range
 * is neither zeroed nor returned, and its bytes stay counted (used bytes,
 * the tenant's quota), until the last hold on it is released; then it goes
 * back as it would have (after the quarantine if a NIC key over it died
 * unconfirmed).  ended tells the holder that its region is gone: a WRITE
 * stops writing and fails with -ECANCELED; a READ reply goes on from the
 * held bytes, which nobody else can write.  A handle revoked while its
 * object lives on (an exclusive open fenced it) ends its holds too.  The owner embeds the struct
 * (zeroed = not held) and must release it before it goes.
 */
struct range_hold {
	uint64_t region;          /* the region it was taken through */
	uint32_t pool;
	uint64_t offset, length;  /* the region's whole range */
	bool active;              /* in srv->holds */
	bool ended;               /* the region ended while held */
	/* One hold of an ended range owes its give-back: the last one
	 * released returns the range (session.c, session_unhold). */
	bool owes, owes_wait;
	uint32_t owes_pool;
	uint64_t owes_offset, owes_length;
	const struct config_tenant *owes_tenant;
	struct range_hold *prev, *next;
};
/* Releases h (nothing when it is not held); the range goes back if h was
 * the last hold of a region that ended. */
void session_unhold(struct server *srv, struct range_hold *h);

/*
 * Named regions (names.h; docs/architecture.md, "Named regions").  Names
 * live in s's namespace (its tenant; anonymous clients share one).
 * create: like session_alloc (the same quota and pools: the object's bytes
 * and one region count against s's tenant until its range is back), under
 * a new name, and a READ|WRITE handle for s.  open: a handle for s with
 * exactly access.  A handle is a region of s's: session_free and the
 * session's end release that handle only.  unlink: the name goes at once;
 * the range goes back when the last handle is released, or now with
 * PROTO_UNLINK_REVOKE, which releases every handle, whoever holds it (keys
 * first).  open with PROTO_ACCESS_EXCL (and WRITE) revokes every other
 * handle that may write first (proto.h); *granted is the reply's flags:
 * access, with PROTO_ACCESS_FENCED when it revoked any.
 * Errors: -EINVAL (a bad name, size, flags or access), -EEXIST,
 * -ENOENT, and session_alloc's.
 */
int session_create(struct server *srv, struct session *s, const char *name, size_t name_len,
		   uint64_t size, uint32_t flags, const struct region **out);
int session_open(struct server *srv, struct session *s, const char *name, size_t name_len,
		 uint32_t access, const struct region **out, uint32_t *granted);
int session_unlink(struct server *srv, struct session *s, const char *name, size_t name_len,
		   uint32_t flags);
/* The same in namespace ns (NULL: anonymous), for whoever may name it. */
int session_unlink_ns(struct server *srv, const struct config_tenant *ns, const char *name,
		      size_t name_len, uint32_t flags);

/*
 * The quarantine: a range whose NIC key died without a completion that
 * confirms it (keys.h, KEY_UNCONFIRMED) waits QUARANTINE_MS before it is
 * zeroed and returned to its allocator, so that an access already on the
 * wire can never land in the next owner's region.  A key whose death the
 * NIC confirmed skips it.  The list and its timer are quarantine.h's;
 * session.c decides what enters and returns what comes out.  init makes
 * srv->quarantine (0 or -ENOMEM); flush returns every range at once and
 * frees it (at shutdown, when no queue pair is left).
 */
#define QUARANTINE_MS 200
int session_quarantine_init(struct server *srv);
void session_quarantine_flush(struct server *srv);
/*
 * Whether an allocation of size bytes by s that failed with rc could succeed
 * once the quarantine returns its ranges: for -ENOMEM, some pool's free and
 * quarantined bytes together reach size; for -EDQUOT, s's tenant would be
 * within its quota with its quarantined bytes back.  *due_ns is then when the
 * next range is due (clock_mono_ns's clock).
 */
bool session_quarantine_may_help(struct server *srv, const struct session *s, uint64_t size,
				 int rc, uint64_t *due_ns);

#endif /* RMEMD_SESSION_H */
