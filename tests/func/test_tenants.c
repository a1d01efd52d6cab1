/*
 * test_tenants.c - tenants, their handshake and their quotas, end to end.
 *
 * Two tenants A and B with secrets in a private directory.  B holding A's
 * full region handle (id, addr, rkey) can read, write, CAS, FAA or free
 * nothing, and A's bytes stay as A wrote them.  Quotas (bytes and regions)
 * refuse with -EDQUOT and change nothing; bytes come back when a region is
 * freed or its client dies.  A wrong secret, an unknown tenant, an anonymous
 * network client and a replayed AUTH frame are refused, create no session,
 * and are logged once each.  Without tenants the daemon says at start that
 * only clients of its own host are served.
 * With RMEM_TEST_TRANSPORT=rdma (in the test VM) the tenants' data paths are
 * RDMA: the NIC refuses B's use of A's key.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "harness.h"
#include "tap.h"

#define MiB (1024ull * 1024)
#define KiB 1024ull
#define QUOTA_A (4 * MiB)
#define MAX_REGIONS_B 3
#define WAIT_MS 10000

static char dir[] = "/tmp/test_tenants.XXXXXX";
static const char secret_a[] = "secret of tenant A, 0123456789";
/* The trailing newline is not part of the secret, on either side. */
static struct harness_key keys[] = {
	{ .name = "a.key", .secret = "secret of tenant A, 0123456789\n", .mode = 0600 },
	{ .name = "b.key", .secret = "tenant B has its own secret!!", .mode = 0600 },
	{ .name = "wrong.key", .secret = "secret of tenant A, 012345678X", .mode = 0600 },
	{ .name = "loose.key", .secret = "secret of tenant A, 0123456789", .mode = 0644 },
};
#define NKEYS (sizeof keys / sizeof keys[0])
static const char *const key_a = keys[0].path, *const key_b = keys[1].path;
static const char *const key_wrong = keys[2].path, *const key_loose = keys[3].path;

static uint64_t clients_now(rmem_client *admin)
{
	struct rmem_stats st = { 0 };

	if (rmem_stats(admin, &st) < 0)
		return UINT64_MAX;
	return st.clients;
}

/* ---- B with A's handle ---------------------------------------------------- */

static bool refused(int rc)
{
	return rc == -EACCES || rc == -ENOENT;
}

static void cross_tenant(rmem_client *a, rmem_client *b)
{
	struct rmem_region r;
	uint8_t want[4096], got[4096], junk[4096];
	uint64_t old = 0;
	int rc;

	fill_random(want, sizeof want, 5);
	memset(junk, 0x5a, sizeof junk);
	rc = rmem_alloc(a, sizeof want, 0, &r);
	ok(rc == 0, "tenant A allocates %zu bytes (%d)", sizeof want, rc);
	if (rc)
		return;
	rc = rmem_write(a, &r, 0, want, sizeof want);
	ok(rc == 0, "tenant A writes them (%d)", rc);

	rc = rmem_read(b, &r, 0, got, sizeof got);
	ok(refused(rc), "tenant B reads A's region with A's handle: refused (%d)", rc);
	rc = rmem_write(b, &r, 0, junk, sizeof junk);
	ok(refused(rc), "tenant B writes it: refused (%d)", rc);
	rc = rmem_cas(b, &r, 0, 0, 0x5a5a5a5a5a5a5a5aull, &old);
	ok(refused(rc), "tenant B CAS on it: refused (%d)", rc);
	rc = rmem_faa(b, &r, 8, 1, &old);
	ok(refused(rc), "tenant B FAA on it: refused (%d)", rc);
	rc = rmem_free(b, &r);
	ok(refused(rc), "tenant B frees it: refused (%d)", rc);

	memset(got, 0, sizeof got);
	rc = rmem_read(a, &r, 0, got, sizeof got);
	ok(rc == 0 && memcmp(got, want, sizeof want) == 0,
	   "A reads back exactly what it wrote (%d)", rc);
	rc = rmem_free(a, &r);
	ok(rc == 0, "A frees its region (%d)", rc);
}

/* ---- quotas ------------------------------------------------------------------ */

static int child_holds(int wfd, void *arg)
{
	const struct rmemd *d = arg;
	struct rmem_region r;
	rmem_client *c;
	char done = 1;

	/* On RDMA the 3 MiB just freed may still sit in the quarantine. */
	if (client_connect_as(d, "A", key_a, &c) < 0 || alloc_quota_wait(c, 3 * MiB, &r, WAIT_MS) < 0)
		return 1;
	if (write(wfd, &done, 1) != 1)
		return 2;
	pause();
	return 0;
}

