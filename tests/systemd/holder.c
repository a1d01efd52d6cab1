/*
 * holder - a client that stays connected across restarts of rmemd, for
 * tests/systemd/test_resume.sh.  Uses only <rmem.h>, as an application does.
 *
 *   holder ENDPOINT TRANSPORT NAME LOG [RESUME_MS]
 *
 * Connects (TRANSPORT "rdma" or "tcp", checked as rwcheck does) with
 * opts.resume_ms = RESUME_MS (default 60000), creates the named region NAME
 * and an anonymous region, both seeded with a pattern, opens NAME again
 * read-only, and a word for atomics.  Then loops, never reconnecting by
 * itself: read both regions (the anonymous one, and NAME through the
 * read-only handle) and compare every byte with the last pattern written and
 * acknowledged, then write the next, counter-stamped, pattern to both.  So
 * the first read after a restart proves the bytes survived it, through the
 * struct rmem_region values taken before it.
 *
 * Lines appended to LOG (one fprintf + fflush each):
 *   ready ID           set up; ID is the anonymous region's id
 *   iter N             every 10th iteration done (N iterations so far)
 *   pause MS OP N      a call that took more than PAUSE_MS: the client-visible
 *                      pause, from the call that met the broken connection to
 *                      its success (the library resumed and retried inside it)
 *   idle N             LOG.idle appeared: the word read, then no call in
 *                      flight until LOG.faa appears
 *   faa RC MS          LOG.faa: one rmem_faa(word, +1), its result and time
 *   word OLD NEW       the word before and after it (NEW is OLD or OLD + 1)
 *   FAIL ...           something did not verify; exits 1
 *   done N             LOG.stop appeared: verified, freed, unlinked, closed;
 *                      exits 0
 * The test steers it with those files, not signals: a signal would interrupt
 * the library's own waits, which is not what this test is about.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rmem.h>

#define REGION_BYTES (256u << 10)
/* Longer than any call takes under TCG while rmemd runs. */
#define PAUSE_MS 1000

static FILE *log_file;
static const char *logname;

/* Whether the test created LOG.SUFFIX. */
static int asked(const char *suffix)
{
	char path[4096];

	snprintf(path, sizeof path, "%s.%s", logname, suffix);
	return access(path, F_OK) == 0;
}

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(log_file, fmt, ap);
	va_end(ap);
	fputc('\n', log_file);
	fflush(log_file);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Pattern number n of a region: differs at every offset, per region, per n. */
static void fill(unsigned char *buf, size_t len, uint64_t n, uint64_t which)
{
	uint64_t x = (n * 2654435761u) ^ (which << 40) ^ 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, 8);
	}
	memcpy(buf, &n, sizeof n); /* the counter stamp */
}

struct holder {
	rmem_client *c;
	struct rmem_region anon, named, ro, word;
	unsigned char *want, *got;
	uint64_t n; /* the pattern last written and acknowledged */
};

/* Times one call; a long one is a pause, logged. */
static void timed(uint64_t t0, const char *op, uint64_t n)
{
	uint64_t dt = now_ms() - t0;

	if (dt > PAUSE_MS)
		say("pause %llu %s %llu", (unsigned long long)dt, op, (unsigned long long)n);
}

static int check(struct holder *h, const struct rmem_region *r, uint64_t which, const char *what)
{
	uint64_t t0 = now_ms();
	int rc;

	memset(h->got, 0, REGION_BYTES);
	rc = rmem_read(h->c, r, 0, h->got, REGION_BYTES);
	timed(t0, "read", h->n);
	if (rc < 0) {
		say("FAIL read %s: %s", what, rmem_strerror(rc));
		return -1;
	}
	fill(h->want, REGION_BYTES, h->n, which);
	if (memcmp(h->got, h->want, REGION_BYTES) != 0) {
		size_t i = 0;

		while (h->got[i] == h->want[i])
			i++;
		say("FAIL %s: pattern %llu differs at byte %zu", what, (unsigned long long)h->n, i);
		return -1;
	}
	return 0;
}

static int put(struct holder *h, const struct rmem_region *r, uint64_t n, uint64_t which,
	       const char *what)
{
	uint64_t t0 = now_ms();
	int rc;

	fill(h->want, REGION_BYTES, n, which);
	rc = rmem_write(h->c, r, 0, h->want, REGION_BYTES);
	timed(t0, "write", n);
	if (rc < 0) {
		say("FAIL write %s: %s", what, rmem_strerror(rc));
		return -1;
	}
	return 0;
}

/* Idle until LOG.faa, then one rmem_faa(+1) on the word, as the test
 * triggers it while rmemd is stopped (TCP: the FAA waits for it, then it is
 * killed) or right after it was killed (RDMA: the NIC, not rmemd, does
 * atomics): its result, then what the word holds once the client resumed. */
