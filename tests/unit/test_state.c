/*
 * test_state.c - the persistent state codec (common/state.h): the header and
 * every slot type round trip with edge values, the layout is the one state.h
 * documents, and damage of every kind is refused: every single-bit flip of a
 * slot, a slot moved to another index, a bad magic, version, length or field.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "state.h"
#include "tap.h"

static uint8_t slot[STATE_SLOT_LEN];

/* Seals a slot edited by hand, as the encoder would: for the decoder's
 * field checks to be reached, the check must hold. */
static void reseal(uint8_t *s, uint32_t index)
{
	static const size_t fixed[] = { 0, 40, 64, 48, 104, 0, 40 };
	uint16_t t = proto_get_u16(s);
	size_t end = STATE_SLOT_LEN;
	uint8_t idx[4];

	if (t < 7 && fixed[t])
		end = fixed[t];
	if (t == STATE_NAME && proto_get_u16(s + 16) <= STATE_NAME_MAX)
		end = 24 + proto_get_u16(s + 16);
	proto_put_u32(idx, index);
	proto_put_u32(s + 4, state_crc32c(state_crc32c(state_crc32c(0, idx, 4), s, 4), s + 8,
					  end - 8));
}

static void reseal_hdr(uint8_t *h)
{
	proto_put_u32(h + STATE_HDR_LEN - 8, state_crc32c(0, h, STATE_HDR_LEN - 8));
}

static void test_crc(void)
{
	static const uint8_t check[] = "123456789";

	ok(state_crc32c(0, check, 9) == 0xe3069283u, "CRC-32C of \"123456789\" is e3069283");
	ok(state_crc32c(state_crc32c(0, check, 4), check + 4, 5) == 0xe3069283u,
	   "CRC-32C continues across calls");
}

static struct state_hdr sample_hdr(void)
{
	struct state_hdr h;

	memset(&h, 0, sizeof h);
	h.nslots = 3;
	h.npools = 2;
	strcpy(h.pools[0].name, "default");
	h.pools[0].size = 64ull << 20;
	h.pools[0].alignment = 64;
	h.pools[0].page_size = 4096;
	memset(h.pools[1].name, 'p', STATE_STR_LEN - 1);
	h.pools[1].size = UINT64_MAX;
	h.pools[1].alignment = 1ull << 30;
	h.pools[1].page_size = 2u << 20;
	return h;
}

