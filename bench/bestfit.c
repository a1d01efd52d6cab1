/*
 * bestfit.c - rmem's allocator before TLSF, kept only to be measured beside
 * the daemon's (bench/alloc.c, bench/allocfrag.c).  Unchanged but for the
 * names, its own (bestfit_*, struct bestfit: nothing here shares a name with
 * daemon/alloc.c), and the calls of bench/bestfit.h that take the
 * allocator as void *, as the benches' table of calls does (allocops.h).
 *
 * Best fit with coalescing over [0, total).
 *
 * Every free range is one struct free_range that sits in two AVL trees at
 * once: BY_SIZE, ordered by (length, offset), where the best fit is the
 * leftmost node that is long enough, and BY_OFFSET, where a released range
 * finds the neighbours it merges with.  Carving from the front of a range or
 * growing a range into its released neighbour never changes its place in the
 * offset order, so most calls only search the offset tree; and when the new
 * (length, offset) still sorts between the old neighbours in the size order,
 * the node stays where it is there too.  The trees keep no parent pointers
 * (the node stays at 56 bytes, 64 with malloc's header): a descent records its
 * path and rebalancing walks that path back up.
 *
 * Build with -DBESTFIT_DEBUG to check every tree invariant after every call.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "bestfit.h"

enum { BY_SIZE, BY_OFFSET, N_TREES };

/*
 * An AVL tree of height h holds at least fib(h + 2) - 1 nodes.  A 2^64-byte
 * pool with 8-byte alignment has fewer than 2^61 free ranges, so 90 levels
 * always suffice.
 */
#define AVL_MAX_HEIGHT 90

/* Released nodes kept for the next split, so alloc/free churn skips malloc. */
#define NODE_CACHE_MAX 64

struct free_range {
	uint64_t offset;
	uint64_t length;
	struct free_range *child[N_TREES][2];	/* [tree][0 = left, 1 = right] */
	int8_t balance[N_TREES];		/* height(right) - height(left) */
};

struct bestfit {
	struct free_range *root[N_TREES];
	struct free_range *largest;		/* last node of BY_SIZE */
	struct free_range *node_cache;		/* chained through child[BY_SIZE][0] */
	unsigned int node_cache_len;
	uint64_t align_mask;
	/* total, used, live, peak_used, free_ranges kept as they are read;
	 * free and largest_free are worked out by bestfit_stats. */
	struct alloc_stats fig;
};

/* A descent: node[i] was visited and dir[i] taken from it.  The node the path
 * leads to (or the empty slot) hangs below node[depth - 1]. */
struct avl_path {
	struct free_range *node[AVL_MAX_HEIGHT];
	uint8_t dir[AVL_MAX_HEIGHT];
	int depth;
};

/*
 * The tree code takes the tree as an argument, and every caller passes a
 * constant: inlined, each copy compares one key and indexes one child array
 * directly.  Measured with callgrind on 600 k random alloc+free pairs: 15%
 * fewer instructions than the shared out-of-line versions.
 */
#define TREE_OP static inline __attribute__((always_inline))

#ifdef BESTFIT_DEBUG
static void bestfit_check(const struct bestfit *a);
#else
static inline void bestfit_check(const struct bestfit *a) { (void)a; }
#endif

/* The size order, on bare keys: (length, offset). */
static inline bool size_key_before(uint64_t len_x, uint64_t off_x, uint64_t len_y, uint64_t off_y)
{
	return len_x < len_y || (len_x == len_y && off_x < off_y);
}

/* The tree order: unique keys, because free ranges never share an offset. */
static inline bool range_before(int t, const struct free_range *x, const struct free_range *y)
{
	if (t == BY_OFFSET)
		return x->offset < y->offset;
	return size_key_before(x->length, x->offset, y->length, y->offset);
}

static inline void path_push(struct avl_path *p, struct free_range *n, int dir)
{
	p->node[p->depth] = n;
	p->dir[p->depth] = (uint8_t)dir;
	p->depth++;
}

/* Points the slot at level depth of the path (the root when depth is 0) at n. */
static inline void path_set_slot(struct bestfit *a, int t, const struct avl_path *p, int depth,
				 struct free_range *n)
{
	if (depth == 0)
		a->root[t] = n;
	else
		p->node[depth - 1]->child[t][p->dir[depth - 1]] = n;
}

/*
 * x's subtree on side d is two levels taller than the other one.  Rotates and
 * returns the new root of the subtree; *shrunk tells whether the subtree is
 * now one level lower than before the rotation (always, after an insertion).
 */
