/*
 * restore.c - see restore.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "identity.h"
#include "log.h"
#include "names.h"
#include "region.h"
#include "restore.h"
#include "scrub.h"
#include "server.h"
#include "session.h"
#include "slots.h"
#include "state.h"
#include "tenant.h"

/* ---- pass 1: read and check ------------------------------------------------------ */

/* One whole slot of the state: its record, its slot number, and whether it is
 * an orphan (dropped, below). */
struct rec {
	struct state_slot s;
	uint32_t index;
	bool drop;
	struct name_obj *obj;  /* an OBJECT's, once pass 2 built it */
	struct session *sess;  /* a SESSION's, likewise */
};

/* Everything the state holds, sorted by (type, id). */
struct image {
	struct state_hdr hdr;
	uint8_t *base;         /* the state memfd, mapped */
	uint64_t len;
	struct rec *rec;
	size_t n, cap;
	struct state_slot counters;
	uint32_t counters_index;
	bool have_counters;
	size_t orphans;
	/* Where the restore's time went, for its log line (ms). */
	int64_t t_start, ms_pin, ms_zero;
};

static void image_free(struct image *im)
{
	free(im->rec);
	if (im->base)
		munmap(im->base, im->len);
	memset(im, 0, sizeof *im);
}

static int image_add(struct image *im, const struct state_slot *s, uint32_t index)
{
	if (im->n == im->cap) {
		size_t cap = im->cap ? im->cap * 2 : 1024;
		struct rec *r = realloc(im->rec, cap * sizeof *r);

		if (!r)
			return -ENOMEM;
		im->rec = r;
		im->cap = cap;
	}
	im->rec[im->n++] = (struct rec){ .s = *s, .index = index };
	return 0;
}

/* Decodes every slot that holds data (a memfd's holes read as free slots
 * without being touched: SEEK_DATA skips them). */
static int read_slots(int fd, struct image *im, char *why, size_t whylen)
{
	off_t end = (off_t)im->len, off = STATE_HDR_LEN;

	while (off < end) {
		off_t data = lseek(fd, off, SEEK_DATA), hole;

		if (data < 0)
			break; /* ENXIO: nothing but holes to the end */
		hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0 || hole > end)
			hole = end;
		for (uint64_t i = ((uint64_t)data - STATE_HDR_LEN) / STATE_SLOT_LEN;
		     i < im->hdr.nslots && STATE_HDR_LEN + i * STATE_SLOT_LEN < (uint64_t)hole; i++) {
			struct state_slot s;

			if (state_slot_decode(im->base + STATE_HDR_LEN + i * STATE_SLOT_LEN,
					      (uint32_t)i, &s) < 0) {
				snprintf(why, whylen, "state slot %" PRIu64 " is damaged", i);
				return -EBADMSG;
			}
			if (s.type == STATE_FREE)
				continue;
			if ((s.type == STATE_COUNTERS) != (i < 2)) {
				snprintf(why, whylen, "slot %" PRIu64 " holds a record of type %u", i,
					 s.type);
				return -EBADMSG;
			}
			if (s.type == STATE_COUNTERS) {
				if (!im->have_counters || s.u.counters.gen > im->counters.u.counters.gen) {
					im->counters = s;
					im->counters_index = (uint32_t)i;
					im->have_counters = true;
				}
				continue;
			}
			if (image_add(im, &s, (uint32_t)i) < 0) {
				snprintf(why, whylen, "out of memory reading the state");
				return -ENOMEM;
			}
		}
		off = hole > off ? hole : off + STATE_SLOT_LEN;
	}
	return 0;
}

static int by_type_id(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	uint64_t ix = state_slot_id(&x->s), iy = state_slot_id(&y->s);

	if (x->s.type != y->s.type)
		return x->s.type < y->s.type ? -1 : 1;
	return ix < iy ? -1 : ix > iy;
}

static struct rec *find_rec(const struct image *im, uint16_t type, uint64_t id)
{
	struct rec key = { .s.type = type };

	switch (type) {
	case STATE_SESSION: key.s.u.session.id = id; break;
	case STATE_OBJECT:  key.s.u.object.id = id; break;
	case STATE_NAME:    key.s.u.name.object = id; break;
	case STATE_PENDING:  key.s.u.pending.object = id; break;
	default:            return NULL;
	}
	return im->n ? bsearch(&key, im->rec, im->n, sizeof *im->rec, by_type_id) : NULL;
}

/* A saved tenant name as the config's tenant; "" is none.  false: gone from
 * the config. */
static bool tenant_of(struct server *srv, const char *name, const struct config_tenant **t)
{
	*t = NULL;
	if (!*name)
		return true;
	*t = tenant_find(srv, name, strlen(name));
	return *t != NULL;
}