static void test_hdr(void)
{
	size_t len = (size_t)state_size(3);
	uint8_t *buf = calloc(1, len + 1);
	struct state_hdr h = sample_hdr(), out;

	if (!buf) {
		skip(22, "out of memory");
		return;
	}
	ok(state_size(3) == STATE_HDR_LEN + 3 * STATE_SLOT_LEN, "state_size: header + slots");
	ok(state_hdr_encode(buf, &h) == STATE_HDR_LEN, "header encodes to STATE_HDR_LEN bytes");
	ok(proto_get_u32(buf) == STATE_MAGIC && memcmp(buf, "RMST", 4) == 0 &&
	   proto_get_u32(buf + 4) == STATE_VERSION && proto_get_u32(buf + 16) == 3 &&
	   proto_get_u32(buf + 20) == 2 && memcmp(buf + 32, "default", 8) == 0 &&
	   proto_get_u64(buf + 32 + 32) == 64ull << 20,
	   "header layout: magic RMST, version, nslots @16, npools @20, pools @32");
	memset(&out, 0xa5, sizeof out);
	ok(state_hdr_decode(buf, len, &out) == 0 && out.nslots == 3 && out.npools == 2 &&
	   strcmp(out.pools[0].name, "default") == 0 && out.pools[1].size == UINT64_MAX &&
	   out.pools[1].alignment == 1ull << 30 && out.pools[1].page_size == 2u << 20 &&
	   strlen(out.pools[1].name) == STATE_STR_LEN - 1 && out.pools[2].size == 0,
	   "header round trips (31-byte pool name, max size)");
	ok(state_hdr_decode(buf, len - 1, &out) == -EMSGSIZE &&
	   state_hdr_decode(buf, len + 1, &out) == -EMSGSIZE,
	   "a state one byte short or long is -EMSGSIZE (truncated memfd)");
	ok(state_hdr_decode(buf, STATE_HDR_LEN - 1, &out) == -EBADMSG &&
	   state_hdr_decode(buf, 0, &out) == -EBADMSG, "shorter than a header is -EBADMSG");
	buf[0] ^= 1;
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "bad magic is -EBADMSG");
	buf[0] ^= 1;
	buf[100] ^= 0x10;
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "a garbled byte fails the check");
	buf[100] ^= 0x10;
	proto_put_u32(buf + 4, STATE_VERSION + 1);
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "a garbled version fails the check");
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EPROTO &&
	   state_hdr_version(buf) == STATE_VERSION + 1,
	   "a newer version, sealed, is -EPROTO, and state_hdr_version names it");
	proto_put_u32(buf + 4, STATE_VERSION_MIN - 1);
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EPROTO, "a version below the oldest read is -EPROTO");
	for (uint32_t v = STATE_VERSION_MIN; v <= STATE_VERSION; v++) {
		proto_put_u32(buf + 4, v);
		reseal_hdr(buf);
		ok(state_hdr_decode(buf, len, &out) == 0, "version %u, every one read, decodes", v);
	}
	state_hdr_encode(buf, &h);
	proto_put_u32(buf + 12, STATE_SLOT_LEN + 8);
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "another slot length is -EBADMSG");
	state_hdr_encode(buf, &h);
	buf[32 + 2 * STATE_POOL_REC_LEN] = 'x';
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "a pool record past npools is -EBADMSG");
	state_hdr_encode(buf, &h);
	buf[32 + 10] = 'x'; /* after "default" and its NUL */
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "a pool name not NUL padded is -EBADMSG");
	/* The server's identity: generation @24, server_id @928. */
	state_hdr_encode(buf, &h);
	ok(state_hdr_decode(buf, len, &out) == 0 && out.generation == 0 && out.server_id[0] == 0,
	   "a header without an identity (an older rmemd's) decodes with generation 0, id \"\"");
	h.generation = 1795486599383223ull;
	strcpy(h.server_id, "0123456789abcdef");
	ok(state_hdr_encode(buf, &h) == STATE_HDR_LEN && proto_get_u64(buf + 24) == h.generation &&
	   memcmp(buf + 928, "0123456789abcdef", 17) == 0,
	   "generation @24, server_id @928");
	memset(&out, 0xa5, sizeof out);
	ok(state_hdr_decode(buf, len, &out) == 0 && out.generation == h.generation &&
	   strcmp(out.server_id, "0123456789abcdef") == 0, "generation and server_id round trip");
	buf[928 + 20] = 'x';
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "a server_id not NUL padded is -EBADMSG");
	state_hdr_encode(buf, &h);
	buf[960] = 1;
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "a reserved byte after server_id is -EBADMSG");
	state_hdr_encode(buf, &h);
	proto_put_u64(buf + 24, (uint64_t)INT64_MAX + 1);
	reseal_hdr(buf);
	ok(state_hdr_decode(buf, len, &out) == -EBADMSG, "a generation past INT64_MAX is -EBADMSG");
	h.generation = (uint64_t)INT64_MAX + 1;
	ok(state_hdr_encode(buf, &h) == 0, "encode refuses a generation past INT64_MAX");
	h.generation = 1;
	memset(h.server_id, 'i', STATE_STR_LEN);
	ok(state_hdr_encode(buf, &h) == 0, "encode refuses a 32-byte server_id");
	h = sample_hdr();
	h.npools = 0;
	ok(state_hdr_encode(buf, &h) == 0, "encode refuses npools 0");
	h.npools = STATE_MAX_POOLS + 1;
	ok(state_hdr_encode(buf, &h) == 0, "encode refuses npools above STATE_MAX_POOLS");
	free(buf);
}

