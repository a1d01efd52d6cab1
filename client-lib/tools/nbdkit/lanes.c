/*
 * lanes.c - one rmem region through several sessions, and posted I/O on
 * one of them (lanes.h says why).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "lanes.h"

/* Largest rounding a create may apply to a size: rmemd rounds a region up
 * to its pool's alignment, at most a 2 MiB hugepage (rmemd.conf(5)). */
#define CREATE_SLACK (2u << 20)

static void lane_fini(struct lane *l)
{
	if (l->c) {
		/* Ending the session releases its handle. */
		rmem_close(l->c);
		l->c = NULL;
	}
	pthread_mutex_destroy(&l->mu);
}

static int lane_connect(struct lane *l, const struct lanes_cfg *cfg)
{
	struct rmem_opts o;

	rmem_opts_init(&o, sizeof o);
	o.tenant = cfg->tenant;
	o.secret_file = cfg->secret_file;
	if (cfg->transport)
		o.transport = cfg->transport;
	if (cfg->tcp_congestion)
		o.tcp_congestion = cfg->tcp_congestion;
	if (cfg->timeout_ms >= 0)
		o.timeout_ms = cfg->timeout_ms;
	if (cfg->resume_ms >= 0)
		o.resume_ms = cfg->resume_ms;
	return rmem_connect(cfg->url, &o, &l->c);
}

/* The first lane: allocates, creates or opens the region. */
static int lane0_region(struct lanes *ls, const struct lanes_cfg *cfg, char *err,
			size_t errlen)
{
	struct lane *l = &ls->lane[0];
	const char *name = cfg->name;
	int rc = -ENOENT;

	/* The anonymous disk is the session's own region: the daemon frees it
	 * when the session ends, however nbdkit ends (kill -9 included, once
	 * the session's lease has run out).  A name made for it, to be opened
	 * on every lane and then unlinked, stayed for ever when nbdkit died
	 * in between. */
	if (!name) {
		rc = rmem_alloc(l->c, (uint64_t)cfg->size, 0, &l->r);
		if (rc < 0)
			snprintf(err, errlen, "cannot allocate %" PRId64 " bytes: %s", cfg->size,
				 rmem_strerror(rc));
		return rc;
	}
	if (cfg->create != LANES_CREATE_NEVER && cfg->size > 0)
		rc = rmem_create(l->c, name, (uint64_t)cfg->size, 0, &l->r);
	if (cfg->create == LANES_CREATE_ALWAYS) {
		if (rc < 0)
			snprintf(err, errlen, "cannot create region '%s' of %" PRId64 " bytes: %s",
				 name, cfg->size, rmem_strerror(rc));
		return rc;
	}
	if (rc == -EEXIST || rc == -ENOENT)
		rc = rmem_open(l->c, name, RMEM_READ | RMEM_WRITE, &l->r);
	if (rc == -ENOENT && cfg->create == LANES_CREATE_NEVER) {
		snprintf(err, errlen, "no region named '%s' (create=never)", name);
		return rc;
	}
	if (rc == -ENOENT && cfg->size <= 0) {
		snprintf(err, errlen, "no region named '%s', and no size= to create it", name);
		return rc;
	}
	if (rc < 0) {
		snprintf(err, errlen, "cannot open region '%s': %s", name, rmem_strerror(rc));
		return rc;
	}
	/* An existing disk opened with size= must be that disk: never show a
	 * shorter region as a longer disk, nor half of a larger one. */
	if (cfg->size > 0 && (l->r.length < (uint64_t)cfg->size ||
			      l->r.length - (uint64_t)cfg->size >= CREATE_SLACK)) {
		snprintf(err, errlen, "region '%s' is %" PRIu64 " bytes, not size=%" PRId64,
			 name, l->r.length, cfg->size);
		return -EINVAL;
	}
	return 0;
}

/*
 * Whether the library posts transfers on lane 0's region: a librmem
 * before 1.4 did not on a redundant cluster region (EOPNOTSUPP there).
 * Nothing in rmem.h tells such a region apart, so one posted read of its
 * first bytes asks.  1: it posts; 0: synchronous calls only; or the read's
 * negative errno.
 */
static int lane0_posts(struct lane *l)
{
	char buf[4096];
	struct rmem_completion done;
	size_t len = l->r.length < sizeof buf ? (size_t)l->r.length : sizeof buf;
	int rc = rmem_post_read(l->c, &l->r, 0, buf, len, 0);

	if (rc == -EOPNOTSUPP)
		return 0;
	if (rc < 0)
		return rc;
	while ((rc = rmem_poll(l->c, &done, 1, -1)) == 0)
		;
	if (rc < 0)
		return rc;
	return done.status < 0 ? done.status : 1;
}

