/*
 * router_watch.c - the server set of a cluster client, kept from etcd:
 * one full read of /rmem/<name>/servers/ at connect, then a watch from the
 * revision after it on a thread the client owns (etcd's /v3/watch is one
 * long streaming POST, so it needs a thread of its own; the library holds no
 * global state, so each client has its own).  A broken stream is resumed
 * from the last revision seen + 1, on the next endpoint; a watch canceled
 * because that history was compacted is replaced by a full read and a new
 * watch from its revision.  Between tries it waits 100 ms doubling to 1 s.
 *
 * The thread only feeds router_members.c; nothing on the data path waits
 * for it or for etcd, so an etcd leader's loss (or all of etcd's) stops no
 * read, write or alloc: placement uses the last set known.
 *
 * A second watch, of the tenant's names (/rmem/<name>/names/<tenant>/),
 * runs the same loop once a redundant name is first opened read-only
 * (names_watch_ensure): each change of a record raises its bucket of
 * cl->name_rev to the change's revision, and nothing else, so that a
 * reader's handle learns within the stream's delivery that its record
 * moved (redund_validate; docs/architecture.md, "Invariant: a piece
 * declared stale is never served").  Its full read, after a compaction,
 * raises every bucket: what the lost history held is not known.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "router_int.h"
#include "etcd_client.h"

struct router_watch {
	struct router *cl;
	struct etcd_client *etcd;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	pthread_mutex_t mu;       /* the stop's wake-up; guards fd */
	pthread_cond_t cv;
	int fd;                   /* the stream's socket, -1: none */
	char prefix[CLUSTER_NAME_MAX + 32 + RMEM_NAME_MAX];
	int64_t next_rev;         /* watch from here; 0: read everything first */
	bool names;               /* the names watch: buckets, not members */
};

/* FNV-1a of a name (a record's key less the prefix), to its bucket. */
static unsigned bucket_of(const void *name, size_t len)
{
	const unsigned char *p = name;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return (unsigned)(h % ROUTER_NAME_BUCKETS);
}

unsigned names_bucket(const char *name)
{
	return bucket_of(name, strlen(name));
}

int64_t names_rev(struct router *cl, unsigned bucket)
{
	return __atomic_load_n(&cl->name_rev[bucket], __ATOMIC_ACQUIRE);
}

/* Bucket b at least rev; the watch thread is its one writer. */
static void names_raise(struct router *cl, unsigned b, int64_t rev)
{
	if (rev > __atomic_load_n(&cl->name_rev[b], __ATOMIC_RELAXED))
		__atomic_store_n(&cl->name_rev[b], rev, __ATOMIC_RELEASE);
}

/* The id at the end of a server's key; NULL when it is not one. */
static const char *key_id(const struct router_watch *w, const struct etcd_kv *kv,
			  char *id, size_t id_len)
{
	size_t plen = strlen(w->prefix);

	if (kv->key_len <= plen || kv->key_len - plen >= id_len ||
	    memcmp(kv->key, w->prefix, plen))
		return NULL;
	memcpy(id, kv->key + plen, kv->key_len - plen);
	id[kv->key_len - plen] = '\0';
	return id;
}

/* A record whose id is not its key's is not trusted. */
static bool rec_of(const struct router_watch *w, const struct etcd_kv *kv,
		   struct cluster_rec *rec)
{
	char id[CLUSTER_ID_MAX];

	return key_id(w, kv, id, sizeof id) &&
	       cluster_rec_decode((const char *)kv->value, kv->value_len, rec) == 0 &&
	       !strcmp(rec->id, id);
}

