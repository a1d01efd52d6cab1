/*
 * pool.h - one pinned memory pool: mapped (hugepages where possible), touched,
 * locked in RAM, and cut into regions by its own allocator.  The RDMA issue adds
 * the registration of [base, base + size) here.
 */
#ifndef RMEMD_POOL_H
#define RMEMD_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct alloc;
struct scrub;
struct scrub_span;

struct pool {
	char name[CONFIG_NAME_MAX];
	uint8_t *base;
	uint64_t size;        /* bytes mapped and locked */
	uint32_t page_size;   /* 4096 or the hugepage size */
	uint32_t index;
	struct alloc *alloc;
	int fd;               /* the memfd behind base: what the fd store keeps (-1: none) */
	bool on_fault;        /* adopted: locked on fault, faulted in where held or scrubbed */
	bool thp;             /* 4 KiB pages the kernel backs with transparent 2 MiB ones */
	struct scrub *scrub;  /* free bytes an adoption found, zeroed after READY (or NULL) */
};

/* Progress of a long pin: called now and then with bytes done out of total. */
typedef void (*pool_progress_fn)(void *arg, const struct pool *p, uint64_t done, uint64_t total);

/*
 * Checks that RLIMIT_MEMLOCK lets us pin every pool of cfg (with
 * CAP_IPC_LOCK there is no limit).  -ENOMEM with a message naming the figures
 * and LimitMEMLOCK in err when it does not.
 */
int pool_check_memlock(const struct config *cfg, char *err, size_t errlen);

/* Maps, touches and locks the pool described by pc.  On failure returns a
 * negative errno with a message in err and leaves *p closed. */
int pool_open(struct pool *p, const struct config_pool *pc, uint32_t index,
	      pool_progress_fn progress, void *arg, char *err, size_t errlen);
/*
 * As pool_open, over fd, the memfd of a pool that a previous rmemd made (from
 * systemd's fd store): its bytes are kept, not zeroed.  The pool is locked
 * on fault, not faulted in (on kernels with MADV_POPULATE_WRITE; older ones
 * pin it whole as pool_open does): a restart costs what is held, so the
 * caller faults in the ranges it keeps (pool_populate) and hands the rest to
 * pool_scrub.  fd must be a memfd of the page size pc allows and of at
 * least kept_size bytes (the size the state says the pool had), and pc may
 * not ask for less than kept_size (else -EINVAL, with the reason in err).
 * When pc asks for more the memfd grows (ftruncate) and the pool is mapped
 * at pc's size: a pool grows at a restart with every byte kept.  On success
 * the pool owns fd; on failure fd is still the caller's.
 */
int pool_adopt(struct pool *p, const struct config_pool *pc, uint32_t index, int fd,
	       uint64_t kept_size, pool_progress_fn progress, void *arg, char *err,
	       size_t errlen);
/* The kernel's policy for transparent hugepages in shared memory
 * (/sys/kernel/mm/transparent_hugepage/shmem_enabled, the selected word:
 * "never", "advise", "always"...) in word; "" when it cannot be read. */
void pool_thp_policy(char *word, size_t len);
/* Faults in and locks the pages of [off, off + len) of an adopted pool
 * (nothing to do for one pinned whole).  0 or a negative errno. */
int pool_populate(struct pool *p, uint64_t off, uint64_t len);
/* The n spans (sorted, disjoint) of an adopted pool that may hold a former
 * owner's bytes: zeroed after READY by a worker and by pool_take (scrub.h),
 * or here and now when no worker can be had. */
void pool_scrub(struct pool *p, const struct scrub_span *sp, size_t n);
/* A range just reserved in p's allocator, before anyone is told of it:
 * whatever of it a scrub has not zeroed yet is zeroed now. */
void pool_take(struct pool *p, uint64_t off, uint64_t len);
/* Stops the scrub, unmaps; accepts a pool that was never opened or failed
 * to open. */
void pool_close(struct pool *p);

#endif /* RMEMD_POOL_H */
