/*
 * member.c - see member.h.
 *
 * Why a thread and not libcurl's multi interface on the loop: the agent's
 * work is a short conversation (grant, create, keepalive, put, revoke) whose
 * every step depends on the last, with failover between endpoints; written
 * as blocking calls on a thread of its own it reads in order, and nothing it
 * does, however slow etcd is, can delay a client's request.  The price is
 * one thread that sleeps almost all the time, and a boundary that must stay
 * narrow: the loop writes its figures (free bytes, largest free, regions)
 * into atomics from a timer; the agent reads them and never touches struct
 * server; the agent's own state (its registration, whether the drain key is
 * there) is the agent's alone, and the loop copies what it needs.  The only lock is the one the agent sleeps on, which
 * main.c's thread takes only to stop it.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "alloc.h"
#include "clock.h"
#include "member.h"
#include "cluster_rec.h"
#include "config.h"
#include "etcd_client.h"
#include "identity.h"
#include "log.h"
#include "region.h"
#include "server.h"

#ifndef RMEM_VERSION_STRING
#define RMEM_VERSION_STRING "unknown"
#endif

/* How often the loop publishes its figures, and the agent looks at them. */
#define PUBLISH_MS 100
#define CHECK_MS   250
/* How often the agent reads the drain key (docs/architecture.md, "Drain"):
 * an operator's drain takes effect within this, plus the loop's copy. */
#define DRAIN_CHECK_MS 500

struct member {
	/* Set before the thread starts; read-only afterwards. */
	char key[CONFIG_NAME_MAX * 2 + 32];  /* /rmem/<name>/servers/<id> */
	char drain_key[CONFIG_NAME_MAX * 2 + 32]; /* /rmem/<name>/drain/<id> */
	struct cluster_rec rec;              /* the fixed fields */
	uint32_t lease_ms;
	uint64_t step;
	char endpoints[CONFIG_ETCD_MAX];
	struct etcd_tls tls;
	/* Made by member_start (which tried it once under TLS), the agent's
	 * from its start. */
	struct etcd_client *etcd;

	/* Written by the loop (publish timer), read by the agent. */
	_Atomic uint64_t free_bytes, largest_free, regions;
	/* Written by the agent, read by anyone. */
	_Atomic int state;
	/* Whether the drain key is there, as the agent last read it; the
	 * loop copies it into srv->draining, which ALLOC and CREATE look at. */
	_Atomic bool draining;
	/* The agent's counts for the metrics (counters.h, struct
	 * counters_cluster), copied by the loop's publish timer. */
	_Atomic uint64_t registrations, leases_lost, renewals, renewal_failures, record_writes,
		unreachable;
	_Atomic int64_t last_ok_ms;
	_Atomic bool reachable;

	struct event *timer;                 /* the loop's publish timer */
	/* The loop's own: what STATUS= last said of the drain (regions left
	 * + 1; 0: nothing, not draining). */
	uint64_t drain_shown;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;                /* guards stop; the agent sleeps on cond */
	pthread_cond_t cond;
	bool stop;
	bool keep_lease;                     /* set with stop: a restart, not a departure */
};

uint64_t member_refresh_step(uint64_t pool_bytes)
{
	uint64_t step = pool_bytes / 64;

	return step < (UINT64_C(1) << 20) ? UINT64_C(1) << 20 : step;
}

/* ---- the loop's side ------------------------------------------------------------ */

static void publish(const struct server *srv, struct member *cl)
{
	uint64_t free_bytes = 0, largest = 0;

	for (uint32_t i = 0; i < srv->npools; i++) {
		struct alloc_stats st;

		alloc_get_stats(srv->pools[i].alloc, &st);
		free_bytes += st.free;
		if (st.largest_free > largest)
			largest = st.largest_free;
	}
	atomic_store_explicit(&cl->free_bytes, free_bytes, memory_order_relaxed);
	atomic_store_explicit(&cl->largest_free, largest, memory_order_relaxed);
	atomic_store_explicit(&cl->regions, region_count(srv->regions), memory_order_relaxed);
}

