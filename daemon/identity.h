/*
 * identity.h - a memory server's identity in a cluster: its id and the
 * generation of its memory (docs/architecture.md, "Cluster").
 *
 * The generation names one life of the server's memory: drawn when the
 * memory is new, it stays the same for as long as the memory lives, across
 * restarts without loss (the state memfd's header carries it, with the id:
 * persist.c draws both for new memory, restore.c takes them back), and a
 * new one, larger, replaces it when the memory was lost.  So a client that
 * sees a server's key again after a restart tells "same server, same
 * regions" (same id, same generation) from "same server, its memory gone"
 * (same id, a new generation).  Without the fd store nothing persists and
 * member.c draws both at its start, as before.
 */
#ifndef RMEMD_IDENTITY_H
#define RMEMD_IDENTITY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/* One server's identity, as struct server holds it (srv->identity): both
 * 0 / "" until persist.c draws it for new memory or restore.c takes it
 * back from the state memfd; still so without the fd store, where
 * member.c draws its own. */
struct identity {
	uint64_t generation;
	char id[CONFIG_NAME_MAX];
};

/*
 * A new identity: *generation the wall clock in microseconds (unique per
 * server start and increasing, so a later memory has a larger one), and in
 * id (len bytes) cluster.id, or 64 random bits in hex when none is
 * configured.  0, or a negative errno from getrandom.
 */
int identity_draw(const struct config *cfg, uint64_t *generation, char *id, size_t len);

#endif /* RMEMD_IDENTITY_H */
