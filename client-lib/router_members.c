/*
 * router_members.c - the cluster client's table of servers: what etcd
 * says of each (its record, whether its key is there), the client this
 * process holds on it (connected on first use), placement by free bytes,
 * and what a server's loss means to a caller (-EHOSTDOWN).
 *
 * A server keeps its slot for the client's whole life, also when its key
 * goes and comes back: region handles name the slot (CLUSTER_REGION_TAG).
 * Its client is replaced only when it lost the server for good and the
 * server came back: as a new process (a new start_time_ms in its record),
 * or with its key gone and put again (a new lease); the old one is closed
 * once no call that began before the replacement is left (members_enter,
 * members_retire: the redundant regions retire their state the same way),
 * since another thread may still be inside it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "router_int.h"
#include "randbytes.h"
#include "single.h"

/* Each of the list's, in the order retired (cl NULL: the router closes). */
static void retirees_run(struct router *cl, struct retiree *r)
{
	struct retiree *rev = NULL;

	/* (Retired onto the head: the oldest last.) */
	while (r) {
		struct retiree *next = r->next;

		r->next = rev;
		rev = r;
		r = next;
	}
	while (rev) {
		struct retiree *next = rev->next;

		rev->fn(cl, rev);
		rev = next;
	}
}

/* A member's client that was replaced, closed when no call holds it. */
struct old_client {
	struct retiree node; /* first: the retiree is the whole */
	rmem_client *c;
};

static void old_client_close(struct router *cl, struct retiree *self)
{
	struct old_client *o = (struct old_client *)self;

	(void)cl;
	single_close(o->c);
	free(o);
}

int members_init(struct router *cl)
{
	cl->members = calloc(CLUSTER_MAX_SERVERS, sizeof(*cl->members));
	if (!cl->members)
		return -ENOMEM;
	for (size_t i = 0; i < CLUSTER_MAX_SERVERS; i++)
		pthread_mutex_init(&cl->members[i].conn_mu, NULL);
	if (getrandom(&cl->rng, sizeof(cl->rng), 0) != sizeof(cl->rng) || cl->rng == 0)
		cl->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)cl;
	return 0;
}

void members_fini(struct router *cl)
{
	if (!cl->members)
		return;
	/* No call is left: what they could have held goes now. */
	retirees_run(NULL, cl->draining);
	retirees_run(NULL, cl->retired);
	cl->draining = cl->retired = NULL;
	for (size_t i = 0; i < cl->nmembers; i++)
		single_close(cl->members[i].client);
	for (size_t i = 0; i < CLUSTER_MAX_SERVERS; i++)
		pthread_mutex_destroy(&cl->members[i].conn_mu);
	free(cl->members);
	cl->members = NULL;
}

/* Under mu. */
static struct member *find_locked(struct router *cl, const char *id, uint32_t *slot)
{
	for (size_t i = 0; i < cl->nmembers; i++)
		if (!strcmp(cl->members[i].rec.id, id)) {
			if (slot)
				*slot = (uint32_t)i;
			return &cl->members[i];
		}
	return NULL;
}

/* Under mu.  A server beyond the table's size is not used (it never gets a
 * slot); the others go on.  The slot, or -1. */
static long put_locked(struct router *cl, const struct cluster_rec *rec, int64_t key_rev)
{
	struct member *m = find_locked(cl, rec->id, NULL);

	if (!m) {
		if (cl->nmembers == CLUSTER_MAX_SERVERS)
			return -1;
		m = &cl->members[cl->nmembers++];
	} else if (!m->present || m->key_rev != key_rev ||
		   m->rec.start_time_ms != rec->start_time_ms ||
		   m->rec.generation != rec->generation) {
		/* Back, or another key or process than the one seen last
		 * (a deletion this client never saw: a full read after a
		 * compaction): whatever happened meanwhile was missed. */
		m->moves++;
	}
	/* A failed server whose key comes back (a new lease: it restarted,
	 * or lost etcd for a while) is worth a new connection. */
	if (m->failed && (!m->present || m->key_rev != key_rev))
		m->back = true;
	m->rec = *rec;
	m->present = true;
	m->key_rev = key_rev;
	m->free_est = rec->free_bytes;
	return m - cl->members;
}