/* The agent's counts into srv->counters.cluster, for the metrics page, which
 * runs on this loop too (relaxed: each figure is one counter on its own). */
static void copy_counts(struct server *srv, struct member *cl)
{
	struct counters_cluster *c = &srv->counters.cluster;

	c->registrations = atomic_load_explicit(&cl->registrations, memory_order_relaxed);
	c->leases_lost = atomic_load_explicit(&cl->leases_lost, memory_order_relaxed);
	c->renewals = atomic_load_explicit(&cl->renewals, memory_order_relaxed);
	c->renewal_failures = atomic_load_explicit(&cl->renewal_failures, memory_order_relaxed);
	c->record_writes = atomic_load_explicit(&cl->record_writes, memory_order_relaxed);
	c->unreachable = atomic_load_explicit(&cl->unreachable, memory_order_relaxed);
	c->last_ok_ms = atomic_load_explicit(&cl->last_ok_ms, memory_order_relaxed);
	c->etcd_reachable = atomic_load_explicit(&cl->reachable, memory_order_relaxed);
	c->registered = srv->member_state == MEMBER_REGISTERED;
}

/* systemd's STATUS= says how far a drain is (systemctl status rmemd), at
 * its start, at each change of the regions left, and at its end. */
static void drain_status(const struct server *srv, struct member *cl)
{
	uint64_t n = atomic_load_explicit(&cl->regions, memory_order_relaxed);

	if (srv->draining && cl->drain_shown != n + 1) {
		sd_notifyf(0, "STATUS=serving; draining: %" PRIu64 " region%s left", n,
			   n == 1 ? "" : "s");
		cl->drain_shown = n + 1;
	} else if (!srv->draining && cl->drain_shown) {
		sd_notify(0, "STATUS=serving");
		cl->drain_shown = 0;
	}
}

static void on_publish(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = arg;

	(void)fd;
	(void)what;
	publish(srv, srv->cluster);
	/* For the metrics page, which runs on this loop too. */
	srv->member_state = atomic_load(&srv->cluster->state);
	srv->draining = atomic_load(&srv->cluster->draining);
	drain_status(srv, srv->cluster);
	copy_counts(srv, srv->cluster);
}

/* ---- the agent ---------------------------------------------------------------------- */

struct agent {
	struct member *cl;
	struct etcd_client *etcd;
	int64_t lease;            /* 0: none */
	bool registered;          /* the key is ours, under lease */
	int64_t ttl_s;
	uint64_t put_free, put_largest;  /* the figures etcd has */
	uint64_t put_regions;
	bool put_draining;
	int64_t next_drain_check; /* clock_mono_ms() */
	int64_t next_keepalive;   /* clock_mono_ms() */
	int64_t waiting_for;      /* the foreign lease on our key last logged */
	int last_err;             /* the last failure logged (not a reachability one) */
	int64_t failing_since;    /* clock_mono_ms() of the first unanswered call; 0: none */
};

/* etcd answered (whatever it said): for the metrics' reachability and age. */
static void answered(struct agent *a)
{
	atomic_store_explicit(&a->cl->last_ok_ms, clock_mono_ms(), memory_order_relaxed);
	atomic_store_explicit(&a->cl->reachable, true, memory_order_relaxed);
}