static void quota_bytes(const struct rmemd *d, rmem_client *a, rmem_client *admin)
{
	struct rmem_region r1, r2, r3;
	struct rmem_stats before, after;
	struct child ch;
	char byte = 0;
	int rc;

	/* On RDMA the cross-tenant region's bytes wait in the quarantine, and
	 * count in A's quota meanwhile: start from nothing held. */
	rc = stats_wait(admin, 0, 0, WAIT_MS, &before);
	ok(rc == 0, "nothing is held before the quota tests (%d)", rc);
	rc = rmem_alloc(a, 1 * MiB, 0, &r1);
	ok(rc == 0, "A allocates 1 MiB of its 4 MiB quota (%d)", rc);
	rc = rmem_alloc(a, 3 * MiB, 0, &r2);
	ok(rc == 0, "A allocates 3 MiB more: exactly its quota (%d)", rc);
	rmem_stats(admin, &before);
	rc = rmem_alloc(a, 64, 0, &r3);
	ok(rc == -EDQUOT, "one byte more (64) is -EDQUOT (%d: %s)", rc, rmem_strerror(rc));
	rmem_stats(admin, &after);
	ok(after.used_bytes == before.used_bytes && after.regions == before.regions &&
	   after.allocs == before.allocs, "the refused alloc changed nothing (used %llu -> %llu)",
	   (unsigned long long)before.used_bytes, (unsigned long long)after.used_bytes);
	rc = rmem_alloc(a, 8 * MiB, 0, &r3);
	ok(rc == -EDQUOT, "more than the whole quota at once is -EDQUOT (%d)", rc);

	rc = rmem_free(a, &r2);
	ok(rc == 0, "A frees 3 MiB (%d)", rc);
	rc = alloc_quota_wait(a, 3 * MiB, &r2, WAIT_MS);
	ok(rc == 0, "its bytes come back to A: 3 MiB again (%d)", rc);
	rc = rmem_free(a, &r2);
	ok(rc == 0, "and freed again (%d)", rc);

	/* A second client of A dies holding 3 MiB: the tenant gets them back. */
	rc = child_spawn(&ch, child_holds, (void *)d);
	/* A blocking read: the child writes its byte, or dies and closes. */
	ok(rc == 0 && read(ch.rfd, &byte, 1) == 1, "another client of A holds 3 MiB (%d)", rc);
	rc = rmem_alloc(a, 3 * MiB, 0, &r2);
	ok(rc == -EDQUOT, "meanwhile A's quota is full: -EDQUOT (%d)", rc);
	if (ch.pid > 0)
		child_end(&ch, SIGKILL);
	rc = alloc_quota_wait(a, 3 * MiB, &r2, WAIT_MS);
	ok(rc == 0, "once it is killed, A gets its 3 MiB back (%d)", rc);
	if (rc == 0)
		rmem_free(a, &r2);
	rmem_free(a, &r1);
}

static void quota_regions(const struct rmemd *d, rmem_client *admin)
{
	struct rmem_region r[MAX_REGIONS_B + 1];
	struct rmem_stats before, after;
	rmem_client *b;
	int rc, n = 0;

	rc = client_connect_as(d, "B", key_b, &b);
	ok(rc == 0, "a fresh client of B (%d)", rc);
	if (rc)
		return;
	for (int i = 0; i < MAX_REGIONS_B; i++)
		n += rmem_alloc(b, 4 * KiB, 0, &r[i]) == 0;
	ok(n == MAX_REGIONS_B, "B allocates its max_regions (%d of %d)", n, MAX_REGIONS_B);
	rmem_stats(admin, &before);
	rc = rmem_alloc(b, 4 * KiB, 0, &r[MAX_REGIONS_B]);
	ok(rc == -EDQUOT, "one region more is -EDQUOT (%d)", rc);
	rmem_stats(admin, &after);
	ok(after.used_bytes == before.used_bytes && after.regions == before.regions,
	   "and changed nothing (regions %llu -> %llu)", (unsigned long long)before.regions,
	   (unsigned long long)after.regions);
	rc = n == MAX_REGIONS_B ? rmem_free(b, &r[0]) : -1;
	ok(rc == 0, "B frees one (%d)", rc);
	rc = rmem_alloc(b, 4 * KiB, 0, &r[0]);
	ok(rc == 0, "and may allocate one again at once (%d)", rc);
	rmem_close(b);
}

