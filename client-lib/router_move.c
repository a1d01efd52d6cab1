/*
 * router_move.c - plain named regions that move: the table of their handles,
 * the follow of a handle whose region moved, and the move off a draining
 * member (docs/architecture.md, "Drain").
 *
 * A plain named region has one copy, and any handle may write it at any
 * time (on RDMA one-sided), so a move stops its writes first.  The mover
 * (pnamed_move: rmemd's repair agent, through rmem_repair) opens the name
 * on its server with PROTO_ACCESS_FREEZE, which revokes every other handle
 * and refuses every open (-EAGAIN) while the freezing handle lives; it
 * creates a region of the same name on a member with room, copies the
 * bytes, swaps the name's record in etcd to the new region by a txn over
 * the mod_revision it read, and unlinks the old one with revoke.  The
 * record is the truth at every step: before the swap it names the old copy
 * (whole, and nothing but the mover reads or writes it); after it the new
 * one, and the old one has no handle but the mover's, unlinked with revoke
 * before the mover returns.  Crashes at each step: docs/architecture.md,
 * "Drain".
 *
 * A handle of a plain named region made by this client (rmem_create,
 * rmem_open) names an entry here (reserved[1]); the entry holds the name,
 * the access, the record's create revision and the handle in use now.  A
 * call that meets -ENOENT (its handle revoked by a freeze, or
 * by the unlink that ends a move) reads the record and opens the name
 * again where the record says, and calls again (pnamed_follow).  The
 * create revision tells a move from an unlink: a name unlinked and made
 * again has another, and the handle then stays dead, -ENOENT, as a revoke
 * promises.  An open refused while frozen (-EAGAIN) waits, polling every
 * PNAMED_PAUSE_MS, at most the options' timeout: a write is refused or
 * lands in the copy the record names, and a read reads that copy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router.h"
#include "router_int.h"
#include "clock.h"
#include "single.h"

#define PNAMED_PAUSE_MS 10
#define PNAMED_WAIT_MS  30000    /* without the options' timeout */
#define PNAMED_GONE_LOOKS 3      /* opens that meet -ENOENT under a record unchanged */
#define MOVE_STEP (4u << 20)     /* bytes per read and write of a move's copy */

struct plain_entry {
	bool used;
	uint32_t access;
	int64_t created;            /* the record's create revision */
	uint64_t uid;               /* the application's handle: its id */
	struct rmem_region cur;     /* the handle in use now (tagged with its slot) */
	char name[RMEM_NAME_MAX + 1];
};

bool pnamed_is(const struct rmem_region *r)
{
	return r && r->reserved[1] >> 32 == PLAIN_NAMED_TAG;
}

/* The entry of r, under mu: NULL when it is not one (freed, or another's). */
static struct plain_entry *entry_locked(struct router *cl, const struct rmem_region *r)
{
	uint32_t i = (uint32_t)r->reserved[1];

	if (!pnamed_is(r) || i >= cl->nplain || !cl->plain[i].used || cl->plain[i].uid != r->id)
		return NULL;
	return &cl->plain[i];
}

void pnamed_add(struct router *cl, const char *name, uint32_t access, int64_t created,
		struct rmem_region *out)
{
	size_t i;

	if (strlen(name) > RMEM_NAME_MAX)
		return;
	pthread_mutex_lock(&cl->mu);
	for (i = 0; i < cl->nplain && cl->plain[i].used; i++)
		;
	if (i == cl->nplain && i < UINT32_MAX / 2) {
		size_t n = cl->nplain ? cl->nplain * 2 : 16;
		struct plain_entry *p = realloc(cl->plain, n * sizeof(*p));

		if (p) {
			memset(p + cl->nplain, 0, (n - cl->nplain) * sizeof(*p));
			cl->plain = p;
			cl->nplain = n;
		}
	}
	if (i < cl->nplain) {
		struct plain_entry *e = &cl->plain[i];

		e->used = true;
		e->access = access;
		e->created = created;
		e->uid = out->id;
		e->cur = *out;
		memcpy(e->name, name, strlen(name) + 1); /* length checked above */
		out->reserved[1] = (uint64_t)PLAIN_NAMED_TAG << 32 | i;
	}
	pthread_mutex_unlock(&cl->mu);
}

const struct rmem_region *pnamed_cur(struct router *cl, const struct rmem_region *r,
				     struct rmem_region *tmp)
{
	struct plain_entry *e;

	if (!pnamed_is(r))
		return r;
	pthread_mutex_lock(&cl->mu);
	e = entry_locked(cl, r);
	if (e)
		*tmp = e->cur;
	pthread_mutex_unlock(&cl->mu);
	return e ? tmp : r;
}

static void pause_ms(int ms)
{
	nanosleep(&(struct timespec){ .tv_nsec = ms * 1000000L }, NULL);
}

/* The entry's handle becomes nr (on slot) if it is still the one the
 * caller saw: whether it did. */
