/*
 * test_raw.c - the tests' raw wire client (tests/lib/raw.h) reads frames
 * however the bytes are cut: a stream of frames fed one byte at a time, or
 * all at once, gives the same frames back; a payload above the reader's
 * limit is refused with its header still readable.
 */
#include <errno.h>
#include <string.h>

#include "raw.h"
#include "tap.h"

/* Three frames as the daemon might send them: two replies and an ERROR. */
static void stream(struct raw_out *o)
{
	uint8_t st[PROTO_STATUS_LEN] = { 0 }, h[PROTO_HDR_LEN];

	raw_out_frame(o, PROTO_OP_PING, 7, st, sizeof st);
	raw_out_frame(o, PROTO_OP_STATS, 8, "abcdefghijkl", 12);
	raw_hdr(h, PROTO_VERSION, PROTO_OP_ERROR, PROTO_F_RESPONSE, 0, 9);
	raw_out_put(o, h, sizeof h);
}

/* Feeds o in pieces of cut bytes (0: all at once); the frames taken, in order. */
static int read_back(const struct raw_out *o, size_t cut, uint64_t *ids, uint32_t *lens)
{
	struct raw_reader rd;
	struct raw_reply f;
	int n = 0, rc = 0;

	raw_reader_init(&rd, 64);
	for (size_t at = 0; at < o->len && rc >= 0; at += cut ? cut : o->len) {
		size_t take = cut && o->len - at > cut ? cut : o->len - at;

		rc = raw_reader_feed(&rd, o->buf + at, take);
		while (rc >= 0 && (rc = raw_reader_take(&rd, &f)) == 1) {
			ids[n] = f.req_id;
			lens[n++] = f.length;
			raw_reply_release(&f);
		}
	}
	raw_reader_fini(&rd);
	return rc < 0 ? rc : n;
}

int main(void)
{
	static const size_t cuts[] = { 0, 1, 5, PROTO_HDR_LEN };
	struct raw_reader rd;
	struct raw_reply f;
	struct raw_out o;
	uint8_t big[PROTO_HDR_LEN];

	raw_out_init(&o);
	stream(&o);
	ok(o.err == 0 && o.len == 3 * PROTO_HDR_LEN + PROTO_STATUS_LEN + 12,
	   "three frames built (%zu bytes)", o.len);
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		uint64_t ids[4] = { 0 };
		uint32_t lens[4] = { 0 };
		int n = read_back(&o, cuts[i], ids, lens);

		ok(n == 3 && ids[0] == 7 && ids[1] == 8 && ids[2] == 9 &&
		   lens[0] == PROTO_STATUS_LEN && lens[1] == 12 && lens[2] == 0,
		   "fed %s%zu: the same three frames (%d)", cuts[i] ? "in pieces of " : "all at once, ",
		   cuts[i] ? cuts[i] : o.len, n);
	}
	raw_out_fini(&o);

	raw_hdr(big, PROTO_VERSION, PROTO_OP_READ, PROTO_F_RESPONSE, 65, 10);
	raw_reader_init(&rd, 64);
	ok(raw_reader_want(&rd) == PROTO_HDR_LEN, "an empty reader wants a header");
	raw_reader_feed(&rd, big, sizeof big);
	ok(raw_reader_take(&rd, &f) == -EMSGSIZE && f.req_id == 10 && f.length == 65 &&
	   !f.payload, "a payload above the limit: -EMSGSIZE, the header readable");
	raw_reader_fini(&rd);
	return tap_done();
}
