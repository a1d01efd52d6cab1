/*
 * regcache.c - see regcache.h.  A small array searched linearly: a program
 * moves data through a handful of buffers, and a registration costs far more
 * than a scan of 64 entries.
 */
#include "regcache.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <string.h>
#include <unistd.h>

/* Reads of remote memory land in the buffer: local write is needed. */
#define REG_ACCESS IBV_ACCESS_LOCAL_WRITE

void regcache_init(struct regcache *rc, struct ibv_pd *pd)
{
	memset(rc, 0, sizeof(*rc));
	rc->pd = pd;
}

static void entry_drop(struct regcache *rc, struct regcache_entry *e)
{
	/* A failed deregistration leaves the pages pinned: nothing better to
	 * do in a library that never prints. */
	(void)ibv_dereg_mr(e->mr);
	rc->pinned -= e->end - e->start;
	memset(e, 0, sizeof(*e));
}

/* The least recently used entry nobody uses, or NULL. */
static struct regcache_entry *lru_idle(struct regcache *rc)
{
	struct regcache_entry *best = NULL;

	for (uint32_t i = 0; i < REGCACHE_MAX; i++) {
		struct regcache_entry *e = &rc->e[i];

		if (e->mr && e->users == 0 && (!best || e->last_use < best->last_use))
			best = e;
	}
	return best;
}

static struct regcache_entry *free_slot(struct regcache *rc, uint64_t bytes)
{
	struct regcache_entry *slot = NULL;

	while (rc->pinned + bytes > REGCACHE_PIN_MAX) {
		struct regcache_entry *victim = lru_idle(rc);

		if (!victim)
			break;
		entry_drop(rc, victim);
	}
	for (uint32_t i = 0; i < REGCACHE_MAX && !slot; i++)
		if (!rc->e[i].mr)
			slot = &rc->e[i];
	if (!slot) {
		slot = lru_idle(rc);
		if (slot)
			entry_drop(rc, slot);
	}
	return slot;
}

int regcache_get(struct regcache *rc, const void *buf, size_t len, struct regcache_entry **out)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)buf, hi = lo + len;
	struct regcache_entry *e;

	for (uint32_t i = 0; i < REGCACHE_MAX; i++) {
		e = &rc->e[i];
		if (e->mr && e->start <= lo && hi <= e->end)
			goto hit;
	}
	lo &= ~(page - 1);
	hi = (hi + page - 1) & ~(page - 1);
	e = free_slot(rc, hi - lo);
	if (!e)
		return -ENOMEM;
	e->mr = ibv_reg_mr(rc->pd, (void *)lo, hi - lo, REG_ACCESS);
	if (!e->mr)
		return errno == ENOMEM || errno == EAGAIN ? -ENOMEM : -EFAULT;
	e->start = lo;
	e->end = hi;
	rc->pinned += hi - lo;
	rc->registrations++;
hit:
	e->users++;
	e->last_use = ++rc->tick;
	*out = e;
	return 0;
}

void regcache_put(struct regcache_entry *e)
{
	e->users--;
}

void regcache_clear(struct regcache *rc)
{
	for (uint32_t i = 0; i < REGCACHE_MAX; i++)
		if (rc->e[i].mr)
			entry_drop(rc, &rc->e[i]);
}
