/*
 * tenant.c - see tenant.h.
 */
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "authmac.h"
#include "log.h"
#include "randbytes.h"
#include "server.h"
#include "slots.h"
#include "tenant.h"

_Static_assert(PROTO_TENANT_LEN == CONFIG_NAME_MAX, "a tenant name fits the wire field");
_Static_assert(crypto_auth_hmacsha256_BYTES == PROTO_MAC_LEN, "MAC size");

/* Buffers for group lists: enough for any sane account. */
#define GROUPS_MAX 1024

int tenant_init(struct server *srv)
{
	if (sodium_init() < 0) {
		log_err("libsodium cannot start");
		return -EIO;
	}
	if (!srv->cfg.ntenants) {
		log_notice("no tenants configured: anonymous clients from this host only "
			   "(Unix socket, loopback, or this host's own addresses)");
		return 0;
	}
	log_notice("%zu tenant(s) configured: network clients must authenticate; the Unix "
		   "socket also serves anonymous clients", srv->cfg.ntenants);
	return 0;
}

/* ---- admin peers ------------------------------------------------------------ */

static bool uid_in_group(uid_t uid, gid_t primary, gid_t group)
{
	struct passwd pw, *found = NULL;
	gid_t *groups = NULL;
	char *buf = NULL;
	int n = GROUPS_MAX;
	bool in = false;

	if (primary == group)
		return true;
	buf = malloc(16384);
	groups = malloc(sizeof *groups * GROUPS_MAX);
	if (!buf || !groups || getpwuid_r(uid, &pw, buf, 16384, &found) || !found)
		goto out;
	if (pw.pw_gid == group)
		in = true;
	else if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &n) >= 0)
		for (int i = 0; i < n && !in; i++)
			in = groups[i] == group;
out:
	free(groups);
	free(buf);
	return in;
}

bool tenant_admin_peer(uid_t uid, gid_t gid)
{
	struct group gr, *found = NULL;
	char buf[16384]; /* a group with many members needs room */

	if (uid == 0 || uid == geteuid())
		return true;
	/* No group "rmem": root and our own uid only. */
	if (getgrnam_r(TENANT_ADMIN_GROUP, &gr, buf, sizeof buf, &found) || !found)
		return false;
	return uid_in_group(uid, gid, gr.gr_gid);
}

/* ---- who may say HELLO -------------------------------------------------------- */

static bool v4_loopback(const struct in_addr *a)
{
	return (ntohl(a->s_addr) >> 24) == 127;
}

/* Loopback, or the peer's address is the one it reached us on: a client on
 * this host that dialled one of its own addresses (a veth, say). */
static bool peer_is_local(int fd)
{
	struct sockaddr_storage peer, self;
	socklen_t plen = sizeof peer, slen = sizeof self;

	if (getpeername(fd, (struct sockaddr *)&peer, &plen) < 0 ||
	    getsockname(fd, (struct sockaddr *)&self, &slen) < 0 ||
	    peer.ss_family != self.ss_family)
		return false;
	if (peer.ss_family == AF_INET) {
		const struct sockaddr_in *p = (const struct sockaddr_in *)&peer;
		const struct sockaddr_in *s = (const struct sockaddr_in *)&self;

		return v4_loopback(&p->sin_addr) || p->sin_addr.s_addr == s->sin_addr.s_addr;
	}
	if (peer.ss_family == AF_INET6) {
		const struct sockaddr_in6 *p = (const struct sockaddr_in6 *)&peer;
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&self;
		struct in_addr v4;

		if (IN6_IS_ADDR_LOOPBACK(&p->sin6_addr))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(&p->sin6_addr)) {
			memcpy(&v4, p->sin6_addr.s6_addr + 12, sizeof v4);
			if (v4_loopback(&v4))
				return true;
		}
		return !memcmp(&p->sin6_addr, &s->sin6_addr, sizeof p->sin6_addr);
	}
	return peer.ss_family == AF_UNIX;
}

int tenant_hello_allowed(struct server *srv, const struct config_tenant *proven, bool unix_peer,
			 int fd, char *why, size_t whylen)
{
	if (proven || unix_peer)
		return 0;
	if (srv->cfg.ntenants) {
		snprintf(why, whylen, "anonymous client refused: tenants are configured and "
			 "network clients must authenticate");
		return -EACCES;
	}
	if (peer_is_local(fd))
		return 0;
	snprintf(why, whylen, "anonymous client refused: no tenants are configured, so only "
		 "clients on this host may connect");
	return -EACCES;
}

/* ---- the handshake ------------------------------------------------------------ */

/* A name from the wire, safe to log. */
static const char *printable(const char *name, char *buf, size_t len)
{
	size_t n = 0;

	for (; *name && n + 1 < len; name++)
		buf[n++] = (*name > 0x20 && *name < 0x7f && *name != '"') ? *name : '?';
	buf[n] = '\0';
	return buf;
}

