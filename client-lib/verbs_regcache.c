/*
 * verbs_regcache.c - see verbs_regcache.h.  A small array searched linearly, starting
 * at the last hit: the transfers in flight come from a handful of buffers,
 * and a registration costs far more than a scan of the table.  The kept
 * ranges are a second small table, looked at only when it is not empty.
 */
#include "verbs_regcache.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
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
	rc->used--;
	memset(e, 0, sizeof(*e));
}

static bool covers(const struct regcache_entry *e, uintptr_t lo, uintptr_t hi)
{
	return e->mr && e->start <= lo && hi <= e->end;
}

static struct regcache_entry *find_entry(struct regcache *rc, uintptr_t lo, uintptr_t hi)
{
	if (rc->used == 0)
		return NULL;
	if (covers(&rc->e[rc->hint], lo, hi))
		return &rc->e[rc->hint];
	for (uint32_t i = 0; i < REGCACHE_MAX; i++)
		if (covers(&rc->e[i], lo, hi))
			return &rc->e[i];
	return NULL;
}

static struct regcache_entry *free_entry(struct regcache *rc)
{
	for (uint32_t i = 0; i < REGCACHE_MAX; i++)
		if (!rc->e[i].mr)
			return &rc->e[i];
	return NULL;
}

int regcache_get(struct regcache *rc, const void *buf, size_t len, struct regcache_entry **out)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)buf, hi = lo + len;
	struct regcache_entry *e = find_entry(rc, lo, hi);

	if (e)
		goto hit;
	lo &= ~(page - 1);
	hi = (hi + page - 1) & ~(page - 1);
	e = free_entry(rc);
	if (!e)
		return -ENOMEM;
	e->mr = ibv_reg_mr(rc->pd, (void *)lo, hi - lo, REG_ACCESS);
	if (!e->mr)
		return errno == ENOMEM || errno == EAGAIN ? -ENOMEM : -EFAULT;
	e->start = lo;
	e->end = hi;
	rc->pinned += hi - lo;
	rc->used++;
	rc->registrations++;
hit:
	rc->hint = (uint32_t)(e - rc->e);
	e->users++;
	*out = e;
	return 0;
}

void regcache_put(struct regcache *rc, struct regcache_entry *e)
{
	if (--e->users == 0 && !e->kept)
		entry_drop(rc, e);
}

void regcache_clear(struct regcache *rc)
{
	for (uint32_t i = 0; i < REGCACHE_MAX; i++)
		if (rc->e[i].mr)
			entry_drop(rc, &rc->e[i]);
}

/* ---- kept ranges ------------------------------------------------------------------ */

static struct regcache_entry *kept_at(struct regcache_kept *k, uintptr_t start)
{
	for (uint32_t i = 0; i < REGCACHE_KEPT_MAX; i++)
		if (k->e[i].kept && k->e[i].start == start)
			return &k->e[i];
	return NULL;
}

static bool overlaps_kept(const struct regcache_kept *k, uintptr_t lo, uintptr_t hi)
{
	for (uint32_t i = 0; i < REGCACHE_KEPT_MAX; i++)
		if (k->e[i].kept && lo < k->e[i].end && k->e[i].start < hi)
			return true;
	return false;
}

int regcache_keep(struct regcache_kept *k, struct ibv_pd *pd, const void *buf, size_t len)
{
	uintptr_t lo = (uintptr_t)buf, hi = lo + len;
	struct regcache_entry *e = NULL;

	if (!buf || len == 0 || hi < lo || overlaps_kept(k, lo, hi))
		return -EINVAL;
	for (uint32_t i = 0; i < REGCACHE_KEPT_MAX && !e; i++)
		if (!k->e[i].kept)
			e = &k->e[i];
	if (!e)
		return -ENOSPC;
	if (pd) {
		e->mr = ibv_reg_mr(pd, (void *)lo, len, REG_ACCESS);
		if (!e->mr)
			return errno == ENOMEM || errno == EAGAIN ? -ENOMEM : -EFAULT;
	}
	e->start = lo;
	e->end = hi;
	e->users = 0;
	e->kept = true;
	k->used++;
	return 0;
}

static void kept_drop(struct regcache_kept *k, struct regcache_entry *e)
{
	if (e->mr)
		(void)ibv_dereg_mr(e->mr);
	memset(e, 0, sizeof(*e));
	k->used--;
}

int regcache_unkeep(struct regcache_kept *k, const void *buf)
{
	struct regcache_entry *e = kept_at(k, (uintptr_t)buf);

	if (!buf || !e)
		return -ENOENT;
	if (e->users)
		return -EBUSY;
	kept_drop(k, e);
	return 0;
}

struct regcache_entry *regcache_kept_get(struct regcache_kept *k, const void *buf, size_t len)
{
	uintptr_t lo = (uintptr_t)buf, hi = lo + len;

	if (k->used == 0)
		return NULL;
	for (uint32_t i = 0; i < REGCACHE_KEPT_MAX; i++) {
		struct regcache_entry *e = &k->e[i];

		if (e->kept && e->mr && e->start <= lo && hi <= e->end) {
			e->users++;
			return e;
		}
	}
	return NULL;
}

void regcache_kept_clear(struct regcache_kept *k)
{
	for (uint32_t i = 0; i < REGCACHE_KEPT_MAX; i++)
		if (k->e[i].kept)
			kept_drop(k, &k->e[i]);
}
