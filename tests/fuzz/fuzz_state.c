/*
 * fuzz_state.c - libFuzzer target for the persistent state codec
 * (common/state.h): what a new rmemd reads back from systemd's fd store, which
 * may be damaged in any way.
 *
 * An input shorter than a header is a run of slots from index 0; a longer one
 * is a header (decoded against the input's length, as the daemon decodes the
 * memfd) followed by slots.  Whatever decodes must encode back to the very
 * same bytes: one encoding per record, so no garbage can pass for a record.
 * Any disagreement aborts.  Linked with replay.c it replays the seed corpus
 * in `make test`.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "proto.h"
#include "state.h"

static void check_hdr(const uint8_t *in, size_t len)
{
	uint8_t out[STATE_HDR_LEN];
	struct state_hdr h, h2;
	int rc = state_hdr_decode(in, len, &h);

	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTO || rc == -EMSGSIZE);
	if (rc < 0)
		return;
	CHECK(len == state_size(h.nslots));
	CHECK(state_hdr_encode(out, &h) == STATE_HDR_LEN);
	CHECK(memcmp(out, in, STATE_HDR_LEN) == 0);
	CHECK(state_hdr_decode(in, len, &h2) == 0 && memcmp(&h, &h2, sizeof h) == 0);
}

static void check_slot(const uint8_t *in, uint32_t index)
{
	uint8_t out[STATE_SLOT_LEN];
	struct state_slot s;
	int rc = state_slot_decode(in, index, &s);

	CHECK(rc == 0 || rc == -EBADMSG);
	if (rc < 0)
		return;
	if (s.type == STATE_FREE) {
		CHECK(proto_get_u64(in) == 0);
		return;
	}
	CHECK(s.type < STATE_TYPE_COUNT);
	CHECK(state_slot_encode(out, index, &s) == STATE_SLOT_LEN);
	CHECK(memcmp(out, in, STATE_SLOT_LEN) == 0);
	/* The same bytes at another index are damage. */
	CHECK(state_slot_decode(in, index + 1, &s) == -EBADMSG);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (size >= STATE_HDR_LEN) {
		check_hdr(data, size);
		off = STATE_HDR_LEN;
	}
	for (uint32_t i = 0; size - off >= STATE_SLOT_LEN; i++, off += STATE_SLOT_LEN)
		check_slot(data + off, i);
	return 0;
}
