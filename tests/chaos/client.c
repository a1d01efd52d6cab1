/*
 * client.c - one chaos client process: allocates regions of random sizes,
 * checks each is all zero when fresh, fills it with data from its own seed,
 * reads it back; keeps some, re-reads them later, frees others.  Its session
 * may vanish under it (frozen past its lease): every call then fails with
 * -ECONNRESET, and it reconnects, forgets what it held and checks that the
 * old regions are out of its reach.
 *
 * Some regions are named ("chaos/<seed>/<n>", bytes from the name): once
 * filled, the name goes into the driver's names file; the creator keeps its
 * handle among the others until it drops it, is reset or is killed - the
 * name outlives all that.  Other clients adopt names from the file: open
 * read-only, verify, release the handle and unlink the name (-ENOENT when
 * another adopter was first is no error).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos.h"
#include "harness.h"

#define MAX_HELD     16
#define MAX_BYTES    (256u << 10)
/* Connect and per-call timeout: generous, the machine may be busy. */
#define CALL_MS      20000
/* Named regions are small: the names killed clients leave wait for an
 * adopter, and the pool (64 MiB) must keep room for everyone. */
#define NAMED_MAX_BYTES 8192
/* Adopters look at the end of the names file: the newest names. */
#define NAMES_TAIL 4096
/* Connection attempts in a row before the client gives up. */
#define MAX_CONNECT_FAILS 50

struct held {
	struct rmem_region r;
	uint64_t seed;
};

struct client {
	const struct chaos_client_arg *arg;
	rmem_client *c;
	struct held held[MAX_HELD];
	unsigned nheld;
	/* The regions of the session before the last reset, to probe after it. */
	struct rmem_region lost;
	bool have_lost;
	uint64_t rng;
	unsigned named_n;          /* names created so far: the next name's <n> */
	char killed[32768];        /* the killed file, read by pick_name() */
	uint8_t *want, *got;
	struct chaos_report rep;
};

