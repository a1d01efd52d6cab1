/*
 * persist.h - restart without loss (docs/architecture.md, "Restart without
 * loss"): the pools' memfds and the state memfd go into systemd's file
 * descriptor store; a new rmemd takes them back, checks them, and rebuilds
 * the allocators, region table, named regions and sessions from the state.
 *
 * main.c calls persist_open instead of opening the pools itself when
 * persistence is possible (NOTIFY_SOCKET is set: systemd, or a test's fd
 * store); it calls down into pool, alloc, region, names, session, tenant and
 * slots.  Outside systemd rmemd starts fresh, as before.
 */
#ifndef RMEMD_PERSIST_H
#define RMEMD_PERSIST_H

#include <stdbool.h>

#include "pool.h"

struct server;

/* Whether an fd store may be there: NOTIFY_SOCKET is set. */
bool persist_possible(void);

/*
 * Takes back what the fd store holds and restores from it.  When the store
 * holds no state (nothing, or pools of a fresh start cut short), or when
 * discard is set (the operator's --discard-state: the one way to drop a
 * state, said in one line), it removes our fds from the store and starts
 * fresh: new pools opened by open_pools (main.c's, as a start without the
 * store opens them; progress is for the pools taken back) and a new state
 * memfd, both pushed into the store.  When a state is there and cannot be
 * restored (another format, damage, pools that differ from the config) it
 * refuses: one log line and STATUS= say why and the ways out, nothing is
 * opened, the store is told nothing, and it returns PERSIST_REFUSED (the
 * caller serves nothing until it is stopped).  Sets srv->npools,
 * srv->slots, srv->restored; restored sessions are detached until RESUME
 * or the restore timer that persist_ready starts.  srv->base, srv->regions
 * and srv->names must exist.  0, PERSIST_REFUSED, or a negative errno
 * after logging (the daemon cannot start).
 */
#define PERSIST_REFUSED 1
int persist_open(struct server *srv, pool_progress_fn progress,
		 int (*open_pools)(struct server *srv), bool discard);
/*
 * Once clients can reach rmemd (the NIC up, the listeners open, just before
 * READY=1): after a restore, the restored sessions have from now lease_ms
 * (10 s without a lease) to RESUME, then end.  Nothing without a restore.
 * 0, or -ENOMEM after logging.
 */
int persist_ready(struct server *srv);
/*
 * At shutdown, before the sessions end: the state memfd and the pools keep
 * what they hold (no slot freed, no byte zeroed), so that the next rmemd,
 * given them by the fd store, restores every session (`systemctl restart`).
 * Without persistence it does nothing.
 */
void persist_keep(struct server *srv);
/* Frees the state writer and the restore timer; accepts what persist_open
 * left half-built.  The pools are main.c's to close. */
void persist_close(struct server *srv);

/* Sessions restored and not resumed end this long after a restore when the
 * daemon has no lease. */
#define PERSIST_DETACHED_MS 10000

#endif /* RMEMD_PERSIST_H */
