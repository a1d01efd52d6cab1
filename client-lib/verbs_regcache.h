/*
 * verbs_regcache.h - registrations of user buffers for the RDMA path, shared by the
 * work requests in flight: a buffer is registered (ibv_reg_mr) when a posted
 * transfer first needs it, every other transfer posted meanwhile from or into
 * the same pages uses the same registration, and it is dropped when the last
 * of them completes.
 *
 * Not kept past that, on purpose.  A registration names the pages the buffer
 * had when it was made, and the library cannot see memory being unmapped and
 * mapped again at the same address (free() of a large malloc() and a new one,
 * munmap()/mmap(), madvise(MADV_DONTNEED)): a kept registration would then
 * move the data to or from the old pages, silently.  While a transfer is in
 * flight its buffer belongs to the library, so sharing among the transfers in
 * flight is safe.  The price is one ibv_reg_mr and one ibv_dereg_mr per
 * buffer per burst of transfers, which an application that reuses its
 * buffers avoids by registering them itself (below; rmem-perf does, like
 * perftest).
 *
 * A registration covers whole pages around the buffer.  The table holds
 * REGCACHE_MAX registrations, more than the work requests that can be in
 * flight (verbs_post.c), so a free entry can always be found.
 *
 * The exception is a range the application registered itself
 * (rmem_register_buf): it owns the memory and promised not to free it
 * before rmem_unregister_buf(), so that registration is kept (struct
 * regcache_kept, in the client so that a TCP client records the same
 * ranges), and transfers that lie inside it use it and register nothing.
 */
#ifndef RMEM_VERBS_REGCACHE_H
#define RMEM_VERBS_REGCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ibv_pd;
struct ibv_mr;

/* Above the RDMA send queue's depth (verbs_post.c): every posted work request may
 * hold a registration of its own. */
#define REGCACHE_MAX     512u

struct regcache_entry {
	uintptr_t start, end;    /* page-aligned bounds of the registration */
	struct ibv_mr *mr;       /* NULL: slot unused */
	uint32_t users;          /* posted work requests that use it, > 0 */
	bool kept;               /* the application's: users may be 0 */
};

struct regcache {
	struct ibv_pd *pd;
	struct regcache_entry e[REGCACHE_MAX];
	uint32_t hint;           /* the entry of the last hit: looked at first */
	uint32_t used;           /* entries with a registration */
	uint64_t pinned;         /* bytes registered now */
	uint64_t registrations;  /* ibv_reg_mr calls made, for tests and tuning */
};

void regcache_init(struct regcache *rc, struct ibv_pd *pd);

/* The registration that covers [buf, buf + len), registering it if no
 * transfer in flight has one; its users count grows by one.  0 or a negative
 * errno (-ENOMEM, -EFAULT for memory the device cannot register). */
int regcache_get(struct regcache *rc, const void *buf, size_t len, struct regcache_entry **out);

/* Undoes one regcache_get() or regcache_kept_get(); the last user of a
 * registration that is not kept deregisters it. */
void regcache_put(struct regcache *rc, struct regcache_entry *e);

/* Deregisters everything.  No work request may use any entry any more. */
void regcache_clear(struct regcache *rc);

/* ---- ranges the application registered (rmem_register_buf) ---------------- */

#define REGCACHE_KEPT_MAX 64u

/* start and end are the application's range, not rounded to pages: memory
 * beside it is not the application's promise. */
struct regcache_kept {
	struct regcache_entry e[REGCACHE_KEPT_MAX];  /* kept false: unused */
	uint32_t used;
};

/* Records [buf, buf + len), registered on pd (NULL: a client without RDMA,
 * where only the range is recorded).  0, -EINVAL (it overlaps a recorded
 * range, or wraps), -ENOSPC (REGCACHE_KEPT_MAX recorded), -ENOMEM, -EFAULT. */
int regcache_keep(struct regcache_kept *k, struct ibv_pd *pd, const void *buf, size_t len);

/* Forgets the range that starts at buf: 0, -ENOENT, -EBUSY (work requests in
 * flight use it). */
int regcache_unkeep(struct regcache_kept *k, const void *buf);

/* The kept registration that holds all of [buf, buf + len), its users count
 * grown by one (undo with regcache_put()); NULL when there is none. */
struct regcache_entry *regcache_kept_get(struct regcache_kept *k, const void *buf, size_t len);

/* Deregisters and forgets every kept range, in use or not. */
void regcache_kept_clear(struct regcache_kept *k);

#endif /* RMEM_VERBS_REGCACHE_H */
