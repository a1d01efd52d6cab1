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
 * free range start -> blk and (end | 1) -> blk, to merge on release (its
 * layout, cache-line buckets of fingerprints, is described where it is
 * defined).  Live ranges cost nothing: a table of them (offset -> length)
 * would check releases exactly, but its probe is a cache miss on every
 * release at 1 M live (measured: FIFO 4 KiB pairs took 765 ns instead of 66),
 * so only ALLOC_DEBUG builds keep a list of them, ltab, and refuse what it
 * refutes.
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
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

#if defined(__SSE2__) && !defined(ALLOC_NO_SIMD)
#include <emmintrin.h>
#endif

#define SL_LOG 5
#define SL_N (1u << SL_LOG)
#define FL_N 64
#define NIL UINT32_MAX
#define MAX_NODES (UINT32_MAX - 1)
#define FT_WAYS 8
#define FT_NONE UINT64_MAX
#define FT_MIN_BITS 1
#ifndef FT_LOAD_NUM
#define FT_LOAD_NUM 1
#define FT_LOAD_DEN 2
#endif
/* A claim that walks more ranges than this rebuilds the index next time. */
#define CLAIM_WALK_MAX 64

struct blk {
	uint64_t off;
	uint64_t len;
	uint32_t prev, next;	/* class list; next chains the spare nodes too */
	uint32_t anext;		/* claim index: the next free range by offset */
	uint32_t dead;		/* claim index: used up, waiting for the drop */
};

/* Free range starts and ends -> node (see "ftab" below). */
struct ft_bucket {
	uint32_t fp[FT_WAYS];	/* fingerprints of the keys */
	uint32_t node[FT_WAYS];	/* node index + 1; 0: empty */
};
/* ft_load4's aligned loads rest on this layout. */
_Static_assert(sizeof(struct ft_bucket) == 64 && offsetof(struct ft_bucket, node) % 16 == 0,
	       "a bucket is one line, its halves 16-byte aligned");

struct ftab {
	struct ft_bucket *bk;	/* nbuckets, 64-byte aligned: a line each */
	uint32_t *ovf;		/* per bucket; saturated counts stay */
	uint64_t mask;		/* nbuckets - 1 */
	uint64_t count;
	unsigned int shift;	/* 64 - log2(nbuckets) */
};

