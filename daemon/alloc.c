/*
 * alloc.c - two-level segregated fit over [0, total) (see alloc.h).
 *
 * A free range is a struct blk in one array (indices, not pointers, so the
 * array can grow by realloc), on the list of its size class.  Size classes
 * count alignment units u: below 32 units one class per size; above, the
 * first level is floor(log2 u) and the second level the next 5 bits, so a
 * class spans 1/32 of its lower bound.  fl_map has a bit per first level
 * holding any free range, sl_map[fl] a bit per non-empty class of that level.
 *
 * The pool's bytes are never touched, so the boundary tags of the classic
 * TLSF (a header before each block) become a hash table in the heap, ftab:
 * free range start -> blk and (end | 1) -> blk, to merge on release.  It uses
 * linear probing with backward-shift deletion (no tombstones) and doubles at
 * 3/4 full.  Live ranges cost nothing: a table of them (offset -> length)
 * would check releases exactly, but its probe is a cache miss on every
 * release at 1 M live (measured: FIFO 4 KiB pairs took 765 ns instead of 66),
 * so only ALLOC_DEBUG builds keep one, ltab, and refuse what it refutes.
 *
 * largest_free is kept exact: it only grows on a merge (a max), and when the
 * range that was the largest shrinks, the top non-empty class is scanned for
 * the new one (in steady state that class holds the pool's tail alone).
 *
 * alloc_claim needs "the free range that holds this offset", which no hash
 * answers: claims in a row share an index built on the first one (the free
 * ranges sorted by offset, chained through anext); a split hangs the new
 * range after the old one in the chain, a range used up stays as a dead
 * node until the index is dropped by the next reserve or release.
 *
 * Build with -DALLOC_DEBUG to check every invariant after every call.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#define SL_LOG 5
#define SL_N (1u << SL_LOG)
#define FL_N 64
#define NIL UINT32_MAX
#define MAX_NODES (UINT32_MAX - 1)
#define HT_EMPTY UINT64_MAX
#define HT_NONE UINT64_MAX
#define HT_MIN_BITS 4
/* A claim that walks more ranges than this rebuilds the index next time. */
#define CLAIM_WALK_MAX 64

struct blk {
	uint64_t off;
	uint64_t len;
	uint32_t prev, next;	/* class list; next chains the spare nodes too */
	uint32_t anext;		/* claim index: the next free range by offset */
	uint32_t dead;		/* claim index: used up, waiting for the drop */
};

struct hent {
	uint64_t key;
	uint64_t val;
};

struct htab {
	struct hent *e;
	uint64_t mask;
	uint64_t count;
	unsigned int shift;
};

struct claim_index {
	uint32_t *order;	/* free ranges by offset when built */
	size_t n;
	uint32_t finger;	/* where the last claim landed */
	uint32_t dead;		/* used-up nodes, chained through next */
	bool active;
	bool stale;
};

struct alloc {
	uint64_t fl_map;
	uint32_t sl_map[FL_N];
	uint32_t head[FL_N][SL_N];
	struct blk *node;
	uint32_t node_cap;
	uint32_t node_used;	/* slots ever handed out; spares are below */
	uint32_t spare;		/* spare nodes, chained through next */
	struct htab ftab;
#ifdef ALLOC_DEBUG
	struct htab ltab;
#endif
	struct claim_index ci;
	unsigned int shift;	/* log2(alignment) */
	uint64_t total;
	uint64_t align_mask;
	uint64_t used;
	uint64_t peak_used;
	uint64_t live;
	uint64_t free_ranges;
	uint64_t largest;
};

#ifdef ALLOC_DEBUG
static void alloc_check(const struct alloc *a);
#else
static inline void alloc_check(const struct alloc *a) { (void)a; }
#endif

/* ---- hash tables ---------------------------------------------------------- */

static inline uint64_t ht_home(const struct htab *h, uint64_t key)
{
	/* Fibonacci hashing: offsets are multiples of the alignment, and the
	 * product's high bits depend on all of the key's bits.  Bit 0 (ftab's
	 * "end" tag) is left out: x and x | 1 share a home, so a release finds
	 * "a free range ending at my offset" and "one starting there" (and the
	 * same at its end) in one cache line. */
	return ((key & ~1ull) * 0x9e3779b97f4a7c15ULL) >> h->shift;
}

