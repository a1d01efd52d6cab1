/*
 * hash64.h - an intrusive chained hash keyed by a 64-bit value, doubled when
 * it holds as many nodes as it has buckets.
 *
 * The owner embeds a struct hash64_node in its object and sets its key: a
 * unique id (named-region handles, a peer's NIC keys) or a hash whose
 * collisions the owner tells apart itself (names by namespace and name:
 * walk hash64_first/hash64_next and compare).  The table owns no nodes:
 * hash64_fini frees the buckets only.
 *
 * Growing allocates; when that fails the table keeps its width and its
 * chains get longer, still correct, so adding never fails.
 */
#ifndef RMEM_HASH64_H
#define RMEM_HASH64_H

#include <stddef.h>
#include <stdint.h>

struct hash64_node {
	struct hash64_node *next;
	uint64_t key;
};

struct hash64 {
	struct hash64_node **b;
	unsigned bits;
	uint64_t count;
};

/* 0, or -ENOMEM.  Starts with 2^min_bits buckets (1..32). */
int hash64_init(struct hash64 *h, unsigned min_bits);
/* The buckets; the nodes stay the owner's.  Accepts a zeroed table. */
void hash64_fini(struct hash64 *h);

/* n->key set by the caller; n not in any table. */
void hash64_add(struct hash64 *h, struct hash64_node *n);
/* n is in h. */
void hash64_del(struct hash64 *h, struct hash64_node *n);

/* The first node of key, then the next ones of the same key (NULL at the end). */
struct hash64_node *hash64_first(const struct hash64 *h, uint64_t key);
struct hash64_node *hash64_next(const struct hash64_node *n);
/* The node of key taken out of h, or NULL: for unique keys. */
struct hash64_node *hash64_take(struct hash64 *h, uint64_t key);
/* Takes the nodes out one by one, for a teardown: *cursor starts at 0 and
 * only this call moves it; NULL when h is empty.  Linear over the whole
 * drain, as long as nothing is added meanwhile. */
struct hash64_node *hash64_pop(struct hash64 *h, size_t *cursor);

/* The object that embeds node as its member field. */
#define hash64_entry(node, type, field) \
	((type *)(void *)((char *)(node) - offsetof(type, field)))

#endif /* RMEM_HASH64_H */