/* ALLOC_DEBUG only: every live range, in no order. */
struct live_set {
	struct live_range { uint64_t off, len; } *r;
	size_t n, cap;
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
	struct ftab ftab;
#ifdef ALLOC_DEBUG
	struct live_set ltab;
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

/* ---- ftab: where free ranges start and end --------------------------------- */

/*
 * Buckets of FT_WAYS slots, one cache line each.  At 1 M live regions of
 * mixed sizes, a release's two lines and a reserve's are cache misses, and
 * they are the allocator's cost: without the table the same pairs take a
 * tenth of the time.  A lookup reads one line and scans it whole, with no
 * branch that waits on which slot holds what, and the table is kept at most
 * half full so that a bucket rarely overflows into the next line.  Against
 * linear probing of 16-byte slots at up to 3/4 (the table before), random
 * release of mixed sizes went from 5.5-7.0 M to 11.0-13.4 M pairs/s
 * (bench/alloc, alternated in one run); hot-cache patterns (lifo, fifo) pay
 * about 30% more instructions and stay above 14 M.
 *
 * A slot holds a 32-bit fingerprint of its key and the node's index + 1 (0:
 * empty), so the key itself is not stored: a fingerprint match is confirmed
 * on the node (its start or end), and a delete names the node too.  A full
 * bucket sends the key to the next one and counts it in ovf[] (F14's
 * "outbound overflow"): a lookup goes on past a bucket only while that count
 * is not 0, and a delete takes it back.  Keys x and x | 1 (a free range
 * starting and one ending at x) share a bucket, so a release looks at two
 * lines for its two ends.
 */
static inline uint64_t ft_home(const struct ftab *t, uint64_t key)
{
	/* Fibonacci hashing: offsets are multiples of the alignment, and the
	 * product's high bits depend on all of the key's bits.  Bit 0 (the "end"
	 * tag) is left out, so x and x | 1 share a bucket. */
	return ((key & ~1ull) * 0x9e3779b97f4a7c15ULL) >> t->shift;
}

/* Independent of the bucket's bits; x and x | 1 differ in bit 0 alone, so
 * one compare finds both (ft_eq_pair). */
static inline uint32_t ft_fp(uint64_t key)
{
	return ((uint32_t)(((key & ~1ull) * 0xc2b2ae3d27d4eb4fULL) >> 32) & ~1u) |
	       (uint32_t)(key & 1);
}

/* A key's bucket and fingerprint, worked out once per call (a release uses
 * each of its two several times).  Valid until the table grows. */
struct ft_key {
	uint64_t home;
	uint32_t fp;
};

static inline struct ft_key ft_key(const struct ftab *t, uint64_t key)
{
	return (struct ft_key){ ft_home(t, key), ft_fp(key) };
}

/* x | 1's, from x's (x even): the same bucket, bit 0 of the fingerprint. */
static inline struct ft_key ft_end(struct ft_key k)
{
	return (struct ft_key){ k.home, k.fp | 1 };
}

#if defined(__SSE2__) && !defined(ALLOC_NO_SIMD)
/* Four of a bucket's words, v[0..3].  A bucket is one 64-byte aligned line
 * and fp[] and node[] start at 0 and 32 in it, so v (fp, node, or either
 * + 4) is 16-byte aligned and the aligned load is safe.  Through a void *,
 * since casting a uint32_t * to __m128i * is what clang's -Wcast-align
 * refuses; the machine code is the same as the cast's. */
static inline __m128i ft_load4(const uint32_t *v)
{
	const void *p = v;

	return _mm_load_si128(p);
}
#endif

/* Bit w set where v[w] == x, for the FT_WAYS words of a bucket. */
static inline unsigned int ft_eq(const uint32_t *v, uint32_t x)
{
#if defined(__SSE2__) && !defined(ALLOC_NO_SIMD)
	/* Two compares and two movemasks instead of eight compare-and-shift
	 * steps: these masks are most of a call's instructions. */
	__m128i k = _mm_set1_epi32((int)x);
	__m128i lo = _mm_cmpeq_epi32(ft_load4(v), k);
	__m128i hi = _mm_cmpeq_epi32(ft_load4(v + 4), k);

	return (unsigned int)_mm_movemask_ps(_mm_castsi128_ps(lo)) |
	       (unsigned int)_mm_movemask_ps(_mm_castsi128_ps(hi)) << 4;
#else
	unsigned int m = 0;

	for (unsigned int w = 0; w < FT_WAYS; w++)
		m |= (unsigned int)(v[w] == x) << w;
	return m;
#endif
}

/* Bit w set where v[w] and x differ at most in bit 0. */
static inline unsigned int ft_eq_pair(const uint32_t *v, uint32_t x)
{
#if defined(__SSE2__) && !defined(ALLOC_NO_SIMD)
	__m128i one = _mm_set1_epi32(1), k = _mm_set1_epi32((int)(x | 1));
	__m128i lo = _mm_or_si128(ft_load4(v), one);
	__m128i hi = _mm_or_si128(ft_load4(v + 4), one);

	lo = _mm_cmpeq_epi32(lo, k);
	hi = _mm_cmpeq_epi32(hi, k);
	return (unsigned int)_mm_movemask_ps(_mm_castsi128_ps(lo)) |
	       (unsigned int)_mm_movemask_ps(_mm_castsi128_ps(hi)) << 4;
#else
	unsigned int m = 0;

	for (unsigned int w = 0; w < FT_WAYS; w++)
		m |= (unsigned int)((v[w] | 1) == (x | 1)) << w;
	return m;
#endif
}

static inline void ft_prefetch(const struct ftab *t, struct ft_key k)
{
	__builtin_prefetch(&t->bk[k.home]);
}

static int ft_init(struct ftab *t, unsigned int bits)
{
	uint64_t nb = 1ull << bits;

	t->bk = aligned_alloc(64, nb * sizeof(*t->bk));
	t->ovf = calloc(nb, sizeof(*t->ovf));
	if (!t->bk || !t->ovf) {
		free(t->bk);
		free(t->ovf);
		return -ENOMEM;
	}
	memset(t->bk, 0, nb * sizeof(*t->bk));
	t->mask = nb - 1;
	t->count = 0;
	t->shift = 64 - bits;
	return 0;
}

static void ft_fini(struct ftab *t)
{
	free(t->bk);
	free(t->ovf);
}

/* Room must have been made (ftab_room). */
static inline void ft_put_k(struct ftab *t, struct ft_key key, uint32_t i)
{
	for (uint64_t b = key.home;; b = (b + 1) & t->mask) {
		struct ft_bucket *k = &t->bk[b];
		/* The free slots as a mask, then the first: no branch on which. */
		unsigned int m = ft_eq(k->node, 0);

		if (m) {
			unsigned int w = (unsigned int)__builtin_ctz(m);

			k->fp[w] = key.fp;
			k->node[w] = i + 1;
			t->count++;
			return;
		}
		if (t->ovf[b] != UINT32_MAX)
			t->ovf[b]++;
	}
}

/* The slot (bucket * FT_WAYS + way) of key for node i; FT_NONE if absent. */
static inline uint64_t ft_slot_of(const struct ftab *t, struct ft_key key, uint32_t i)
{
	for (uint64_t b = key.home;; b = (b + 1) & t->mask) {
		const struct ft_bucket *k = &t->bk[b];

		/* The node's slots here, then the one with the key's fingerprint:
		 * the node's other key may be in this bucket too. */
		for (unsigned int m = ft_eq(k->node, i + 1); m; m &= m - 1) {
			unsigned int w = (unsigned int)__builtin_ctz(m);

			if (k->fp[w] == key.fp)
				return b * FT_WAYS + w;
		}
		if (!t->ovf[b])
			return FT_NONE;
	}
}

/* Empties slot p, which holds key, and takes back the overflow counts of
 * the buckets the key passed. */
static inline void ft_del_at(struct ftab *t, struct ft_key key, uint64_t p)
{
	uint64_t last = p / FT_WAYS;

	t->bk[last].node[p % FT_WAYS] = 0;
	t->count--;
	for (uint64_t b = key.home; b != last; b = (b + 1) & t->mask)
		if (t->ovf[b] != UINT32_MAX)
			t->ovf[b]--;
}

static inline void ft_del(struct ftab *t, uint64_t key, uint32_t i)
{
	struct ft_key k = ft_key(t, key);

	ft_del_at(t, k, ft_slot_of(t, k, i));
}

static inline void ft_put(struct ftab *t, uint64_t key, uint32_t i)
{
	ft_put_k(t, ft_key(t, key), i);
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

/* A fresh free range, in its class and ftab under the keys given (its
 * start, its end | 1; room made first). */
static inline uint32_t range_add_k(struct alloc *a, uint64_t off, uint64_t len,
				   struct ft_key start, struct ft_key end)
{
	uint32_t i = node_get(a);

	a->node[i].off = off;
	a->node[i].len = len;
	ft_put_k(&a->ftab, start, i);
	ft_put_k(&a->ftab, end, i);
	list_push(a, i);
	a->free_ranges++;
	return i;
}

static inline uint32_t range_add(struct alloc *a, uint64_t off, uint64_t len)
{
	return range_add_k(a, off, len, ft_key(&a->ftab, off), ft_key(&a->ftab, (off + len) | 1));
}

/* The slow half of ftab_room: a table with more buckets, filled from the
 * class lists (slots do not hold their keys); the old one survives a
 * failure. */
static __attribute__((noinline, cold)) int ftab_grow(struct alloc *a, uint64_t extra)
{
	struct ftab n;
	unsigned int bits = 64 - a->ftab.shift;

	while ((a->ftab.count + extra) * FT_LOAD_DEN > ((1ull << bits) * FT_WAYS) * FT_LOAD_NUM)
		bits++;
	if (bits > 56 || ft_init(&n, bits))
		return -ENOMEM;
	for (unsigned int fl = 0; fl < FL_N; fl++)
		for (unsigned int sl = 0; sl < SL_N; sl++)
			for (uint32_t i = a->head[fl][sl]; i != NIL; i = a->node[i].next) {
				ft_put(&n, a->node[i].off, i);
				ft_put(&n, (a->node[i].off + a->node[i].len) | 1, i);
			}
	ft_fini(&a->ftab);
	a->ftab = n;
	return 0;
}

/* Room for extra more keys at most 3/4 of the slots full (an 8-slot bucket
 * overflows then for about one key in eight). */
static inline __attribute__((always_inline)) int ftab_room(struct alloc *a, uint64_t extra)
{
	if ((a->ftab.count + extra) * FT_LOAD_DEN <= (a->ftab.mask + 1) * FT_WAYS * FT_LOAD_NUM)
		return 0;
	return ftab_grow(a, extra);
}

/* The free ranges that end at x and that start at x (NIL: none), and their
 * slots, from the bucket(s) of x.  A fingerprint match is confirmed on the
 * node; none matches in the common case, and no node is read. */
static inline __attribute__((always_inline)) void
ftab_at(const struct alloc *a, uint64_t x, struct ft_key kx, uint32_t *ends, uint64_t *ends_p,
	uint32_t *starts, uint64_t *starts_p)
{
	const struct ftab *t = &a->ftab;
	uint32_t f = kx.fp;

	*ends = NIL;
	*starts = NIL;
	for (uint64_t b = kx.home;; b = (b + 1) & t->mask) {
		const struct ft_bucket *k = &t->bk[b];
		unsigned int m = ft_eq_pair(k->fp, f);

		/* Empty slots keep old fingerprints: drop them (rarely needed). */
		if (__builtin_expect(m, 0))
			m &= ~ft_eq(k->node, 0);
		for (; m; m &= m - 1) {
			unsigned int w = (unsigned int)__builtin_ctz(m);
			const struct blk *n = &a->node[k->node[w] - 1];

			if (!(k->fp[w] & 1) && n->off == x) {
				*starts = k->node[w] - 1;
				*starts_p = b * FT_WAYS + w;
			} else if ((k->fp[w] & 1) && n->off + n->len == x) {
				*ends = k->node[w] - 1;
				*ends_p = b * FT_WAYS + w;
			}
		}
		if (!t->ovf[b])
			return;
	}
}

/* ---- live ranges: only ALLOC_DEBUG builds know them ------------------------- */

#ifdef ALLOC_DEBUG
/* A plain array searched end to end: debug builds check every invariant
 * after every call (alloc_check) at O(n log n) anyway. */
static int live_init(struct alloc *a)
{
	(void)a;
	return 0;
}

static void live_fini(struct alloc *a)
{
	free(a->ltab.r);
}

static int live_room(struct alloc *a)
{
	struct live_set *l = &a->ltab;
	struct live_range *r;
	size_t cap = l->cap ? 2 * l->cap : 16;

	if (l->n < l->cap)
		return 0;
	r = realloc(l->r, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	l->r = r;
	l->cap = cap;
	return 0;
}

static void live_add(struct alloc *a, uint64_t off, uint64_t len)
{
	a->ltab.r[a->ltab.n++] = (struct live_range){ off, len };
}

static size_t live_find(const struct alloc *a, uint64_t off)
{
	for (size_t k = 0; k < a->ltab.n; k++)
		if (a->ltab.r[k].off == off)
			return k;
	return SIZE_MAX;
}

/* Is [off, off + len) exactly one live range? */
static bool live_is(const struct alloc *a, uint64_t off, uint64_t len)
{
	size_t k = live_find(a, off);

	return k != SIZE_MAX && a->ltab.r[k].len == len;
}

static void live_del(struct alloc *a, uint64_t off)
{
	size_t k = live_find(a, off);

	a->ltab.r[k] = a->ltab.r[--a->ltab.n];
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
	if (!a->node || ft_init(&a->ftab, FT_MIN_BITS) || live_init(a))
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
	ft_fini(&a->ftab);
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
	ft_del(&a->ftab, b->off, i);
	if (was == len) {
		list_unlink(a, i);
		ft_del(&a->ftab, (b->off + len) | 1, i);
		node_put(a, i);
		a->free_ranges--;
		if (was == a->largest)
			largest_rescan(a);
	} else {
		/* Carved from the front: the end, and its hash entry, stay. */
		b->off += len;
		ft_put(&a->ftab, b->off, i);
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
	uint64_t end = offset + length, lp = 0, rp = 0, unused;
	uint32_t l, r, starts_here, ends_there;
	unsigned int shift = a->ftab.shift;
	struct ft_key ko, ke;

	if (length == 0 || ((offset | length) & a->align_mask) || offset >= a->total ||
	    length > a->total - offset || !a->live || !live_is(a, offset, length))
		return -EINVAL;
	/* Both lines at once: at 1 M live they are cache misses. */
	ko = ft_key(&a->ftab, offset);
	ke = ft_key(&a->ftab, end);
	ft_prefetch(&a->ftab, ko);
	ft_prefetch(&a->ftab, ke);
	/* Room first (growing moves slots, and changes nothing one can see). */
	if (ftab_room(a, 2) || node_room(a))
		return -ENOMEM;
	if (a->ftab.shift != shift) {
		ko = ft_key(&a->ftab, offset);
		ke = ft_key(&a->ftab, end);
	}
	ftab_at(a, offset, ko, &l, &lp, &starts_here, &unused);
	ftab_at(a, end, ke, &ends_there, &unused, &r, &rp);
	if (starts_here != NIL || ends_there != NIL)
		return -EINVAL;
	if (a->ci.active)
		claim_index_drop(a);
	live_del(a, offset);
	if (l != NIL) {
		/* Grows the left neighbour over the range (and the right one). */
		ft_del_at(&a->ftab, ft_end(ko), lp);
		if (r != NIL) {
			list_unlink(a, r);
			ft_del_at(&a->ftab, ke, rp);
			end += a->node[r].len;
			ft_del(&a->ftab, end | 1, r);
			node_put(a, r);
			a->free_ranges--;
		}
		ft_put(&a->ftab, end | 1, l);
		range_relen(a, l, end - a->node[l].off);
	} else if (r != NIL) {
		/* The right neighbour grows down: its end entry stays. */
		ft_del_at(&a->ftab, ke, rp);
		a->node[r].off = offset;
		ft_put_k(&a->ftab, ko, r);
		range_relen(a, r, a->node[r].len + length);
	} else {
		range_add_k(a, offset, length, ko, ft_end(ke));
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
	if (live_room(a) || ftab_room(a, 2) || node_room(a))
		return -ENOMEM;
	f_off = a->node[f].off;
	was = a->node[f].len;
	f_end = f_off + was;
	list_unlink(a, f);
	if (f_off < offset) {
		/* f keeps the front; the back, if any, is a new range after it. */
		ft_del(&a->ftab, f_end | 1, f);
		a->node[f].len = offset - f_off;
		ft_put(&a->ftab, offset | 1, f);
		list_push(a, f);
		if (end < f_end) {
			r = range_add(a, end, f_end - end);
			a->node[r].anext = a->node[f].anext;
			a->node[f].anext = r;
		}
	} else if (end < f_end) {
		/* Claimed from the front: f moves up, still before the next range. */
		ft_del(&a->ftab, f_off, f);
		a->node[f].off = end;
		a->node[f].len = f_end - end;
		ft_put(&a->ftab, end, f);
		list_push(a, f);
	} else {
		/* Used up: dead until the index goes, so the chain stays whole. */
		ft_del(&a->ftab, f_off, f);
		ft_del(&a->ftab, f_end | 1, f);
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

/* Is key in ftab for node i?  Counts, in ovf, the buckets it passed. */
static bool ft_check_key(const struct ftab *t, uint64_t key, uint32_t i, uint32_t *ovf)
{
	uint64_t p = ft_slot_of(t, ft_key(t, key), i);

	if (p == FT_NONE)
		return false;
	for (uint64_t b = ft_home(t, key); b != p / FT_WAYS; b = (b + 1) & t->mask)
		ovf[b]++;
	return true;
}

static int span_cmp(const void *x, const void *y)
{
	const struct span *p = x, *q = y;

	return (p->off > q->off) - (p->off < q->off);
}

/* Every free and live range, sorted, must tile [0, total) exactly, free
 * ranges never touching; the lists, maps and hashes must agree. */
static void alloc_check(const struct alloc *a)
{
	size_t n = (size_t)(a->free_ranges + a->live), k = 0;
	struct span *sp = malloc((n ? n : 1) * sizeof(*sp));
	uint32_t *ovf = calloc(a->ftab.mask + 1, sizeof(*ovf));
	uint64_t bytes = 0, largest = 0, at = 0, live_bytes = 0;

	if (!sp || !ovf)
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
				if (!ft_check_key(&a->ftab, b->off, i, ovf) ||
				    !ft_check_key(&a->ftab, (b->off + b->len) | 1, i, ovf))
					check_fail("free range missing from ftab");
				sp[k++] = (struct span){ b->off, b->len, true };
				bytes += b->len;
				largest = b->len > largest ? b->len : largest;
				prev = i;
			}
		}
	}
	if (k != a->free_ranges || bytes != a->total - a->used || largest != a->largest ||
	    a->ftab.count != 2 * a->free_ranges || a->ltab.n != a->live)
		check_fail("lists disagree with the books");
	for (uint64_t b = 0; b <= a->ftab.mask; b++)
		if (ovf[b] != a->ftab.ovf[b] && a->ftab.ovf[b] != UINT32_MAX)
			check_fail("ftab overflow counts are off");
	for (size_t i = 0; i < a->ltab.n; i++) {
		if (k == n)
			check_fail("more live ranges than counted");
		sp[k++] = (struct span){ a->ltab.r[i].off, a->ltab.r[i].len, false };
		live_bytes += a->ltab.r[i].len;
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
	free(ovf);
}
#endif