TREE_OP struct free_range *avl_rotate(int t, struct free_range *x, int d, bool *shrunk)
{
	struct free_range *y = x->child[t][d], *z;
	int s = d ? 1 : -1;

	if (y->balance[t] != -s) {
		x->child[t][d] = y->child[t][!d];
		y->child[t][!d] = x;
		/* y balanced happens only on removal; the height stays */
		*shrunk = y->balance[t] != 0;
		x->balance[t] = (int8_t)(*shrunk ? 0 : s);
		y->balance[t] = (int8_t)(*shrunk ? 0 : -s);
		return y;
	}
	z = y->child[t][!d];
	x->child[t][d] = z->child[t][!d];
	y->child[t][!d] = z->child[t][d];
	z->child[t][!d] = x;
	z->child[t][d] = y;
	x->balance[t] = (int8_t)(z->balance[t] == s ? -s : 0);
	y->balance[t] = (int8_t)(z->balance[t] == -s ? s : 0);
	z->balance[t] = 0;
	*shrunk = true;
	return z;
}

/* Hangs n in the empty slot the path leads to, then rebalances upwards. */
TREE_OP void avl_insert_at(struct bestfit *a, int t, struct avl_path *p, struct free_range *n)
{
	bool shrunk;

	n->child[t][0] = NULL;
	n->child[t][1] = NULL;
	n->balance[t] = 0;
	path_set_slot(a, t, p, p->depth, n);
	for (int i = p->depth - 1; i >= 0; i--) {
		struct free_range *x = p->node[i];
		int d = p->dir[i], s = d ? 1 : -1;

		if (x->balance[t] == 0) {
			x->balance[t] = (int8_t)s;	/* grew: the parent must know */
			continue;
		}
		if (x->balance[t] == -s) {
			x->balance[t] = 0;
			return;
		}
		path_set_slot(a, t, p, i, avl_rotate(t, x, d, &shrunk));
		return;
	}
}

TREE_OP void avl_insert(struct bestfit *a, int t, struct free_range *n)
{
	struct avl_path p;
	struct free_range *x = a->root[t];

	p.depth = 0;
	while (x) {
		int d = range_before(t, x, n);

		path_push(&p, x, d);
		x = x->child[t][d];
	}
	avl_insert_at(a, t, &p, n);
}

/* Unlinks the node the path leads to, then rebalances upwards. */
TREE_OP void avl_remove_at(struct bestfit *a, int t, struct avl_path *p)
{
	struct free_range *n = p->depth ? p->node[p->depth - 1]->child[t][p->dir[p->depth - 1]]
					: a->root[t];
	bool shrunk;

	if (n->child[t][0] && n->child[t][1]) {
		/* Two children: n's in-order successor takes n's place. */
		int at = p->depth;
		struct free_range *succ;

		path_push(p, n, 1);
		succ = n->child[t][1];
		while (succ->child[t][0]) {
			path_push(p, succ, 0);
			succ = succ->child[t][0];
		}
		path_set_slot(a, t, p, p->depth, succ->child[t][1]);
		succ->child[t][0] = n->child[t][0];
		succ->child[t][1] = n->child[t][1];
		succ->balance[t] = n->balance[t];
		path_set_slot(a, t, p, at, succ);
		p->node[at] = succ;
	} else {
		path_set_slot(a, t, p, p->depth, n->child[t][n->child[t][0] == NULL]);
	}
	for (int i = p->depth - 1; i >= 0; i--) {
		struct free_range *x = p->node[i];
		int d = p->dir[i], s = d ? 1 : -1;

		if (x->balance[t] == s) {
			x->balance[t] = 0;	/* lost a level: the parent must know */
			continue;
		}
		if (x->balance[t] == 0) {
			x->balance[t] = (int8_t)-s;
			return;
		}
		path_set_slot(a, t, p, i, avl_rotate(t, x, !d, &shrunk));
		if (!shrunk)
			return;
	}
}

TREE_OP void avl_remove(struct bestfit *a, int t, struct free_range *n)
{
	struct avl_path p;
	struct free_range *x = a->root[t];

	p.depth = 0;
	while (x != n) {
		int d = range_before(t, x, n);

		path_push(&p, x, d);
		x = x->child[t][d];
	}
	avl_remove_at(a, t, &p);
}

