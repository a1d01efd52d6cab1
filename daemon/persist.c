/*
 * persist.c - see persist.h and docs/architecture.md, "Restart without loss":
 * the fd store's plumbing (what systemd hands us, what we hand it), a fresh
 * start, and the end of restored sessions nobody resumed.  The restore
 * itself, its checks and its rebuilding, is restore.c.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "identity.h"
#include "log.h"
#include "persist.h"
#include "restore.h"
#include "scrub.h"
#include "server.h"
#include "session.h"
#include "slots.h"
#include "state.h"

#define STATE_FDNAME "rmem-state"
/* The state memfd's own name, which the fd store keeps with it: who wrote
 * it, for a refusal's log line (state.h, "Versions"). */
#define STATE_MEMFD_NAME STATE_FDNAME " rmemd " RMEM_VERSION_STRING
#define POOL_FDNAME_PREFIX "rmem-pool-"
/* A new state memfd has limits.state_slots slots: one per session,
 * anonymous region and handle, two per named object (tenant.h shares them
 * out).  Pages are touched only as slots are used. */
_Static_assert(CONFIG_SLOT_BYTES == STATE_SLOT_LEN, "rmemd.conf(5) states a slot's cost");

_Static_assert(CONFIG_MAX_POOLS <= STATE_MAX_POOLS, "every pool fits the state header");
_Static_assert(CONFIG_NAME_MAX <= STATE_STR_LEN, "pool and tenant names fit the state");

bool persist_possible(void)
{
	const char *e = getenv("NOTIFY_SOCKET");

	return e && *e;
}

/* ---- the fds systemd handed us --------------------------------------------------- */

static void kept_close(struct restore_fds *k)
{
	if (k->state_fd >= 0)
		close(k->state_fd);
	k->state_fd = -1;
	for (unsigned i = 0; i < CONFIG_MAX_POOLS; i++) {
		if (k->pool_fd[i] >= 0)
			close(k->pool_fd[i]);
		k->pool_fd[i] = -1;
	}
}

/* "rmemd VERSION" from the state memfd's name; a name without one is of
 * a release before 1.4.0, which did not say. */
static void writer_of(int fd, char *out, size_t len)
{
	static const char pre[] = "/memfd:" STATE_FDNAME;
	char path[64], link[256];
	ssize_t n;

	out[0] = '\0';
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof link - 1);
	if (n <= 0)
		return;
	link[n] = '\0';
	if (strncmp(link, pre, strlen(pre)) || link[strlen(pre)] != ' ') {
		snprintf(out, len, "rmemd 1.3 or older");
		return;
	}
	snprintf(out, len, "%.*s", (int)strcspn(link + strlen(pre) + 1, "("),
		 link + strlen(pre) + 1);
	n = (ssize_t)strlen(out);
	while (n > 0 && out[n - 1] == ' ')
		out[--n] = '\0';
}

/* Ours by name; anything else is closed (rmemd takes no sockets from systemd). */
static void take_fds(struct server *srv, struct restore_fds *k)
{
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names);

	memset(k, 0, sizeof *k);
	k->state_fd = -1;
	for (unsigned i = 0; i < CONFIG_MAX_POOLS; i++)
		k->pool_fd[i] = -1;
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		const char *name = names && names[i] ? names[i] : "";
		bool taken = false;

		if (!strcmp(name, STATE_FDNAME) && k->state_fd < 0) {
			k->state_fd = fd;
			writer_of(fd, k->writer, sizeof k->writer);
			taken = true;
		}
		for (uint32_t p = 0; !taken && p < srv->cfg.npools; p++) {
			if (!strncmp(name, POOL_FDNAME_PREFIX, strlen(POOL_FDNAME_PREFIX)) &&
			    !strcmp(name + strlen(POOL_FDNAME_PREFIX), srv->cfg.pools[p].name) &&
			    k->pool_fd[p] < 0) {
				k->pool_fd[p] = fd;
				k->npool_fds++;
				taken = true;
			}
		}
		if (!taken) {
			k->others++;
			if (!strncmp(name, "rmem-", 5) && k->nstale < CONFIG_MAX_POOLS)
				snprintf(k->stale[k->nstale++], sizeof k->stale[0], "%s", name);
			close(fd);
		}
	}
	if (names) {
		for (int i = 0; i < n; i++)
			free(names[i]);
		free(names);
	}
}

/* The store forgets every fd of ours, whatever it holds: stale ones after a
 * failed restore, or what a config without some pool no longer names. */
