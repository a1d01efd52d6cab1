/*
 * restore.h - rebuilding rmemd from what systemd's fd store kept (the state
 * memfd and the pools' memfds; docs/architecture.md, "Restart without loss").
 * Called by persist.c only; calls down into pool, alloc, region, names,
 * session, tenant and slots.
 */
#ifndef RMEMD_RESTORE_H
#define RMEMD_RESTORE_H

#include <stddef.h>

#include "config.h"
#include "pool.h"

struct server;

/* The descriptors systemd handed over, by name (-1: none). */
struct restore_fds {
	int state_fd;
	int pool_fd[CONFIG_MAX_POOLS];
	unsigned npool_fds;
	unsigned others;  /* fds that were not ours (closed) */
	/* Names of ours that the config no longer has (a pool removed): the
	 * store is told to forget them. */
	char stale[CONFIG_MAX_POOLS][48];
	unsigned nstale;
};

/*
 * Two passes.  The first reads and checks everything (the header against
 * the config, every slot's check, every id against its counter, every
 * cross-reference, every range claimed in a fresh allocator so that two
 * ranges that overlap are caught) and changes nothing the daemon serves.
 * The second builds sessions (detached), named objects, handles and regions
 * and hands the state memfd to a new slots writer (srv->slots); it can only
 * fail for want of memory.
 *
 * Returns 0 when restored (fds adopted: the pools' and the state's entries
 * of fds are -1); RESTORE_FRESH when a check failed (why says which; the
 * pools adopted so far are still open in srv: the caller closes them and
 * starts fresh); a negative errno when the second pass failed (the daemon
 * must exit: never serve half-restored state).
 */
#define RESTORE_FRESH 1
int restore_run(struct server *srv, struct restore_fds *fds, pool_progress_fn progress,
		char *why, size_t whylen);

#endif /* RMEMD_RESTORE_H */