static struct free_range *size_tree_last(const struct bestfit *a)
{
	struct free_range *x = a->root[BY_SIZE];

	while (x && x->child[BY_SIZE][1])
		x = x->child[BY_SIZE][1];
	return x;
}

/* The size tree changes only through the size_* helpers, which keep a->largest. */
static void size_insert(struct bestfit *a, struct free_range *n)
{
	avl_insert(a, BY_SIZE, n);
	if (!a->largest || range_before(BY_SIZE, a->largest, n))
		a->largest = n;
}

static void size_remove_at(struct bestfit *a, struct avl_path *p, struct free_range *n)
{
	avl_remove_at(a, BY_SIZE, p);
	if (a->largest == n)
		a->largest = size_tree_last(a);
}

static void size_remove(struct bestfit *a, struct free_range *n)
{
	avl_remove(a, BY_SIZE, n);
	if (a->largest == n)
		a->largest = size_tree_last(a);
}

/*
 * Gives n a larger key (a release merged into it).  When it still sorts before
 * its successor (always true of the largest range, and of a range that takes
 * back what was just carved from it) the tree needs no change.
 */
static void size_grow(struct bestfit *a, struct free_range *n, uint64_t offset, uint64_t length)
{
	struct avl_path p;
	struct free_range *x = a->root[BY_SIZE], *next = NULL;

	p.depth = 0;
	while (x != n) {
		int d = range_before(BY_SIZE, x, n);

		if (!d)
			next = x;
		path_push(&p, x, d);
		x = x->child[BY_SIZE][d];
	}
	for (x = n->child[BY_SIZE][1]; x; x = x->child[BY_SIZE][0])
		next = x;
	if (next && !size_key_before(length, offset, next->length, next->offset)) {
		size_remove_at(a, &p, n);
		n->offset = offset;
		n->length = length;
		size_insert(a, n);
		return;
	}
	n->offset = offset;
	n->length = length;
}

/*
 * The shortest free range of at least len bytes, lowest offset among equals;
 * *p is left leading to it and *below is the range just before it in the size
 * order (the last node the search passed on the right), or NULL.
 */
static struct free_range *find_best_fit(const struct bestfit *a, uint64_t len, struct avl_path *p,
					struct free_range **below)
{
	struct free_range *x = a->root[BY_SIZE], *best = NULL;
	int best_depth = 0;

	*below = NULL;
	p->depth = 0;
	while (x) {
		if (x->length >= len) {
			best = x;
			best_depth = p->depth;
			path_push(p, x, 0);
			x = x->child[BY_SIZE][0];
		} else {
			*below = x;
			path_push(p, x, 1);
			x = x->child[BY_SIZE][1];
		}
	}
	p->depth = best_depth;
	return best;
}

/* The free ranges either side of offset; *p is left leading to where a range
 * starting at offset would hang in the offset tree. */
static void find_neighbours(const struct bestfit *a, uint64_t offset, struct avl_path *p,
			    struct free_range **pred, struct free_range **succ)
{
	struct free_range *x = a->root[BY_OFFSET];

	*pred = NULL;
	*succ = NULL;
	p->depth = 0;
	while (x) {
		int d = x->offset < offset;

		if (d)
			*pred = x;
		else
			*succ = x;
		path_push(p, x, d);
		x = x->child[BY_OFFSET][d];
	}
}

static struct free_range *node_get(struct bestfit *a)
{
	struct free_range *n = a->node_cache;

	if (!n)
		return malloc(sizeof(*n));
	a->node_cache = n->child[BY_SIZE][0];
	a->node_cache_len--;
	return n;
}

static void node_put(struct bestfit *a, struct free_range *n)
{
	if (a->node_cache_len >= NODE_CACHE_MAX) {
		free(n);
		return;
	}
	n->child[BY_SIZE][0] = a->node_cache;
	a->node_cache = n;
	a->node_cache_len++;
}

/* The figures after a range of length bytes went live (reserved or claimed). */
static void count_reserved(struct bestfit *a, uint64_t length)
{
	a->fig.used += length;
	if (a->fig.used > a->fig.peak_used)
		a->fig.peak_used = a->fig.used;
	a->fig.live++;
	bestfit_check(a);
}

