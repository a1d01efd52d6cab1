/*
 * fuzz_restore.c - libFuzzer target for the restore (daemon/restore.c): a
 * new rmemd handed a state memfd whose slots are anything at all.
 *
 * Input: one mode byte, then slots (STATE_SLOT_LEN bytes each; a short tail
 * is dropped).  The harness writes a valid header for one 1 MiB pool before
 * them and, when bit 0 of the mode is set, seals every non-free slot (its
 * check computed as the writer would), so that inputs reach the checks
 * behind the CRC: ids, counters, tenants, ranges, overlaps, orphans, names.
 * When bit 1 is set the state (and its pool memfd) says half the pool the
 * config asks for: the restore must grow it, keep every range the state
 * holds within the half and refuse any past it.
 * Then restore_run() must either refuse (RESTORE_REFUSED, with nothing of the
 * server changed) or restore a state that holds together: the allocator's
 * used bytes are what the regions and named objects hold, every region lies
 * in the pool, and once every session ends and every name is unlinked the
 * pool is whole again and no tenant holds anything.  Any disagreement aborts.
 * Linked with replay.c it replays tests/fuzz/corpus/restore in make test.
 */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "fuzz.h"
#include "inproc.h"
#include "log.h"
#include "names.h"
#include "proto.h"
#include "region.h"
#include "restore.h"
#include "server.h"
#include "session.h"
#include "slots.h"
#include "state.h"
#include "tenant.h"

#define POOL_BYTES (1u << 20)
#define MAX_SLOTS 64

static int memfd_of(const char *name, const void *bytes, size_t len, size_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	CHECK(fd >= 0 && ftruncate(fd, (off_t)size) == 0);
	if (len)
		CHECK(pwrite(fd, bytes, len, 0) == (ssize_t)len);
	return fd;
}

/* One pool configured, not opened (restore_run opens it from the memfd),
 * and the tenant the slots may name (tests/lib/inproc.h). */
static struct server *server_new(void)
{
	struct inproc_opts o;
	struct server *srv;
	char err[256];

	inproc_opts_init(&o, "fuzz", POOL_BYTES);
	o.open_pool = false;
	o.tenant = "team-a";
	o.log_level = LOG_EMERG;
	srv = inproc_new(&o, err, sizeof err);
	if (!srv)
		fprintf(stderr, "%s\n", err);
	CHECK(srv);
	return srv;
}

static void seal(uint8_t *slot, uint32_t index)
{
	struct state_slot s;
	uint8_t again[STATE_SLOT_LEN];
	uint16_t type = proto_get_u16(slot);

	if (type == STATE_FREE || type >= STATE_TYPE_COUNT)
		return;
	/* What the body says, encoded as the writer would (garbage in the
	 * padding dropped); a body that does not encode stays as it is. */
	memset(&s, 0, sizeof s);
	s.type = type;
	switch (type) {
	case STATE_COUNTERS:
		s.u.counters.gen = proto_get_u64(slot + 8);
		s.u.counters.next_region = proto_get_u64(slot + 16);
		s.u.counters.next_session = proto_get_u64(slot + 24);
		s.u.counters.next_name = proto_get_u64(slot + 32);
		break;
	case STATE_SESSION:
		s.u.session.id = proto_get_u64(slot + 8);
		memcpy(s.u.session.tenant, slot + 16, STATE_STR_LEN - 1);
		memcpy(s.u.session.token, slot + 48, STATE_TOKEN_LEN);
		break;
	case STATE_REGION:
		s.u.region.id = proto_get_u64(slot + 8);
		s.u.region.session = proto_get_u64(slot + 16);
		s.u.region.pool = proto_get_u32(slot + 24);
		s.u.region.offset = proto_get_u64(slot + 32);
		s.u.region.length = proto_get_u64(slot + 40);
		break;
	case STATE_OBJECT:
		s.u.object.id = proto_get_u64(slot + 8);
		s.u.object.pool = proto_get_u32(slot + 16);
		s.u.object.offset = proto_get_u64(slot + 24);
		s.u.object.length = proto_get_u64(slot + 32);
		memcpy(s.u.object.ns, slot + 40, STATE_STR_LEN - 1);
		memcpy(s.u.object.charged, slot + 72, STATE_STR_LEN - 1);
		break;
	case STATE_NAME:
		s.u.name.object = proto_get_u64(slot + 8);
		s.u.name.name_len = proto_get_u16(slot + 16) % (STATE_NAME_MAX + 1);
		memcpy(s.u.name.name, slot + 24, s.u.name.name_len);
		for (size_t i = 0; i < s.u.name.name_len; i++)
			if (!s.u.name.name[i])
				s.u.name.name[i] = 'x';
		break;
	case STATE_HANDLE:
		s.u.handle.region = proto_get_u64(slot + 8);
		s.u.handle.session = proto_get_u64(slot + 16);
		s.u.handle.object = proto_get_u64(slot + 24);
		s.u.handle.access = proto_get_u32(slot + 32);
		break;
	case STATE_PENDING:
		s.u.pending.object = proto_get_u64(slot + 8);
		break;
	}
	if (state_slot_encode(again, index, &s) == STATE_SLOT_LEN)
		memcpy(slot, again, sizeof again);
}