/* A record that exists and is not dropped. */
static const struct rec *kept(const struct image *im, uint16_t type, uint64_t id)
{
	const struct rec *r = find_rec(im, type, id);

	return r && !r->drop ? r : NULL;
}

/* What a tenant gone from the config takes with it, for one log line each. */
#define GONE_MAX 8
struct gone {
	char name[STATE_STR_LEN];
	uint64_t sessions, regions, objects, bytes;
};

static struct gone *gone_of(struct gone *g, size_t *n, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(g[i].name, name))
			return &g[i];
	if (*n == GONE_MAX) /* the last entry stands for the rest */
		return &g[GONE_MAX - 1];
	memset(&g[*n], 0, sizeof g[*n]);
	snprintf(g[*n].name, sizeof g[*n].name, "%s", name);
	return &g[(*n)++];
}

/*
 * What is dropped, each record's slot freed and its range left free (and
 * zeroed): nothing a client did can make the restore fail
 * (docs/architecture.md, "Invariant: a restart needs nothing a client
 * controls").
 *  - A tenant gone from the config takes its sessions and named regions,
 *    and only those: every other tenant keeps everything.
 *  - A PENDING mark drops its object, the name and every handle with it:
 *    a CREATE cut short is absent, a revoke cut short complete
 *    ("Invariant: a change is whole or absent after a crash").
 *  - Orphans, what a crash between the slots of one change leaves (a region
 *    or handle whose session is gone, a name whose object is gone, an
 *    object with neither name nor handle): never acknowledged as there.
 * Sessions and objects are decided first, then what refers to them; an
 * object lives on through a kept handle (unlinked, held).
 */
static void find_orphans(struct server *srv, struct image *im)
{
	const struct config_tenant *t;
	struct gone gone[GONE_MAX];
	size_t ngone = 0;

	for (size_t i = 0; i < im->n; i++) {
		struct rec *r = &im->rec[i];

		if (r->s.type == STATE_PENDING)
			r->drop = true;
		if (r->s.type == STATE_SESSION && !tenant_of(srv, r->s.u.session.tenant, &t)) {
			r->drop = true;
			gone_of(gone, &ngone, r->s.u.session.tenant)->sessions++;
		}
		if (r->s.type == STATE_OBJECT) {
			const char *ns = r->s.u.object.ns, *ch = r->s.u.object.charged;

			if (!tenant_of(srv, ns, &t) || !tenant_of(srv, ch, &t)) {
				struct gone *g = gone_of(gone, &ngone, tenant_of(srv, ns, &t) ? ch : ns);

				r->drop = true;
				g->objects++;
				g->bytes += r->s.u.object.length;
			} else {
				r->drop = find_rec(im, STATE_PENDING, r->s.u.object.id) != NULL;
			}
		}
	}
	for (size_t i = 0; i < im->n; i++) {
		struct rec *r = &im->rec[i];
		const struct rec *s;

		switch (r->s.type) {
		case STATE_REGION:
			s = find_rec(im, STATE_SESSION, r->s.u.region.session);
			r->drop = !s || s->drop;
			if (s && s->drop) {
				struct gone *g = gone_of(gone, &ngone, s->s.u.session.tenant);

				g->regions++;
				g->bytes += r->s.u.region.length;
			}
			break;
		case STATE_HANDLE:
			r->drop = !kept(im, STATE_SESSION, r->s.u.handle.session) ||
				  !kept(im, STATE_OBJECT, r->s.u.handle.object);
			break;
		case STATE_NAME:
			r->drop = !kept(im, STATE_OBJECT, r->s.u.name.object);
			break;
		default:
			break;
		}
	}
	/* An object kept so far stays while its name or a kept handle holds it. */
	for (size_t i = 0; i < im->n; i++) {
		struct rec *r = &im->rec[i];

		if (r->s.type == STATE_OBJECT && !r->drop)
			r->drop = !kept(im, STATE_NAME, r->s.u.object.id);
	}
	for (size_t i = 0; i < im->n; i++) {
		struct rec *r = &im->rec[i], *o;

		if (r->s.type != STATE_HANDLE || r->drop)
			continue;
		o = find_rec(im, STATE_OBJECT, r->s.u.handle.object);
		if (o)
			o->drop = false;
	}
	for (size_t i = 0; i < im->n; i++)
		im->orphans += im->rec[i].drop;
	for (size_t i = 0; i < ngone; i++)
		log_warn("restore: tenant \"%s\"%s is not in the config: dropped its %" PRIu64
			 " session(s), %" PRIu64 " region(s) and %" PRIu64 " named region(s), %" PRIu64
			 " bytes; every other tenant keeps its state",
			 gone[i].name, i == GONE_MAX - 1 ? " (and others)" : "", gone[i].sessions,
			 gone[i].regions, gone[i].objects, gone[i].bytes);
}

