/*
 * slots.c - see slots.h.
 *
 * Why a slot is whole or free at every instant: a free slot's first 8 bytes
 * are 0, and nothing else of it counts (state.h).  A write fills bytes
 * [8, 384) of a free slot, then stores bytes [0, 8) (type and check) with one
 * aligned 8-byte store, after a compiler barrier: a SIGKILL stops the
 * process between two instructions, and the memfd keeps every store made
 * before that in program order (one thread, one mapping), so the slot is
 * either still free or whole.  A delete is one 8-byte store of 0.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "slots.h"

#define EMPTY UINT32_MAX

struct slots {
	int fd;
	uint8_t *base;          /* the memfd: header, then the slots */
	uint32_t nslots, used;
	uint32_t *free_stack;   /* free slot numbers, lowest on top */
	uint32_t nfree;
	/* (type, id) -> slot, open addressing with linear probing. */
	uint64_t *keys;
	uint32_t *vals;
	uint32_t mask;
	uint64_t ceiling[3];    /* region, session, name: ids below may be out */
	uint64_t gen;           /* of the last COUNTERS written */
	uint32_t counters_slot; /* 0 or 1: the one written last */
	bool frozen;            /* shutting down: the state stays as it is */
	uint8_t *marked;        /* during a restore: the slots slots_mark took */
};

static uint8_t *slot_at(const struct slots *t, uint32_t i)
{
	return t->base + STATE_HDR_LEN + (uint64_t)i * STATE_SLOT_LEN;
}

static uint64_t key_of(uint16_t type, uint64_t id)
{
	return ((uint64_t)type << 58) ^ id;
}

static uint32_t hash_of(uint64_t k, uint32_t mask)
{
	k *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(k >> 32) & mask;
}

/* The hash starts small and doubles at half full: a daemon with a few
 * hundred records keeps it in cache (a table sized for every slot would cost
 * a cache miss or two per change). */
#define HASH_MIN 1024u

struct slots *slots_new(int fd, uint8_t *base, uint32_t nslots)
{
	struct slots *t = calloc(1, sizeof *t);
	uint32_t cap = HASH_MIN;

	if (!t)
		goto nomem;
	/* fd and base stay the caller's until this succeeds: slots_free()
	 * below must not close or unmap them. */
	t->fd = -1;
	if (nslots < 3)
		goto nomem;
	t->nslots = nslots;
	t->free_stack = malloc(sizeof *t->free_stack * nslots);
	t->keys = malloc(sizeof *t->keys * cap);
	t->vals = malloc(sizeof *t->vals * cap);
	if (!t->free_stack || !t->keys || !t->vals)
		goto nomem;
	t->mask = cap - 1;
	for (uint32_t i = 0; i < cap; i++)
		t->vals[i] = EMPTY;
	/* Slots 0 and 1 are the counters'; the rest are handed out lowest first. */
	for (uint32_t i = nslots; i-- > 2;)
		t->free_stack[t->nfree++] = i;
	t->counters_slot = 1;
	t->fd = fd;
	t->base = base;
	return t;
nomem:
	slots_free(t);
	errno = ENOMEM;
	return NULL;
}

void slots_free(struct slots *t)
{
	if (!t)
		return;
	if (t->base)
		munmap(t->base, state_size(t->nslots));
	if (t->fd >= 0)
		close(t->fd);
	free(t->free_stack);
	free(t->keys);
	free(t->vals);
	free(t->marked);
	free(t);
}

int slots_fd(const struct slots *t)
{
	return t ? t->fd : -1;
}

uint32_t slots_used(const struct slots *t)
{
	return t ? t->used : 0;
}

uint32_t slots_count(const struct slots *t)
{
	return t ? t->nslots : 0;
}

static uint32_t find(const struct slots *t, uint64_t k, uint32_t *pos)
{
	uint32_t i = hash_of(k, t->mask);

	while (t->vals[i] != EMPTY) {
		if (t->keys[i] == k) {
			*pos = i;
			return t->vals[i];
		}
		i = (i + 1) & t->mask;
	}
	*pos = i;
	return EMPTY;
}

/* Twice the room, every entry filed again; -ENOMEM changes nothing. */
static int grow(struct slots *t)
{
	uint32_t cap = (t->mask + 1) * 2, *vals;
	uint64_t *keys;

	keys = malloc(sizeof *keys * cap);
	vals = malloc(sizeof *vals * cap);
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < cap; i++)
		vals[i] = EMPTY;
	for (uint32_t i = 0; i <= t->mask; i++) {
		uint32_t j;

		if (t->vals[i] == EMPTY)
			continue;
		for (j = hash_of(t->keys[i], cap - 1); vals[j] != EMPTY; j = (j + 1) & (cap - 1))
			;
		keys[j] = t->keys[i];
		vals[j] = t->vals[i];
	}
	free(t->keys);
	free(t->vals);
	t->keys = keys;
	t->vals = vals;
	t->mask = cap - 1;
	return 0;
}

/* Room for one more entry at load <= 1/2. */
static int make_room(struct slots *t)
{
	return (t->used + 1) * 2 > t->mask + 1 ? grow(t) : 0;
}

/* Removes entry pos, shifting back the entries of its run (no tombstones). */
static void unfile(struct slots *t, uint32_t pos)
{
	uint32_t hole = pos, i = pos;

	t->vals[hole] = EMPTY;
	for (;;) {
		uint32_t home;

		i = (i + 1) & t->mask;
		if (t->vals[i] == EMPTY)
			return;
		home = hash_of(t->keys[i], t->mask);
		/* Moves back unless its home lies cyclically in (hole, i]. */
		if ((i > hole && (home <= hole || home > i)) ||
		    (i < hole && home <= hole && home > i)) {
			t->keys[hole] = t->keys[i];
			t->vals[hole] = t->vals[i];
			t->vals[i] = EMPTY;
			hole = i;
		}
	}
}

