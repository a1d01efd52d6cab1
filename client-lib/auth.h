/*
 * auth.h - the client's side of the tenant handshake (auth.c).
 */
#ifndef RMEM_AUTH_H
#define RMEM_AUTH_H

#include "engine.h"

/* The tenant handshake on a fresh stream, before HELLO: 0, -EACCES (refused,
 * or the daemon could not prove the secret), -EINVAL (bad name or secret
 * file), open(2)'s errors for secret_file, or the engine's. */
int auth_tenant(struct engine *e, const char *tenant, const char *secret_file);

#endif /* RMEM_AUTH_H */
