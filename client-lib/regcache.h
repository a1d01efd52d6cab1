/*
 * regcache.h - the registration cache of the RDMA path: user buffers are
 * registered (ibv_reg_mr) once and kept, so repeated transfers from or into
 * the same buffer do not register again.
 *
 * A registration covers whole pages around the buffer.  The cache holds at
 * most REGCACHE_MAX registrations and REGCACHE_PIN_MAX pinned bytes; past
 * either, the least recently used registration that no posted work request
 * uses is dropped.  Entries in use (users > 0) are never dropped, and there
 * are never more work requests in flight than REGCACHE_MAX - 1, so a free
 * slot can always be found.
 *
 * What a cache of registrations cannot see: memory that is unmapped and
 * mapped again at the same address (free() of a large malloc() and a new
 * one, munmap()/mmap(), madvise(MADV_DONTNEED)).  The old registration
 * still names the old pages.  librmem(7) tells callers; rmem_close() drops
 * every registration.
 */
#ifndef RMEM_REGCACHE_H
#define RMEM_REGCACHE_H

#include <stddef.h>
#include <stdint.h>

struct ibv_pd;
struct ibv_mr;

#define REGCACHE_MAX     96u
#define REGCACHE_PIN_MAX (1ull << 30)

struct regcache_entry {
	uintptr_t start, end;    /* page-aligned bounds of the registration */
	struct ibv_mr *mr;       /* NULL: slot unused */
	uint32_t users;          /* posted work requests that use it */
	uint64_t last_use;
};

struct regcache {
	struct ibv_pd *pd;
	struct regcache_entry e[REGCACHE_MAX];
	uint64_t tick;
	uint64_t pinned;         /* bytes registered now */
	uint64_t registrations;  /* ibv_reg_mr calls made, for tests and tuning */
};

void regcache_init(struct regcache *rc, struct ibv_pd *pd);

/* The registration that covers [buf, buf + len), registering it if needed;
 * its users count grows by one.  0 or a negative errno (-ENOMEM, -EFAULT
 * for memory the device cannot register). */
int regcache_get(struct regcache *rc, const void *buf, size_t len, struct regcache_entry **out);

/* Undoes one regcache_get(). */
void regcache_put(struct regcache_entry *e);

/* Deregisters everything.  No work request may use any entry any more. */
void regcache_clear(struct regcache *rc);

#endif /* RMEM_REGCACHE_H */