/* ---- refused handshakes ----------------------------------------------------- */

static void refused_connect(const struct rmemd *d, rmem_client *admin, const char *what,
			    const char *tenant, const char *key, const char *log_needle)
{
	uint64_t clients = clients_now(admin);
	int before = rmemd_log_count(d, log_needle);
	rmem_client *c = NULL;
	struct rmem_opts o;
	int rc;

	rmem_opts_init(&o, sizeof o);
	o.tenant = tenant;
	o.secret_file = key;
	rc = rmem_connect(d->tcp_ep, &o, &c);
	ok(rc == -EACCES, "%s: refused with -EACCES (%d: %s)", what, rc, rmem_strerror(rc));
	rmem_close(c);
	ok(clients_now(admin) == clients, "%s: no session (clients still %llu)", what,
	   (unsigned long long)clients);
	ok(rmemd_log_count(d, log_needle) == before + 1, "%s: logged once (\"%s\")", what,
	   log_needle);
}

/* The transcript of docs/protocol.md, written out here on purpose: the test
 * checks the documented bytes, not the code's own idea of them. */
static void client_mac(const char *tenant, const uint8_t *snonce, const uint8_t *cnonce,
		       uint64_t sid, uint8_t mac[PROTO_MAC_LEN])
{
	crypto_auth_hmacsha256_state st;
	uint8_t msg[12 + 32 + 32 + 32 + 8] = { 0 };

	memcpy(msg, "rmem-auth-v1", 12);
	memcpy(msg + 12, snonce, 32);
	memcpy(msg + 44, cnonce, 32);
	memcpy(msg + 76, tenant, strlen(tenant));
	proto_put_u64(msg + 108, sid);
	crypto_auth_hmacsha256_init(&st, (const uint8_t *)secret_a, strlen(secret_a));
	crypto_auth_hmacsha256_update(&st, msg, sizeof msg);
	crypto_auth_hmacsha256_final(&st, mac);
}

/* AUTH_BEGIN for tenant A: the session id and server nonce, or an error. */
static int raw_begin(int fd, const uint8_t *cnonce, uint64_t *sid, uint8_t *snonce)
{
	uint8_t p[PROTO_AUTH_BEGIN_REQ_LEN] = { 'A' };
	struct raw_reply r;
	int rc;

	memcpy(p + PROTO_TENANT_LEN, cnonce, PROTO_NONCE_LEN);
	rc = raw_call(fd, PROTO_OP_AUTH_BEGIN, 1, p, sizeof p, &r, PROTO_MAX_CTL, WAIT_MS);
	if (rc < 0)
		return rc;
	if (r.opcode != PROTO_OP_AUTH_BEGIN || r.status || r.length != PROTO_AUTH_BEGIN_REP_LEN)
		rc = r.status ? -r.status : -EPROTO;
	else {
		*sid = proto_get_u64(r.payload + 8);
		memcpy(snonce, r.payload + 16, PROTO_NONCE_LEN);
	}
	raw_reply_release(&r);
	return rc;
}

/* AUTH with this MAC: the reply's status (0, or the positive errno of an
 * ERROR frame), or a negative error. */
static int raw_auth(int fd, const uint8_t *mac, uint16_t *opcode)
{
	struct raw_reply r;
	int rc = raw_call(fd, PROTO_OP_AUTH, 2, mac, PROTO_MAC_LEN, &r, PROTO_MAX_CTL, WAIT_MS);

	if (rc < 0)
		return rc;
	*opcode = r.opcode;
	rc = r.status;
	raw_reply_release(&r);
	return rc;
}