static inline void ht_prefetch(const struct htab *h, uint64_t key)
{
	__builtin_prefetch(&h->e[ht_home(h, key)]);
}

static int ht_init(struct htab *h, unsigned int bits)
{
	uint64_t cap = 1ull << bits;

	h->e = malloc(cap * sizeof(*h->e));
	if (!h->e)
		return -ENOMEM;
	for (uint64_t i = 0; i < cap; i++)
		h->e[i].key = HT_EMPTY;
	h->mask = cap - 1;
	h->count = 0;
	h->shift = 64 - bits;
	return 0;
}

static inline uint64_t ht_find(const struct htab *h, uint64_t key)
{
	for (uint64_t i = ht_home(h, key);; i = (i + 1) & h->mask) {
		if (h->e[i].key == key)
			return i;
		if (h->e[i].key == HT_EMPTY)
			return HT_NONE;
	}
}

/* The slots of keys x and x | 1 (x even), which share a home, in one scan;
 * HT_NONE for a key that is absent. */
static inline void ht_find_pair(const struct htab *h, uint64_t x, uint64_t *even, uint64_t *odd)
{
	*even = HT_NONE;
	*odd = HT_NONE;
	for (uint64_t i = ht_home(h, x); h->e[i].key != HT_EMPTY; i = (i + 1) & h->mask) {
		if (h->e[i].key == x)
			*even = i;
		else if (h->e[i].key == (x | 1))
			*odd = i;
	}
}

/* The key must be absent and the table have room (ht_room). */
static inline void ht_put(struct htab *h, uint64_t key, uint64_t val)
{
	uint64_t i = ht_home(h, key);

	while (h->e[i].key != HT_EMPTY)
		i = (i + 1) & h->mask;
	h->e[i].key = key;
	h->e[i].val = val;
	h->count++;
}

/* Empties slot i and moves later members of its run back, so every key stays
 * reachable from its home slot without tombstones. */
static inline void ht_del_at(struct htab *h, uint64_t i)
{
	uint64_t j = i;

	for (;;) {
		uint64_t k;

		j = (j + 1) & h->mask;
		if (h->e[j].key == HT_EMPTY)
			break;
		k = ht_home(h, h->e[j].key);
		/* The entry at j may move to i unless its home lies in (i, j]. */
		if (i <= j ? (k > i && k <= j) : (k > i || k <= j))
			continue;
		h->e[i] = h->e[j];
		i = j;
	}
	h->e[i].key = HT_EMPTY;
	h->count--;
}

static inline void ht_del(struct htab *h, uint64_t key)
{
	ht_del_at(h, ht_find(h, key));
}

/* The slow half of ht_room: a bigger table; the old one survives a failure. */
static int ht_grow(struct htab *h, uint64_t extra)
{
	struct htab n;
	unsigned int bits = 64 - h->shift;

	while ((h->count + extra) * 4 > (1ull << bits) * 3)
		bits++;
	if (bits > 60 || ht_init(&n, bits))
		return -ENOMEM;
	for (uint64_t i = 0; i <= h->mask; i++)
		if (h->e[i].key != HT_EMPTY)
			ht_put(&n, h->e[i].key, h->e[i].val);
	free(h->e);
	*h = n;
	return 0;
}

/* Room for extra more keys below 3/4 full. */
static inline int ht_room(struct htab *h, uint64_t extra)
{
	if ((h->count + extra) * 4 <= (h->mask + 1) * 3)
		return 0;
	return ht_grow(h, extra);
}

/* ---- size classes ---------------------------------------------------------- */

static inline int ilog2(uint64_t x)
{
	return 63 - __builtin_clzll(x);
}

/* The class of a free range of u units (u >= 1): the one whose span holds u. */
static inline void class_of(uint64_t u, unsigned int *fl, unsigned int *sl)
{
	int t;

	if (u < SL_N) {
		*fl = 0;
		*sl = (unsigned int)u;
		return;
	}
	t = ilog2(u);
	*fl = (unsigned int)(t - SL_LOG + 1);
	*sl = (unsigned int)(u >> (t - SL_LOG)) - SL_N;
}