/* A saved range: in a pool, and free until now in its allocator (so two
 * ranges that overlap are caught here). */
static int claim(struct server *srv, const struct image *im, uint32_t pool, uint64_t off,
		 uint64_t len, char *why, size_t whylen)
{
	uint64_t page, kept;
	int rc;

	if (pool >= srv->npools) {
		snprintf(why, whylen, "a range in pool %u of %u", pool, srv->npools);
		return -EBADMSG;
	}
	/* Within the size the state gave the pool, not the grown one: a
	 * range past it was never handed out. */
	page = srv->pools[pool].page_size;
	kept = (im->hdr.pools[pool].size + page - 1) / page * page;
	if (off > kept || len > kept - off) {
		snprintf(why, whylen, "range [%" PRIu64 ", +%" PRIu64 ") of pool %s is past the %"
			 PRIu64 " bytes the state gives it", off, len, srv->pools[pool].name, kept);
		return -EBADMSG;
	}
	rc = alloc_claim(srv->pools[pool].alloc, off, len);
	if (rc < 0)
		snprintf(why, whylen, "range [%" PRIu64 ", +%" PRIu64 ") of pool %s %s", off, len,
			 srv->pools[pool].name, rc == -EEXIST ? "overlaps another" : "is out of place");
	return rc == -ENOMEM ? rc : rc < 0 ? -EBADMSG : 0;
}

/* Checks one kept record against the counters and the config, and claims
 * its range. */
static int check_rec(struct server *srv, const struct image *im, const struct state_slot *s,
		     char *why, size_t whylen)
{
	const struct config_tenant *t;
	uint64_t id = state_slot_id(s), ceil = 0;

	switch (s->type) {
	case STATE_SESSION: ceil = im->counters.u.counters.next_session; break;
	case STATE_REGION:
	case STATE_HANDLE:  ceil = im->counters.u.counters.next_region; break;
	case STATE_OBJECT:
	case STATE_NAME:    ceil = im->counters.u.counters.next_name; break;
	default: break;
	}
	if (!id || id >= ceil) {
		snprintf(why, whylen, "id %" PRIu64 " (type %u) is not below its saved counter", id,
			 s->type);
		return -EBADMSG;
	}
	switch (s->type) {
	case STATE_SESSION:
		if (!tenant_of(srv, s->u.session.tenant, &t)) {
			snprintf(why, whylen, "tenant \"%s\" of session %" PRIu64 " is not in the config",
				 s->u.session.tenant, id);
			return -EBADMSG;
		}
		return 0;
	case STATE_REGION:
		return claim(srv, im, s->u.region.pool, s->u.region.offset, s->u.region.length, why,
			     whylen);
	case STATE_OBJECT:
		if (!tenant_of(srv, s->u.object.ns, &t) || !tenant_of(srv, s->u.object.charged, &t)) {
			snprintf(why, whylen, "a tenant of named region %" PRIu64 " is not in the config",
				 id);
			return -EBADMSG;
		}
		return claim(srv, im, s->u.object.pool, s->u.object.offset, s->u.object.length, why,
			     whylen);
	case STATE_NAME:
		if (names_valid(s->u.name.name, s->u.name.name_len) < 0) {
			snprintf(why, whylen, "a bad name for named region %" PRIu64, id);
			return -EBADMSG;
		}
		return 0;
	case STATE_HANDLE:
		if (names_access_valid(s->u.handle.access) < 0) {
			snprintf(why, whylen, "bad access of handle %" PRIu64, id);
			return -EBADMSG;
		}
		return 0;
	default:
		return 0;
	}
}

/* The linked names of one namespace, compared through their sort. */
static const struct image *names_im;

static int by_ns_name(const void *a, const void *b)
{
	const struct rec *x = &names_im->rec[*(const size_t *)a];
	const struct rec *y = &names_im->rec[*(const size_t *)b];
	const struct rec *ox = find_rec(names_im, STATE_OBJECT, x->s.u.name.object);
	const struct rec *oy = find_rec(names_im, STATE_OBJECT, y->s.u.name.object);
	int c = strcmp(ox->s.u.object.ns, oy->s.u.object.ns);

	return c ? c : strcmp(x->s.u.name.name, y->s.u.name.name);
}

/* A record's id once per type (sorted: neighbours); a region id is a
 * REGION's or a HANDLE's, never both; a name is linked once per namespace. */