static void auth_mac(const struct config_tenant *t, enum proto_auth_role role,
		     const struct tenant_auth *a, uint64_t session_id, uint8_t mac[PROTO_MAC_LEN])
{
	authmac_compute(t->secret, t->secret_len, role, t->name, a->server_nonce,
			a->client_nonce, session_id, mac);
}

const struct config_tenant *tenant_find(struct server *srv, const char *name, size_t len)
{
	for (size_t i = 0; i < srv->cfg.ntenants; i++) {
		const struct config_tenant *t = &srv->cfg.tenants[i];

		if (strlen(t->name) == len && !memcmp(t->name, name, len))
			return t;
	}
	return NULL;
}

int tenant_auth_begin(struct server *srv, struct tenant_auth *a, uint64_t session_id,
		      const struct proto_auth_begin_req *req, struct proto_auth_begin_rep *rep,
		      char *why, size_t whylen)
{
	const struct config_tenant *t = NULL;
	char name[PROTO_TENANT_LEN];

	if (a->claimed)
		return -EINVAL;
	for (size_t i = 0; i < srv->cfg.ntenants && !t; i++)
		if (!strncmp(srv->cfg.tenants[i].name, req->tenant, PROTO_TENANT_LEN))
			t = &srv->cfg.tenants[i];
	if (!t) {
		snprintf(why, whylen, "authentication refused: unknown tenant \"%s\"",
			 printable(req->tenant, name, sizeof name));
		return -EACCES;
	}
	if (rand_bytes(a->server_nonce, sizeof a->server_nonce) < 0)
		return -EIO;
	memcpy(a->client_nonce, req->client_nonce, sizeof a->client_nonce);
	a->claimed = t;
	rep->session_id = session_id;
	memcpy(rep->server_nonce, a->server_nonce, sizeof rep->server_nonce);
	return 0;
}

int tenant_auth_finish(struct tenant_auth *a, uint64_t session_id,
		       const uint8_t mac[PROTO_MAC_LEN], uint8_t server_mac[PROTO_MAC_LEN],
		       const struct config_tenant **proven, char *why, size_t whylen)
{
	const struct config_tenant *t = a->claimed;
	uint8_t want[PROTO_MAC_LEN];
	int ok;

	if (!t) {
		snprintf(why, whylen, "authentication refused: AUTH without AUTH_BEGIN");
		return -EACCES;
	}
	/* One try per connection: a failed AUTH ends it. */
	a->claimed = NULL;
	auth_mac(t, PROTO_AUTH_CLIENT, a, session_id, want);
	ok = sodium_memcmp(want, mac, PROTO_MAC_LEN) == 0;
	sodium_memzero(want, sizeof want);
	if (!ok) {
		snprintf(why, whylen, "authentication failed for tenant \"%s\": wrong secret "
			 "or replayed handshake", t->name);
		return -EACCES;
	}
	*proven = t;
	auth_mac(t, PROTO_AUTH_SERVER, a, session_id, server_mac);
	return 0;
}

/* ---- quotas -------------------------------------------------------------------- */

/* Tenants in cfg.tenants order, then the anonymous clients. */
static size_t use_index(const struct server *srv, const struct config_tenant *t)
{
	return t ? (size_t)(t - srv->cfg.tenants) : CONFIG_MAX_TENANTS;
}

static struct tenant_use *use_of(struct server *srv, const struct config_tenant *t)
{
	return &srv->tenants.use[use_index(srv, t)];
}

const struct tenant_use *tenant_usage(const struct server *srv, const struct config_tenant *t)
{
	return &srv->tenants.use[use_index(srv, t)];
}

int tenant_check(struct server *srv, const struct config_tenant *t, uint64_t bytes)
{
	const struct tenant_use *u;

	if (!t)
		return 0;
	u = use_of(srv, t);
	if (t->max_regions && u->regions >= t->max_regions)
		return -EDQUOT;
	if (t->quota && (bytes > t->quota || u->bytes > t->quota - bytes))
		return -EDQUOT;
	return 0;
}

int tenant_charge(struct server *srv, const struct config_tenant *t, uint64_t bytes)
{
	struct tenant_use *u;
	int rc = tenant_check(srv, t, bytes);

	if (rc < 0 || !t)
		return rc;
	u = use_of(srv, t);
	u->regions++;
	u->bytes += bytes;
	return 0;
}

void tenant_region_gone(struct server *srv, const struct config_tenant *t)
{
	if (t)
		use_of(srv, t)->regions--;
}

void tenant_bytes_back(struct server *srv, const struct config_tenant *t, uint64_t bytes)
{
	if (t)
		use_of(srv, t)->bytes -= bytes;
}

