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
	char prefix[CLUSTER_NAME_MAX + 32];
	int64_t next_rev;         /* watch from here; 0: read everything first */
};

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

		if (ev->type == ETCD_EVENT_PUT && rec_of(w, &ev->kv, &rec))
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

int watch_start(struct router *cl, unsigned timeout_ms)
{
	struct router_watch *w = calloc(1, sizeof(*w));
	char why[160];
	int rc;

	if (!w)
		return -ENOMEM;
	w->cl = cl;
	atomic_init(&w->stop, false);
	w->fd = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	snprintf(w->prefix, sizeof w->prefix, "/rmem/%s/servers/", cl->name);
	rc = etcd_client_new(cl->etcd_list, &cl->etcd_tls, timeout_ms, &w->etcd, why, sizeof why);
	if (rc == 0)
		rc = full_read(w);
	if (rc == 0) {
		rc = -pthread_create(&w->thread, NULL, watch_main, w);
		w->started = rc == 0;
	}
	cl->watch = w;
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