void *bestfit_create(uint64_t total, uint64_t alignment)
{
	struct bestfit *a;
	struct free_range *all;

	if (alignment < 8 || (alignment & (alignment - 1)) || total < alignment) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	all = malloc(sizeof(*all));
	if (!a || !all) {
		free(a);
		free(all);
		errno = ENOMEM;
		return NULL;
	}
	a->align_mask = alignment - 1;
	a->fig.total = total & ~a->align_mask;
	all->offset = 0;
	all->length = a->fig.total;
	avl_insert(a, BY_OFFSET, all);
	size_insert(a, all);
	a->fig.free_ranges = 1;
	return a;
}

/* Frees a tree's nodes in O(n) without a stack: rotate every left child up
 * until the root has none, then drop the root. */
static void free_tree(struct free_range *x, int t)
{
	while (x) {
		struct free_range *l = x->child[t][0];

		if (l) {
			x->child[t][0] = l->child[t][1];
			l->child[t][1] = x;
			x = l;
		} else {
			l = x->child[t][1];
			free(x);
			x = l;
		}
	}
}

void bestfit_destroy(void *self)
{
	struct bestfit *a = self;
	struct free_range *n;

	if (!a)
		return;
	free_tree(a->root[BY_OFFSET], BY_OFFSET);
	while ((n = a->node_cache)) {
		a->node_cache = n->child[BY_SIZE][0];
		free(n);
	}
	free(a);
}

int bestfit_reserve(void *self, uint64_t size, uint64_t *offset, uint64_t *length)
{
	struct bestfit *a = self;
	struct avl_path p;
	struct free_range *best, *below;
	uint64_t len;

	if (size == 0 || size > UINT64_MAX - a->align_mask)
		return -EINVAL;
	len = (size + a->align_mask) & ~a->align_mask;
	best = find_best_fit(a, len, &p, &below);
	if (!best)
		return -ENOMEM;
	*offset = best->offset;
	*length = len;
	if (best->length == len) {
		size_remove_at(a, &p, best);
		avl_remove(a, BY_OFFSET, best);
		node_put(a, best);
		a->fig.free_ranges--;
	} else if (below && !size_key_before(below->length, below->offset, best->length - len,
					      best->offset + len)) {
		size_remove_at(a, &p, best);
		best->offset += len;
		best->length -= len;
		size_insert(a, best);
	} else {
		/* Still after its predecessor in both orders: no tree changes. */
		best->offset += len;
		best->length -= len;
	}
	count_reserved(a, len);
	return 0;
}

/*
 * Checks that need no tree: alignment and bounds.  live != 0 keeps the count
 * sane when a caller releases the halves of one range separately, which no
 * tree can tell from two neighbouring ranges.
 */
static bool release_plausible(const struct bestfit *a, uint64_t offset, uint64_t length)
{
	return length != 0 && !((offset | length) & a->align_mask) &&
	       offset < a->fig.total && length <= a->fig.total - offset && a->fig.live != 0;
}

/* Gives a fresh node for [offset, offset + length), hung where *p leads. */
static int insert_isolated(struct bestfit *a, struct avl_path *p, uint64_t offset, uint64_t length)
{
	struct free_range *n = node_get(a);

	if (!n)
		return -ENOMEM;
	n->offset = offset;
	n->length = length;
	avl_insert_at(a, BY_OFFSET, p, n);
	size_insert(a, n);
	a->fig.free_ranges++;
	return 0;
}

int bestfit_release(void *self, uint64_t offset, uint64_t length)
{
	struct bestfit *a = self;
	struct avl_path p;
	struct free_range *pred, *succ;
	bool join_pred, join_succ;
	uint64_t end = offset + length;
	int rc;

	if (!release_plausible(a, offset, length))
		return -EINVAL;
	find_neighbours(a, offset, &p, &pred, &succ);
	/* Free ranges are disjoint and sorted: only these two can overlap. */
	if ((pred && pred->offset + pred->length > offset) || (succ && succ->offset < end))
		return -EINVAL;
	join_pred = pred && pred->offset + pred->length == offset;
	join_succ = succ && succ->offset == end;
	if (join_pred && join_succ) {
		size_remove(a, succ);
		avl_remove(a, BY_OFFSET, succ);
		size_grow(a, pred, pred->offset, pred->length + length + succ->length);
		node_put(a, succ);
		a->fig.free_ranges--;
	} else if (join_pred) {
		size_grow(a, pred, pred->offset, pred->length + length);
	} else if (join_succ) {
		/* Still after pred, so its place in the offset tree holds. */
		size_grow(a, succ, offset, succ->length + length);
	} else {
		rc = insert_isolated(a, &p, offset, length);
		if (rc < 0)
			return rc;
	}
	a->fig.used -= length;
	a->fig.live--;
	bestfit_check(a);
	return 0;
}