static bool told_to_stop(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

/* Mostly small regions, some large: many calls, and some long streams. */
static uint64_t pick_size(struct client *cl)
{
	uint64_t r = chaos_rand(&cl->rng) % 100;

	if (r < 55)
		return chaos_between(&cl->rng, 1, 4096);
	if (r < 90)
		return chaos_between(&cl->rng, 4097, 64 << 10);
	return chaos_between(&cl->rng, (64 << 10) + 1, MAX_BYTES);
}

static int reconnect(struct client *cl)
{
	for (int fails = 0;; fails++) {
		int rc;

		if (told_to_stop(cl->arg->stop_fd))
			return -ECANCELED;
		rc = client_connect(cl->arg->endpoint, CALL_MS, &cl->c);
		if (rc == 0)
			return 0;
		cl->c = NULL;
		cl->rep.connect_fails++;
		if (fails >= MAX_CONNECT_FAILS)
			return rc;
		sleep_ms(20);
	}
}

/* A failed call: -ECONNRESET says the session is gone (a lease that ran
 * out), anything else is an error.  Either way the client starts afresh. */
static int failed(struct client *cl, int rc)
{
	if (rc == -ECONNRESET) {
		cl->rep.resets++;
	} else {
		cl->rep.errors++;
		cl->rep.last_error = rc;
	}
	if (cl->nheld) {
		cl->lost = cl->held[0].r;
		cl->have_lost = true;
	}
	cl->nheld = 0;
	rmem_close(cl->c);
	cl->c = NULL;
	rc = reconnect(cl);
	if (rc < 0)
		return rc;
	cl->rep.reconnects++;
	/* A region of the dead session must be out of reach of the new one. */
	if (cl->have_lost) {
		if (rmem_read(cl->c, &cl->lost, 0, cl->got, 1) == 0)
			cl->rep.foreign++;
		cl->have_lost = false;
	}
	return 0;
}

/* Reads h back whole and compares it with what was written. */
static int verify(struct client *cl, const struct held *h)
{
	size_t len = (size_t)h->r.length;
	int rc = rmem_read(cl->c, &h->r, 0, cl->got, len);

	if (rc < 0)
		return rc;
	cl->rep.ops++;
	fill_random(cl->want, len, h->seed);
	if (memcmp(cl->want, cl->got, len) != 0)
		cl->rep.mismatches++;
	else
		cl->rep.verified += len;
	return 0;
}

/* A region just had (h, its first len bytes used): counted and held; it
 * must read as zeros (else foreign); then filled from its seed (the name's,
 * or the next of the client's generator), written and verified. */
static int fill_new(struct client *cl, struct held *h, size_t len, const char *name)
{
	int rc;

	cl->rep.ops++;
	cl->nheld++;
	rc = rmem_read(cl->c, &h->r, 0, cl->got, len);
	if (rc < 0)
		return rc;
	if (!all_zero(cl->got, len))
		cl->rep.foreign++;
	h->seed = name ? chaos_name_seed(name) : chaos_rand(&cl->rng);
	fill_random(cl->want, len, h->seed);
	rc = rmem_write(cl->c, &h->r, 0, cl->want, len);
	if (rc < 0)
		return rc;
	cl->rep.ops++;
	return verify(cl, h);
}

static int add_region(struct client *cl)
{
	struct held *h = &cl->held[cl->nheld];
	uint64_t size = pick_size(cl);
	size_t len;
	int rc = rmem_alloc(cl->c, size, 0, &h->r);

	if (rc == -ENOMEM) {
		cl->rep.enomem++;
		return 0;
	}
	if (rc < 0)
		return rc;
	/* Regions are rounded up; the client writes every byte it got. */
	len = h->r.length <= MAX_BYTES ? (size_t)h->r.length : MAX_BYTES;
	h->r.length = len;
	return fill_new(cl, h, len, NULL);
}

static int drop_region(struct client *cl, unsigned i)
{
	int rc = rmem_free(cl->c, &cl->held[i].r);

	if (rc < 0)
		return rc;
	cl->rep.ops++;
	cl->held[i] = cl->held[--cl->nheld];
	return 0;
}

/* ---- named regions ---------------------------------------------------------- */

/* Appends name to the names file in one write (O_APPEND: lines stay whole). */
static int record_name(struct client *cl, const char *name)
{
	char line[RMEM_NAME_MAX + 2];
	int n = snprintf(line, sizeof line, "%s\n", name);
	int fd = open(cl->arg->names_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	ssize_t w;

	if (fd < 0)
		return -errno;
	w = write(fd, line, (size_t)n);
	close(fd);
	return w == n ? 0 : -EIO;
}

/* Creates the next name, checks it fresh (zero), fills it from the name,
 * reads it back and only then records it: an adopter never sees it half
 * written.  The handle stays held like any region. */
static int add_named(struct client *cl)
{
	struct held *h = &cl->held[cl->nheld];
	char name[64];
	int rc;

	snprintf(name, sizeof name, CHAOS_NAME_PREFIX "%" PRIu64 "/%u", cl->arg->seed,
		 cl->named_n++);
	rc = rmem_create(cl->c, name, chaos_between(&cl->rng, 1, NAMED_MAX_BYTES), 0, &h->r);
	if (rc == -ENOMEM) {
		cl->rep.enomem++;
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = fill_new(cl, h, (size_t)h->r.length, name);
	if (rc < 0)
		return rc;
	rc = record_name(cl, name);
	if (rc == 0)
		cl->rep.named_created++;
	return rc;
}

/* The killed file (the seeds of killed clients, one a line), "\n" first;
 * "\n" alone when it cannot be read. */
static void read_killed(struct client *cl, char *buf, size_t cap)
{
	int fd = open(cl->arg->killed_path, O_RDONLY | O_CLOEXEC);
	ssize_t got = fd < 0 ? -1 : read(fd, buf + 1, cap - 2);

	if (fd >= 0)
		close(fd);
	buf[0] = '\n';
	buf[got > 0 ? got + 1 : 1] = 0;
}

/* Whether name's creator ("chaos/<seed>/<n>") is a line of killed. */
static bool creator_killed(const char *killed, const char *name)
{
	const char *p = name + strlen(CHAOS_NAME_PREFIX), *slash = strchr(p, '/');
	char seed[32];

	if (!slash || (size_t)(slash - p) + 3 > sizeof seed)
		return false;
	snprintf(seed, sizeof seed, "\n%.*s\n", (int)(slash - p), p);
	return strstr(killed, seed) != NULL;
}

/* The last NAMES_TAIL bytes of the names file, "" when there are none; from
 * the middle of the file the first line may be cut, and it is skipped. */
static char *names_tail(struct client *cl, char *buf)
{
	int fd = open(cl->arg->names_path, O_RDONLY | O_CLOEXEC);
	off_t end = fd < 0 ? -1 : lseek(fd, 0, SEEK_END);
	off_t from = end > NAMES_TAIL ? end - NAMES_TAIL : 0;
	ssize_t got = end < 0 ? -1 : pread(fd, buf, (size_t)(end - from), from);
	char *p = buf;

	if (fd >= 0)
		close(fd);
	buf[got > 0 ? got : 0] = 0;
	if (from > 0 && (p = strchr(buf, '\n')) != NULL)
		p++;
	return p ? p : buf + strlen(buf);
}

/*
 * A whole line of the names file's tail that another client wrote, half
 * the time one whose creator the driver killed if there is one (*orphan
 * says whether it is); name "" when there is none.  The killed file is read
 * first, so an orphan's creator was dead before the caller opens it.
 */
static void pick_name(struct client *cl, char *name, size_t cap, bool *orphan)
{
	char *killed = cl->killed;
	char buf[NAMES_TAIL + 1], own[40], *lines[NAMES_TAIL / 8], *orphans[NAMES_TAIL / 8];
	char *p, *nl, *pick = NULL;
	unsigned n = 0, no = 0;

	name[0] = 0;
	read_killed(cl, killed, sizeof cl->killed);
	snprintf(own, sizeof own, CHAOS_NAME_PREFIX "%" PRIu64 "/", cl->arg->seed);
	/* Only whole lines: the last may be cut while its writer is at it. */
	for (p = names_tail(cl, buf); (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		*nl = 0;
		if (!*p || !strncmp(p, own, strlen(own)) || n == sizeof lines / sizeof lines[0])
			continue;
		lines[n++] = p;
		if (creator_killed(killed, p))
			orphans[no++] = p;
	}
	/* Half the time, any line: the orphans' names, once adopted, stay in
	 * the tail as -ENOENT, and the others must not pile up meanwhile. */
	if (no && chaos_rand(&cl->rng) % 2) {
		pick = orphans[chaos_rand(&cl->rng) % no];
	} else if (n) {
		pick = lines[chaos_rand(&cl->rng) % n];
		no = creator_killed(killed, pick);
	}
	*orphan = no > 0;
	if (pick && strlen(pick) < cap)
		memcpy(name, pick, strlen(pick) + 1);
}

/* Another client's name: open read-only, verify, release, unlink. */
static int adopt_named(struct client *cl)
{
	struct rmem_region r;
	char name[RMEM_NAME_MAX + 1];
	size_t len;
	bool orphan;
	int rc;

	pick_name(cl, name, sizeof name, &orphan);
	if (!name[0])
		return 0;
	rc = rmem_open(cl->c, name, RMEM_READ, &r);
	if (rc == -ENOENT) {
		cl->rep.named_gone++;
		return 0;
	}
	if (rc < 0)
		return rc;
	cl->rep.ops++;
	if (r.flags != RMEM_READ || r.length > MAX_BYTES)
		return -EPROTO;
	len = (size_t)r.length;
	rc = rmem_read(cl->c, &r, 0, cl->got, len);
	if (rc < 0)
		return rc;
	cl->rep.ops++;
	fill_random(cl->want, len, chaos_name_seed(name));
	if (memcmp(cl->want, cl->got, len) != 0) {
		cl->rep.mismatches++;
	} else {
		cl->rep.verified += len;
		cl->rep.named_adopted++;
		cl->rep.named_orphans += orphan;
	}
	rc = rmem_free(cl->c, &r);
	if (rc < 0)
		return rc;
	rc = rmem_unlink(cl->c, name);
	if (rc == -ENOENT)
		cl->rep.named_gone++;
	else if (rc == 0)
		cl->rep.named_unlinked++;
	return rc == -ENOENT ? 0 : rc;
}

static int step(struct client *cl)
{
	uint64_t dice = chaos_rand(&cl->rng) % 10;
	uint64_t named = chaos_rand(&cl->rng) % 100;
	unsigned i;

	/* Adopting more often than creating: the names killed clients leave
	 * behind do not pile up. */
	if (named < 4 && cl->nheld < MAX_HELD)
		return add_named(cl);
	if (named < 12)
		return adopt_named(cl);

	if (cl->nheld == 0 || (dice < 5 && cl->nheld < MAX_HELD))
		return add_region(cl);
	i = (unsigned)(chaos_rand(&cl->rng) % cl->nheld);
	if (dice < 8)
		return verify(cl, &cl->held[i]);
	return drop_region(cl, i);
}

static int run(struct client *cl)
{
	int rc = reconnect(cl);

	if (rc < 0)
		return rc == -ECANCELED ? 0 : rc;
	while (!told_to_stop(cl->arg->stop_fd)) {
		rc = step(cl);
		if (rc < 0) {
			rc = failed(cl, rc);
			if (rc == -ECANCELED)
				break;
			if (rc < 0 && !cl->c)
				return rc;
		}
	}
	/* A client thawed just before the end may not have called since: one
	 * last call shows whether its session outlived the freeze. */
	if (cl->c) {
		struct rmem_stats st;

		rc = rmem_stats(cl->c, &st);
		if (rc == -ECONNRESET) {
			cl->rep.resets++;
			cl->nheld = 0;
			rmem_close(cl->c);
			cl->c = NULL;
		} else if (rc < 0) {
			cl->rep.errors++;
			cl->rep.last_error = rc;
		}
	}
	/* Half the survivors free what they hold, half leave it to the daemon. */
	if (cl->c && chaos_rand(&cl->rng) % 2) {
		while (cl->nheld && drop_region(cl, 0) == 0)
			;
	}
	rmem_close(cl->c);
	cl->c = NULL;
	return 0;
}

int chaos_client_main(int wfd, void *arg)
{
	struct client *cl = calloc(1, sizeof *cl);
	int rc;

	if (!cl)
		return 3;
	cl->arg = arg;
	cl->rng = cl->arg->seed;
	cl->want = malloc(MAX_BYTES);
	cl->got = malloc(MAX_BYTES);
	if (!cl->want || !cl->got)
		return 3;
	rc = run(cl);
	if (rc < 0) {
		cl->rep.errors++;
		cl->rep.last_error = rc;
	}
	if (write(wfd, &cl->rep, sizeof cl->rep) != (ssize_t)sizeof cl->rep)
		return 4;
	free(cl->want);
	free(cl->got);
	free(cl);
	return 0;
}