/* One slot written in the order that makes it whole or free (above). */
static int write_slot(struct slots *t, uint32_t index, const struct state_slot *s)
{
	uint8_t buf[STATE_SLOT_LEN];
	uint8_t *dst = slot_at(t, index);
	uint64_t head;

	if (state_slot_encode(buf, index, s) != STATE_SLOT_LEN)
		return -EINVAL;
	__atomic_store_n((uint64_t *)(void *)dst, 0, __ATOMIC_RELEASE);
	memcpy(dst + STATE_HEAD_LEN, buf + STATE_HEAD_LEN, STATE_SLOT_LEN - STATE_HEAD_LEN);
	memcpy(&head, buf, sizeof head);
	__atomic_store_n((uint64_t *)(void *)dst, head, __ATOMIC_RELEASE);
	return 0;
}

/* The next COUNTERS goes to the slot not written last, so the other stays
 * whole while it is written. */
static int write_counters(struct slots *t)
{
	struct state_slot c = { .type = STATE_COUNTERS };
	uint32_t next = t->counters_slot ^ 1;
	int rc;

	c.u.counters.gen = t->gen + 1;
	c.u.counters.next_region = t->ceiling[0];
	c.u.counters.next_session = t->ceiling[1];
	c.u.counters.next_name = t->ceiling[2];
	rc = write_slot(t, next, &c);
	if (rc == 0) {
		t->gen++;
		t->counters_slot = next;
	}
	return rc;
}

void slots_set_counters(struct slots *t, const struct state_slot *c, uint32_t index)
{
	if (!t)
		return;
	t->ceiling[0] = c->u.counters.next_region;
	t->ceiling[1] = c->u.counters.next_session;
	t->ceiling[2] = c->u.counters.next_name;
	t->gen = c->u.counters.gen;
	t->counters_slot = index & 1;
}

/* Before an id at or past its ceiling is recorded, the ceiling moves up a block. */
static int reserve_ids(struct slots *t, const struct state_slot *s)
{
	uint64_t ids[3] = { 0, 0, 0 };
	bool bump = false;

	switch (s->type) {
	case STATE_SESSION: ids[1] = s->u.session.id; break;
	case STATE_REGION:  ids[0] = s->u.region.id; break;
	case STATE_OBJECT:  ids[2] = s->u.object.id; break;
	case STATE_HANDLE:  ids[0] = s->u.handle.region; ids[1] = s->u.handle.session;
			    ids[2] = s->u.handle.object; break;
	default: break;
	}
	for (int i = 0; i < 3; i++) {
		if (ids[i] && ids[i] >= t->ceiling[i]) {
			t->ceiling[i] = ids[i] + SLOTS_ID_BLOCK;
			bump = true;
		}
	}
	return bump ? write_counters(t) : 0;
}

int slots_mark(struct slots *t, uint32_t index, const struct state_slot *s)
{
	uint32_t pos;

	if (!t)
		return 0;
	if (index < 2 || index >= t->nslots)
		return -EINVAL;
	/* Which slots are taken, until slots_mark_done rebuilds the free stack
	 * from it (one pass, whatever the number of records). */
	if (!t->marked) {
		t->marked = calloc(t->nslots, 1);
		if (!t->marked)
			return -ENOMEM;
	}
	if (t->marked[index])
		return -EEXIST;
	if (make_room(t) < 0)
		return -ENOMEM;
	if (find(t, key_of(s->type, state_slot_id(s)), &pos) != EMPTY)
		return -EEXIST;
	t->keys[pos] = key_of(s->type, state_slot_id(s));
	t->vals[pos] = index;
	t->marked[index] = 1;
	t->used++;
	return 0;
}

void slots_mark_done(struct slots *t)
{
	if (!t || !t->marked)
		return;
	t->nfree = 0;
	for (uint32_t i = t->nslots; i-- > 2;)
		if (!t->marked[i])
			t->free_stack[t->nfree++] = i;
	free(t->marked);
	t->marked = NULL;
}

void slots_freeze(struct slots *t)
{
	if (t)
		t->frozen = true;
}

int slots_put(struct slots *t, const struct state_slot *s)
{
	uint64_t k;
	uint32_t pos, index;
	int rc;

	if (!t || t->frozen)
		return 0;
	k = key_of(s->type, state_slot_id(s));
	if (find(t, k, &pos) != EMPTY)
		return -EEXIST;
	if (!t->nfree)
		return -ENOSPC;
	if (make_room(t) < 0)
		return -ENOMEM;
	find(t, k, &pos); /* where it goes now, if the table grew */
	rc = reserve_ids(t, s);
	if (rc < 0)
		return rc;
	index = t->free_stack[t->nfree - 1];
	rc = write_slot(t, index, s);
	if (rc < 0)
		return rc;
	t->nfree--;
	t->keys[pos] = k;
	t->vals[pos] = index;
	t->used++;
	return 0;
}

void slots_del(struct slots *t, uint16_t type, uint64_t id)
{
	uint32_t pos, index;

	if (!t || t->frozen)
		return;
	index = find(t, key_of(type, id), &pos);
	if (index == EMPTY)
		return;
	__atomic_store_n((uint64_t *)(void *)slot_at(t, index), 0, __ATOMIC_RELEASE);
	unfile(t, pos);
	t->free_stack[t->nfree++] = index;
	t->used--;
}