static int check_unique(const struct image *im, char *why, size_t whylen)
{
	size_t *names, nn = 0, a = 0, b = 0;
	int rc = 0;

	for (size_t i = 1; i < im->n; i++) {
		if (!by_type_id(&im->rec[i - 1], &im->rec[i])) {
			snprintf(why, whylen, "two records of type %u with id %" PRIu64,
				 im->rec[i].s.type, state_slot_id(&im->rec[i].s));
			return -EBADMSG;
		}
	}
	for (;;) {
		while (a < im->n && im->rec[a].s.type != STATE_REGION)
			a++;
		while (b < im->n && im->rec[b].s.type != STATE_HANDLE)
			b++;
		if (a >= im->n || b >= im->n)
			break;
		if (im->rec[a].s.u.region.id == im->rec[b].s.u.handle.region) {
			snprintf(why, whylen, "region id %" PRIu64 " twice", im->rec[a].s.u.region.id);
			return -EBADMSG;
		}
		if (im->rec[a].s.u.region.id < im->rec[b].s.u.handle.region)
			a++;
		else
			b++;
	}
	names = malloc(sizeof *names * (im->n + 1));
	if (!names) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	/* A name without its object is an orphan (find_orphans drops it). */
	for (size_t i = 0; i < im->n; i++)
		if (im->rec[i].s.type == STATE_NAME &&
		    find_rec(im, STATE_OBJECT, im->rec[i].s.u.name.object))
			names[nn++] = i;
	names_im = im;
	qsort(names, nn, sizeof *names, by_ns_name);
	for (size_t i = 1; i < nn && rc == 0; i++) {
		if (!by_ns_name(&names[i - 1], &names[i])) {
			snprintf(why, whylen, "name \"%s\" linked twice", im->rec[names[i]].s.u.name.name);
			rc = -EBADMSG;
		}
	}
	names_im = NULL;
	free(names);
	return rc;
}

#define FIX_POOLS "put the pools back as the state has them (a pool may grow, and new " \
	"pools go after the others), then restart rmemd"
#define FIX_NONE "nothing can repair it"

/* The state's pools that the config keeps: the first ones. */
static uint32_t kept_pools(const struct server *srv, const struct state_hdr *h)
{
	return h->npools < srv->cfg.npools ? h->npools : srv->cfg.npools;
}

/* A pool removed from the config (one of the state's last) may go only
 * empty: a kept range in it would be lost. */
static int removed_pools(const struct server *srv, struct restore_fds *k, const struct image *im,
			 char *why, size_t whylen)
{
	for (uint32_t p = kept_pools(srv, &im->hdr); p < im->hdr.npools; p++) {
		uint64_t n = 0, bytes = 0;

		for (size_t i = 0; i < im->n; i++) {
			const struct state_slot *r = &im->rec[i].s;

			if (im->rec[i].drop)
				continue;
			if ((r->type == STATE_REGION && r->u.region.pool == p) ||
			    (r->type == STATE_OBJECT && r->u.object.pool == p)) {
				n++;
				bytes += r->type == STATE_REGION ? r->u.region.length : r->u.object.length;
			}
		}
		if (n) {
			snprintf(why, whylen, "pool %s is in the state but not in the config, and holds "
				 "%" PRIu64 " region(s), %" PRIu64 " bytes", im->hdr.pools[p].name, n,
				 bytes);
			k->fix = FIX_POOLS;
			return -EINVAL;
		}
		log_notice("pool %s: in the state, not in the config, empty: it goes",
			   im->hdr.pools[p].name);
	}
	return 0;
}

/* The header against the config: the state's pools first, in the same
 * order, with the same names and alignments, each as large or larger; the
 * config's pools after them are new.  Anything else is refused: a range of
 * a pool that is gone or smaller would be lost, and a pool moved or renamed
 * would hand one pool's bytes out as another's. */
static int plan_pools(const struct server *srv, struct restore_fds *k, const struct state_hdr *h,
		      char *why, size_t whylen)
{
	k->fix = FIX_POOLS;
	/* The state's pools past the config's are removed: allowed while no
	 * kept range lies in them (removed_pools, once the slots are read). */
	for (uint32_t i = 0; i < kept_pools(srv, h); i++) {
		const struct config_pool *pc = &srv->cfg.pools[i];
		const struct state_pool *sp = &h->pools[i];

		if (strcmp(sp->name, pc->name) || sp->alignment != pc->alignment) {
			snprintf(why, whylen, "pool %u is %s (alignment %" PRIu64 ") in the state, %s "
				 "(alignment %" PRIu64 ") in the config", i, sp->name, sp->alignment,
				 pc->name, pc->alignment);
			return -EINVAL;
		}
		if (pc->size < sp->size) {
			snprintf(why, whylen, "pool %s is %" PRIu64 " bytes in the state, %" PRIu64
				 " in the config: a pool may grow at a restart, never shrink",
				 sp->name, sp->size, pc->size);
			return -EINVAL;
		}
		if (k->pool_fd[i] < 0) {
			k->fix = FIX_NONE;
			snprintf(why, whylen, "the fd store holds the state but no memfd for its pool %s",
				 sp->name);
			return -ENOENT;
		}
	}
	/* A new pool's memfd in the store is a growth that a crash cut short
	 * before the header named it: it holds nothing yet, and is made anew. */
	for (uint32_t i = h->npools; i < srv->cfg.npools; i++) {
		if (k->pool_fd[i] >= 0)
			close(k->pool_fd[i]);
		k->pool_fd[i] = -1;
	}
	k->fix = NULL;
	return 0;
}