/* The first non-empty class after (fl, sl), or false. */
static inline bool class_after(const struct alloc *a, unsigned int *fl, unsigned int *sl)
{
	uint32_t m = *sl + 1 < SL_N ? a->sl_map[*fl] & (~0u << (*sl + 1)) : 0;
	uint64_t f;

	if (m) {
		*sl = (unsigned int)__builtin_ctz(m);
		return true;
	}
	f = *fl + 1 < FL_N ? a->fl_map & (~0ull << (*fl + 1)) : 0;
	if (!f)
		return false;
	*fl = (unsigned int)__builtin_ctzll(f);
	*sl = (unsigned int)__builtin_ctz(a->sl_map[*fl]);
	return true;
}

static inline void list_push(struct alloc *a, uint32_t i)
{
	struct blk *b = &a->node[i];
	unsigned int fl, sl;

	class_of(b->len >> a->shift, &fl, &sl);
	b->prev = NIL;
	b->next = a->head[fl][sl];
	if (b->next != NIL)
		a->node[b->next].prev = i;
	a->head[fl][sl] = i;
	a->sl_map[fl] |= 1u << sl;
	a->fl_map |= 1ull << fl;
	if (b->len > a->largest)
		a->largest = b->len;
}

/* Unlinks node i from its class list; its len must still be the one it was
 * pushed with. */
static inline void list_unlink(struct alloc *a, uint32_t i)
{
	struct blk *b = &a->node[i];
	unsigned int fl, sl;

	if (b->next != NIL)
		a->node[b->next].prev = b->prev;
	if (b->prev != NIL) {
		a->node[b->prev].next = b->next;
		return;
	}
	class_of(b->len >> a->shift, &fl, &sl);
	a->head[fl][sl] = b->next;
	if (b->next == NIL) {
		a->sl_map[fl] &= ~(1u << sl);
		if (!a->sl_map[fl])
			a->fl_map &= ~(1ull << fl);
	}
}

/* After the range that was the largest shrank or left: the longest member of
 * the top non-empty class. */
static void largest_rescan(struct alloc *a)
{
	unsigned int fl, sl;
	uint64_t best = 0;

	if (!a->fl_map) {
		a->largest = 0;
		return;
	}
	fl = (unsigned int)ilog2(a->fl_map);
	sl = 31u - (unsigned int)__builtin_clz(a->sl_map[fl]);
	for (uint32_t i = a->head[fl][sl]; i != NIL; i = a->node[i].next)
		if (a->node[i].len > best)
			best = a->node[i].len;
	a->largest = best;
}

/*
 * Gives free range i a new length, re-filing it only when its class changes
 * (the pool's tail shrinks and grows in place most of the time), and keeps
 * largest exact: a range alone in the top class that shrinks is still the
 * largest; otherwise a shrinking largest means a rescan.
 */
static inline __attribute__((always_inline)) void range_relen(struct alloc *a, uint32_t i,
								uint64_t len)
{
	struct blk *b = &a->node[i];
	uint64_t was = b->len;
	unsigned int f0, s0, f1, s1;

	class_of(was >> a->shift, &f0, &s0);
	class_of(len >> a->shift, &f1, &s1);
	if (f0 != f1 || s0 != s1) {
		list_unlink(a, i);
		b->len = len;
		list_push(a, i);
	} else {
		b->len = len;
		if (len > a->largest)
			a->largest = len;
	}
	if (len >= was || was != a->largest)
		return;
	if (b->prev == NIL && b->next == NIL && f1 == (unsigned int)ilog2(a->fl_map) &&
	    s1 == 31u - (unsigned int)__builtin_clz(a->sl_map[f1]))
		a->largest = len;
	else
		largest_rescan(a);
}

/* ---- nodes ------------------------------------------------------------------ */

