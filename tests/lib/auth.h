/*
 * auth.h - the client's side of the tenant handshake (docs/protocol.md), for
 * raw clients that authenticate by hand.  Needs libsodium.
 */
#ifndef RMEM_TESTS_AUTH_H
#define RMEM_TESTS_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* HMAC-SHA256(secret, transcript) of the given role, as the codec builds the
 * transcript (proto_auth_transcript()). */
void auth_mac(const uint8_t *secret, size_t secret_len, enum proto_auth_role role,
	      const char *tenant, const uint8_t *server_nonce, const uint8_t *client_nonce,
	      uint64_t session_id, uint8_t mac[PROTO_MAC_LEN]);

#endif /* RMEM_TESTS_AUTH_H */