/* Posted calls on every lane, or, where the library takes none, synchronous
 * calls on one: a redundant region admits one writer (librmem(7)), so a
 * second session's open for writing would be EBUSY, and the library
 * serialises one client's writes to it anyway.  *n: the lanes to open. */
static int lane0_mode(struct lanes *ls, unsigned *n, char *err, size_t errlen)
{
	int rc = lane0_posts(&ls->lane[0]);

	if (rc < 0) {
		snprintf(err, errlen, "cannot read the disk's region: %s", rmem_strerror(rc));
		return rc;
	}
	if (rc == 0) {
		ls->lane[0].sync = true;
		*n = 1;
	}
	return 0;
}

int lanes_open(struct lanes *ls, const struct lanes_cfg *cfg, char *err, size_t errlen)
{
	/* The anonymous disk's region is lane 0's alone (its session's). */
	unsigned i, n = cfg->name ? cfg->nlanes : 1;
	int rc;

	memset(ls, 0, sizeof *ls);
	if (cfg->nlanes < 1 || cfg->nlanes > LANES_MAX) {
		snprintf(err, errlen, "lanes must be 1 to %d", LANES_MAX);
		return -EINVAL;
	}
	if (!cfg->name && cfg->size <= 0) {
		snprintf(err, errlen, "an anonymous disk (no name=) needs size=");
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		pthread_mutex_init(&ls->lane[i].mu, NULL);
		ls->lane[i].queue_tail = &ls->lane[i].queue;
		ls->n = i + 1;
		if ((rc = lane_connect(&ls->lane[i], cfg)) < 0) {
			snprintf(err, errlen, "cannot connect to %s: %s", cfg->url, rmem_strerror(rc));
			goto fail;
		}
		if (i == 0) {
			rc = lane0_region(ls, cfg, err, errlen);
			if (rc == 0)
				rc = lane0_mode(ls, &n, err, errlen);
		} else if ((rc = rmem_open(ls->lane[i].c, cfg->name, RMEM_READ | RMEM_WRITE,
					   &ls->lane[i].r)) == -EBUSY) {
			/* A redundant region admits one writer (librmem(7)):
			 * the lanes opened so far serve it. */
			lane_fini(&ls->lane[i]);
			ls->n = i;
			break;
		} else if (rc < 0) {
			snprintf(err, errlen, "cannot open region '%s' again: %s", cfg->name,
				 rmem_strerror(rc));
		} else if (ls->lane[i].r.length != ls->lane[0].r.length) {
			snprintf(err, errlen, "region '%s' changed size while opening", cfg->name);
			rc = -ESTALE;
		}
		if (rc < 0)
			goto fail;
	}
	ls->size = cfg->size > 0 ? (uint64_t)cfg->size : ls->lane[0].r.length;
	return 0;
fail:
	lanes_close(ls);
	return rc;
}

void lanes_close(struct lanes *ls)
{
	unsigned i;

	for (i = 0; i < ls->n; i++)
		lane_fini(&ls->lane[i]);
	ls->n = 0;
}

struct lane *lane_get(struct lanes *ls)
{
	/* Each nbdkit worker thread keeps to one lane, spread round-robin. */
	static atomic_uint next;
	static _Thread_local int mine = -1;

	if (mine < 0)
		mine = (int)(atomic_fetch_add(&next, 1) % ls->n);
	return &ls->lane[mine];
}

/* A region the library does not post to: a synchronous call per chunk;
 * the client takes the threads' calls in turn (rmem.h). */
static int sync_io(struct lane *l, bool write, char *buf, bool same_buf, uint64_t count,
		   uint64_t off)
{
	uint64_t done;
	size_t len;
	int rc;

	for (done = 0; done < count; done += len) {
		char *p = buf + (same_buf ? 0 : done);

		len = count - done > LANE_CHUNK ? LANE_CHUNK : (size_t)(count - done);
		rc = write ? rmem_write(l->c, &l->r, off + done, p, len)
			   : rmem_read(l->c, &l->r, off + done, p, len);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int lane_io(struct lane *l, bool write, void *buf, bool same_buf, uint64_t count, uint64_t off)
{
	if (l->sync)
		return sync_io(l, write, buf, same_buf, count, off);
	return poller_io(l, write, buf, same_buf, count, off);
}
