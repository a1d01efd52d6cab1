/*
 * authmac.h - the MAC of the tenant handshake (docs/protocol.md, AUTH):
 * HMAC-SHA256 under the tenant's secret over proto_auth_transcript().  The
 * daemon and the library compute it with this one function, so the two
 * sides cannot drift apart.
 */
#ifndef RMEM_COMMON_AUTHMAC_H
#define RMEM_COMMON_AUTHMAC_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

void authmac_compute(const uint8_t *secret, size_t secret_len, enum proto_auth_role role,
		     const char *tenant, const uint8_t *server_nonce,
		     const uint8_t *client_nonce, uint64_t session_id,
		     uint8_t mac[PROTO_MAC_LEN]);

#endif /* RMEM_COMMON_AUTHMAC_H */
