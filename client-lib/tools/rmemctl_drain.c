/*
 * rmemctl_drain.c - `rmemctl -e URL cluster drain ID [--wait] [--timeout=S]`
 * and `cluster undrain ID [--wait]`: an operator empties a memory server
 * before it leaves (a reboot, a new machine), and takes it back
 * (docs/architecture.md, "Drain"; docs/operations.md, "Draining a member").
 *
 * The drain is one key, /rmem/<cluster>/drain/<id>, without a lease: etcd
 * is the truth, so it reaches the member wherever rmemctl runs, outlives
 * the member's restarts, and every client reads it in the member's record
 * (which the member rewrites with "draining": 1 once its agent has read the
 * key).  The drain refuses up front, writing nothing, when the other
 * members have less room free than the member holds.  --wait then follows
 * the member's record until it says it holds no region (the record's
 * "regions", which a draining member rewrites whenever it changes).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster_layout.h"
#include "cluster_rec.h"
#include "etcd_client.h"
#include "output.h"
#include "rmemctl.h"

#define POLL_MS 200

/* The members' records, decoded (those that decode). */
struct members {
	struct cluster_rec *recs;
	size_t n;
};

static int members_read(struct etcd_client *etcd, const char *cmd, const char *cluster,
			struct members *m)
{
	struct etcd_range r = { .nkvs = 0 };
	int err = cluster_read(etcd, cmd, cluster, "servers", &r, NULL);

	m->n = 0;
	m->recs = NULL;
	if (err < 0)
		return err;
	m->recs = calloc(r.nkvs ? r.nkvs : 1, sizeof *m->recs);
	if (!m->recs) {
		etcd_range_free(&r);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r.nkvs; i++)
		if (cluster_rec_decode((const char *)r.kvs[i].value, r.kvs[i].value_len,
				       &m->recs[m->n]) == 0)
			m->n++;
	etcd_range_free(&r);
	return 0;
}

static const struct cluster_rec *member_of(const struct members *m, const char *id)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->recs[i].id, id))
			return &m->recs[i];
	return NULL;
}

/* Pieces of redundant named regions that the records place on id. */
static long pieces_on(struct etcd_client *etcd, const char *cmd, const char *cluster,
		      const char *id)
{
	struct etcd_range r = { .nkvs = 0 };
	long n = 0;

	if (cluster_read(etcd, cmd, cluster, "names", &r, NULL) < 0)
		return -1;
	for (size_t i = 0; i < r.nkvs; i++) {
		struct cluster_layout l;

		if (cluster_layout_decode((const char *)r.kvs[i].value, r.kvs[i].value_len, &l))
			continue; /* a plain name's record */
		for (unsigned p = 0; p < l.k + l.r; p++)
			n += !strcmp(l.pieces[p].server, id);
	}
	etcd_range_free(&r);
	return n;
}