/* The slow half of node_room: a bigger array. */
static int node_grow(struct alloc *a)
{
	struct blk *n;
	uint32_t cap;

	if (a->node_cap >= MAX_NODES)
		return -ENOMEM;
	cap = a->node_cap > MAX_NODES / 2 ? MAX_NODES : a->node_cap * 2;
	n = realloc(a->node, (size_t)cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	a->node = n;
	a->node_cap = cap;
	return 0;
}

/* At least one spare node; pointers into a->node are stale after a success. */
static inline int node_room(struct alloc *a)
{
	if (a->spare != NIL || a->node_used < a->node_cap)
		return 0;
	return node_grow(a);
}

/* Takes a spare node (node_room first). */
static inline uint32_t node_get(struct alloc *a)
{
	uint32_t i = a->spare;

	if (i != NIL)
		a->spare = a->node[i].next;
	else
		i = a->node_used++;
	a->node[i].dead = 0;
	a->node[i].anext = NIL;
	return i;
}

static inline void node_put(struct alloc *a, uint32_t i)
{
	a->node[i].next = a->spare;
	a->spare = i;
}

/* A fresh free range, in its class and both hashes (room made first). */
static inline uint32_t range_add(struct alloc *a, uint64_t off, uint64_t len)
{
	uint32_t i = node_get(a);

	a->node[i].off = off;
	a->node[i].len = len;
	ht_put(&a->ftab, off, i);
	ht_put(&a->ftab, (off + len) | 1, i);
	list_push(a, i);
	a->free_ranges++;
	return i;
}

/* ---- live ranges: only ALLOC_DEBUG builds know them ------------------------- */

#ifdef ALLOC_DEBUG
static int live_init(struct alloc *a)
{
	return ht_init(&a->ltab, HT_MIN_BITS);
}

static void live_fini(struct alloc *a)
{
	free(a->ltab.e);
}

static int live_room(struct alloc *a)
{
	return ht_room(&a->ltab, 1);
}

static void live_add(struct alloc *a, uint64_t off, uint64_t len)
{
	ht_put(&a->ltab, off, len);
}

/* Is [off, off + len) exactly one live range? */
static bool live_is(const struct alloc *a, uint64_t off, uint64_t len)
{
	uint64_t s = ht_find(&a->ltab, off);

	return s != HT_NONE && a->ltab.e[s].val == len;
}

static void live_del(struct alloc *a, uint64_t off)
{
	ht_del(&a->ltab, off);
}
#else
static inline int live_init(struct alloc *a) { (void)a; return 0; }
static inline void live_fini(struct alloc *a) { (void)a; }
static inline int live_room(struct alloc *a) { (void)a; return 0; }
static inline void live_add(struct alloc *a, uint64_t off, uint64_t len)
{
	(void)a, (void)off, (void)len;
}
static inline bool live_is(const struct alloc *a, uint64_t off, uint64_t len)
{
	(void)a, (void)off, (void)len;
	return true;
}
static inline void live_del(struct alloc *a, uint64_t off) { (void)a, (void)off; }
#endif

/* ---- the claim index -------------------------------------------------------- */

static void claim_index_drop(struct alloc *a)
{
	struct claim_index *ci = &a->ci;

	while (ci->dead != NIL) {
		uint32_t i = ci->dead;

		ci->dead = a->node[i].next;
		node_put(a, i);
	}
	free(ci->order);
	ci->order = NULL;
	ci->n = 0;
	ci->active = false;
	ci->stale = false;
	ci->finger = NIL;
}

struct by_off {
	uint64_t off;
	uint32_t i;
};

static int by_offset(const void *x, const void *y)
{
	uint64_t p = ((const struct by_off *)x)->off, q = ((const struct by_off *)y)->off;

	return (p > q) - (p < q);
}

static int claim_index_build(struct alloc *a)
{
	struct claim_index *ci = &a->ci;
	size_t cap = a->free_ranges ? (size_t)a->free_ranges : 1, n = 0;
	uint32_t *order = malloc(cap * sizeof(*order));
	struct by_off *tmp = malloc(cap * sizeof(*tmp));

	if (!order || !tmp) {
		free(order);
		free(tmp);
		return -ENOMEM;
	}
	claim_index_drop(a);
	for (unsigned int fl = 0; fl < FL_N; fl++)
		for (unsigned int sl = 0; sl < SL_N; sl++)
			for (uint32_t i = a->head[fl][sl]; i != NIL; i = a->node[i].next)
				tmp[n++] = (struct by_off){ a->node[i].off, i };
	qsort(tmp, n, sizeof(*tmp), by_offset);
	for (size_t k = 0; k < n; k++) {
		order[k] = tmp[k].i;
		a->node[tmp[k].i].anext = k + 1 < n ? tmp[k + 1].i : NIL;
	}
	free(tmp);
	ci->order = order;
	ci->n = n;
	ci->active = true;
	return 0;
}

static inline bool holds(const struct blk *b, uint64_t x)
{
	return !b->dead && b->off <= x && x - b->off < b->len;
}

/* The live free range that holds offset x, or NIL. */
static uint32_t claim_index_find(struct alloc *a, uint64_t x)
{
	struct claim_index *ci = &a->ci;
	size_t lo = 0, hi = ci->n;	/* the last order[k] with off <= x */
	uint32_t i, f = ci->finger;
	int steps = 0;

	/* Claims in offset order land in the range the last one left, or in the
	 * one after it. */
	if (f != NIL && holds(&a->node[f], x))
		return f;
	if (f != NIL && a->node[f].anext != NIL && holds(&a->node[a->node[f].anext], x))
		return ci->finger = a->node[f].anext;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->node[ci->order[mid]].off <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NIL;
	for (i = ci->order[lo - 1]; i != NIL && a->node[i].off <= x; i = a->node[i].anext) {
		if (holds(&a->node[i], x)) {
			ci->finger = i;
			break;
		}
		steps++;
	}
	/* Many splits since the build: the next claim rebuilds. */
	if (steps > CLAIM_WALK_MAX)
		ci->stale = true;
	return i != NIL && holds(&a->node[i], x) ? i : NIL;
}

/* ---- the calls ----------------------------------------------------------------- */

struct alloc *alloc_new(uint64_t total, uint64_t alignment)
{
	struct alloc *a;

	if (alignment < 8 || (alignment & (alignment - 1)) || total < alignment) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		goto nomem;
	memset(a->head, 0xff, sizeof(a->head));
	a->spare = NIL;
	a->ci.finger = NIL;
	a->ci.dead = NIL;
	a->node_cap = 16;
	a->node = malloc(a->node_cap * sizeof(*a->node));
	if (!a->node || ht_init(&a->ftab, HT_MIN_BITS) || live_init(a))
		goto nomem;
	a->shift = (unsigned int)ilog2(alignment);
	a->align_mask = alignment - 1;
	a->total = total & ~a->align_mask;
	range_add(a, 0, a->total);
	return a;
nomem:
	alloc_free(a);
	errno = ENOMEM;
	return NULL;
}

void alloc_free(struct alloc *a)
{
	if (!a)
		return;
	free(a->ci.order);
	free(a->ftab.e);
	live_fini(a);
	free(a->node);
	free(a);
}

/*
 * The range a request of len bytes is carved from: the head of its own class
 * when long enough (an exact fit for repeated sizes), else the head of the
 * first non-empty class above, every member of which is long enough.  When
 * all classes above are empty, the own class may still hold a range long
 * enough further down its list: the one scan.
 */
static uint32_t find_fit(const struct alloc *a, uint64_t len)
{
	unsigned int fl, sl;
	uint32_t i;

	class_of(len >> a->shift, &fl, &sl);
	i = a->head[fl][sl];
	if (i != NIL && a->node[i].len >= len)
		return i;
	{
		unsigned int f = fl, s = sl;

		if (class_after(a, &f, &s))
			return a->head[f][s];
	}
	while (i != NIL && a->node[i].len < len)
		i = a->node[i].next;
	return i;
}

static void note_used(struct alloc *a, uint64_t len)
{
	a->used += len;
	if (a->used > a->peak_used)
		a->peak_used = a->used;
	a->live++;
}

int alloc_reserve(struct alloc *a, uint64_t size, uint64_t *offset, uint64_t *length)
{
	uint64_t len, was;
	struct blk *b;
	uint32_t i;

	if (size == 0 || size > UINT64_MAX - a->align_mask)
		return -EINVAL;
	len = (size + a->align_mask) & ~a->align_mask;
	if (len > a->largest)
		return -ENOMEM;
	if (a->ci.active)
		claim_index_drop(a);
	if (live_room(a))
		return -ENOMEM;
	i = find_fit(a, len);
	b = &a->node[i];
	was = b->len;
	*offset = b->off;
	*length = len;
	ht_del(&a->ftab, b->off);
	if (was == len) {
		list_unlink(a, i);
		ht_del(&a->ftab, (b->off + len) | 1);
		node_put(a, i);
		a->free_ranges--;
		if (was == a->largest)
			largest_rescan(a);
	} else {
		/* Carved from the front: the end, and its hash entry, stay. */
		b->off += len;
		ht_put(&a->ftab, b->off, i);
		range_relen(a, i, was - len);
	}
	live_add(a, *offset, len);
	note_used(a, len);
	alloc_check(a);
	return 0;
}

/*
 * A release is checked in O(1) against bounds and alignment, and against the
 * free ranges that share an end with it (a free range cannot start at offset
 * nor end at offset + length): that refuses the double release of a range
 * that did not merge on both sides.  A range strictly inside a free range, or
 * around one, is not seen: the region table is the authority on what is
 * live, as it was before on "exactly one reserved range".
 */
int alloc_release(struct alloc *a, uint64_t offset, uint64_t length)
{
	uint64_t end = offset + length, starts_here, left, right, ends_there;
	uint32_t l, r;

	if (length == 0 || ((offset | length) & a->align_mask) || offset >= a->total ||
	    length > a->total - offset || !a->live || !live_is(a, offset, length))
		return -EINVAL;
	/* Both lines at once: at 1 M live they are cache misses. */
	ht_prefetch(&a->ftab, offset);
	ht_prefetch(&a->ftab, end);
	/* Room first (growing moves slots, and changes nothing one can see). */
	if (ht_room(&a->ftab, 2) || node_room(a))
		return -ENOMEM;
	ht_find_pair(&a->ftab, offset, &starts_here, &left);
	ht_find_pair(&a->ftab, end, &right, &ends_there);
	if (starts_here != HT_NONE || ends_there != HT_NONE)
		return -EINVAL;
	if (a->ci.active)
		claim_index_drop(a);
	live_del(a, offset);
	l = left == HT_NONE ? NIL : (uint32_t)a->ftab.e[left].val;
	r = right == HT_NONE ? NIL : (uint32_t)a->ftab.e[right].val;
	if (l != NIL) {
		/* Grows the left neighbour over the range (and the right one). */
		ht_del_at(&a->ftab, left);
		if (r != NIL) {
			list_unlink(a, r);
			ht_del(&a->ftab, end);
			end += a->node[r].len;
			ht_del(&a->ftab, end | 1);
			node_put(a, r);
			a->free_ranges--;
		}
		ht_put(&a->ftab, end | 1, l);
		range_relen(a, l, end - a->node[l].off);
	} else if (r != NIL) {
		/* The right neighbour grows down: its end entry stays. */
		ht_del_at(&a->ftab, right);
		a->node[r].off = offset;
		ht_put(&a->ftab, offset, r);
		range_relen(a, r, a->node[r].len + length);
	} else {
		range_add(a, offset, length);
	}
	a->used -= length;
	a->live--;
	alloc_check(a);
	return 0;
}

int alloc_claim(struct alloc *a, uint64_t offset, uint64_t length)
{
	uint64_t end = offset + length, f_off, f_end, was;
	uint32_t f, r;
	int rc;

	if (length == 0 || ((offset | length) & a->align_mask) || offset >= a->total ||
	    length > a->total - offset)
		return -EINVAL;
	if ((!a->ci.active || a->ci.stale) && (rc = claim_index_build(a)))
		return rc;
	f = claim_index_find(a, offset);
	if (f == NIL || end - a->node[f].off > a->node[f].len)
		return -EEXIST;
	if (live_room(a) || ht_room(&a->ftab, 2) || node_room(a))
		return -ENOMEM;
	f_off = a->node[f].off;
	was = a->node[f].len;
	f_end = f_off + was;
	list_unlink(a, f);
	if (f_off < offset) {
		/* f keeps the front; the back, if any, is a new range after it. */
		ht_del(&a->ftab, f_end | 1);
		a->node[f].len = offset - f_off;
		ht_put(&a->ftab, offset | 1, f);
		list_push(a, f);
		if (end < f_end) {
			r = range_add(a, end, f_end - end);
			a->node[r].anext = a->node[f].anext;
			a->node[f].anext = r;
		}
	} else if (end < f_end) {
		/* Claimed from the front: f moves up, still before the next range. */
		ht_del(&a->ftab, f_off);
		a->node[f].off = end;
		a->node[f].len = f_end - end;
		ht_put(&a->ftab, end, f);
		list_push(a, f);
	} else {
		/* Used up: dead until the index goes, so the chain stays whole. */
		ht_del(&a->ftab, f_off);
		ht_del(&a->ftab, f_end | 1);
		a->node[f].dead = 1;
		a->node[f].next = a->ci.dead;
		a->ci.dead = f;
		a->free_ranges--;
	}
	if (was == a->largest)
		largest_rescan(a);
	live_add(a, offset, length);
	note_used(a, length);
	alloc_check(a);
	return 0;
}

void alloc_get_stats(const struct alloc *a, struct alloc_stats *out)
{
	out->total = a->total;
	out->used = a->used;
	out->free = a->total - a->used;
	out->largest_free = a->largest;
	out->live = a->live;
	out->peak_used = a->peak_used;
	out->free_ranges = a->free_ranges;
}

uint64_t alloc_alignment(const struct alloc *a)
{
	return a->align_mask + 1;
}

#ifdef ALLOC_DEBUG
#include <stdio.h>

static void check_fail(const char *what)
{
	fprintf(stderr, "alloc_check: %s\n", what);
	abort();
}

struct span {
	uint64_t off, len;
	bool is_free;
};

static int span_cmp(const void *x, const void *y)
{
	const struct span *p = x, *q = y;

	return (p->off > q->off) - (p->off < q->off);
}

static uint64_t ht_get(const struct htab *h, uint64_t key)
{
	uint64_t s = ht_find(h, key);

	return s == HT_NONE ? HT_NONE : h->e[s].val;
}

/* Every free and live range, sorted, must tile [0, total) exactly, free
 * ranges never touching; the lists, maps and hashes must agree. */
static void alloc_check(const struct alloc *a)
{
	size_t n = (size_t)(a->free_ranges + a->live), k = 0;
	struct span *sp = malloc((n ? n : 1) * sizeof(*sp));
	uint64_t bytes = 0, largest = 0, at = 0, live_bytes = 0;

	if (!sp)
		check_fail("out of memory");
	for (unsigned int fl = 0; fl < FL_N; fl++) {
		if (!!(a->fl_map & (1ull << fl)) != !!a->sl_map[fl])
			check_fail("fl_map disagrees with sl_map");
		for (unsigned int sl = 0; sl < SL_N; sl++) {
			uint32_t prev = NIL;

			if (!!(a->sl_map[fl] & (1u << sl)) != (a->head[fl][sl] != NIL))
				check_fail("sl_map disagrees with the lists");
			for (uint32_t i = a->head[fl][sl]; i != NIL; i = a->node[i].next) {
				const struct blk *b = &a->node[i];
				unsigned int f, s;

				if (k == n)
					check_fail("more free ranges than counted");
				if (b->prev != prev || b->dead || !b->len)
					check_fail("bad list node");
				class_of(b->len >> a->shift, &f, &s);
				if (f != fl || s != sl)
					check_fail("free range in the wrong class");
				if (ht_get(&a->ftab, b->off) != i ||
				    ht_get(&a->ftab, (b->off + b->len) | 1) != i)
					check_fail("free range missing from ftab");
				sp[k++] = (struct span){ b->off, b->len, true };
				bytes += b->len;
				largest = b->len > largest ? b->len : largest;
				prev = i;
			}
		}
	}
	if (k != a->free_ranges || bytes != a->total - a->used || largest != a->largest ||
	    a->ftab.count != 2 * a->free_ranges || a->ltab.count != a->live)
		check_fail("lists disagree with the books");
	for (uint64_t i = 0; i <= a->ltab.mask; i++) {
		if (a->ltab.e[i].key == HT_EMPTY)
			continue;
		if (k == n)
			check_fail("more live ranges than counted");
		sp[k++] = (struct span){ a->ltab.e[i].key, a->ltab.e[i].val, false };
		live_bytes += a->ltab.e[i].val;
	}
	if (k != n || live_bytes != a->used)
		check_fail("live table disagrees with the books");
	qsort(sp, n, sizeof(*sp), span_cmp);
	for (size_t i = 0; i < n; i++) {
		if (sp[i].off != at || !sp[i].len || ((sp[i].off | sp[i].len) & a->align_mask) ||
		    sp[i].len > a->total - sp[i].off)
			check_fail("ranges overlap, leave a gap or stray out of the pool");
		if (i && sp[i].is_free && sp[i - 1].is_free)
			check_fail("free ranges touch: a missed merge");
		at += sp[i].len;
	}
	if (at != a->total)
		check_fail("ranges do not cover the pool");
	free(sp);
}
#endif