static void store_forget(const struct server *srv, const struct restore_fds *k)
{
	sd_notify(0, "FDSTOREREMOVE=1\nFDNAME=" STATE_FDNAME);
	for (uint32_t p = 0; p < srv->cfg.npools; p++)
		sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=" POOL_FDNAME_PREFIX "%s", srv->cfg.pools[p].name);
	for (unsigned i = 0; i < k->nstale; i++)
		sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", k->stale[i]);
}

/* FDPOLL=0: a memfd never hangs up, and systemd should not watch it. */
static int store_push(int fd, const char *name)
{
	char msg[128];
	int rc;

	snprintf(msg, sizeof msg, "FDSTORE=1\nFDPOLL=0\nFDNAME=%s", name);
	rc = sd_pid_notify_with_fds(0, 0, msg, &fd, 1);
	if (rc <= 0)
		log_warn("fd store: cannot keep %s (%s): a restart will start fresh", name,
			 rc < 0 ? strerror(-rc) : "no NOTIFY_SOCKET");
	return rc;
}

/* What a restored start runs once it is READY (persist_ready), persist.c's
 * alone: the timer that ends the restored sessions nobody resumed, and the
 * one that says in STATUS= how far the zeroing of free bytes is. */
struct persist_after {
	struct server *srv;
	struct event *restore_timer;
	struct event *scrub_timer;
	unsigned scrub_shown; /* the percentage STATUS= last said, + 1 (0: none yet) */
};

/* ---- the restored sessions nobody resumed -------------------------------------- */

static void on_restore_timer(evutil_socket_t fd, short what, void *arg)
{
	struct server *srv = ((struct persist_after *)arg)->srv;
	struct session *s, *next;
	unsigned n = 0;

	(void)fd;
	(void)what;
	for (s = srv->sessions_first; s; s = next) {
		next = s->next;
		if (s->detached) {
			session_destroy(srv, s);
			n++;
		}
	}
	if (n)
		log_notice("restore: %u session(s) not resumed in time: their regions are back", n);
}

/* ---- the free bytes zeroed after READY (scrub.h) -------------------------------- */

#define SCRUB_STATUS_MS 250

/* STATUS= says how far the pools' scrubs are, until they are done. */
static void on_scrub_timer(evutil_socket_t fd, short what, void *arg)
{
	struct persist_after *pa = arg;
	struct server *srv = pa->srv;
	uint64_t total = 0, left = 0;
	int64_t ms = 0;
	bool done = true;
	unsigned pct;

	(void)fd;
	(void)what;
	for (uint32_t p = 0; p < srv->npools; p++) {
		uint64_t t, l;
		int64_t m;

		if (!srv->pools[p].scrub)
			continue;
		done &= scrub_progress(srv->pools[p].scrub, &t, &l, &m);
		total += t;
		left += l;
		ms = m > ms ? m : ms;
	}
	if (done) {
		log_notice("restore: %llu free bytes zeroed after READY, in %lld ms",
			   (unsigned long long)total, (long long)ms);
		sd_notify(0, "STATUS=serving");
		return;
	}
	/* A line per quarter: the notify socket is not ours to flood (a full
	 * queue would block the loop in sd_notify). */
	pct = total ? (unsigned)((total - left) * 100 / total) : 100;
	if (!pa->scrub_shown || pct / 25 != (pa->scrub_shown - 1) / 25) {
		sd_notifyf(0, "STATUS=serving; zeroing free memory after the restart: %u%%", pct);
		pa->scrub_shown = pct + 1;
	}
	{
		struct timeval tv = { 0, SCRUB_STATUS_MS * 1000 };

		evtimer_add(pa->scrub_timer, &tv);
	}
}