static void count(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static void set_state(struct agent *a, enum member_state st)
{
	int old;

	if (st != MEMBER_UNREACHABLE)
		a->failing_since = 0; /* only an answer sets another state */
	old = atomic_exchange(&a->cl->state, (int)st);

	if (old == (int)st)
		return;
	if (st == MEMBER_UNREACHABLE) {
		atomic_store_explicit(&a->cl->reachable, false, memory_order_relaxed);
		count(&a->cl->unreachable);
	}
	/* Once when etcd goes away, once when it is back: never every tick. */
	if (st == MEMBER_UNREACHABLE)
		log_warn("cluster: etcd is unreachable (%s); serving clients on, retrying",
			 etcd_client_error(a->etcd));
	else if (old == MEMBER_UNREACHABLE)
		log_notice("cluster: etcd is reachable again (%s)", etcd_client_endpoint(a->etcd));
}

/*
 * A call's failure.  No member answering (or none able to serve) for a
 * keepalive period makes the state UNREACHABLE; a shorter gap, as while the
 * members elect a new leader, is retried without a word.  Anything else is
 * logged when it differs from the last one.
 */
static void failed(struct agent *a, const char *what, int rc)
{
	int64_t now = clock_mono_ms();

	if (rc == -EHOSTUNREACH || rc == -EAGAIN) {
		if (!a->failing_since)
			a->failing_since = now;
		if (now - a->failing_since >= a->cl->lease_ms / 3)
			set_state(a, MEMBER_UNREACHABLE);
		else
			log_debug("cluster: %s: %s; retrying", what, etcd_client_error(a->etcd));
		return;
	}
	a->failing_since = 0;
	answered(a); /* it said no, but it answered */
	if (rc != a->last_err)
		log_warn("cluster: %s: %s (%s)", what, strerror(-rc), etcd_client_error(a->etcd));
	a->last_err = rc;
}

static int make_value(struct agent *a, char **out)
{
	struct cluster_rec r = a->cl->rec;

	r.free_bytes = atomic_load_explicit(&a->cl->free_bytes, memory_order_relaxed);
	r.largest_free = atomic_load_explicit(&a->cl->largest_free, memory_order_relaxed);
	if (r.free_bytes > r.pool_bytes)
		r.free_bytes = r.pool_bytes;
	if (r.largest_free > r.free_bytes)
		r.largest_free = r.free_bytes;
	r.regions = atomic_load_explicit(&a->cl->regions, memory_order_relaxed);
	r.draining = atomic_load(&a->cl->draining);
	a->put_free = r.free_bytes;
	a->put_largest = r.largest_free;
	a->put_regions = r.regions;
	a->put_draining = r.draining;
	return cluster_rec_encode(&r, out);
}

/*
 * Our key under another lease: when its record is this server's own
 * previous life (the same id and the same generation, which only the state
 * memfd carries over: a restart under the fd store), the lease it kept is
 * taken over (docs/architecture.md, "Invariant: a restart keeps a server
 * in the set").  The key then never leaves etcd, so clients never see the
 * server gone.  0 once the lease is ours and the record this process's;
 * -EBUSY when it is not ours to take, or etcd's error.
 */
static int adopt(struct agent *a, const struct etcd_kv *existing)
{
	struct member *cl = a->cl;
	struct cluster_rec was;
	int64_t ttl = 0;
	char *value = NULL;
	int rc;

	if (!existing->key || existing->lease == 0 ||
	    cluster_rec_decode((const char *)existing->value, existing->value_len, &was) < 0 ||
	    strcmp(was.id, cl->rec.id) || was.generation != cl->rec.generation)
		return -EBUSY;
	rc = etcd_lease_keepalive(a->etcd, existing->lease, &ttl);
	if (rc < 0 || ttl <= 0)
		return rc < 0 ? rc : -EBUSY; /* ended meanwhile: create next time */
	/* The lease we were granted is not needed. */
	etcd_lease_revoke(a->etcd, a->lease);
	a->lease = existing->lease;
	a->ttl_s = ttl;
	rc = make_value(a, &value);
	if (rc == 0)
		rc = etcd_put(a->etcd, cl->key, strlen(cl->key), value, strlen(value), a->lease);
	free(value);
	if (rc < 0) {
		failed(a, "put", rc);
		/* A lease we may not hold any more: the next join starts over. */
		a->lease = 0;
		return rc;
	}
	log_notice("cluster: %s kept its lease %" PRIx64 " across the restart",
		   cl->key, (uint64_t)a->lease);
	return 0;
}

/*
 * Grant (when there is no lease) and create the key under it, if no one
 * holds it.  A key under another lease is another rmemd with our id, or
 * this server's previous life whose lease has not ended yet: we wait for it
 * rather than take it over, so that two servers never share one id.
 */
static int join(struct agent *a)
{
	struct member *cl = a->cl;
	struct etcd_kv existing;
	bool created;
	char *value = NULL;
	int rc;

	if (!a->lease) {
		rc = etcd_lease_grant(a->etcd, (cl->lease_ms + 999) / 1000, &a->lease, &a->ttl_s);
		if (rc < 0) {
			failed(a, "lease grant", rc);
			return rc;
		}
		answered(a);
	}
	rc = make_value(a, &value);
	if (rc == 0)
		rc = etcd_create(a->etcd, cl->key, strlen(cl->key), value, strlen(value), a->lease,
				 &created, &existing);
	free(value);
	if (rc == -ENOENT) {
		/* Our lease ended before the key could be created (we were
		 * waiting for the key, or etcd was away): a new one next time. */
		answered(a);
		log_debug("cluster: lease %" PRIx64 " ended before %s was created",
			  (uint64_t)a->lease, cl->key);
		a->lease = 0;
		set_state(a, MEMBER_JOINING);
		return rc;
	}
	if (rc < 0) {
		failed(a, "create", rc);
		return rc;
	}
	answered(a);
	if (!created && existing.lease != a->lease && adopt(a, &existing) == 0)
		created = true;
	if (!created && existing.lease != a->lease) {
		if (existing.lease != a->waiting_for)
			log_warn("cluster: %s is held by lease %" PRIx64 " (another rmemd with "
				 "this id, or this server before a restart): waiting for it to end",
				 cl->key, (uint64_t)existing.lease);
		a->waiting_for = existing.lease;
		etcd_kv_free(&existing);
		set_state(a, MEMBER_JOINING);
		return -EBUSY;
	}
	etcd_kv_free(&existing);
	a->waiting_for = 0;
	a->last_err = 0;
	a->registered = true;
	count(&cl->registrations);
	set_state(a, MEMBER_REGISTERED);
	log_notice("cluster: registered %s (lease %" PRIx64 ", ttl %" PRId64 " s) via %s",
		   cl->key, (uint64_t)a->lease, a->ttl_s, etcd_client_endpoint(a->etcd));
	a->next_keepalive = clock_mono_ms() + cl->lease_ms / 3;
	return 0;
}

static void keepalive(struct agent *a)
{
	int64_t ttl = 0;
	int rc = etcd_lease_keepalive(a->etcd, a->lease, &ttl);

	if (rc < 0) {
		count(&a->cl->renewal_failures);
		failed(a, "lease keepalive", rc);
		/* Sooner than the period: the lease is running out meanwhile. */
		a->next_keepalive = clock_mono_ms() + CHECK_MS;
		return;
	}
	answered(a);
	if (ttl <= 0) {
		count(&a->cl->leases_lost);
		log_warn("cluster: lease %" PRIx64 " is lost (it ended while etcd was out of "
			 "reach, or was revoked); registering again", (uint64_t)a->lease);
		a->lease = 0;
		a->registered = false;
		set_state(a, MEMBER_JOINING);
		return;
	}
	count(&a->cl->renewals);
	set_state(a, MEMBER_REGISTERED);
	a->next_keepalive = clock_mono_ms() + a->cl->lease_ms / 3;
}

static bool moved(uint64_t now, uint64_t then, uint64_t step)
{
	return now > then ? now - then >= step : then - now >= step;
}

/*
 * Whether an operator drains this server: its drain key is there (written
 * by rmemctl cluster drain, without a lease, so it outlives this process
 * and a restart: a server drained for a reboot comes back drained).  etcd
 * is the truth, not a request to this rmemd, because an operator drains
 * from anywhere (the admin socket is this host's) and every client must
 * see it too (it reaches them in this server's record).  Read every
 * DRAIN_CHECK_MS; etcd out of reach keeps the last answer.
 */
static void drain_check(struct agent *a)
{
	struct member *cl = a->cl;
	struct etcd_range r;
	bool on, was = atomic_load(&cl->draining);
	int rc;

	if (clock_mono_ms() < a->next_drain_check)
		return;
	a->next_drain_check = clock_mono_ms() + DRAIN_CHECK_MS;
	rc = etcd_range(a->etcd, cl->drain_key, strlen(cl->drain_key), false, &r);
	if (rc < 0) {
		failed(a, "reading the drain key", rc);
		return;
	}
	on = r.nkvs > 0;
	etcd_range_free(&r);
	if (on == was)
		return;
	atomic_store(&cl->draining, on);
	if (on)
		log_notice("cluster: draining (%s is set): no new regions or names here; "
			   "redundant pieces move to other members", cl->drain_key);
	else
		log_notice("cluster: no longer draining: new regions and names are taken again");
}

/* The figures, again, when they have moved by a step since etcd got them;
 * and at once when the drain began or ended, or (while draining) the count
 * of regions moved: rmemctl cluster drain --wait counts it down, and the
 * writes are bounded by the regions there are to move. */
static void refresh(struct agent *a)
{
	struct member *cl = a->cl;
	uint64_t f = atomic_load_explicit(&cl->free_bytes, memory_order_relaxed);
	uint64_t l = atomic_load_explicit(&cl->largest_free, memory_order_relaxed);
	uint64_t n = atomic_load_explicit(&cl->regions, memory_order_relaxed);
	bool d = atomic_load(&cl->draining);
	uint64_t was_free = a->put_free, was_largest = a->put_largest, was_regions = a->put_regions;
	bool was_draining = a->put_draining;
	char *value = NULL;
	int rc;

	if (!moved(f, was_free, cl->step) && !moved(l, was_largest, cl->step) &&
	    d == was_draining && (!d || n == was_regions))
		return;
	rc = make_value(a, &value);
	if (rc == 0)
		rc = etcd_put(a->etcd, cl->key, strlen(cl->key), value, strlen(value), a->lease);
	free(value);
	if (rc < 0) {
		a->put_free = was_free; /* try again next time */
		a->put_largest = was_largest;
		a->put_regions = was_regions;
		a->put_draining = was_draining;
		if (rc == -ENOENT) {  /* the lease is gone */
			count(&cl->leases_lost);
			a->lease = 0;
			a->registered = false;
			set_state(a, MEMBER_JOINING);
		}
		failed(a, "put", rc);
		return;
	}
	answered(a);
	count(&cl->record_writes);
	log_debug("cluster: figures refreshed: %" PRIu64 " bytes free, largest %" PRIu64,
		  a->put_free, a->put_largest);
}

/* Sleeps until ms from now or until asked to stop; true when asked. */
static bool nap(struct member *cl, int64_t ms)
{
	struct timespec ts = clock_mono_ts_after(ms);
	bool stop;

	pthread_mutex_lock(&cl->lock);
	while (!cl->stop && pthread_cond_timedwait(&cl->cond, &cl->lock, &ts) != ETIMEDOUT)
		;
	stop = cl->stop;
	pthread_mutex_unlock(&cl->lock);
	return stop;
}

static void *agent_main(void *arg)
{
	struct agent a = { .cl = arg };
	struct member *cl = a.cl;
	bool keep;

	a.etcd = cl->etcd;
	cl->etcd = NULL;
	while (!nap(cl, 0)) {
		int64_t wait = CHECK_MS, until;

		/* First, so that a drained server restarted registers drained. */
		drain_check(&a);
		if (!a.registered) {
			/* Not every tick: a failed join waits a keepalive period. */
			if (join(&a) < 0)
				wait = cl->lease_ms / 3 < CHECK_MS ? CHECK_MS : cl->lease_ms / 3;
		} else if (clock_mono_ms() >= a.next_keepalive) {
			keepalive(&a);
		} else {
			refresh(&a);
		}
		until = a.next_keepalive - clock_mono_ms();
		if (a.registered && until < wait)
			wait = until > 0 ? until : 0;
		if (nap(cl, wait))
			break;
	}
	/* A restart under the fd store (the state kept for the next start) is
	 * not a departure: the lease is left to the next process, which takes
	 * it over (adopt), so the key never leaves etcd.  Otherwise it is
	 * revoked, the key goes now; left to expire, it would stay up to a
	 * lease longer, with clients placing memory on a server that is gone. */
	pthread_mutex_lock(&cl->lock);
	keep = cl->keep_lease;
	pthread_mutex_unlock(&cl->lock);
	if (a.lease && keep && a.registered) {
		log_notice("cluster: lease %" PRIx64 " kept for the next start (%s stays up to "
			   "%u ms without it)", (uint64_t)a.lease, cl->key, cl->lease_ms);
	} else if (a.lease) {
		int rc = etcd_lease_revoke(a.etcd, a.lease);

		if (rc == 0 && a.registered)
			log_notice("cluster: lease %" PRIx64 " revoked; %s is gone",
				   (uint64_t)a.lease, cl->key);
		else if (rc == 0)
			log_info("cluster: lease %" PRIx64 " revoked (%s was not ours)",
				 (uint64_t)a.lease, cl->key);
		else if (a.registered)
			log_warn("cluster: revoking lease %" PRIx64 ": %s (%s); %s goes when it "
				 "expires", (uint64_t)a.lease, strerror(-rc),
				 etcd_client_error(a.etcd), cl->key);
	}
	etcd_client_free(a.etcd);
	return NULL;
}

/* ---- start and stop ------------------------------------------------------------------ */

/* The id and generation (identity.h): the ones the state memfd carries
 * (restart without loss: the same server, the same memory), else new ones:
 * cluster.id or 64 random bits, and the start time in µs. */
static int make_identity(const struct server *srv, struct cluster_rec *rec)
{
	if (srv->identity.generation && srv->identity.id[0]) {
		snprintf(rec->id, sizeof rec->id, "%s", srv->identity.id);
		rec->generation = srv->identity.generation;
		return 0;
	}
	return identity_draw(&srv->cfg, &rec->generation, rec->id, sizeof rec->id);
}

/* "HOST:PORT" -> "HOST:port" (HOST may be "[v6]"). */
static void with_port(const char *hostport, unsigned port, char *out, size_t len)
{
	const char *colon = strrchr(hostport, ':');
	int hostlen = colon ? (int)(colon - hostport) : (int)strlen(hostport);

	snprintf(out, len, "%.*s:%u", hostlen, hostport, port);
}

static void member_free(struct member *cl)
{
	if (!cl)
		return;
	if (cl->timer)
		event_free(cl->timer);
	etcd_client_free(cl->etcd);
	pthread_cond_destroy(&cl->cond);
	pthread_mutex_destroy(&cl->lock);
	free(cl);
}

static int member_new(struct server *srv, struct member **out)
{
	const struct config *cfg = &srv->cfg;
	struct member *cl = calloc(1, sizeof *cl);
	pthread_condattr_t ca;
	struct timespec now;
	int rc;

	*out = NULL;
	if (!cl)
		return -ENOMEM;
	pthread_mutex_init(&cl->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cl->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = make_identity(srv, &cl->rec);
	if (rc < 0) {
		member_free(cl);
		return rc;
	}
	snprintf(cl->key, sizeof cl->key, "/rmem/%s/servers/%s", cfg->cluster_name, cl->rec.id);
	snprintf(cl->drain_key, sizeof cl->drain_key, "/rmem/%s/drain/%s", cfg->cluster_name,
		 cl->rec.id);
	snprintf(cl->rec.tcp, sizeof cl->rec.tcp, "%s",
		 cfg->cluster_advertise[0] ? cfg->cluster_advertise : cfg->listen_tcp);
	if (srv->nic_port)
		with_port(cl->rec.tcp, srv->nic_port, cl->rec.rdma, sizeof cl->rec.rdma);
	for (uint32_t i = 0; i < srv->npools; i++) {
		struct alloc_stats st;

		alloc_get_stats(srv->pools[i].alloc, &st);
		cl->rec.pool_bytes += st.total;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	cl->rec.start_time_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
	snprintf(cl->rec.version, sizeof cl->rec.version, "%s", RMEM_VERSION_STRING);
	cl->lease_ms = cfg->cluster_lease_ms;
	cl->step = member_refresh_step(cl->rec.pool_bytes);
	snprintf(cl->endpoints, sizeof cl->endpoints, "%s", cfg->cluster_etcd);
	config_etcd_tls(cfg, &cl->tls);
	*out = cl;
	return 0;
}

/*
 * The agent's etcd client, and under TLS one read of the server's own key
 * now: a certificate etcd refuses (or a member's this server cannot
 * verify) is a configuration error, said once and fatal at start, where an
 * etcd out of reach is not (the agent keeps trying).
 */
static int member_client(struct member *cl)
{
	/* Short: a member that does not answer costs this much before the next
	 * is tried, and a keepalive must get through well within the lease. */
	unsigned timeout_ms = cl->lease_ms / 6 < 200 ? 200 : cl->lease_ms / 6;
	struct etcd_range r;
	char why[2 * ETCD_TLS_PATH_MAX + 256];
	int rc = etcd_client_new(cl->endpoints, &cl->tls, timeout_ms, &cl->etcd, why, sizeof why);

	if (rc < 0) {
		log_err("cluster: no etcd client: %s", why);
		return rc;
	}
	if (!etcd_tls_any(&cl->tls))
		return 0;
	rc = etcd_range(cl->etcd, cl->key, strlen(cl->key), false, &r);
	if (rc == 0) {
		etcd_range_free(&r);
		log_info("cluster: etcd over TLS: %s answered", etcd_client_endpoint(cl->etcd));
		return 0;
	}
	if (etcd_tls_errno(rc)) {
		log_err("cluster: etcd over TLS: %s", etcd_client_error(cl->etcd));
		return rc;
	}
	log_warn("cluster: etcd over TLS: not checked yet (%s)", etcd_client_error(cl->etcd));
	return 0;
}

int member_start(struct server *srv)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = PUBLISH_MS * 1000 };
	struct member *cl;
	int rc;

	if (!srv->cfg.cluster_etcd[0])
		return 0;
	rc = etcd_global_init(); /* before any thread: libcurl's global state */
	if (rc < 0)
		return rc;
	rc = member_new(srv, &cl);
	if (rc < 0)
		return rc;
	srv->cluster = cl;
	rc = member_client(cl);
	if (rc < 0)
		return rc;
	publish(srv, cl);
	cl->timer = event_new(srv->base, -1, EV_PERSIST, on_publish, srv);
	if (!cl->timer || event_add(cl->timer, &tv) < 0)
		return -ENOMEM;
	atomic_store(&cl->state, MEMBER_JOINING);
	srv->member_state = MEMBER_JOINING;
	rc = pthread_create(&cl->thread, NULL, agent_main, cl);
	if (rc)
		return -rc;
	cl->thread_started = true;
	log_info("cluster: joining as %s (generation %" PRIu64 "%s, tcp %s, rdma %s, lease %u ms, "
		 "refresh step %" PRIu64 " bytes) through %s", cl->key, cl->rec.generation,
		 srv->identity.generation ? ", the memory's" : "", cl->rec.tcp,
		 cl->rec.rdma[0] ? cl->rec.rdma : "off", cl->lease_ms, cl->step, cl->endpoints);
	return 0;
}

void member_stop(struct server *srv)
{
	struct member *cl = srv->cluster;

	if (!cl)
		return;
	if (cl->thread_started) {
		pthread_mutex_lock(&cl->lock);
		cl->stop = true;
		cl->keep_lease = srv->keep_state;
		pthread_cond_signal(&cl->cond);
		pthread_mutex_unlock(&cl->lock);
		pthread_join(cl->thread, NULL);
	}
	member_free(cl);
	srv->cluster = NULL;
	srv->member_state = MEMBER_OFF;
}

const char *member_id(const struct server *srv)
{
	return srv->cluster ? srv->cluster->rec.id : "";
}

uint64_t member_generation(const struct server *srv)
{
	return srv->cluster ? srv->cluster->rec.generation : 0;
}

enum member_state member_state(const struct server *srv)
{
	return srv->cluster ? (enum member_state)atomic_load(&srv->cluster->state) : MEMBER_OFF;
}