static int faa_once(struct holder *h)
{
	uint64_t before = 0, after = 0, t0;
	int rc, rc2;

	/* Read while rmemd still runs: after a resume this is also the word's
	 * first use, which asks its new key, so that the FAA itself is what
	 * meets the stopped or dead daemon. */
	rc = rmem_read(h->c, &h->word, 0, &before, sizeof before);
	if (rc < 0) {
		say("FAIL read word: %s", rmem_strerror(rc));
		return -1;
	}
	say("idle %llu", (unsigned long long)h->n);
	while (!asked("faa")) {
		if (asked("stop"))
			return 0;
		usleep(2000);
	}
	t0 = now_ms();
	rc = rmem_faa(h->c, &h->word, 0, 1, NULL);
	say("faa %d %llu", rc, (unsigned long long)(now_ms() - t0));
	rc2 = rmem_read(h->c, &h->word, 0, &after, sizeof after);
	if (rc2 < 0) {
		say("FAIL read word after the faa: %s", rmem_strerror(rc2));
		return -1;
	}
	say("word %llu %llu", (unsigned long long)before, (unsigned long long)after);
	return 0;
}

static int loop(struct holder *h)
{
	for (;;) {
		if (asked("stop"))
			return 0;
		if (asked("idle") && !asked("faa") && faa_once(h) < 0)
			return -1;
		if (check(h, &h->anon, 1, "anonymous") < 0 || check(h, &h->ro, 2, "named") < 0)
			return -1;
		if (put(h, &h->anon, h->n + 1, 1, "anonymous") < 0 ||
		    put(h, &h->named, h->n + 1, 2, "named") < 0)
			return -1;
		h->n++;
		if (h->n % 10 == 0)
			say("iter %llu", (unsigned long long)h->n);
	}
}

static int setup(struct holder *h, const char *name)
{
	uint64_t zero = 0;
	int rc;

	if ((rc = rmem_alloc(h->c, REGION_BYTES, 0, &h->anon)) < 0 ||
	    (rc = rmem_create(h->c, name, REGION_BYTES, 0, &h->named)) < 0 ||
	    (rc = rmem_open(h->c, name, RMEM_READ, &h->ro)) < 0 ||
	    (rc = rmem_alloc(h->c, 64, 0, &h->word)) < 0 ||
	    (rc = rmem_write(h->c, &h->word, 0, &zero, sizeof zero)) < 0) {
		say("FAIL setup: %s", rmem_strerror(rc));
		return -1;
	}
	if (put(h, &h->anon, 0, 1, "anonymous") < 0 || put(h, &h->named, 0, 2, "named") < 0)
		return -1;
	rc = rmem_write(h->c, &h->ro, 0, &zero, sizeof zero);
	if (rc != -EACCES) {
		say("FAIL a write through the read-only handle: %d", rc);
		return -1;
	}
	say("ready %llu", (unsigned long long)h->anon.id);
	return 0;
}

int main(int argc, char **argv)
{
	struct holder h = { 0 };
	struct rmem_opts o;
	int rc, ret = 1;

	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: holder ENDPOINT rdma|tcp NAME LOG [RESUME_MS]\n");
		return 2;
	}
	log_file = fopen(argv[4], "a");
	if (!log_file) {
		perror(argv[4]);
		return 2;
	}
	logname = argv[4];
	h.want = malloc(REGION_BYTES);
	h.got = malloc(REGION_BYTES);
	if (!h.want || !h.got) {
		say("FAIL out of memory");
		goto out;
	}
	rmem_opts_init(&o, sizeof o);
	o.transport = argv[2];
	o.resume_ms = argc == 6 ? atoi(argv[5]) : 60000;
	rc = rmem_connect(argv[1], &o, &h.c);
	if (rc < 0) {
		say("FAIL connect %s: %s", argv[1], rmem_strerror(rc));
		goto out;
	}
	if (strcmp(rmem_transport(h.c), argv[2]) != 0) {
		say("FAIL asked for %s, connected over %s", argv[2], rmem_transport(h.c));
		goto out;
	}
	if (setup(&h, argv[3]) < 0 || loop(&h) < 0)
		goto out;
	/* A clean end: the last pattern verifies, every handle goes back. */
	if (check(&h, &h.anon, 1, "anonymous") < 0 || check(&h, &h.ro, 2, "named") < 0)
		goto out;
	if ((rc = rmem_free(h.c, &h.ro)) < 0 || (rc = rmem_free(h.c, &h.named)) < 0 ||
	    (rc = rmem_unlink(h.c, argv[3])) < 0 || (rc = rmem_free(h.c, &h.anon)) < 0 ||
	    (rc = rmem_free(h.c, &h.word)) < 0) {
		say("FAIL the end: %s", rmem_strerror(rc));
		goto out;
	}
	say("done %llu", (unsigned long long)h.n);
	ret = 0;
out:
	rmem_close(h.c);
	free(h.got);
	free(h.want);
	fclose(log_file);
	return ret;
}
