/*
 * auth.c - the client's side of the tenant handshake (docs/protocol.md,
 * AUTH_BEGIN and AUTH): proves that we know the tenant's secret without
 * sending it, and checks that the daemon knows it too.
 */
#include "auth.h"
#include "authmac.h"
#include "secret.h"

#include <errno.h>
#include <string.h>

#include <sodium.h>

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
	/* The library never prints: the daemon's wording of why is not needed. */
	err = secret_read(secret_file, 0, 1, &secret, NULL, 0);
	if (err)
		goto out;
	randombytes_buf(client_nonce, sizeof client_nonce);
	err = begin(e, tenant, client_nonce, &rep);
	if (err)
		goto out;
	authmac_compute(secret.bytes, secret.len, PROTO_AUTH_CLIENT, tenant, rep.server_nonce,
			client_nonce, rep.session_id, mac);
	err = prove(e, mac, mac);
	if (err)
		goto out;
	/* A daemon that cannot show the secret is not the one we trust. */
	authmac_compute(secret.bytes, secret.len, PROTO_AUTH_SERVER, tenant, rep.server_nonce,
			client_nonce, rep.session_id, want);
	if (sodium_memcmp(want, mac, PROTO_MAC_LEN) != 0)
		err = eng_fail(e, -EACCES);
out:
	secret_wipe(&secret);
	sodium_memzero(want, sizeof want);
	return err;
}