static void replay(const struct rmemd *d, rmem_client *admin)
{
	static const char needle[] = "authentication failed for tenant \"A\"";
	uint8_t cnonce[PROTO_NONCE_LEN], snonce[PROTO_NONCE_LEN], mac[PROTO_MAC_LEN];
	uint64_t sid = 0, sid2 = 0, clients;
	uint16_t opcode = 0;
	int fd, fd2, rc, logged;

	randombytes_buf(cnonce, sizeof cnonce);
	fd = raw_connect_tcp(d->port);
	rc = fd < 0 ? fd : raw_begin(fd, cnonce, &sid, snonce);
	ok(rc == 0, "raw AUTH_BEGIN as A (%d)", rc);
	client_mac("A", snonce, cnonce, sid, mac);
	rc = rc ? rc : raw_auth(fd, mac, &opcode);
	ok(rc == 0 && opcode == PROTO_OP_AUTH, "raw AUTH with the documented MAC works (%d)", rc);
	rc = fd < 0 ? fd : raw_hello(fd, 3);
	ok(rc == 0, "and HELLO after it opens the session (%d)", rc);

	/* The same AUTH frame, even after the same AUTH_BEGIN, on a new connection. */
	clients = clients_now(admin);
	logged = rmemd_log_count(d, needle);
	fd2 = raw_connect_tcp(d->port);
	rc = fd2 < 0 ? fd2 : raw_begin(fd2, cnonce, &sid2, snonce);
	ok(rc == 0 && sid2 != sid, "a second connection begins again (%d), another session id",
	   rc);
	rc = rc ? rc : raw_auth(fd2, mac, &opcode);
	ok(rc == EACCES && opcode == PROTO_OP_ERROR,
	   "the replayed AUTH frame is refused: ERROR EACCES (%d, opcode %u)", rc, opcode);
	ok(fd2 >= 0 && raw_wait_closed(fd2, WAIT_MS) == 0, "and the connection is closed");
	ok(clients_now(admin) == clients, "no session was created");
	ok(rmemd_log_count(d, needle) == logged + 1, "the refusal is logged once");
	close_fd(fd2);

	/* An AUTH out of the blue. */
	fd2 = raw_connect_tcp(d->port);
	rc = fd2 < 0 ? fd2 : raw_auth(fd2, mac, &opcode);
	ok(rc == EACCES && opcode == PROTO_OP_ERROR, "AUTH without AUTH_BEGIN: EACCES (%d)", rc);
	close_fd(fd2);
	close_fd(fd);
}

/* ---- the whole ------------------------------------------------------------------ */

static void admin_view(rmem_client *admin)
{
	struct rmem_client_info info[16];
	int n = rmem_clients(admin, 0, info, 16), tagged = 0;

	for (int i = 0; i < n; i++)
		tagged += strstr(info[i].peer, "tenant=A") != NULL;
	ok(n > 0 && tagged >= 1, "rmemctl clients shows the tenant (%d of %d)", tagged, n);
}

/* A non-loopback IPv4 address of this host other than not, or false. */
static bool other_address(struct in_addr not, struct in_addr *out)
{
	struct ifaddrs *ifs, *i;
	bool found = false;

	if (getifaddrs(&ifs) < 0)
		return false;
	for (i = ifs; i && !found; i = i->ifa_next) {
		const struct sockaddr_in *in = (const void *)i->ifa_addr;

		if (!in || in->sin_family != AF_INET || (ntohl(in->sin_addr.s_addr) >> 24) == 127 ||
		    in->sin_addr.s_addr == not.s_addr)
			continue;
		*out = in->sin_addr;
		found = true;
	}
	freeifaddrs(ifs);
	return found;
}

/*
 * A peer that is neither loopback nor the address it reached: from another
 * local address of this host to the daemon's (127.0.0.1 on the host; in the
 * test VM veth0's, from veth1's) looks exactly like that to the daemon,
 * which is all the policy can see.
 */
static void foreign_peer(const struct rmemd *d)
{
	static const char needle[] = "only clients on this host may connect";
	struct sockaddr_in from = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	uint8_t hello[PROTO_HELLO_REQ_LEN] = { 0 };
	struct raw_reply r = { 0 };
	int fd, rc, logged = rmemd_log_count(d, needle);
	char host[64], daemon_at[INET_ADDRSTRLEN];
	const char *colon = strrchr(d->host_port, ':');

	snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - d->host_port) : 0,
		 d->host_port);
	if (inet_pton(AF_INET, host, &to.sin_addr) != 1 ||
	    !other_address(to.sin_addr, &from.sin_addr)) {
		skip(1, "needs listen.tcp on IPv4 and another IPv4 address here");
		return;
	}
	inet_ntop(AF_INET, &to.sin_addr, daemon_at, sizeof daemon_at);
	to.sin_port = htons(d->port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	rc = fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof from) < 0 ||
	     connect(fd, (struct sockaddr *)&to, sizeof to) < 0 ? -errno : 0;
	proto_put_u32(hello, PROTO_VERSION);
	if (rc == 0)
		rc = raw_call(fd, PROTO_OP_HELLO, 1, hello, sizeof hello, &r, PROTO_MAX_CTL, WAIT_MS);
	ok(rc == 0 && r.opcode == PROTO_OP_ERROR && r.status == EACCES &&
	   rmemd_log_count(d, needle) == logged + 1,
	   "an anonymous peer from elsewhere (%s -> %s) is refused, logged once (%d, "
	   "opcode %u, status %d)", inet_ntoa(from.sin_addr), daemon_at, rc, r.opcode, r.status);
	raw_reply_release(&r);
	close_fd(fd);
}