/* The pools the config adds, opened as a fresh start opens them (pinned
 * whole, zero), and the header that names every pool at its new size. */
static int open_new_pools(struct server *srv, struct restore_fds *k, const struct image *im,
			  pool_progress_fn progress, char *why, size_t whylen)
{
	struct state_hdr nh = im->hdr;
	char err[512];
	int rc;

	for (uint32_t p = srv->npools; p < srv->cfg.npools; p++) {
		rc = pool_open(&srv->pools[p], &srv->cfg.pools[p], p, progress, srv, err, sizeof err);
		if (rc < 0) {
			snprintf(why, whylen, "new pool %s: %s", srv->cfg.pools[p].name, err);
			k->fix = "free the memory it needs, or take it out of the config, then restart rmemd";
			return rc;
		}
		srv->npools = p + 1;
		log_info("pool %s: %" PRIu64 " bytes pinned at %p, %u-byte pages, alignment %" PRIu64
			 " (new beside the kept pools)", srv->pools[p].name, srv->pools[p].size,
			 (void *)srv->pools[p].base, srv->pools[p].page_size,
			 srv->cfg.pools[p].alignment);
	}
	nh.npools = srv->cfg.npools;
	for (uint32_t p = 0; p < srv->cfg.npools; p++) {
		snprintf(nh.pools[p].name, sizeof nh.pools[p].name, "%s", srv->cfg.pools[p].name);
		nh.pools[p].size = srv->cfg.pools[p].size;
		nh.pools[p].alignment = srv->cfg.pools[p].alignment;
		nh.pools[p].page_size = srv->pools[p].page_size;
	}
	if (state_hdr_encode(k->new_hdr, &nh) != STATE_HDR_LEN) {
		snprintf(why, whylen, "the grown state header does not encode");
		k->fix = FIX_NONE;
		return -EINVAL;
	}
	k->kept_npools = kept_pools(srv, &im->hdr);
	k->hdr_changed = memcmp(k->new_hdr, im->base, STATE_HDR_LEN) != 0;
	return 0;
}

/* Pass 1: the state mapped and checked, the pools adopted and their ranges
 * claimed; on failure why says what, and nothing is left open but k's fds
 * and what image_free and pool_close undo. */