static bool install(struct router *cl, const struct rmem_region *r, uint64_t seen_id,
		    uint32_t seen_slot, struct rmem_region *nr, uint32_t slot)
{
	struct plain_entry *e;
	bool done = false;

	members_tag(nr, slot);
	pthread_mutex_lock(&cl->mu);
	e = entry_locked(cl, r);
	/* (reserved[0]'s low half is the slot: members_tag) */
	if (e && e->cur.id == seen_id && (uint32_t)e->cur.reserved[0] == seen_slot) {
		e->cur = *nr;
		done = true;
	}
	pthread_mutex_unlock(&cl->mu);
	return done;
}

int pnamed_follow(struct router *cl, const struct rmem_region *r, const struct rmem_region *cur)
{
	char name[RMEM_NAME_MAX + 1];
	uint32_t access, seen_slot;
	int64_t created, deadline;
	struct plain_entry *e;
	unsigned gone = 0;
	int err = -ENOENT;

	if (cur == r || members_slot_of(cl, cur, &seen_slot))
		return -ENOENT; /* not a followed handle */
	pthread_mutex_lock(&cl->mu);
	e = entry_locked(cl, r);
	if (e && e->cur.id != cur->id)
		err = 0; /* another thread followed it meanwhile */
	else if (e) {
		memcpy(name, e->name, sizeof name);
		access = e->access;
		created = e->created;
	}
	pthread_mutex_unlock(&cl->mu);
	if (!e || !err)
		return e ? 0 : -ENOENT;
	deadline = clock_mono_ms() + (cl->opts.timeout_ms > 0 ? cl->opts.timeout_ms : PNAMED_WAIT_MS);
	for (;;) {
		struct rmem_region nr;
		struct plain_at at;

		err = names_plain_at(cl, name, &at);
		if (!err && at.created != created)
			err = -ENOENT; /* unlinked and made again: another region */
		if (!err) {
			err = members_err(cl, at.slot, single_open(at.c, name, access, &nr));
			if (!err) {
				if (!install(cl, r, cur->id, seen_slot, &nr, at.slot))
					(void)single_free(at.c, &nr); /* another thread's won */
				return 0;
			}
			/* Gone there under a record unchanged: an unlink with
			 * revoke between its two steps, or a stale record. */
			if (err == -ENOENT && ++gone < PNAMED_GONE_LOOKS)
				err = -EAGAIN;
		}
		if (err != -EAGAIN || clock_mono_ms() >= deadline)
			return err;
		pause_ms(PNAMED_PAUSE_MS); /* frozen: a move is copying it */
	}
}

int pnamed_free(struct router *cl, const struct rmem_region *r)
{
	struct rmem_region tmp;
	const struct rmem_region *cur = pnamed_cur(cl, r, &tmp);
	int64_t created = 0;
	char name[RMEM_NAME_MAX + 1] = "";
	struct plain_entry *e;
	struct plain_at at;
	rmem_client *c;
	uint32_t slot;
	int err = members_slot_of(cl, cur, &slot);

	if (!err)
		err = members_client(cl, slot, &c);
	if (!err)
		err = members_err(cl, slot, single_free(c, cur));
	pthread_mutex_lock(&cl->mu);
	if ((e = entry_locked(cl, r))) {
		created = e->created;
		memcpy(name, e->name, sizeof name);
		e->used = false;
	}
	pthread_mutex_unlock(&cl->mu);
	/* Revoked by a move (its freeze) while the name lives on:
	 * the handle is gone, as the caller asked. */
	if (err == -ENOENT && e && names_plain_at(cl, name, &at) == 0 && at.created == created)
		err = 0;
	return err;
}

void pnamed_fini(struct router *cl)
{
	free(cl->plain);
	cl->plain = NULL;
	cl->nplain = 0;
}

/* ---- the move ----------------------------------------------------------------------- */

/* A region of name, size bytes, on a member other than from that is not
 * draining: 0 with *slot and *nr, or the last answer.  A member that holds
 * the name already (-EEXIST: a move or a create that died before its
 * record) is passed over; what it holds is listed there, for rmemctl. */
static int move_target(struct router *cl, const char *name, uint64_t size, uint32_t from,
		       uint32_t *slot, struct rmem_region *nr)
{
	uint64_t tried[CLUSTER_MAX_SERVERS / 64] = { 0 };
	int err = -ENOSPC;

	tried[from / 64] |= 1ull << (from % 64);
	while (members_pick(cl, size, tried, slot) == 0) {
		rmem_client *c;

		tried[*slot / 64] |= 1ull << (*slot % 64);
		err = members_client(cl, *slot, &c);
		if (!err)
			err = members_err(cl, *slot, single_create(c, name, size, 0, nr));
		members_placed(cl, *slot, size, err);
		if (!err)
			return 0;
		if (!members_refused_room(err) && err != -EHOSTDOWN && err != -EEXIST)
			return err;
		err = -ENOSPC;
	}
	return err;
}

