/*
 * names.h - named regions: the objects behind the names and their handles.
 *
 * An object is a range of a pool with a name in a namespace (a tenant, or
 * NULL: the namespace anonymous local clients share).  It outlives every
 * session: it lasts until it is unlinked and its last handle is released,
 * as shm_unlink does.  A handle is an ordinary region of the region table
 * (region.h, marked `named`), owned by the session that opened it; this
 * module keeps what the 56-byte region entry has no room for: the handle's
 * access and its object, in a side map keyed by region id, and each
 * object's list of handles (revocation reaches them all).
 *
 * Pure bookkeeping like region.c: no pool memory, no keys, no I/O.  Who
 * charges what, and when a range goes back, is session.c's business.
 * Ids come from a counter and are never reused; objects sit in one list in
 * id order (ids only grow) for the NAMES listing, in a hash on (namespace,
 * name) while they are linked, and handles in a hash on region id.
 */
#ifndef RMEMD_NAMES_H
#define RMEMD_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hash64.h"
#include "proto.h"

struct config_tenant;
struct name_handle;

struct name_obj {
	uint64_t id;
	const struct config_tenant *ns;      /* namespace; NULL: anonymous */
	const struct config_tenant *charged; /* whose quota holds the range */
	uint32_t pool;
	uint64_t offset, length;
	uint64_t created_ns;
	uint32_t handles;                    /* open handles */
	bool unlinked;                       /* the name is gone; the object waits
						for its last handle */
	bool piece;                          /* a redundant region's piece
						(CREATE with PROTO_CREATE_F_PIECE;
						kept across a restart): only
						these are the repair agent's to
						give back */
	uint64_t unconfirmed_ns;             /* when a handle's key last died
						without the NIC's word (0: never):
						the range waits out the quarantine
						if it goes back before that ends */
	uint16_t name_len;
	char name[PROTO_NAME_MAX + 1];
	/* The module's own links: use the calls below. */
	struct hash64_node link;     /* by (namespace, name) while linked */
	struct name_obj *prev, *next;
	struct name_handle *first_handle;
};

struct name_handle {
	struct hash64_node link; /* by region id: link.key, see names_handle_region */
	uint32_t access;      /* PROTO_ACCESS_* */
	struct name_obj *obj;
	void *holder;         /* the owner's, opaque here (session.c: its session) */
	/* The module's own links. */
	struct name_handle *obj_prev, *obj_next;
};

/* The region a handle stands for. */
static inline uint64_t names_handle_region(const struct name_handle *h)
{
	return h->link.key;
}

struct names;

struct names *names_new(void);
/* Frees the table, every object and every handle still in it.  Accepts NULL. */
void names_free(struct names *n);

/* 0 when name[0..len) is a valid name: 1..PROTO_NAME_MAX bytes of 0x21..0x7e
 * ('/' makes namespaces of a caller's own); else -EINVAL. */
int names_valid(const char *name, size_t len);
/* 0 when name[0..len) is a valid name that a piece may have:
 * "<base>~<made>.<i>" (cluster_layout.h); else -EINVAL. */
int names_piece_valid(const char *name, size_t len);
/* 0 when access is a valid non-empty set of PROTO_ACCESS_* bits; else -EINVAL. */
int names_access_valid(uint32_t access);

/* The linked (not unlinked) object called name in namespace ns, or NULL. */
struct name_obj *names_lookup(const struct names *n, const struct config_tenant *ns,
			      const char *name, size_t len);
/*
 * A new linked object with no handle.  NULL with errno EINVAL (a bad name),
 * EEXIST (the name is linked in ns), ENOMEM.
 */
struct name_obj *names_add(struct names *n, const struct config_tenant *ns, const char *name,
			   size_t len, uint32_t pool, uint64_t offset, uint64_t length,
			   const struct config_tenant *charged, uint64_t now_ns);
/*
 * An unlinked object with no name and no handle, for a restore: an object
 * that handles kept after its name went.  It never enters the table of
 * names, so nothing a client named can collide with it.  NULL with errno
 * ENOMEM.
 */
struct name_obj *names_add_unlinked(struct names *n, const struct config_tenant *ns,
				    uint32_t pool, uint64_t offset, uint64_t length,
				    const struct config_tenant *charged, uint64_t now_ns);
/* Takes o's name away (the name may be added again); o stays, unlinked, in
 * the id list until names_remove(). */
void names_unlink(struct names *n, struct name_obj *o);
/* Frees o (unlinking it first if needed) and its handles' entries. */
void names_remove(struct names *n, struct name_obj *o);

/* Records region region_id as a handle of o with access; 0, -EEXIST (the id
 * has a handle), -EINVAL (bad access), -ENOMEM. */
int names_handle_add(struct names *n, struct name_obj *o, uint64_t region_id, uint32_t access,
		     void *holder);
struct name_handle *names_handle_find(const struct names *n, uint64_t region_id);
/* Forgets h; its object has one handle fewer (the object stays). */
void names_handle_remove(struct names *n, struct name_handle *h);
/* The first of o's handles, or NULL; h's next, or NULL. */
struct name_handle *names_handle_first(const struct name_obj *o);
struct name_handle *names_handle_next(const struct name_handle *h);

/* The first object with id > after, or NULL; o's next in id order. */
struct name_obj *names_next_after(const struct names *n, uint64_t after);
struct name_obj *names_next(const struct name_obj *o);
/* Objects (linked or not) and handles in the table. */
uint64_t names_count(const struct names *n);
uint64_t names_handle_count(const struct names *n);

/* The id the next names_add gives, and setting it (a restore, as
 * region_table_set_next_id: objects are added in id order). */
uint64_t names_next_id(const struct names *n);
void names_set_next_id(struct names *n, uint64_t next);

#endif /* RMEMD_NAMES_H */