/* The restored server holds together (see the top). */
static void check_restored(struct server *srv)
{
	struct alloc_stats a;
	uint64_t held = 0, objects = 0;
	struct session *s, *next;
	int rc;

	alloc_get_stats(srv->pools[0].alloc, &a);
	for (struct region *r = region_next_after(srv->regions, 0); r;
	     r = region_next(srv->regions, r)) {
		CHECK(r->pool == 0 && r->length && r->offset + r->length <= srv->pools[0].size);
		if (!r->named)
			held += r->length;
	}
	for (struct name_obj *o = names_next_after(srv->names, 0); o; o = names_next(o))
		objects += o->length;
	CHECK(a.used == held + objects && srv->used_bytes == a.used);
	/* Everything ends: the pool is whole again, no tenant holds a byte. */
	for (s = srv->sessions_first; s; s = next) {
		next = s->next;
		CHECK(s->detached);
		session_destroy(srv, s);
	}
	/* Only linked names are left: an unlinked object went with its last
	 * handle.  A revoke needs a free state slot for its PENDING mark and
	 * is refused (-ENOMEM) when the restored table is full; with every
	 * session gone no handle is left to revoke, and the plain unlink,
	 * which needs no slot, ends the object all the same. */
	for (struct name_obj *o = names_next_after(srv->names, 0); o;
	     o = names_next_after(srv->names, 0)) {
		rc = session_unlink_ns(srv, o->ns, o->name, o->name_len, PROTO_UNLINK_REVOKE);
		if (rc == -ENOMEM)
			rc = session_unlink_ns(srv, o->ns, o->name, o->name_len, 0);
		CHECK(rc == 0);
	}
	session_quarantine_flush(srv);
	alloc_get_stats(srv->pools[0].alloc, &a);
	CHECK(a.used == 0 && a.free_ranges == 1 && srv->used_bytes == 0 && srv->clients == 0);
	CHECK(region_count(srv->regions) == 0 && srv->tenants.use[0].bytes == 0 &&
	      srv->tenants.use[0].regions == 0);
}

/* No restored range lies past what the state gave the pool. */
static void check_no_range_past(struct server *srv, uint64_t kept)
{
	for (struct region *g = region_next_after(srv->regions, 0); g;
	     g = region_next(srv->regions, g))
		CHECK(g->offset + g->length <= kept);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t nslots;
	size_t len;
	uint8_t *state;
	struct state_hdr h;
	struct restore_fds fds;
	struct server *srv;
	char why[256];
	int rc;

	if (size < 1)
		return 0;
	nslots = (uint32_t)((size - 1) / STATE_SLOT_LEN);
	nslots = nslots < 3 ? 3 : nslots > MAX_SLOTS ? MAX_SLOTS : nslots;
	len = (size_t)state_size(nslots);
	state = calloc(1, len);
	CHECK(state);
	memset(&h, 0, sizeof h);
	h.nslots = nslots;
	h.npools = 1;
	snprintf(h.pools[0].name, sizeof h.pools[0].name, "fuzz");
	h.pools[0].size = data[0] & 2 ? POOL_BYTES / 2 : POOL_BYTES;
	h.pools[0].alignment = 64;
	h.pools[0].page_size = 4096;
	CHECK(state_hdr_encode(state, &h) == STATE_HDR_LEN);
	for (uint32_t i = 0; i < nslots && 1 + (size_t)(i + 1) * STATE_SLOT_LEN <= size; i++) {
		uint8_t *slot = state + STATE_HDR_LEN + (size_t)i * STATE_SLOT_LEN;

		memcpy(slot, data + 1 + (size_t)i * STATE_SLOT_LEN, STATE_SLOT_LEN);
		if (data[0] & 1)
			seal(slot, i);
	}
	srv = server_new();
	memset(&fds, 0, sizeof fds);
	for (unsigned i = 0; i < CONFIG_MAX_POOLS; i++)
		fds.pool_fd[i] = -1;
	fds.state_fd = memfd_of("state", state, len, len);
	fds.pool_fd[0] = memfd_of("pool", NULL, 0, h.pools[0].size);
	fds.npool_fds = 1;
	rc = restore_run(srv, &fds, NULL, why, sizeof why);
	CHECK(rc == 0 || rc == RESTORE_REFUSED);
	/* FUZZ_TRACE=1: what each input came to, to see what a seed reaches. */
	if (getenv("FUZZ_TRACE"))
		fprintf(stderr, "  %s: %llu sessions, %llu regions, %llu names, %llu bytes\n",
			rc ? why : "restored", (unsigned long long)srv->clients,
			(unsigned long long)region_count(srv->regions),
			(unsigned long long)names_count(srv->names),
			(unsigned long long)srv->used_bytes);
	if (rc == 0) {
		struct stat st;

		CHECK(srv->restored == 1 && srv->slots && fds.state_fd < 0 && fds.pool_fd[0] < 0);
		/* Grown: the memfd is the config's size, the header to write says so. */
		CHECK(fstat(srv->pools[0].fd, &st) == 0 && st.st_size == POOL_BYTES &&
		      srv->pools[0].size == POOL_BYTES && fds.hdr_changed == !!(data[0] & 2));
		check_no_range_past(srv, h.pools[0].size);
		check_restored(srv);
	} else {
		CHECK(why[0] && srv->clients == 0 && region_count(srv->regions) == 0 &&
		      names_count(srv->names) == 0 && srv->used_bytes == 0 && !srv->slots &&
		      srv->tenants.use[0].bytes == 0);
	}
	if (fds.state_fd >= 0)
		close(fds.state_fd);
	if (fds.pool_fd[0] >= 0)
		close(fds.pool_fd[0]);
	inproc_free(srv);
	free(state);
	return 0;
}
