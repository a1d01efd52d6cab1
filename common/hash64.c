/*
 * hash64.c - see hash64.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "hash64.h"

/* Fibonacci hashing: the top bits of key times 2^64/phi, so ids handed out
 * in sequence spread over the buckets. */
static size_t slot_of(uint64_t key, unsigned bits)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

int hash64_init(struct hash64 *h, unsigned min_bits)
{
	if (min_bits < 1 || min_bits > 32)
		return -EINVAL;
	h->b = calloc((size_t)1 << min_bits, sizeof *h->b);
	if (!h->b)
		return -ENOMEM;
	h->bits = min_bits;
	h->count = 0;
	return 0;
}

void hash64_fini(struct hash64 *h)
{
	free(h->b);
	h->b = NULL;
	h->count = 0;
}

static void grow(struct hash64 *h)
{
	unsigned bits = h->bits + 1;
	struct hash64_node **b = calloc((size_t)1 << bits, sizeof *b);

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < (size_t)1 << h->bits; i++) {
		for (struct hash64_node *n = h->b[i], *next; n; n = next) {
			size_t j = slot_of(n->key, bits);

			next = n->next;
			n->next = b[j];
			b[j] = n;
		}
	}
	free(h->b);
	h->b = b;
	h->bits = bits;
}

void hash64_add(struct hash64 *h, struct hash64_node *n)
{
	size_t i;

	if (h->count >= (uint64_t)1 << h->bits && h->bits < 48)
		grow(h);
	i = slot_of(n->key, h->bits);
	n->next = h->b[i];
	h->b[i] = n;
	h->count++;
}

void hash64_del(struct hash64 *h, struct hash64_node *n)
{
	struct hash64_node **pp = &h->b[slot_of(n->key, h->bits)];

	while (*pp != n)
		pp = &(*pp)->next;
	*pp = n->next;
	n->next = NULL;
	h->count--;
}

static struct hash64_node *same_key(struct hash64_node *n, uint64_t key)
{
	while (n && n->key != key)
		n = n->next;
	return n;
}

struct hash64_node *hash64_first(const struct hash64 *h, uint64_t key)
{
	return same_key(h->b[slot_of(key, h->bits)], key);
}

struct hash64_node *hash64_next(const struct hash64_node *n)
{
	return same_key(n->next, n->key);
}

struct hash64_node *hash64_take(struct hash64 *h, uint64_t key)
{
	struct hash64_node *n = hash64_first(h, key);

	if (n)
		hash64_del(h, n);
	return n;
}

struct hash64_node *hash64_pop(struct hash64 *h, size_t *cursor)
{
	for (; h->count && *cursor < (size_t)1 << h->bits; (*cursor)++) {
		struct hash64_node *n = h->b[*cursor];

		if (n) {
			h->b[*cursor] = n->next;
			n->next = NULL;
			h->count--;
			return n;
		}
	}
	return NULL;
}