static int drain_key(const char *cluster, const char *id, char *key, size_t len)
{
	int n = snprintf(key, len, "/rmem/%s/drain/%s", cluster, id);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

/*
 * Whether the others can take what id holds: the bytes it uses against the
 * free bytes of every other member that is not draining itself, as their
 * records last said.  A lower bound of the need (a redundant region's
 * piece may not go where another of its pieces is), said as such.
 */
static bool room_for(const struct members *m, const struct cluster_rec *me)
{
	uint64_t need = me->pool_bytes - me->free_bytes, free_ = 0;
	char a[32], b[32], one[32];

	for (size_t i = 0; i < m->n; i++)
		if (&m->recs[i] != me && !m->recs[i].draining)
			free_ += m->recs[i].free_bytes;
	if (need <= free_)
		return true;
	format_size(a, sizeof a, need);
	format_size(b, sizeof b, free_);
	fprintf(stderr, "rmemctl: cluster drain: refused: %s holds %s (%" PRIu64 " bytes, %" PRIu64
		" region%s); the other members have %s free (%" PRIu64 " bytes):", me->id, a, need,
		me->regions, me->regions == 1 ? "" : "s", b, free_);
	for (size_t i = 0; i < m->n; i++) {
		if (&m->recs[i] == me)
			continue;
		format_size(one, sizeof one, m->recs[i].free_bytes);
		fprintf(stderr, " %s %s%s", m->recs[i].id, one,
			m->recs[i].draining ? " (draining: not counted)" : "");
	}
	fprintf(stderr, "%s\nNothing was changed; free memory, or add a member, first.\n",
		m->n > 1 ? "" : " none");
	return false;
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Follows id's record until it says draining (on) with no region left, or
 * not draining (!on): 0, or EXIT_FAILURE when it left the set or timeout_s
 * (0: none) passed first.  A progress line on a terminal (stderr), one
 * line per change elsewhere.
 */
static int wait_for(struct ctl *ctl, struct etcd_client *etcd, const char *cluster,
		    const char *id, bool on)
{
	const bool tty = isatty(STDERR_FILENO);
	const int64_t end = ctl->timeout_s ? mono_ms() + (int64_t)ctl->timeout_s * 1000 : 0;
	uint64_t last = UINT64_MAX;

	for (;;) {
		struct members m;
		const struct cluster_rec *me;
		char used[32];

		if (members_read(etcd, "cluster drain", cluster, &m) < 0)
			return EXIT_FAILURE;
		if (!(me = member_of(&m, id))) {
			free(m.recs);
			if (tty)
				fprintf(stderr, "\n");
			fprintf(stderr, "rmemctl: cluster %sdrain: %s left the cluster while waiting\n",
				on ? "" : "un", id);
			return EXIT_FAILURE;
		}
		if (on && me->draining && me->regions == 0) {
			free(m.recs);
			if (tty)
				fprintf(stderr, "\r\033[K");
			printf("%s: drained: nothing is left on it\n", id);
			return 0;
		}
		if (!on && !me->draining) {
			free(m.recs);
			printf("%s: takes new regions and names again\n", id);
			return 0;
		}
		format_size(used, sizeof used, me->pool_bytes - me->free_bytes);
		if (on && me->draining && me->regions != last) {
			if (tty)
				fprintf(stderr, "\r\033[K%s: %" PRIu64 " region%s, %s left", id,
					me->regions, me->regions == 1 ? "" : "s", used);
			else
				fprintf(stderr, "%s: %" PRIu64 " region%s, %s left\n", id, me->regions,
					me->regions == 1 ? "" : "s", used);
			last = me->regions;
		}
		free(m.recs);
		if (end && mono_ms() >= end) {
			long pieces = on ? pieces_on(etcd, "cluster drain", cluster, id) : 0;

			if (tty)
				fprintf(stderr, "\n");
			if (on)
				fprintf(stderr, "rmemctl: cluster drain: %s still holds %" PRIu64
					" region%s after %u s, %ld of them pieces of redundant "
					"named regions; other regions (plain, anonymous) do not move "
					"yet (docs/operations.md, \"Draining a member\")\n", id, last,
					last == 1 ? "" : "s", ctl->timeout_s, pieces);
			else
				fprintf(stderr, "rmemctl: cluster undrain: %s still says draining "
					"after %u s (is it up, and reaching etcd?)\n", id,
					ctl->timeout_s);
			return EXIT_FAILURE;
		}
		nap_ms(POLL_MS);
	}
}

int cluster_drain(struct ctl *ctl, struct etcd_client *etcd, const char *cluster, bool on)
{
	const char *id = ctl->arg2;
	const char *cmd = on ? "cluster drain" : "cluster undrain";
	struct members m;
	const struct cluster_rec *me;
	char key[512], now[32];
	struct timespec ts;
	int64_t deleted = 0;
	int n, err;

	n = drain_key(cluster, id, key, sizeof key);
	if (n < 0) {
		fprintf(stderr, "rmemctl: %s: cluster name or id too long\n", cmd);
		return EXIT_USAGE;
	}
	if (members_read(etcd, cmd, cluster, &m) < 0)
		return EXIT_FAILURE;
	me = member_of(&m, id);
	if (on && !me) {
		fprintf(stderr, "rmemctl: %s: no member %s in cluster %s (rmemctl cluster lists "
			"them)\n", cmd, id, cluster);
		free(m.recs);
		return EXIT_FAILURE;
	}
	if (on && !room_for(&m, me)) {
		free(m.recs);
		return EXIT_FAILURE;
	}
	if (on) {
		char used[32];
		long pieces = pieces_on(etcd, cmd, cluster, id);

		clock_gettime(CLOCK_REALTIME, &ts);
		snprintf(now, sizeof now, "%" PRId64,
			 (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
		err = etcd_put(etcd, key, (size_t)n, now, strlen(now), 0);
		format_size(used, sizeof used, me->pool_bytes - me->free_bytes);
		if (!err)
			printf("%s: draining: %s in %" PRIu64 " region%s to move (%ld piece%s of "
			       "redundant named regions)\n", id, used, me->regions,
			       me->regions == 1 ? "" : "s", pieces, pieces == 1 ? "" : "s");
	} else {
		err = etcd_delete(etcd, key, (size_t)n, false, &deleted);
		if (!err)
			printf("%s: %s\n", id, deleted ? "undrained" : "was not draining");
	}
	free(m.recs);
	if (err < 0) {
		fprintf(stderr, "rmemctl: %s: writing %s in etcd: %s (%s)\n", cmd, key,
			strerror(-err), etcd_client_error(etcd));
		return EXIT_FAILURE;
	}
	fflush(stdout);
	if (!ctl->wait || (!on && !me))
		return 0;
	return wait_for(ctl, etcd, cluster, id, on);
}
