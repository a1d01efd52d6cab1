/*
 * auth.c - see auth.h.
 */
#include <sodium.h>

#include "auth.h"

void auth_mac(const uint8_t *secret, size_t secret_len, enum proto_auth_role role,
	      const char *tenant, const uint8_t *server_nonce, const uint8_t *client_nonce,
	      uint64_t session_id, uint8_t mac[PROTO_MAC_LEN])
{
	crypto_auth_hmacsha256_state st;
	uint8_t msg[PROTO_AUTH_MSG_LEN];
	size_t len = proto_auth_transcript(msg, role, tenant, server_nonce, client_nonce,
					   session_id);

	crypto_auth_hmacsha256_init(&st, secret, secret_len);
	crypto_auth_hmacsha256_update(&st, msg, len);
	crypto_auth_hmacsha256_final(&st, mac);
}