/* Under mu: m's key left the set. */
static void gone_locked(struct member *m)
{
	if (m->present)
		m->moves++;
	m->present = false;
}

void members_put(struct router *cl, const struct cluster_rec *rec, int64_t key_rev)
{
	pthread_mutex_lock(&cl->mu);
	(void)put_locked(cl, rec, key_rev);
	pthread_mutex_unlock(&cl->mu);
}

void members_gone(struct router *cl, const char *id)
{
	struct member *m;

	pthread_mutex_lock(&cl->mu);
	m = find_locked(cl, id, NULL);
	if (m)
		gone_locked(m);
	pthread_mutex_unlock(&cl->mu);
}

void members_only(struct router *cl, const struct cluster_rec *recs, const int64_t *key_revs,
		  size_t n)
{
	bool in[CLUSTER_MAX_SERVERS] = { false };

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < n; i++) {
		long s = put_locked(cl, &recs[i], key_revs[i]);

		if (s >= 0)
			in[s] = true;
	}
	for (size_t i = 0; i < cl->nmembers; i++)
		if (!in[i])
			gone_locked(&cl->members[i]);
	pthread_mutex_unlock(&cl->mu);
}

uint64_t members_epoch_locked(struct router *cl, uint32_t slot)
{
	const struct member *m = &cl->members[slot];

	/* A new client's resumes start again at 0: its connect moved moves. */
	return (uint64_t)m->moves << 32 | single_resumes(m->client);
}

size_t members_present(struct router *cl)
{
	size_t n = 0;

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->nmembers; i++)
		n += cl->members[i].present && !cl->members[i].failed;
	pthread_mutex_unlock(&cl->mu);
	return n;
}

