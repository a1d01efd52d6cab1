/*
 * auth.c - the client's side of the tenant handshake (docs/protocol.md,
 * AUTH_BEGIN and AUTH): proves that we know the tenant's secret without
 * sending it, and checks that the daemon knows it too.
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

/* As the daemon takes it (rmemd.conf(5)); one byte more tells "too long". */
#define SECRET_MAX 256

struct secret {
	uint8_t bytes[SECRET_MAX + 2];
	size_t len;
};

/* The file's bytes, one trailing newline stripped. */
static int read_secret(const char *path, struct secret *s)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	int err = 0;

	if (fd < 0)
		return -errno;
	s->len = 0;
	while (s->len < sizeof s->bytes) {
		ssize_t n = read(fd, s->bytes + s->len, sizeof s->bytes - s->len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		s->len += (size_t)n;
	}
	close(fd);
	if (!err && s->len && s->bytes[s->len - 1] == '\n')
		s->len--;
	if (!err && (s->len == 0 || s->len > SECRET_MAX))
		err = -EINVAL;
	return err;
}

static void mac_of(const struct secret *s, enum proto_auth_role role, const char *tenant,
		   const uint8_t *server_nonce, const uint8_t *client_nonce, uint64_t session_id,
		   uint8_t mac[PROTO_MAC_LEN])
{
	crypto_auth_hmacsha256_state st;
	uint8_t msg[PROTO_AUTH_MSG_LEN];
	size_t len = proto_auth_transcript(msg, role, tenant, server_nonce, client_nonce,
					   session_id);

	crypto_auth_hmacsha256_init(&st, s->bytes, s->len);
	crypto_auth_hmacsha256_update(&st, msg, len);
	crypto_auth_hmacsha256_final(&st, mac);
	sodium_memzero(&st, sizeof st);
}

/* AUTH_BEGIN: the daemon's nonce and our session id. */
static int begin(struct engine *e, const char *tenant, const uint8_t *client_nonce,
		 struct proto_auth_begin_rep *rep)
{
	struct proto_auth_begin_req req = { .tenant = { 0 } };
	uint8_t buf[PROTO_AUTH_BEGIN_REQ_LEN];
	size_t reply_len;
	int status, err;

	memcpy(req.tenant, tenant, strlen(tenant));
	memcpy(req.client_nonce, client_nonce, PROTO_NONCE_LEN);
	err = eng_call(e, PROTO_OP_AUTH_BEGIN, buf, proto_auth_begin_req_encode(buf, &req),
		       &reply_len);
	if (err)
		return err;
	if (proto_auth_begin_rep_decode(e->rx, reply_len, &status, rep) < 0)
		return eng_fail(e, -EPROTO);
	return status;
}

/* AUTH: our MAC out, the daemon's back. */
static int prove(struct engine *e, const uint8_t mac[PROTO_MAC_LEN],
		 uint8_t server_mac[PROTO_MAC_LEN])
{
	uint8_t buf[PROTO_AUTH_REQ_LEN];
	size_t reply_len;
	int status, err;

	err = eng_call(e, PROTO_OP_AUTH, buf, proto_auth_req_encode(buf, mac), &reply_len);
	if (err)
		return err;
	if (proto_auth_rep_decode(e->rx, reply_len, &status, server_mac) < 0)
		return eng_fail(e, -EPROTO);
	return status;
}

int auth_tenant(struct engine *e, const char *tenant, const char *secret_file)
{
	uint8_t client_nonce[PROTO_NONCE_LEN], mac[PROTO_MAC_LEN], want[PROTO_MAC_LEN];
	struct proto_auth_begin_rep rep;
	struct secret secret;
	size_t tlen = strlen(tenant);
	int err;

	if (tlen == 0 || tlen >= PROTO_TENANT_LEN)
		return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	err = read_secret(secret_file, &secret);
	if (err)
		goto out;
	randombytes_buf(client_nonce, sizeof client_nonce);
	err = begin(e, tenant, client_nonce, &rep);
	if (err)
		goto out;
	mac_of(&secret, PROTO_AUTH_CLIENT, tenant, rep.server_nonce, client_nonce,
	       rep.session_id, mac);
	err = prove(e, mac, mac);
	if (err)
		goto out;
	/* A daemon that cannot show the secret is not the one we trust. */
	mac_of(&secret, PROTO_AUTH_SERVER, tenant, rep.server_nonce, client_nonce,
	       rep.session_id, want);
	if (sodium_memcmp(want, mac, PROTO_MAC_LEN) != 0)
		err = eng_fail(e, -EACCES);
out:
	sodium_memzero(&secret, sizeof secret);
	sodium_memzero(want, sizeof want);
	return err;
}