/* len bytes of from (on a) into to (on b), MOVE_STEP at a time. */
static int copy_bytes(rmem_client *a, const struct rmem_region *from, rmem_client *b,
		      const struct rmem_region *to, uint64_t len)
{
	size_t step = len < MOVE_STEP ? (size_t)len : MOVE_STEP;
	unsigned char *buf = malloc(step ? step : 1);
	int err = buf ? 0 : -ENOMEM;

	for (uint64_t off = 0; !err && off < len; off += step) {
		size_t n = len - off < step ? (size_t)(len - off) : step;

		err = single_read(a, from, off, buf, n);
		if (!err)
			err = single_write(b, to, off, buf, n);
	}
	free(buf);
	return err;
}

/* The swap's txn got no answer (etcd away): whether it applied, from the
 * record read again, a few times, MOVE_LOOKS apart.  0 (it names rec),
 * -ESTALE (something else), or -EIO (still unknown).  Unknown, neither
 * undo is safe (unlinking the copy the record may name loses the region;
 * ending the freeze may let the old copy serve beside it): the mover
 * keeps both, frozen, and the name waits for an operator (or the mover's
 * session's end, which lets the old copy's opens in again). */
#define MOVE_LOOKS 10
#define MOVE_LOOK_MS 300
static int swap_outcome(struct router *cl, const char *name, const struct cluster_name *rec)
{
	for (int i = 0; i < MOVE_LOOKS; i++) {
		struct plain_at now;
		int err = names_plain_at(cl, name, &now);

		if (err == -ENOENT)
			return -ESTALE; /* unlinked meanwhile */
		if (err == 0)
			return now.rec.region == rec->region && !strcmp(now.rec.server, rec->server) ?
				       0 :
				       -ESTALE;
		pause_ms(MOVE_LOOK_MS);
	}
	return -EIO;
}

int pnamed_move(struct router *cl, const struct rmem_region *r)
{
	char name[RMEM_NAME_MAX + 1];
	struct rmem_region fr, nr;
	struct cluster_name rec;
	struct plain_entry *e;
	struct plain_at at;
	rmem_client *tc;
	uint32_t to = 0;
	bool draining, made;
	int err;

	pthread_mutex_lock(&cl->mu);
	if ((e = entry_locked(cl, r)))
		memcpy(name, e->name, sizeof name);
	pthread_mutex_unlock(&cl->mu);
	if (!e)
		return -EINVAL;
	err = names_plain_at(cl, name, &at);
	if (err)
		return err;
	pthread_mutex_lock(&cl->mu);
	draining = members_draining_locked(cl, at.slot);
	pthread_mutex_unlock(&cl->mu);
	if (!draining)
		return 0; /* where it should be */
	/* 1. Every other handle revoked, every open waits. */
	err = members_err(cl, at.slot, single_open_freeze(at.c, name, &fr));
	if (err)
		return err;
	/* 2. A copy on a member with room, 3. filled. */
	err = move_target(cl, name, at.rec.size, at.slot, &to, &nr);
	made = !err;
	if (!err && !(err = members_client(cl, to, &tc))) {
		err = copy_bytes(at.c, &fr, tc, &nr, fr.length < nr.length ? fr.length : nr.length);
		if (err)
			err = members_err(cl, at.slot, members_err(cl, to, err));
	}
	/* 4. The record names the copy, if nobody changed it since it was read. */
	if (!err) {
		rec = at.rec;
		pthread_mutex_lock(&cl->mu);
		memcpy(rec.server, cl->members[to].rec.id, sizeof(rec.server));
		rec.generation = cl->members[to].rec.generation;
		pthread_mutex_unlock(&cl->mu);
		rec.region = nr.id;
		err = names_plain_swap(cl, name, at.mod, &rec);
		if (err == -EEXIST || err == -ECANCELED)
			err = -ESTALE;
		else if (err)
			err = swap_outcome(cl, name, &rec);
		if (err == -EIO)
			return err; /* the freeze and the copy stay: see swap_outcome */
	}
	if (err) {
		/* Ours alone (the record never named it): gone again.  The
		 * freeze's end lets the old one's holders open it again. */
		if (made && members_client(cl, to, &tc) == 0 &&
		    single_unlink2(tc, name, RMEM_UNLINK_REVOKE) == 0)
			members_placed(cl, to, at.rec.size, 1);
		(void)single_free(at.c, &fr);
		return err;
	}
	/* 5. The old one goes with its one handle, the freeze's (had this
	 * failed: freed, and the old one holds no handle; the record names
	 * the new one, so no cluster client opens it again). */
	if (members_err(cl, at.slot, single_unlink2(at.c, name, RMEM_UNLINK_REVOKE)))
		(void)single_free(at.c, &fr);
	else
		members_placed(cl, at.slot, at.rec.size, 1);
	(void)single_free(tc, &nr); /* the mover's handle; the name stays */
	return 0;
}