static const struct state_slot samples[] = {
	{ .type = STATE_COUNTERS, .u.counters = { 7, UINT64_MAX, 1024, 2048 } },
	{ .type = STATE_SESSION, .u.session = { .id = UINT64_MAX, .tenant = "team-a",
		.token = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 255 } } },
	{ .type = STATE_SESSION, .u.session = { .id = 1, .tenant = "" } },
	{ .type = STATE_REGION, .u.region = { 9, 3, 15, (1ull << 50) - 64, 1ull << 40 } },
	{ .type = STATE_OBJECT, .u.object = { 5, 1, 4096, 8192, "", "0123456789012345678901234567890" } },
	{ .type = STATE_NAME, .u.name = { 5, 3, "a/b" } },
	{ .type = STATE_NAME, .u.name = { 6, 5, "b~1.0", STATE_NAME_F_PIECE } },
	{ .type = STATE_HANDLE, .u.handle = { 10, 3, 5, PROTO_ACCESS_READ | PROTO_ACCESS_WRITE } },
	{ .type = STATE_PENDING, .u.pending = { 5 } },
};
#define NSAMPLES (sizeof samples / sizeof samples[0])

static bool slot_equal(const struct state_slot *a, const struct state_slot *b)
{
	struct state_slot x = *a, y = *b;

	/* Compare through a canonical copy: encode both at one index. */
	uint8_t ex[STATE_SLOT_LEN], ey[STATE_SLOT_LEN];

	return state_slot_encode(ex, 0, &x) && state_slot_encode(ey, 0, &y) &&
	       memcmp(ex, ey, sizeof ex) == 0 && x.type == y.type;
}