static int check_all(struct server *srv, struct restore_fds *k, struct image *im,
		     pool_progress_fn progress, char *why, size_t whylen)
{
	struct stat st;
	char err[512];
	int rc;

	k->fix = FIX_NONE;
	if (k->state_fd < 0) {
		snprintf(why, whylen, "the fd store holds %u pool memfd(s) and no state",
			 k->npool_fds);
		return -ENOENT;
	}
	if (fstat(k->state_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < STATE_HDR_LEN) {
		snprintf(why, whylen, "the state memfd is %lld bytes, shorter than its header",
			 (long long)st.st_size);
		return -EBADMSG;
	}
	im->len = (uint64_t)st.st_size;
	im->base = mmap(NULL, im->len, PROT_READ | PROT_WRITE, MAP_SHARED, k->state_fd, 0);
	if (im->base == MAP_FAILED) {
		im->base = NULL;
		snprintf(why, whylen, "mmap of the state memfd: %s", strerror(errno));
		return -EIO;
	}
	rc = state_hdr_decode(im->base, im->len, &im->hdr);
	if (rc == -EPROTO) {
		uint32_t v = state_hdr_version(im->base);

		snprintf(why, whylen, "the state is of format %u, this rmemd %s reads formats %u "
			 "to %u", v, RMEM_VERSION_STRING, STATE_VERSION_MIN, STATE_VERSION);
		k->fix = v > STATE_VERSION ? "start the rmemd that wrote it (or a newer one) again"
					   : "restore it with a release that reads it first";
		return rc;
	}
	if (rc < 0) {
		snprintf(why, whylen, "the state header is %s",
			 rc == -EMSGSIZE ? "not the size of its memfd (truncated?)" :
			 "damaged (magic, check or fields)");
		return rc;
	}
	rc = plan_pools(srv, k, &im->hdr, why, whylen);
	if (rc < 0)
		return rc;
	k->fix = FIX_NONE;
	rc = read_slots(k->state_fd, im, why, whylen);
	if (rc < 0)
		return rc;
	if (im->n && !im->have_counters) {
		snprintf(why, whylen, "records without their counters");
		return -EBADMSG;
	}
	if (im->n) /* an empty state (no client at the restart) has no array */
		qsort(im->rec, im->n, sizeof *im->rec, by_type_id);
	rc = check_unique(im, why, whylen);
	if (rc < 0)
		return rc;
	find_orphans(srv, im);
	im->ms_pin = clock_mono_ms();
	rc = removed_pools(srv, k, im, why, whylen);
	if (rc < 0)
		return rc;
	for (uint32_t p = 0; p < kept_pools(srv, &im->hdr); p++) {
		rc = pool_adopt(&srv->pools[p], &srv->cfg.pools[p], p, k->pool_fd[p],
				im->hdr.pools[p].size, progress, srv, err, sizeof err);
		if (rc < 0) {
			snprintf(why, whylen, "%s", err);
			k->fix = rc == -EINVAL ? FIX_POOLS : NULL;
			return rc;
		}
		if (srv->cfg.pools[p].size > im->hdr.pools[p].size)
			log_notice("pool %s: grown from %" PRIu64 " to %" PRIu64 " bytes, every kept "
				   "byte where it was", srv->pools[p].name, im->hdr.pools[p].size,
				   srv->pools[p].size);
		k->pool_fd[p] = -1; /* the pool's now */
		srv->npools = p + 1;
		/* As a fresh start says it: the journal shows what is pinned. */
		log_info("pool %s: %" PRIu64 " bytes pinned at %p, %u-byte pages%s, alignment %" PRIu64
			 " (kept in the fd store)",
			 srv->pools[p].name, srv->pools[p].size, (void *)srv->pools[p].base,
			 srv->pools[p].page_size, srv->pools[p].thp ? " (transparent 2 MiB)" : "",
			 srv->cfg.pools[p].alignment);
	}
	im->ms_pin = clock_mono_ms() - im->ms_pin;
	for (size_t i = 0; i < im->n; i++) {
		if (im->rec[i].drop)
			continue;
		rc = check_rec(srv, im, &im->rec[i].s, why, whylen);
		if (rc < 0)
			return rc;
	}
	return open_new_pools(srv, k, im, progress, why, whylen);
}

/* ---- pass 2: build --------------------------------------------------------------- */

static int build_sessions(struct server *srv, struct image *im)
{
	for (size_t i = 0; i < im->n; i++) {
		const struct state_slot *r = &im->rec[i].s;
		struct session *s;

		if (r->type != STATE_SESSION || im->rec[i].drop)
			continue;
		srv->next_session_id = r->u.session.id - 1;
		s = session_new(srv, SESSION_TCP, false, "restored");
		if (!s)
			return -ENOMEM;
		im->rec[i].sess = s;
		tenant_of(srv, r->u.session.tenant, &s->tenant);
		memcpy(s->resume_token, r->u.session.token, sizeof s->resume_token);
		/* Nobody knows this one: no queue pair attaches before RESUME. */
		if (getrandom(&s->attach_token, sizeof s->attach_token, 0) != sizeof s->attach_token)
			return -EIO;
		s->hello_done = true;
		s->restored = s->detached = true;
		tenant_session_restored(srv, s->tenant);
	}
	return 0;
}

static int build_objects(struct server *srv, struct image *im)
{
	for (size_t i = 0; i < im->n; i++) {
		const struct state_slot *r = &im->rec[i].s;
		const struct config_tenant *ns, *charged;
		const struct rec *nm;
		struct name_obj *o;

		if (r->type != STATE_OBJECT || im->rec[i].drop)
			continue;
		tenant_of(srv, r->u.object.ns, &ns);
		tenant_of(srv, r->u.object.charged, &charged);
		nm = kept(im, STATE_NAME, r->u.object.id);
		names_set_next_id(srv->names, r->u.object.id);
		/* An unlinked object that handles keep has no name, and needs
		 * none: it never enters the table of names, so no name a client
		 * chose can stand in its way.  A linked name is unique in its
		 * namespace (check_unique), so names_add fails only for memory. */
		o = nm ? names_add(srv->names, ns, nm->s.u.name.name, nm->s.u.name.name_len,
				   r->u.object.pool, r->u.object.offset, r->u.object.length, charged, 0)
		       : names_add_unlinked(srv->names, ns, r->u.object.pool, r->u.object.offset,
					    r->u.object.length, charged, 0);
		if (!o)
			return -errno;
		o->piece = nm && (nm->s.u.name.flags & STATE_NAME_F_PIECE);
		im->rec[i].obj = o;
		tenant_charge_restored(srv, charged, o->length);
		tenant_slots_restored(srv, charged, 2); /* as record_object charges */
		srv->used_bytes += o->length;
	}
	return 0;
}

/* One region entry of s: an anonymous region, or a handle of o. */
/* A restored session by its id: the image's sorted records, not a walk of
 * the session list per region. */
static struct session *session_of(const struct image *im, uint64_t id)
{
	const struct rec *r = find_rec(im, STATE_SESSION, id);

	return r ? r->sess : NULL;
}

static int build_region(struct server *srv, const struct image *im, const struct state_slot *r)
{
	struct session *s;
	struct region *g;

	if (r->type == STATE_REGION) {
		s = session_of(im, r->u.region.session);
		region_table_set_next_id(srv->regions, r->u.region.id);
		g = s ? region_add(srv->regions, &s->regions, s->id, r->u.region.pool,
				   r->u.region.offset, r->u.region.length) : NULL;
		if (!g)
			return -ENOMEM;
		tenant_charge_restored(srv, s->tenant, g->length);
		tenant_slots_restored(srv, s->tenant, 1);
		srv->used_bytes += g->length;
	} else {
		/* By the image's sorted records, not a walk of the names: a
		 * walk per handle made a restore of 60000 handles take 16.7 s. */
		const struct rec *orec = find_rec(im, STATE_OBJECT, r->u.handle.object);
		struct name_obj *o = orec ? orec->obj : NULL;

		s = session_of(im, r->u.handle.session);
		if (!s || !o || o->id != r->u.handle.object)
			return -EIO;
		region_table_set_next_id(srv->regions, r->u.handle.region);
		g = region_add(srv->regions, &s->regions, s->id, o->pool, o->offset, o->length);
		if (!g)
			return -ENOMEM;
		g->named = 1;
		if (names_handle_add(srv->names, o, g->id, r->u.handle.access, s) < 0)
			return -ENOMEM;
		/* Counted as open_handle counts it: its release takes one off. */
		s->nhandles++;
		tenant_slots_restored(srv, s->tenant, 1);
	}
	s->used_bytes += g->length;
	s->nregions++;
	return 0;
}

/* REGION and HANDLE records are each in id order; merged, the region table
 * gets them in id order, as it needs. */
static int build_regions(struct server *srv, const struct image *im)
{
	size_t a = 0, b = 0;
	int rc;

	for (;;) {
		const struct state_slot *ra, *rb;

		while (a < im->n && (im->rec[a].s.type != STATE_REGION || im->rec[a].drop))
			a++;
		while (b < im->n && (im->rec[b].s.type != STATE_HANDLE || im->rec[b].drop))
			b++;
		ra = a < im->n ? &im->rec[a].s : NULL;
		rb = b < im->n ? &im->rec[b].s : NULL;
		if (!ra && !rb)
			return 0;
		if (ra && (!rb || ra->u.region.id < rb->u.handle.region)) {
			rc = build_region(srv, im, ra);
			a++;
		} else {
			rc = build_region(srv, im, rb);
			b++;
		}
		if (rc < 0)
			return rc;
	}
}

static int by_off(const void *a, const void *b)
{
	const struct scrub_span *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * What no kept record holds may hold a former owner's bytes: a range freed
 * in the state before its bytes were zeroed (a crash between the two), left
 * unzeroed by a shutdown for a restart, or in the quarantine.  Its next
 * owner must still find zeros, and READY must not wait for them: pool by
 * pool, the kept ranges are faulted in now and the gaps between them go to
 * the pool's scrub (scrub.h), zeroed after READY in the background and by
 * the allocation that reaches them first.
 */
static int scrub_free(struct server *srv, const struct image *im)
{
	struct scrub_span *sp = malloc(sizeof *sp * (im->n + 1));
	struct scrub_span *gap = malloc(sizeof *gap * (im->n + 1));
	int rc = 0;

	if (!sp || !gap) {
		free(sp);
		free(gap);
		return -ENOMEM;
	}
	/* The kept pools only: a new one is zero, pinned whole. */
	for (uint32_t p = 0; p < kept_pools(srv, &im->hdr) && rc == 0; p++) {
		size_t n = 0, ng = 0;
		uint64_t at = 0;

		for (size_t i = 0; i < im->n; i++) {
			const struct state_slot *r = &im->rec[i].s;

			if (im->rec[i].drop)
				continue;
			if (r->type == STATE_REGION && r->u.region.pool == p)
				sp[n++] = (struct scrub_span){ r->u.region.offset, r->u.region.length };
			if (r->type == STATE_OBJECT && r->u.object.pool == p)
				sp[n++] = (struct scrub_span){ r->u.object.offset, r->u.object.length };
		}
		qsort(sp, n, sizeof *sp, by_off);
		for (size_t i = 0; i <= n; i++) {
			uint64_t end = i < n ? sp[i].off : srv->pools[p].size;

			if (end > at)
				gap[ng++] = (struct scrub_span){ at, end - at };
			if (i < n) {
				at = sp[i].off + sp[i].len;
				rc = pool_populate(&srv->pools[p], sp[i].off, sp[i].len);
				if (rc < 0)
					break;
			}
		}
		if (rc == 0)
			pool_scrub(&srv->pools[p], gap, ng);
	}
	free(sp);
	free(gap);
	return rc;
}

/*
 * The identity the state carries (identity.h): the same memory, so the same
 * generation and id.  A configured cluster.id that differs wins (the
 * operator renamed the server), with a line that says so.  A state of an
 * older rmemd carries none: one is drawn, for this process only (the header
 * is written once), and said.
 */
static void take_identity(struct server *srv, const struct state_hdr *h)
{
	const char *cfg_id = srv->cfg.cluster_id;
	struct identity *me = &srv->identity;

	if (!h->generation || !h->server_id[0]) {
		if (identity_draw(&srv->cfg, &me->generation, me->id, sizeof me->id) < 0) {
			me->generation = 0; /* member.c draws its own */
			me->id[0] = '\0';
		}
		log_notice("restore: the state carries no server id or generation (an older "
			   "rmemd's): %s, generation %" PRIu64 " until the memory is new",
			   me->id[0] ? me->id : "none", me->generation);
		return;
	}
	me->generation = h->generation;
	snprintf(me->id, sizeof me->id, "%s", h->server_id);
	if (cfg_id[0] && strcmp(cfg_id, h->server_id)) {
		log_notice("restore: cluster.id is %s, the state says %s: %s it is", cfg_id,
			   h->server_id, cfg_id);
		snprintf(me->id, sizeof me->id, "%s", cfg_id);
	}
	log_info("restore: server id %s, generation %" PRIu64 " (the memory's, kept)",
		 me->id, me->generation);
}

/* Pass 2; im passed pass 1.  Only memory can fail here. */
static int rebuild(struct server *srv, struct restore_fds *k, struct image *im)
{
	const struct state_slot *c = &im->counters;
	int rc;

	im->ms_zero = clock_mono_ms();
	rc = scrub_free(srv, im);
	im->ms_zero = clock_mono_ms() - im->ms_zero;
	if (rc == 0)
		rc = build_sessions(srv, im);
	if (rc == 0)
		rc = build_objects(srv, im);
	if (rc == 0)
		rc = build_regions(srv, im);
	if (rc < 0)
		return rc;
	if (srv->used_bytes > srv->peak_used)
		srv->peak_used = srv->used_bytes;
	if (im->have_counters) {
		region_table_set_next_id(srv->regions, c->u.counters.next_region);
		names_set_next_id(srv->names, c->u.counters.next_name);
		srv->next_session_id = c->u.counters.next_session;
	}
	srv->slots = slots_new(k->state_fd, im->base, im->hdr.nslots);
	if (!srv->slots)
		return -ENOMEM;
	k->state_fd = -1; /* the writer's now, and the mapping too */
	for (size_t i = 0; i < im->n; i++) {
		uint8_t *p = im->base + STATE_HDR_LEN + (uint64_t)im->rec[i].index * STATE_SLOT_LEN;

		if (im->rec[i].drop) {
			/* An orphan's slot is freed as any slot: one store. */
			__atomic_store_n((uint64_t *)(void *)p, 0, __ATOMIC_RELEASE);
			continue;
		}
		rc = slots_mark(srv->slots, im->rec[i].index, &im->rec[i].s);
		if (rc < 0) {
			im->base = NULL;
			return rc;
		}
	}
	im->base = NULL;
	slots_mark_done(srv->slots);
	if (im->have_counters)
		slots_set_counters(srv->slots, c, im->counters_index);
	srv->restored = 1;
	srv->counters.restarts_restored++;
	take_identity(srv, &im->hdr);
	log_notice("restored from the fd store: %llu session(s) detached for resume, %llu named "
		   "region(s), %llu region(s), %llu bytes; %zu orphan record(s) dropped; in %lld ms "
		   "(mapping %lld, faulting in what is held %lld); free bytes are zeroed in the background",
		   (unsigned long long)srv->clients, (unsigned long long)names_count(srv->names),
		   (unsigned long long)region_count(srv->regions),
		   (unsigned long long)srv->used_bytes, im->orphans,
		   (long long)(clock_mono_ms() - im->t_start), (long long)im->ms_pin,
		   (long long)im->ms_zero);
	return 0;
}

int restore_run(struct server *srv, struct restore_fds *fds, pool_progress_fn progress,
		char *why, size_t whylen)
{
	struct image im;
	int rc;

	memset(&im, 0, sizeof im);
	im.t_start = clock_mono_ms();
	rc = check_all(srv, fds, &im, progress, why, whylen);
	if (rc == 0)
		rc = rebuild(srv, fds, &im);
	else
		rc = RESTORE_REFUSED;
	image_free(&im);
	return rc;
}