/*
 * A restore (persist.c) rebuilds a pool's allocator from the ranges the
 * state names, in any order: each one is carved out of the free range that
 * holds it.  Restore-time only, so the plain way is good enough: the free
 * range leaves both trees and what is left of it either side goes back.
 */
int bestfit_claim(void *self, uint64_t offset, uint64_t length)
{
	struct bestfit *a = self;
	struct avl_path p;
	struct free_range *pred, *succ, *f, *rest = NULL;
	uint64_t end = offset + length, f_end;

	if (length == 0 || ((offset | length) & a->align_mask) || offset >= a->fig.total ||
	    length > a->fig.total - offset)
		return -EINVAL;
	find_neighbours(a, offset, &p, &pred, &succ);
	f = succ && succ->offset == offset ? succ : pred;
	if (!f || f->offset > offset || f->offset + f->length < end)
		return -EEXIST;
	f_end = f->offset + f->length;
	/* Taken first, so that a failure changes nothing. */
	if (f->offset < offset && end < f_end) {
		rest = node_get(a);
		if (!rest)
			return -ENOMEM;
	}
	size_remove(a, f);
	avl_remove(a, BY_OFFSET, f);
	if (f->offset < offset) {
		f->length = offset - f->offset;
		avl_insert(a, BY_OFFSET, f);
		size_insert(a, f);
		if (rest) {
			rest->offset = end;
			rest->length = f_end - end;
			avl_insert(a, BY_OFFSET, rest);
			size_insert(a, rest);
			a->fig.free_ranges++;
		}
	} else if (end < f_end) {
		f->offset = end;
		f->length = f_end - end;
		avl_insert(a, BY_OFFSET, f);
		size_insert(a, f);
	} else {
		node_put(a, f);
		a->fig.free_ranges--;
	}
	count_reserved(a, length);
	return 0;
}

void bestfit_stats(const void *self, struct alloc_stats *out)
{
	const struct bestfit *a = self;

	*out = a->fig;
	out->free = a->fig.total - a->fig.used;
	out->largest_free = a->largest ? a->largest->length : 0;
}

#ifdef BESTFIT_DEBUG
#include <stdio.h>

static void check_fail(const char *what)
{
	fprintf(stderr, "bestfit_check: %s\n", what);
	abort();
}

/* Returns the height of x's subtree; checks order, balance and counts. */
static int check_subtree(const struct bestfit *a, int t, const struct free_range *x,
			 const struct free_range *lo, const struct free_range *hi, uint64_t *count,
			 uint64_t *bytes)
{
	int hl, hr;

	if (!x)
		return 0;
	if ((lo && !range_before(t, lo, x)) || (hi && !range_before(t, x, hi)))
		check_fail("tree out of order");
	if (!x->length || ((x->offset | x->length) & a->align_mask) ||
	    x->offset >= a->fig.total || x->length > a->fig.total - x->offset)
		check_fail("bad free range");
	hl = check_subtree(a, t, x->child[t][0], lo, x, count, bytes);
	hr = check_subtree(a, t, x->child[t][1], x, hi, count, bytes);
	if (hr - hl != x->balance[t] || hr - hl > 1 || hl - hr > 1)
		check_fail("bad balance");
	(*count)++;
	*bytes += x->length;
	return 1 + (hl > hr ? hl : hr);
}

/* Adjacent free ranges would mean a missed merge. */
static void check_gaps(const struct free_range *x, const struct free_range **prev)
{
	if (!x)
		return;
	check_gaps(x->child[BY_OFFSET][0], prev);
	if (*prev && (*prev)->offset + (*prev)->length >= x->offset)
		check_fail("free ranges touch or overlap");
	*prev = x;
	check_gaps(x->child[BY_OFFSET][1], prev);
}

static void bestfit_check(const struct bestfit *a)
{
	const struct free_range *prev = NULL;

	for (int t = 0; t < N_TREES; t++) {
		uint64_t count = 0, bytes = 0;

		check_subtree(a, t, a->root[t], NULL, NULL, &count, &bytes);
		if (count != a->fig.free_ranges || bytes != a->fig.total - a->fig.used)
			check_fail("tree disagrees with the books");
	}
	if (a->largest != size_tree_last(a))
		check_fail("stale largest");
	check_gaps(a->root[BY_OFFSET], &prev);
}
#endif
