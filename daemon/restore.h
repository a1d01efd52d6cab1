/*
 * restore.h - rebuilding rmemd from what systemd's fd store kept (the state
 * memfd and the pools' memfds; docs/architecture.md, "Restart without loss").
 * Called by persist.c only; calls down into pool, alloc, region, names,
 * session, tenant and slots.
 */
#ifndef RMEMD_RESTORE_H
#define RMEMD_RESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "pool.h"
#include "state.h"

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
	/* Who wrote the state, from its memfd's name (persist.c): for the
	 * log line of a refusal, never for a decision. */
	char writer[64];
	/* Set by restore_run: on a refusal, the way out other than a discard
	 * (a static string); after a restore, the header the state must now
	 * have when the config grew a pool or added one (hdr_changed): the
	 * pools from kept_npools on are new, opened by the restore, and the
	 * caller hands them to the store before it writes new_hdr. */
	const char *fix;
	bool hdr_changed;
	uint32_t kept_npools;
	uint8_t new_hdr[STATE_HDR_LEN];
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
 * of fds are -1); RESTORE_REFUSED when a check failed (why says which, fix
 * what else than a discard gets out of it; the pools adopted so far are
 * still open in srv: the caller closes them, and nothing of the fd store's
 * was changed but a pool memfd grown that the config grows); a negative
 * errno when the second pass failed (the daemon must exit: never serve
 * half-restored state).
 *
 * What the config may change (docs/architecture.md, "Upgrade and
 * rollback"): a pool's size upwards (its memfd grows, every byte kept),
 * new pools after the state's, and the state's last pools removed while
 * no kept range lies in them; anything else that differs (a pool smaller,
 * renamed, moved, of another alignment, or removed holding ranges) is
 * refused.
 */
#define RESTORE_REFUSED 1
int restore_run(struct server *srv, struct restore_fds *fds, pool_progress_fn progress,
		char *why, size_t whylen);

#endif /* RMEMD_RESTORE_H */