static void test_slots(void)
{
	/* A sample with one field made non-canonical: width bytes at at. */
	static const struct {
		size_t sample, at;
		unsigned width;
		uint32_t value;
		const char *what;
	} bad[] = {
		{ 3, 28, 4, 1, "REGION: reserved word set" },
		{ 1, 16 + 10, 1, 'x', "SESSION: a tenant not NUL padded (after \"team-a\")" },
		{ 5, STATE_SLOT_LEN - 1, 1, 1, "a byte after the body" },
		{ 5, 16, 2, 300, "NAME: name_len 300" },
		{ 6, 18, 2, STATE_NAME_F_PIECE | 0x2, "NAME: a flag it does not know" },
		{ 5, 20, 4, 1, "NAME: reserved word set" },
		{ 5, 0, 2, STATE_TYPE_COUNT, "an unknown type, sealed," },
		{ NSAMPLES - 1, 16, 1, 1, "PENDING: a byte after its object (past the body)" },
	};
	struct state_slot out, long_name;
	bool round = true, flips = true, moved = true;

	for (size_t i = 0; i < NSAMPLES; i++) {
		uint32_t index = (uint32_t)(i * 1000 + 1);

		memset(&out, 0xa5, sizeof out);
		round &= state_slot_encode(slot, index, &samples[i]) == STATE_SLOT_LEN &&
			 proto_get_u16(slot) == samples[i].type &&
			 state_slot_decode(slot, index, &out) == 0 && slot_equal(&out, &samples[i]);
		moved &= state_slot_decode(slot, index + 1, &out) == -EBADMSG;
		for (size_t bit = 0; bit < STATE_SLOT_LEN * 8; bit++) {
			slot[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			flips &= state_slot_decode(slot, index, &out) == -EBADMSG;
			slot[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
	}
	ok(round, "every slot type round trips at its index");
	ok(moved, "a slot read at another index fails its check");
	ok(flips, "every single-bit flip of every sample slot is -EBADMSG");

	memset(&long_name, 0, sizeof long_name);
	long_name.type = STATE_NAME;
	long_name.u.name.object = 1;
	long_name.u.name.name_len = STATE_NAME_MAX;
	memset(long_name.u.name.name, '~', STATE_NAME_MAX);
	ok(state_slot_encode(slot, 2, &long_name) == STATE_SLOT_LEN &&
	   state_slot_decode(slot, 2, &out) == 0 && out.u.name.name_len == STATE_NAME_MAX &&
	   out.u.name.name[STATE_NAME_MAX] == '\0' && out.u.name.name[STATE_NAME_MAX - 1] == '~',
	   "a 255-byte name round trips, NUL-terminated");
	long_name.u.name.name_len = 0;
	ok(state_slot_encode(slot, 2, &long_name) == 0, "encode refuses name_len 0");
	long_name.u.name.name_len = STATE_NAME_MAX + 1;
	ok(state_slot_encode(slot, 2, &long_name) == 0, "encode refuses name_len 256");
	long_name.u.name.name_len = 4;
	long_name.u.name.name[1] = '\0';
	ok(state_slot_encode(slot, 2, &long_name) == 0, "encode refuses a NUL inside a name");
	out = samples[6];
	out.u.name.flags = 0x2;
	ok(state_slot_encode(slot, 2, &out) == 0, "encode refuses a NAME flag it does not know");
	out.u.name.flags = STATE_NAME_F_PIECE;
	ok(state_slot_encode(slot, 2, &out) == STATE_SLOT_LEN && state_slot_decode(slot, 2, &out) == 0 &&
		   out.u.name.flags == STATE_NAME_F_PIECE && proto_get_u16(slot + 18) == STATE_NAME_F_PIECE,
	   "a piece's NAME keeps its flag, at offset 18 (reserved 0 in older states: ordinary)");
	out = samples[1];
	memset(out.u.session.tenant, 't', STATE_STR_LEN);
	ok(state_slot_encode(slot, 2, &out) == 0, "encode refuses a 32-byte tenant");
	out.type = STATE_TYPE_COUNT;
	ok(state_slot_encode(slot, 2, &out) == 0, "encode refuses an unknown type");

	memset(slot, 0, sizeof slot);
	memset(slot + 8, 0x5a, sizeof slot - 8);
	memset(&out, 0xa5, sizeof out);
	ok(state_slot_decode(slot, 4, &out) == 0 && out.type == STATE_FREE,
	   "a slot whose head is 0 is free, whatever its body (a freed slot keeps its bytes)");
	slot[3] = 1;
	ok(state_slot_decode(slot, 4, &out) == -EBADMSG, "type 0 with a non-zero head is -EBADMSG");

	/* Field checks behind a good check: non-canonical bytes are refused. */
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		state_slot_encode(slot, 9, &samples[bad[i].sample]);
		if (bad[i].width == 4)
			proto_put_u32(slot + bad[i].at, bad[i].value);
		else if (bad[i].width == 2)
			proto_put_u16(slot + bad[i].at, (uint16_t)bad[i].value);
		else
			slot[bad[i].at] = (uint8_t)bad[i].value;
		reseal(slot, 9);
		ok(state_slot_decode(slot, 9, &out) == -EBADMSG, "%s is -EBADMSG", bad[i].what);
	}
	ok(state_slot_encode(slot, 9, &samples[NSAMPLES - 1]) == STATE_SLOT_LEN &&
	   state_slot_decode(slot, 9, &out) == 0 && out.type == STATE_PENDING &&
	   out.u.pending.object == 5, "PENDING: one slot names the object being changed");
}

/* The id restore sorts by and the slot table files under, for each type. */
static void test_slot_id(void)
{
	static const uint64_t want[NSAMPLES] = { 0, UINT64_MAX, 1, 9, 5, 5, 6, 10, 5 };
	struct state_slot free_slot = { .type = STATE_FREE };
	bool all = true;

	for (size_t i = 0; i < NSAMPLES; i++)
		all &= state_slot_id(&samples[i]) == want[i];
	ok(all, "state_slot_id: COUNTERS 0, a session's, region's, object's own id, "
	   "the object of a NAME and PENDING, the region of a HANDLE");
	ok(state_slot_id(&free_slot) == 0, "state_slot_id: FREE is 0");
}

int main(void)
{
	test_crc();
	test_hdr();
	test_slots();
	test_slot_id();
	return tap_done();
}