bool tenant_fits_after(struct server *srv, const struct config_tenant *t, uint64_t bytes,
		       uint64_t back)
{
	const struct tenant_use *u;
	uint64_t after;

	if (!t)
		return true;
	u = use_of(srv, t);
	after = u->bytes > back ? u->bytes - back : 0;
	if (t->max_regions && u->regions >= t->max_regions)
		return false; /* regions leave the count at once: waiting is no help */
	if (u->slots >= tenant_slot_share(srv))
		return false; /* and so do state slots */
	return !t->quota || (bytes <= t->quota && after <= t->quota - bytes);
}

/* A restore (persist.c) charges what the saved state says the tenant holds,
 * past its quota if the config shrank it meanwhile: the bytes are held, and
 * refusing them would lose them. */
void tenant_charge_restored(struct server *srv, const struct config_tenant *t, uint64_t bytes)
{
	struct tenant_use *u;

	if (!t)
		return;
	u = use_of(srv, t);
	u->regions++;
	u->bytes += bytes;
}

/* ---- state slots and sessions ----------------------------------------------------- */

uint32_t tenant_slots_total(const struct server *srv)
{
	/* A restored state keeps the count it was made with. */
	return srv->slots ? slots_count(srv->slots) : srv->cfg.state_slots;
}

uint64_t tenant_slots_used(const struct server *srv)
{
	return CONFIG_FIXED_SLOTS + srv->clients + srv->tenants.slots_charged;
}

/* The records' part: what is left once sessions have theirs. */
static uint64_t record_slots(const struct server *srv)
{
	uint64_t set_aside = (uint64_t)CONFIG_FIXED_SLOTS + srv->cfg.max_clients +
			     CONFIG_ADMIN_SESSIONS;
	uint64_t total = tenant_slots_total(srv);

	return total > set_aside ? total - set_aside : 0;
}

uint64_t tenant_slot_share(const struct server *srv)
{
	return record_slots(srv) / (srv->cfg.ntenants + 1);
}

uint64_t tenant_session_share(const struct server *srv)
{
	uint64_t share = srv->cfg.max_clients / (srv->cfg.ntenants + 1);

	return share ? share : 1;
}

int tenant_slots_take(struct server *srv, const struct config_tenant *t, uint32_t n)
{
	struct tenant_use *u = use_of(srv, t);

	if (u->slots + n > tenant_slot_share(srv))
		return -EDQUOT;
	if (srv->tenants.slots_charged + n > record_slots(srv))
		return -ENOSPC;
	u->slots += n;
	srv->tenants.slots_charged += n;
	return 0;
}

void tenant_slots_give(struct server *srv, const struct config_tenant *t, uint32_t n)
{
	struct tenant_use *u = use_of(srv, t);

	if (u->slots < n || srv->tenants.slots_charged < n) { /* charged and given disagree: a bug */
		log_err("tenant \"%s\": %u state slot(s) given back, %llu charged", t ? t->name : "",
			n, (unsigned long long)u->slots);
		u->slots = u->slots < n ? 0 : u->slots - n;
		srv->tenants.slots_charged = srv->tenants.slots_charged < n ? 0 : srv->tenants.slots_charged - n;
		return;
	}
	u->slots -= n;
	srv->tenants.slots_charged -= n;
}

void tenant_slots_restored(struct server *srv, const struct config_tenant *t, uint32_t n)
{
	use_of(srv, t)->slots += n;
	srv->tenants.slots_charged += n;
}

int tenant_session_take(struct server *srv, const struct config_tenant *t, bool admin,
			bool *admin_seat)
{
	struct tenant_use *u = use_of(srv, t);
	bool shared_free = srv->clients - srv->tenants.admin_clients < srv->cfg.max_clients;

	/* A shared seat while there is one, an admin's own seat after. */
	if (!shared_free && !(admin && srv->tenants.admin_clients < CONFIG_ADMIN_SESSIONS))
		return -EUSERS;
	if (!admin && u->sessions >= tenant_session_share(srv))
		return -EDQUOT;
	*admin_seat = !shared_free;
	srv->tenants.admin_clients += *admin_seat;
	u->sessions++;
	srv->clients++;
	return 0;
}

void tenant_session_give(struct server *srv, const struct config_tenant *t, bool admin_seat)
{
	struct tenant_use *u = use_of(srv, t);

	if (u->sessions)
		u->sessions--;
	if (admin_seat && srv->tenants.admin_clients)
		srv->tenants.admin_clients--;
	if (srv->clients)
		srv->clients--;
}

void tenant_session_restored(struct server *srv, const struct config_tenant *t)
{
	use_of(srv, t)->sessions++;
	srv->clients++;
}
