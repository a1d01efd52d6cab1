/*
 * test_slots.c - the state memfd's writer (daemon/slots.c): records put and
 * deleted at random against a model, then every slot decoded from the bytes
 * (as a restore reads them) must be exactly the model's records; the id
 * counters stay above every id recorded; a full table says -ENOSPC; a frozen
 * one changes nothing; a NULL one is a no-op.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "slots.h"
#include "state.h"
#include "tap.h"

#define NSLOTS 700

static uint8_t *new_state(uint32_t nslots)
{
	size_t len = (size_t)state_size(nslots);
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The model: region ids 1..NIDS, present or not. */
#define NIDS 2000
static bool present[NIDS + 1];

static struct state_slot region(uint64_t id)
{
	struct state_slot s = { .type = STATE_REGION };

	s.u.region.id = id;
	s.u.region.session = id % 7 + 1;
	s.u.region.offset = id * 64;
	s.u.region.length = 64;
	return s;
}

/* Decodes every slot: each region record must be one the model has, once,
 * and the counters must be above every id. */
static bool matches(const uint8_t *base, uint32_t nslots, size_t *nrec)
{
	static bool seen[NIDS + 1];
	uint64_t ceiling = 0, gen = 0;
	bool good = true;

	memset(seen, 0, sizeof seen);
	*nrec = 0;
	for (uint32_t i = 0; i < nslots; i++) {
		struct state_slot s;

		if (state_slot_decode(base + STATE_HDR_LEN + (size_t)i * STATE_SLOT_LEN, i, &s) < 0)
			return false;
		if (s.type == STATE_COUNTERS) {
			if (s.u.counters.gen >= gen) {
				gen = s.u.counters.gen;
				ceiling = s.u.counters.next_region;
			}
			continue;
		}
		if (s.type != STATE_REGION)
			continue;
		good &= s.u.region.id <= NIDS && present[s.u.region.id] && !seen[s.u.region.id];
		good &= s.u.region.offset == s.u.region.id * 64;
		if (s.u.region.id <= NIDS)
			seen[s.u.region.id] = true;
		(*nrec)++;
	}
	for (uint64_t id = 1; id <= NIDS; id++) {
		good &= seen[id] == present[id];
		good &= !present[id] || id < ceiling;
	}
	return good;
}

static void test_random(void)
{
	uint8_t *base = new_state(NSLOTS);
	struct slots *t = base ? slots_new(-1, base, NSLOTS) : NULL;
	uint64_t rng = 99;
	size_t live = 0, nrec = 0;
	bool good = true, full_seen = false;

	if (!t) {
		skip(4, "out of memory");
		return;
	}
	memset(present, 0, sizeof present);
	for (int step = 0; step < 40000; step++) {
		uint64_t id;
		struct state_slot s;
		int rc;

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		id = 1 + (rng >> 33) % NIDS;
		s = region(id);
		if (present[id]) {
			slots_del(t, STATE_REGION, id);
			present[id] = false;
			live--;
			continue;
		}
		rc = slots_put(t, &s);
		if (rc == -ENOSPC) {
			full_seen = true;
			good &= live == NSLOTS - 2;
			continue;
		}
		good &= rc == 0;
		present[id] = true;
		live++;
		good &= slots_put(t, &s) == -EEXIST;
	}
	ok(good, "40000 random puts and deletes: each put 0 (or -ENOSPC when full), a repeat -EEXIST");
	ok(full_seen, "the table filled up: -ENOSPC at %d records (two slots are the counters')",
	   NSLOTS - 2);
	ok(matches(base, NSLOTS, &nrec) && nrec == live && slots_used(t) == live,
	   "the bytes decode to exactly the model's %zu records; counters above every id", live);
	for (uint64_t id = 1; id <= NIDS; id++) {
		if (present[id]) {
			slots_del(t, STATE_REGION, id);
			present[id] = false;
		}
	}
	ok(matches(base, NSLOTS, &nrec) && nrec == 0 && slots_used(t) == 0,
	   "after deleting everything no record is left");
	slots_free(t);
}

static void test_freeze_and_null(void)
{
	uint8_t *base = new_state(16);
	struct slots *t = base ? slots_new(-1, base, 16) : NULL;
	struct state_slot s = region(5);
	size_t nrec;

	if (!t) {
		skip(3, "out of memory");
		return;
	}
	memset(present, 0, sizeof present);
	present[5] = true;
	ok(slots_put(t, &s) == 0 && matches(base, 16, &nrec) && nrec == 1, "one record put");
	slots_freeze(t);
	slots_del(t, STATE_REGION, 5);
	s = region(6);
	ok(slots_put(t, &s) == 0 && matches(base, 16, &nrec) && nrec == 1,
	   "frozen: a delete and a put change no byte");
	slots_free(t);
	ok(slots_put(NULL, &s) == 0 && slots_used(NULL) == 0 && slots_fd(NULL) == -1,
	   "a NULL writer (persistence off) is a no-op that succeeds");
	slots_del(NULL, STATE_REGION, 6);
}

/* A restore marks the slots the state holds; puts then take only the others. */
static void test_mark(void)
{
	uint8_t *base = new_state(40);
	struct slots *t = base ? slots_new(-1, base, 40) : NULL;
	bool good = true;
	size_t nrec;

	if (!t) {
		skip(3, "out of memory");
		return;
	}
	memset(present, 0, sizeof present);
	/* What a previous daemon wrote: ids 1..10 at slots 30..39. */
	for (uint64_t id = 1; id <= 10; id++) {
		struct state_slot s = region(id);

		state_slot_encode(base + STATE_HDR_LEN + (29 + id) * STATE_SLOT_LEN, (uint32_t)(29 + id),
				  &s);
		good &= slots_mark(t, (uint32_t)(29 + id), &s) == 0;
		present[id] = true;
	}
	good &= slots_mark(t, 30, &(struct state_slot){ .type = STATE_REGION }) == -EEXIST;
	good &= slots_mark(t, 1, &(struct state_slot){ .type = STATE_REGION }) == -EINVAL;
	slots_mark_done(t);
	ok(good && slots_used(t) == 10, "ten records marked; a slot twice is -EEXIST, a counters "
	   "slot -EINVAL");
	for (uint64_t id = 11; id <= 38; id++) {
		struct state_slot s = region(id);

		good &= slots_put(t, &s) == 0;
		present[id] = true;
	}
	{
		struct state_slot s = region(39);

		ok(good && slots_put(t, &s) == -ENOSPC,
		   "puts fill exactly the 28 slots no record held, then -ENOSPC");
	}
	ok(matches(base, 40, &nrec) && nrec == 38, "the bytes hold the 10 old and 28 new records");
	slots_free(t);
}

/* A refused table leaves the caller's descriptor and mapping alone. */
static void test_refused(void)
{
	int fd = dup(STDERR_FILENO);

	errno = 0;
	ok(fd >= 0 && !slots_new(fd, NULL, 2) && errno == ENOMEM,
	   "fewer than 3 slots: NULL, ENOMEM");
	ok(fd >= 0 && fcntl(fd, F_GETFD) >= 0, "...and the caller's descriptor is still open");
	if (fd >= 0)
		close(fd);
}

int main(void)
{
	test_refused();
	test_random();
	test_mark();
	test_freeze_and_null();
	return tap_done();
}
