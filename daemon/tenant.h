/*
 * tenant.h - who a client of rmemd is and what it may hold.
 *
 * Who: without tenants in the config, only clients on this host (the Unix
 * socket, loopback, or a TCP peer whose address is the socket's own local
 * address) may open a session, anonymously.  With tenants, every network
 * client must first prove it knows its tenant's secret (AUTH_BEGIN, AUTH:
 * HMAC-SHA256 over both nonces, the tenant and the session id); the Unix
 * socket still serves anonymous clients.  Admin rights (Unix socket only)
 * go to uid 0, rmemd's own uid and members of group "rmem".
 *
 * What: a tenant's regions and bytes are counted against its quota and
 * max_regions.  A region counts until it leaves the table; its bytes count
 * until they are back in the pool (after the quarantine, for a NIC key).
 */
#ifndef RMEMD_TENANT_H
#define RMEMD_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

struct server;
struct config_tenant;

#define TENANT_ADMIN_GROUP "rmem"

/*
 * One session's handshake in progress: tenant.c's state, kept inside
 * struct session, so that this module never needs to know what a session
 * is (session.c calls down into tenant.c, never the other way).
 */
struct tenant_auth {
	const struct config_tenant *claimed; /* named by AUTH_BEGIN, AUTH awaited */
	uint8_t client_nonce[PROTO_NONCE_LEN], server_nonce[PROTO_NONCE_LEN];
};

/* Readies the crypto library; logs who may connect.  0 or -EIO. */
int tenant_init(struct server *srv);

/* The configured tenant named by the len bytes at name, or NULL. */
const struct config_tenant *tenant_find(struct server *srv, const char *name, size_t len);

/* Whether a peer with these credentials gets admin rights. */
bool tenant_admin_peer(uid_t uid, gid_t gid);

/*
 * Whether a session on connection fd (over the Unix socket or not, proven
 * a tenant's or anonymous) may say HELLO: 0, or -EACCES with the reason (for
 * the log) in why.
 */
int tenant_hello_allowed(struct server *srv, const struct config_tenant *proven, bool unix_peer,
			 int fd, char *why, size_t whylen);

/*
 * AUTH_BEGIN of session session_id: remembers the tenant claimed and both
 * nonces in *a, and fills the reply.  AUTH: checks the client's MAC and,
 * when it is right, sets *proven to the tenant and fills the daemon's own
 * MAC.  -EACCES (why says it for the log), -EINVAL (a second AUTH_BEGIN),
 * -EIO (no randomness).  The caller refuses AUTH_BEGIN after HELLO or AUTH.
 */
int tenant_auth_begin(struct server *srv, struct tenant_auth *a, uint64_t session_id,
		      const struct proto_auth_begin_req *req, struct proto_auth_begin_rep *rep,
		      char *why, size_t whylen);
int tenant_auth_finish(struct tenant_auth *a, uint64_t session_id,
		       const uint8_t mac[PROTO_MAC_LEN], uint8_t server_mac[PROTO_MAC_LEN],
		       const struct config_tenant **proven, char *why, size_t whylen);

/*
 * Quotas.  check: -EDQUOT when t (NULL: anonymous, no limit) cannot hold
 * one more region of bytes; charge: the same, then counts it.  The region and its bytes are
 * given back apart (see above).
 */
int tenant_check(struct server *srv, const struct config_tenant *t, uint64_t bytes);
int tenant_charge(struct server *srv, const struct config_tenant *t, uint64_t bytes);
void tenant_region_gone(struct server *srv, const struct config_tenant *t);
/* As tenant_charge without the quota check: a restore's (persist.c). */
void tenant_charge_restored(struct server *srv, const struct config_tenant *t, uint64_t bytes);
void tenant_bytes_back(struct server *srv, const struct config_tenant *t, uint64_t bytes);
/* Whether tenant_check(t, bytes) would pass once back bytes of t's came
 * back to the pool (from the quarantine). */
bool tenant_fits_after(struct server *srv, const struct config_tenant *t, uint64_t bytes,
		       uint64_t back);

/*
 * State slots and sessions (docs/architecture.md, "Invariant: every slot,
 * session and handle has a tenant").  Every record of the state memfd but
 * the two id counters is charged to a tenant, the anonymous clients (t
 * NULL) being one more: a session to its tenant's share of sessions, an
 * anonymous region or a handle (one slot) to its holder's tenant, a named
 * object (two: object and name) to its creator's, until it is freed.  The
 * count is kept whether or not the fd store is there, so that the same
 * limits hold without it.
 *
 * The slots (tenant_slots_total) fall in three parts: CONFIG_FIXED_SLOTS;
 * limits.max_clients + CONFIG_ADMIN_SESSIONS for sessions; the rest for
 * records, shared evenly among the configured tenants and the anonymous
 * clients (tenant_slot_share).  Sessions: limits.max_clients shared the same
 * way (tenant_session_share), and CONFIG_ADMIN_SESSIONS past it that only
 * admin sessions may take.  So no tenant, however it behaves, can take what
 * another's share or an admin needs.
 */
uint32_t tenant_slots_total(const struct server *srv);
/* Slots charged now: the fixed ones, one per session, the records'. */
uint64_t tenant_slots_used(const struct server *srv);
uint64_t tenant_slot_share(const struct server *srv);
uint64_t tenant_session_share(const struct server *srv);
/* What t (NULL: the anonymous clients) holds. */
const struct tenant_use *tenant_usage(const struct server *srv, const struct config_tenant *t);
/* n more record slots for t: 0, -EDQUOT past t's share, -ENOSPC when the
 * records' part is full (a restore brought back more than the shares). */
int tenant_slots_take(struct server *srv, const struct config_tenant *t, uint32_t n);
void tenant_slots_give(struct server *srv, const struct config_tenant *t, uint32_t n);
/* A session past HELLO for t: 0; -EUSERS when limits.max_clients are
 * connected (for an admin session: and the admin seats taken), -EDQUOT past
 * t's share of them (admin sessions are not held to it).  *admin_seat says
 * which seat it took; give takes the same. */
int tenant_session_take(struct server *srv, const struct config_tenant *t, bool admin,
			bool *admin_seat);
void tenant_session_give(struct server *srv, const struct config_tenant *t, bool admin_seat);
/* A restore's (restore.c): charged past any share, as
 * tenant_charge_restored. */
void tenant_slots_restored(struct server *srv, const struct config_tenant *t, uint32_t n);
void tenant_session_restored(struct server *srv, const struct config_tenant *t);

#endif /* RMEMD_TENANT_H */