static int full_read(struct router_watch *w)
{
	struct cluster_rec *recs;
	int64_t *revs;
	struct etcd_range r;
	size_t n = 0;
	int rc = etcd_range(w->etcd, w->prefix, strlen(w->prefix), true, &r);

	if (rc < 0)
		return rc;
	if (w->names) {
		/* History lost: every record may have moved. */
		for (unsigned b = 0; b < ROUTER_NAME_BUCKETS; b++)
			names_raise(w->cl, b, r.header.revision);
		w->next_rev = r.header.revision + 1;
		etcd_range_free(&r);
		return 0;
	}
	recs = calloc(r.nkvs ? r.nkvs : 1, sizeof(*recs));
	revs = calloc(r.nkvs ? r.nkvs : 1, sizeof(*revs));
	if (!recs || !revs) {
		free(recs);
		free(revs);
		etcd_range_free(&r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r.nkvs; i++)
		if (rec_of(w, &r.kvs[i], &recs[n]))
			revs[n++] = r.kvs[i].create_revision;
	members_only(w->cl, recs, revs, n);
	w->next_rev = r.header.revision + 1;
	free(recs);
	free(revs);
	etcd_range_free(&r);
	return 0;
}

static int on_message(void *arg, const struct etcd_watch_msg *m)
{
	struct router_watch *w = arg;

	if (m->canceled) {
		/* Compacted past next_rev: read everything again. */
		if (m->compact_revision > 0)
			w->next_rev = 0;
		return 1;
	}
	for (size_t i = 0; i < m->nevents; i++) {
		const struct etcd_event *ev = &m->events[i];
		struct cluster_rec rec;
		char id[CLUSTER_ID_MAX];
		size_t plen = strlen(w->prefix);

		if (w->names) {
			/* A put or a delete: the bucket at least its revision
			 * (the message's, if a delete carries none). */
			int64_t rev = ev->kv.mod_revision > m->header.revision ? ev->kv.mod_revision :
										  m->header.revision;

			if (ev->kv.key_len >= plen && !memcmp(ev->kv.key, w->prefix, plen))
				names_raise(w->cl, bucket_of(ev->kv.key + plen, ev->kv.key_len - plen),
					    rev);
		} else if (ev->type == ETCD_EVENT_PUT && rec_of(w, &ev->kv, &rec))
			members_put(w->cl, &rec, ev->kv.create_revision);
		else if (ev->type == ETCD_EVENT_DELETE && key_id(w, &ev->kv, id, sizeof id))
			members_gone(w->cl, id);
		if (ev->kv.mod_revision >= w->next_rev)
			w->next_rev = ev->kv.mod_revision + 1;
	}
	return atomic_load(&w->stop);
}

static bool on_stop(void *arg)
{
	struct router_watch *w = arg;

	return atomic_load(&w->stop);
}

/* The stream's socket, kept for watch_stop's shutdown; the lock keeps a
 * shutdown off a descriptor closed (and perhaps reused) meanwhile. */
static void on_sock(void *arg, int fd, bool open)
{
	struct router_watch *w = arg;

	pthread_mutex_lock(&w->mu);
	if (open)
		w->fd = fd;
	else if (w->fd == fd)
		w->fd = -1;
	pthread_mutex_unlock(&w->mu);
}

/* Sleeps ms unless stopped meanwhile. */
static void watch_backoff(struct router_watch *w, unsigned ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	if (!atomic_load(&w->stop))
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	pthread_mutex_unlock(&w->mu);
}

static void *watch_main(void *arg)
{
	struct router_watch *w = arg;
	const struct etcd_watch_ops ops = { .message = on_message, .stop = on_stop, .arg = w,
					    .sock = on_sock };
	unsigned backoff = 100;

	while (!atomic_load(&w->stop)) {
		int rc = w->next_rev ? 0 : full_read(w);

		if (rc == 0)
			rc = etcd_watch(w->etcd, w->prefix, strlen(w->prefix), true, w->next_rev,
					&ops);
		if (atomic_load(&w->stop))
			break;
		/* A stream that ran for a while starts again at once; failures
		 * back off. */
		if (rc == 0 || rc == -ECONNRESET) {
			backoff = 100;
			if (rc == 0)
				continue;
		}
		watch_backoff(w, backoff);
		backoff = backoff < 500 ? backoff * 2 : 1000;
	}
	return NULL;
}

/* The members watch, or (names) the names watch from revision from, its
 * thread started: 0 and *out, or the first error (*out is set either way,
 * for watch_stop). */
static int watch_new(struct router *cl, unsigned timeout_ms, bool names, int64_t from,
		     struct router_watch **out)
{
	struct router_watch *w = calloc(1, sizeof(*w));
	char why[160];
	int rc;

	*out = w;
	if (!w)
		return -ENOMEM;
	w->cl = cl;
	w->names = names;
	atomic_init(&w->stop, false);
	w->fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (names)
		snprintf(w->prefix, sizeof w->prefix, "/rmem/%s/names/%s/", cl->name,
			 cl->tenant ? cl->tenant : CLUSTER_ANON_TENANT);
	else
		snprintf(w->prefix, sizeof w->prefix, "/rmem/%s/servers/", cl->name);
	rc = etcd_client_new(cl->etcd_list, &cl->etcd_tls, timeout_ms, &w->etcd, why, sizeof why);
	if (rc == 0 && names)
		w->next_rev = from;
	else if (rc == 0)
		rc = full_read(w);
	if (rc == 0) {
		rc = -pthread_create(&w->thread, NULL, watch_main, w);
		w->started = rc == 0;
	}
	return rc;
}

int watch_start(struct router *cl, unsigned timeout_ms)
{
	return watch_new(cl, timeout_ms, false, 0, &cl->watch);
}

int names_watch_ensure(struct router *cl, int64_t rev)
{
	int rc = 0;

	pthread_mutex_lock(&cl->names_mu);
	if (!cl->names_watch) {
		cl->names_from = rev + 1;
		rc = watch_new(cl, CLUSTER_ETCD_TIMEOUT_MS, true, rev + 1, &cl->names_watch);
		if (rc < 0) {
			watch_stop(cl->names_watch);
			cl->names_watch = NULL;
		}
	}
	/* Started after this record was read (two first opens at once): a
	 * change in between would be missed. */
	if (rc == 0)
		rc = cl->names_from <= rev + 1;
	pthread_mutex_unlock(&cl->names_mu);
	return rc;
}

void watch_stop(struct router_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	atomic_store(&w->stop, true);
	pthread_cond_signal(&w->cv);
	/* An idle stream would see the stop at libcurl's next progress call,
	 * up to a second away (seen: 801 ms in CI): end it now. */
	if (w->fd >= 0)
		shutdown(w->fd, SHUT_RDWR);
	pthread_mutex_unlock(&w->mu);
	if (w->started)
		pthread_join(w->thread, NULL);
	etcd_client_free(w->etcd);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