static int scrub_watch(struct server *srv, struct persist_after *pa)
{
	struct timeval tv = { 0, 0 };

	pa->scrub_timer = evtimer_new(srv->base, on_scrub_timer, pa);
	if (!pa->scrub_timer || evtimer_add(pa->scrub_timer, &tv) < 0) {
		log_err("scrub timer: out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* ---- a fresh start ---------------------------------------------------------------- */

static int fresh_state(struct server *srv)
{
	struct state_hdr h;
	uint64_t len = state_size(srv->cfg.state_slots);
	uint8_t *base;
	int fd, rc;

	memset(&h, 0, sizeof h);
	/* New memory, a new identity: it lives as long as this memfd does. */
	rc = identity_draw(&srv->cfg, &srv->identity.generation, srv->identity.id,
			   sizeof srv->identity.id);
	if (rc < 0) {
		log_err("server id: getrandom: %s", strerror(-rc));
		return rc;
	}
	h.generation = srv->identity.generation;
	snprintf(h.server_id, sizeof h.server_id, "%s", srv->identity.id);
	h.nslots = srv->cfg.state_slots;
	h.npools = srv->npools;
	for (uint32_t i = 0; i < srv->npools; i++) {
		snprintf(h.pools[i].name, sizeof h.pools[i].name, "%s", srv->cfg.pools[i].name);
		h.pools[i].size = srv->cfg.pools[i].size;
		h.pools[i].alignment = srv->cfg.pools[i].alignment;
		h.pools[i].page_size = srv->pools[i].page_size;
	}
	fd = memfd_create(STATE_MEMFD_NAME, MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)len) < 0) {
		log_err("state memfd: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		log_err("state memfd: mmap: %s", strerror(errno));
		close(fd);
		return -EIO;
	}
	if (state_hdr_encode(base, &h) != STATE_HDR_LEN) {
		log_err("state header does not encode");
		munmap(base, len);
		close(fd);
		return -EINVAL;
	}
	srv->slots = slots_new(fd, base, srv->cfg.state_slots);
	if (!srv->slots) {
		munmap(base, len);
		close(fd);
		return -ENOMEM;
	}
	return 0;
}

/* New pools the way a start without the fd store opens them (main.c's
 * open_pools: the memlock check, pinning with progress, a line per pool),
 * then a new state, and all of it into the store. */
static int fresh(struct server *srv, int (*open_pools)(struct server *srv))
{
	char name[CONFIG_NAME_MAX + 16];
	int rc = open_pools(srv);

	if (rc < 0)
		return rc;
	rc = fresh_state(srv);
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < srv->npools; i++) {
		snprintf(name, sizeof name, POOL_FDNAME_PREFIX "%s", srv->pools[i].name);
		store_push(srv->pools[i].fd, name);
	}
	/* Last: a state is only ever found with the pools it describes. */
	store_push(slots_fd(srv->slots), STATE_FDNAME);
	return 0;
}

/* ---- persist_open ------------------------------------------------------------------ */

/* The state names more pools, or larger ones, than it did: the new pools
 * go into the store first, then the header is replaced (restore.h).  One
 * pwrite of one whole page at offset 0: the kernel copies a page of a
 * memfd under one check for a fatal signal, from a buffer just written
 * (resident), so a SIGKILL leaves the old header or the new one, never a
 * mix.  A crash before it finds the old header, pools already grown (which
 * pool_adopt accepts) and new pools the header does not name (made anew). */
static int commit_growth(struct server *srv, const struct restore_fds *k)
{
	char name[CONFIG_NAME_MAX + 16];

	if (!k->hdr_changed)
		return 0;
	for (uint32_t p = k->kept_npools; p < srv->npools; p++) {
		snprintf(name, sizeof name, POOL_FDNAME_PREFIX "%s", srv->pools[p].name);
		sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", name);
		store_push(srv->pools[p].fd, name);
	}
	if (pwrite(slots_fd(srv->slots), k->new_hdr, STATE_HDR_LEN, 0) != (ssize_t)STATE_HDR_LEN) {
		log_err("restore: writing the grown state header: %s: exiting, the fd store keeps "
			"the state as it was", strerror(errno));
		return -EIO;
	}
	log_notice("restore: the state now names %u pool(s) at the config's sizes (%u new)",
		   srv->npools, srv->npools - k->kept_npools);
	return 0;
}

/* Says why the kept state is not restored, and how to get out: in the log
 * and in STATUS=, which `systemctl status rmemd` shows. */
static void say_refused(const struct restore_fds *k, const char *why)
{
	const char *fix = k->fix ? k->fix : "restart rmemd once the cause is gone";

	log_err("fd store: not restoring: %s (the state was written by %s): serving nothing, "
		"the fd store keeps every byte; %s, or discard the kept memory on purpose: "
		"systemctl stop rmemd, then start it (under the shipped unit a stop empties the "
		"store), or start rmemd once with --discard-state (rmemd(8), KEPT STATE)",
		why, k->writer[0] ? k->writer : "an unknown rmemd", fix);
	sd_notifyf(0, "STATUS=refused to restore, serving nothing, memory kept: %s; %s, or "
		   "discard it: systemctl stop rmemd, then start (or rmemd --discard-state)",
		   why, fix);
}

int persist_open(struct server *srv, pool_progress_fn progress,
		 int (*open_pools)(struct server *srv), bool discard)
{
	struct restore_fds k;
	char why[512];
	int rc;

	take_fds(srv, &k);
	if (discard) {
		/* The operator's explicit word, and the only one that drops a
		 * state this rmemd could not read. */
		if (k.state_fd >= 0 || k.npool_fds || k.nstale)
			log_warn("fd store: discarding what it keeps, as asked (--discard-state): "
				 "%s, %u pool memfd(s) and %u of pools not in the config: every "
				 "region in them is gone", k.state_fd >= 0 ? "the state" : "no state",
				 k.npool_fds, k.nstale);
		else
			log_notice("fd store: --discard-state: the store holds nothing of ours");
		kept_close(&k);
		store_forget(srv, &k);
		rc = fresh(srv, open_pools);
		goto out;
	}
	if (k.state_fd < 0) {
		/* A fresh start keeps its pools first and its state last, before
		 * READY: pools without a state are a start cut short that never
		 * served, not memory anyone was given. */
		if (k.npool_fds)
			log_notice("fd store: %u pool memfd(s) and no state (a start cut short "
				   "before it served): starting fresh", k.npool_fds);
		else
			log_notice("fd store: nothing to restore%s: starting fresh",
				   k.others ? " (closed fds that are not ours)" : "");
		kept_close(&k);
		store_forget(srv, &k);
		rc = fresh(srv, open_pools);
		goto out;
	}
	why[0] = '\0';
	rc = restore_run(srv, &k, progress, why, sizeof why);
	if (rc < 0) {
		/* What was built goes without touching a byte of the pools or a
		 * slot: the store keeps it all for the next try. */
		slots_freeze(srv->slots);
		srv->keep_state = true;
		/* Pass 1 checked everything pass 2 relies on: only memory can
		 * fail here, and anything else is a bug (restore.c). */
		log_err("restore: %s after the checks%s: exiting, the fd store keeps its state",
			strerror(-rc), rc == -ENOMEM ? "" : " (a bug: please report it)");
		goto out;
	}
	if (rc == 0) {
		rc = commit_growth(srv, &k);
		if (rc < 0) {
			slots_freeze(srv->slots);
			srv->keep_state = true;
			goto out;
		}
		for (unsigned i = 0; i < k.nstale; i++)
			sd_notifyf(0, "FDSTOREREMOVE=1\nFDNAME=%s", k.stale[i]);
		goto out;
	}
	/* Refused: nothing is discarded, nothing is served.  The store is
	 * told nothing, so it keeps what it has across this process and the
	 * next (docs/architecture.md, "Invariant: no path discards memory
	 * without the operator asking"). */
	say_refused(&k, why);
	for (uint32_t p = 0; p < srv->npools; p++)
		pool_close(&srv->pools[p]);
	srv->npools = 0;
	rc = PERSIST_REFUSED;
out:
	kept_close(&k);
	return rc;
}

/* Not in persist_open: the NIC's registration of the pools and the
 * listeners come after it, and however long they take, no client could
 * RESUME meanwhile.  The time restored sessions have starts when clients
 * can reach rmemd. */
int persist_ready(struct server *srv)
{
	uint32_t ms = srv->cfg.lease_timeout_ms ? srv->cfg.lease_timeout_ms : PERSIST_DETACHED_MS;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	struct persist_after *pa;

	if (!srv->restored || srv->after_restore)
		return 0;
	/* Held by srv at once, so that persist_close frees what a failure
	 * below leaves. */
	pa = srv->after_restore = calloc(1, sizeof *pa);
	if (!pa) {
		log_err("restore timers: out of memory");
		return -ENOMEM;
	}
	pa->srv = srv;
	if (scrub_watch(srv, pa) < 0)
		return -ENOMEM;
	pa->restore_timer = evtimer_new(srv->base, on_restore_timer, pa);
	if (!pa->restore_timer || evtimer_add(pa->restore_timer, &tv) < 0) {
		log_err("restore timer: out of memory");
		return -ENOMEM;
	}
	return 0;
}

void persist_keep(struct server *srv)
{
	struct session *s, *next;

	if (!srv->slots)
		return;
	slots_freeze(srv->slots);
	srv->keep_state = true;
	/* Restored sessions nobody resumed have no connection to end them;
	 * their records stay in the frozen state for the next start. */
	for (s = srv->sessions_first; s; s = next) {
		next = s->next;
		if (s->detached)
			session_destroy(srv, s);
	}
}

void persist_close(struct server *srv)
{
	struct persist_after *pa = srv->after_restore;

	if (pa) {
		if (pa->restore_timer)
			event_free(pa->restore_timer);
		if (pa->scrub_timer)
			event_free(pa->scrub_timer);
		free(pa);
	}
	srv->after_restore = NULL;
	slots_free(srv->slots);
	srv->slots = NULL;
}