int members_find(struct router *cl, const char *id, uint32_t *slot)
{
	int rc;

	pthread_mutex_lock(&cl->mu);
	rc = find_locked(cl, id, slot) ? 0 : -ENOENT;
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

static bool tried_has(const uint64_t *tried, size_t i)
{
	return tried[i / 64] >> (i % 64) & 1;
}

/* A failed member whose server came back as a new process may be used
 * again (members_client reconnects). */
static bool retry(const struct member *m)
{
	return m->back || m->rec.start_time_ms != m->conn_start_ms;
}

static bool usable(const struct member *m)
{
	return m->present && (!m->failed || retry(m));
}

bool members_refused_room(int err)
{
	return err == -ENOMEM || err == -EDQUOT || err == -ESHUTDOWN;
}

bool members_draining_locked(const struct router *cl, uint32_t slot)
{
	return slot < cl->nmembers && cl->members[slot].present &&
	       cl->members[slot].rec.draining;
}

/* Keeps to the server of the last placement while it can hold size and
 * its free bytes are within an eighth of the chosen one's.  A client's
 * allocations then come in runs on one connection, batched and answered
 * by a server still busy-polling after its last reply, instead of one
 * request at a time to each server in turn (measured with three servers
 * on one host: 1.6x the round trip and a third of the pairs/s).  Capacity
 * still decides: the run ends once the servers drift an eighth apart. */
static void keep_last(const struct router *cl, const uint64_t *tried, uint64_t size,
		      uint32_t *slot)
{
	const struct member *best = &cl->members[*slot], *m;
	uint32_t last;

	if (!cl->last_placed)
		return;
	last = cl->last_placed - 1;
	if (last >= cl->nmembers || last == *slot || tried_has(tried, last) ||
	    cl->members[last].rec.draining)
		return;
	m = &cl->members[last];
	if (usable(m) && m->free_est >= size &&
	    m->free_est >= best->free_est - best->free_est / 8)
		*slot = last;
}

int members_pick(struct router *cl, uint64_t size, const uint64_t *tried, uint32_t *slot)
{
	uint32_t cand[CLUSTER_MAX_SERVERS];
	size_t n = 0, any = 0;
	int rc = 0;

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->nmembers; i++) {
		const struct member *m = &cl->members[i];

		/* A draining server takes nothing new (it would refuse it). */
		if (!usable(m) || m->rec.draining)
			continue;
		any++;
		/* The estimate may be stale either way: a server whose record
		 * says too little is still tried once the others said no. */
		if (!tried_has(tried, i))
			cand[n++] = (uint32_t)i;
	}
	if (n == 0) {
		rc = any ? -ENOMEM : -EHOSTDOWN;
	} else {
		/* Two random choices; the one with more free bytes (as far as
		 * this client knows) wins.  Servers that cannot hold size by
		 * their record lose to any that can.  (cl->rng: under mu.) */
		uint32_t a = cand[rand_xorshift(&cl->rng) % n];
		uint32_t b = cand[rand_xorshift(&cl->rng) % n];
		const struct member *ma = &cl->members[a], *mb = &cl->members[b];
		bool fa = ma->free_est >= size, fb = mb->free_est >= size;

		if (fa != fb)
			*slot = fa ? a : b;
		else
			*slot = ma->free_est >= mb->free_est ? a : b;
		/* With none fitting by the records, the best of all goes first. */
		if (!fa && !fb)
			for (size_t i = 0; i < n; i++)
				if (cl->members[cand[i]].free_est > cl->members[*slot].free_est)
					*slot = cand[i];
		keep_last(cl, tried, size, slot);
	}
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

void members_placed(struct router *cl, uint32_t slot, uint64_t size, int rc)
{
	struct member *m = &cl->members[slot];

	pthread_mutex_lock(&cl->mu);
	if (rc == 0) {
		m->free_est = m->free_est > size ? m->free_est - size : 0;
		cl->last_placed = slot + 1;
	}
	else if (rc == 1)
		/* freed: the record may not move (the server publishes only
		 * changes of a step), so this client's own frees count here */
		m->free_est = m->free_est + size < m->rec.pool_bytes ? m->free_est + size :
								       m->rec.pool_bytes;
	else if (rc == -ENOMEM && m->free_est >= size)
		m->free_est = size - 1;
	pthread_mutex_unlock(&cl->mu);
}

void members_tag(struct rmem_region *r, uint32_t slot)
{
	r->reserved[0] = (uint64_t)CLUSTER_REGION_TAG << 32 | slot;
	r->reserved[1] = 0;
}

int members_slot_of(struct router *cl, const struct rmem_region *r, uint32_t *slot)
{
	uint64_t v;
	size_t n;

	if (!r)
		return -EINVAL;
	v = r->reserved[0];
	if (v >> 32 != CLUSTER_REGION_TAG)
		return -EINVAL;
	pthread_mutex_lock(&cl->mu);
	n = cl->nmembers;
	pthread_mutex_unlock(&cl->mu);
	if ((v & 0xffffffffu) >= n)
		return -EINVAL;
	*slot = (uint32_t)v;
	return 0;
}

void members_retire(struct router *cl, struct retiree *r)
{
	pthread_mutex_lock(&cl->mu);
	r->next = cl->retired;
	cl->retired = r;
	pthread_mutex_unlock(&cl->mu);
}

unsigned members_enter(struct router *cl)
{
	unsigned epoch;

	pthread_mutex_lock(&cl->mu);
	epoch = cl->cur;
	cl->calls[epoch]++;
	pthread_mutex_unlock(&cl->mu);
	return epoch;
}

/*
 * A grace period as RCU has it, with two counts: what is retired while
 * calls of epoch cur may hold it waits for the flip of cur; after the flip
 * new calls count in the other epoch, and once the old epoch's count is 0
 * no call can hold it.  One flip at a time: retirees wait while another
 * batch drains.
 */
void members_leave(struct router *cl, unsigned epoch)
{
	struct retiree *done = NULL;

	pthread_mutex_lock(&cl->mu);
	cl->calls[epoch]--;
	if (!cl->draining && cl->retired) {
		cl->draining = cl->retired;
		cl->retired = NULL;
		cl->cur ^= 1;
	}
	if (cl->draining && cl->calls[cl->cur ^ 1] == 0) {
		done = cl->draining;
		cl->draining = NULL;
	}
	pthread_mutex_unlock(&cl->mu);
	retirees_run(cl, done);
}

/* Connects slot's client with the cluster's options, and registers the kept
 * buffers on it.  Under the member's conn_mu. */
static int connect_member(struct router *cl, struct member *m, const char *endpoint,
			  uint64_t start_ms)
{
	rmem_client *c;
	int err = single_connect(endpoint, &cl->opts, &c);

	if (err)
		return err;
	pthread_mutex_lock(&cl->reg_mu);
	for (size_t i = 0; i < cl->nbufs && !err; i++)
		err = single_register_buf(c, cl->bufs[i].buf, cl->bufs[i].len);
	if (!err) {
		/* Another thread may be inside the old one: it is closed
		 * once the calls that began before now have left. */
		struct old_client *old = malloc(sizeof(*old));

		pthread_mutex_lock(&cl->mu);
		if (m->client && !old) {
			err = -ENOMEM;
		} else if (m->client) {
			*old = (struct old_client){ .node.fn = old_client_close, .c = m->client };
			old->node.next = cl->retired;
			cl->retired = &old->node;
			old = NULL;
		}
		if (!err) {
			m->client = c;
			m->failed = false;
			m->back = false;
			m->conn_start_ms = start_ms;
			m->moves++; /* a new session: the old one's past is not its */
		}
		pthread_mutex_unlock(&cl->mu);
		free(old);
	}
	pthread_mutex_unlock(&cl->reg_mu);
	if (err)
		single_close(c);
	return err;
}

int members_client(struct router *cl, uint32_t slot, rmem_client **out)
{
	struct member *m = &cl->members[slot];
	char endpoint[CLUSTER_ADDR_MAX];
	uint64_t start_ms;
	int err = 0;

	pthread_mutex_lock(&cl->mu);
	if (!m->present)
		err = -EHOSTDOWN;
	else if (m->client && !m->failed)
		*out = m->client;
	else if (m->failed && !retry(m))
		err = -EHOSTDOWN; /* lost, and not back */
	else
		err = 1;          /* connect (again) */
	memcpy(endpoint, m->rec.tcp, sizeof(endpoint));
	start_ms = m->rec.start_time_ms;
	pthread_mutex_unlock(&cl->mu);
	if (err <= 0)
		return err;

	pthread_mutex_lock(&m->conn_mu);
	/* Another thread may have connected meanwhile. */
	pthread_mutex_lock(&cl->mu);
	err = m->client && !m->failed ? 0 : m->failed && !retry(m) ? -EHOSTDOWN : 1;
	if (!err)
		*out = m->client;
	pthread_mutex_unlock(&cl->mu);
	if (err == 1) {
		err = connect_member(cl, m, endpoint, start_ms);
		if (!err) {
			pthread_mutex_lock(&cl->mu);
			*out = m->client;
			pthread_mutex_unlock(&cl->mu);
		} else if (err == -ECONNREFUSED || err == -ETIMEDOUT || err == -ECONNRESET ||
			   err == -EHOSTUNREACH || err == -ENETUNREACH) {
			/* Its key is there, the server is not (it died within
			 * its lease): not tried again, so no call waits on it,
			 * until its key changes as above. */
			pthread_mutex_lock(&cl->mu);
			m->failed = true;
			m->back = false;
			m->conn_start_ms = start_ms;
			pthread_mutex_unlock(&cl->mu);
			err = -EHOSTDOWN;
		}
	}
	pthread_mutex_unlock(&m->conn_mu);
	return err;
}

int members_err(struct router *cl, uint32_t slot, int err)
{
	struct member *m = &cl->members[slot];

	/* The member's client is broken for good (it already tried to resume
	 * for opts.resume_ms): so is every region on that server, for us. */
	if (err != -ECONNRESET && err != -EPIPE && err != -ECONNREFUSED && err != -EHOSTDOWN)
		return err;
	pthread_mutex_lock(&cl->mu);
	if (m->client)
		m->failed = true;
	pthread_mutex_unlock(&cl->mu);
	return -EHOSTDOWN;
}

size_t members_connected(struct router *cl, rmem_client **out, uint32_t *slots, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&cl->mu);
	for (size_t i = 0; i < cl->nmembers && n < max; i++)
		if (cl->members[i].client && !cl->members[i].failed) {
			out[n] = cl->members[i].client;
			if (slots)
				slots[n] = (uint32_t)i;
			n++;
		}
	pthread_mutex_unlock(&cl->mu);
	return n;
}
