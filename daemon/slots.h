/*
 * slots.h - the writer of the state memfd (common/state.h): one slot per
 * session, anonymous region, named object, name and handle, written before
 * the reply that acknowledges the change (docs/architecture.md, "Restart
 * without loss").
 *
 * A low module, like region.c: session.c calls it at each change, it calls
 * nothing of the daemon's.  Records are found again by (type, id), so the
 * daemon's structs need no room for a slot number.  The id counters are kept
 * in two COUNTERS slots, written alternately and reserved in blocks
 * (SLOTS_ID_BLOCK): an id below a written ceiling is never handed out again
 * by a restored daemon.
 *
 * A NULL struct slots * (persistence off: outside systemd, unit tests) makes
 * every call a no-op that succeeds.
 */
#ifndef RMEMD_SLOTS_H
#define RMEMD_SLOTS_H

#include <stdint.h>

#include "state.h"

#define SLOTS_ID_BLOCK 4096

struct slots;

/* Over the mapped state memfd at base (its header already written; slots
 * all free, or as slots_mark says).  Takes fd and the mapping: slots_free
 * unmaps and closes.  NULL with errno ENOMEM (fd and the mapping then still
 * the caller's). */
struct slots *slots_new(int fd, uint8_t *base, uint32_t nslots);
void slots_free(struct slots *t);
int slots_fd(const struct slots *t);

/* Restore: slot index holds s (decoded and checked by the caller); then
 * slots_mark_done once, before any put. */
int slots_mark(struct slots *t, uint32_t index, const struct state_slot *s);
void slots_mark_done(struct slots *t);
/* Restore: the COUNTERS record in force (c, at slot index 0 or 1): the next
 * ids start from its ceilings, and the next COUNTERS goes to the other slot. */
void slots_set_counters(struct slots *t, const struct state_slot *c, uint32_t index);

/*
 * Writes s into a free slot (body, then the head in one 8-byte store) and
 * files it under its (type, id); a COUNTERS slot first when one of its ids
 * reaches a reserved ceiling.  0, -ENOSPC (no free slot), -EEXIST (that
 * record is there already: a bug of the caller's), -EINVAL (s does not
 * encode).
 */
int slots_put(struct slots *t, const struct state_slot *s);
/* Frees the slot of (type, id) with one 8-byte store; nothing if none. */
void slots_del(struct slots *t, uint16_t type, uint64_t id);
/* From now on put and del change nothing: at shutdown, the sessions'
 * teardown must not erase what a restart is to find. */
void slots_freeze(struct slots *t);
/* Slots in use; slots in all (0 for NULL). */
uint32_t slots_used(const struct slots *t);
uint32_t slots_count(const struct slots *t);

#endif /* RMEMD_SLOTS_H */