static void without_tenants(void)
{
	struct rmemd d;
	rmem_client *c;
	int rc;

	if (rmemd_start(&d, "16M", NULL) < 0) {
		ok(0, "rmemd without tenants starts");
		return;
	}
	ok(rmemd_log_contains(&d, "no tenants configured: anonymous clients from this host only"),
	   "without tenants the daemon says it serves this host only");
	rc = client_connect(d.tcp_ep, WAIT_MS, &c);
	ok(rc == 0, "an anonymous client of this host is served (%d)", rc);
	rmem_close(c);
	foreign_peer(&d);
	rc = client_connect_as(&d, "A", key_a, &c);
	ok(rc == -EACCES, "a tenant the daemon does not know is refused (%d)", rc);
	rmem_close(c);
	ok(rmemd_stop(&d) == 0, "rmemd exits 0");
	rmemd_cleanup(&d);
}

static void loose_secret_file(void)
{
	char extra[512];
	struct rmemd d;
	int rc;

	snprintf(extra, sizeof extra, "tenants = ( { name = \"A\"; secret_file = \"%s\"; } );",
		 key_loose);
	rc = rmemd_start(&d, "16M", extra);
	ok(rc < 0, "a secret file others may read keeps rmemd from starting (%d)", rc);
	if (rc == 0) {
		rmemd_stop(&d);
		rmemd_cleanup(&d);
	}
}

int main(void)
{
	char extra[1024];
	struct rmemd d;
	rmem_client *a = NULL, *b = NULL, *admin = NULL;
	int rc;

	if (sodium_init() < 0)
		tap_skip_all("libsodium does not start");
	if (harness_keys_make(dir, keys, NKEYS) < 0)
		tap_skip_all("cannot write secret files");
	snprintf(extra, sizeof extra,
		 "tenants = ( { name = \"A\"; secret_file = \"%s\"; quota = \"4M\"; },\n"
		 "            { name = \"B\"; secret_file = \"%s\"; max_regions = %d; } );",
		 key_a, key_b, MAX_REGIONS_B);
	if (rmemd_start(&d, "64M", extra) < 0) {
		harness_keys_remove(dir, keys, NKEYS);
		tap_skip_all("rmemd did not start");
	}
	ok(rmemd_log_contains(&d, "2 tenant(s) configured: network clients must authenticate"),
	   "the daemon says network clients must authenticate");
	rc = client_connect(d.unix_ep, WAIT_MS, &admin);
	ok(rc == 0, "the Unix socket still serves an anonymous (admin) client (%d)", rc);
	rc = client_connect_as(&d, "A", key_a, &a);
	ok(rc == 0, "tenant A connects with its secret (%d: %s)", rc, rmem_strerror(rc));
	rc = client_connect_as(&d, "B", key_b, &b);
	ok(rc == 0, "tenant B connects with its secret (%d)", rc);
	if (a && b) {
		ok(!strcmp(rmem_transport(a), harness_transport()), "A's data path is %s (%s)",
		   harness_transport(), rmem_transport(a));
		cross_tenant(a, b);
		quota_bytes(&d, a, admin);
		quota_regions(&d, admin);
	}
	if (admin) {
		admin_view(admin);
		refused_connect(&d, admin, "wrong secret", "A", key_wrong,
				"authentication failed for tenant \"A\": wrong secret");
		refused_connect(&d, admin, "unknown tenant", "nobody", key_a,
				"unknown tenant \"nobody\"");
		refused_connect(&d, admin, "anonymous network client", NULL, NULL,
				"network clients must authenticate");
		replay(&d, admin);
	}
	rmem_close(a);
	rmem_close(b);
	rmem_close(admin);
	ok(rmemd_stop(&d) == 0, "rmemd exits 0");
	rmemd_cleanup(&d);
	without_tenants();
	loose_secret_file();
	harness_keys_remove(dir, keys, NKEYS);
	return tap_done();
}
