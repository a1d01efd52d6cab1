/*
 * test_proto.c - the wire codec: every message round trips with edge values,
 * the header has the byte layout docs/protocol.md promises, and every class
 * of malformed input is refused with the documented error.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proto.h"
#include "tap.h"

/* Room for the largest fixed message plus one byte, for the len + 1 cases. */
#define BUF_LEN (PROTO_MAX_CTL + 64)

/* ---- header ---------------------------------------------------------------- */

static void put_hdr(uint8_t *out, uint16_t opcode, uint16_t flags, uint32_t length,
		    uint64_t req_id)
{
	struct proto_hdr h = {
		.opcode = opcode, .flags = flags, .length = length, .req_id = req_id,
	};

	proto_hdr_encode(out, &h);
}

/* The layout is the contract with every other implementation: spell it out. */
static void test_hdr_bytes(void)
{
	static const uint8_t want[PROTO_HDR_LEN] = {
		'R', 'M', 'E', 'M',                             /* magic */
		0x01, 0x00,                                     /* version 1 */
		0x02, 0x00,                                     /* opcode ALLOC */
		0x01, 0x00,                                     /* flags RESPONSE */
		0x00, 0x00,                                     /* reserved */
		0x28, 0x00, 0x00, 0x00,                         /* length 40 */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* req_id */
	};
	uint8_t got[PROTO_HDR_LEN];
	struct proto_hdr h = {
		/* Garbage the encoder must not send: it writes its own. */
		.magic = 0xdeadbeef, .version = 77, .reserved = 5,
		.opcode = PROTO_OP_ALLOC, .flags = PROTO_F_RESPONSE,
		.length = PROTO_ALLOC_REP_LEN, .req_id = 0x0102030405060708ull,
	};

	proto_hdr_encode(got, &h);
	ok(memcmp(got, want, sizeof want) == 0, "header bytes are little-endian as documented");
	ok(proto_get_u32(want) == PROTO_MAGIC, "PROTO_MAGIC reads as \"RMEM\"");
}

static bool hdr_round_trip(uint16_t opcode, uint16_t flags, uint32_t length, uint64_t req_id)
{
	uint8_t buf[PROTO_HDR_LEN];
	struct proto_hdr h;

	put_hdr(buf, opcode, flags, length, req_id);
	if (proto_hdr_decode(buf, &h) != 0)
		return false;
	return h.magic == PROTO_MAGIC && h.version == PROTO_VERSION && h.opcode == opcode &&
	       h.flags == flags && h.reserved == 0 && h.length == length && h.req_id == req_id;
}

static void test_hdr_round_trip(void)
{
	bool good = true;

	for (uint16_t op = 0; op < PROTO_OP_COUNT; op++) {
		for (uint16_t flags = 0; flags <= PROTO_F_RESPONSE; flags++) {
			if (op == PROTO_OP_ERROR && !flags)
				continue;
			good &= hdr_round_trip(op, flags, 0, 0);
			good &= hdr_round_trip(op, flags, proto_max_payload(op, flags), UINT64_MAX);
		}
	}
	ok(good, "every opcode, both directions, length 0/max, req_id 0/max round trips");
}

static int hdr_decode_bytes(const uint8_t *buf, struct proto_hdr *h)
{
	memset(h, 0, sizeof *h);
	return proto_hdr_decode(buf, h);
}

static void test_hdr_magic_version(void)
{
	uint8_t buf[PROTO_HDR_LEN];
	struct proto_hdr h;

	put_hdr(buf, PROTO_OP_PING, 0, 0, 42);
	buf[3] = 'X';
	ok(hdr_decode_bytes(buf, &h) == -EBADMSG, "bad magic: -EBADMSG");
	proto_put_u16(buf + 4, 2); /* and another version: magic is judged first */
	ok(hdr_decode_bytes(buf, &h) == -EBADMSG, "bad magic wins over other version");

	put_hdr(buf, PROTO_OP_HELLO, 0, PROTO_HELLO_REQ_LEN, 0x1122334455667788ull);
	proto_put_u16(buf + 4, 2);
	ok(hdr_decode_bytes(buf, &h) == -EPROTO, "version 2: -EPROTO");
	ok(h.version == 2 && h.req_id == 0x1122334455667788ull && h.opcode == PROTO_OP_HELLO,
	   "-EPROTO fills version, req_id and opcode");
	proto_put_u16(buf + 4, 0);
	ok(hdr_decode_bytes(buf, &h) == -EPROTO, "version 0: -EPROTO");

	/* A later version may define flags, opcodes and sizes we do not know. */
	put_hdr(buf, 0x7fff, 0x8000, UINT32_MAX, 9);
	proto_put_u16(buf + 4, 0xffff);
	proto_put_u16(buf + 10, 1);
	ok(hdr_decode_bytes(buf, &h) == -EPROTO && h.req_id == 9,
	   "other version wins over flags, reserved, opcode and length");
}

static void test_hdr_flags_reserved(void)
{
	uint8_t buf[PROTO_HDR_LEN];
	struct proto_hdr h;
	bool all = true;

	for (int bit = 1; bit < 16; bit++) {
		put_hdr(buf, PROTO_OP_PING, (uint16_t)(1u << bit), 0, 1);
		all &= hdr_decode_bytes(buf, &h) == -EBADMSG;
	}
	ok(all, "every unknown flag bit: -EBADMSG");

	put_hdr(buf, PROTO_OP_PING, 0, 0, 1);
	proto_put_u16(buf + 10, 0x0100);
	ok(hdr_decode_bytes(buf, &h) == -EBADMSG, "non-zero reserved: -EBADMSG");
	ok(h.req_id == 1, "raw fields are stored on -EBADMSG too");

	put_hdr(buf, PROTO_OP_COUNT, 0x0002, 0, 1);
	ok(hdr_decode_bytes(buf, &h) == -EBADMSG, "unknown flags win over unknown opcode");
}

static void test_hdr_opcode(void)
{
	uint8_t buf[PROTO_HDR_LEN];
	struct proto_hdr h;

	put_hdr(buf, PROTO_OP_COUNT, 0, 0, 3);
	ok(hdr_decode_bytes(buf, &h) == -EOPNOTSUPP, "opcode PROTO_OP_COUNT: -EOPNOTSUPP");
	ok(h.req_id == 3 && h.opcode == PROTO_OP_COUNT, "-EOPNOTSUPP leaves req_id to echo");
	put_hdr(buf, 0xffff, PROTO_F_RESPONSE, 0, 3);
	ok(hdr_decode_bytes(buf, &h) == -EOPNOTSUPP, "opcode 0xffff reply: -EOPNOTSUPP");
	put_hdr(buf, PROTO_OP_ERROR, 0, PROTO_STATUS_LEN, 3);
	ok(hdr_decode_bytes(buf, &h) == -EOPNOTSUPP, "ERROR as a request: -EOPNOTSUPP");
	put_hdr(buf, PROTO_OP_ERROR, PROTO_F_RESPONSE, PROTO_STATUS_LEN, 3);
	ok(hdr_decode_bytes(buf, &h) == 0, "ERROR as a reply is valid");
	put_hdr(buf, PROTO_OP_COUNT, 0, UINT32_MAX, 3);
	ok(hdr_decode_bytes(buf, &h) == -EOPNOTSUPP, "unknown opcode wins over oversize length");
}

static void test_hdr_length(void)
{
	uint8_t buf[PROTO_HDR_LEN];
	struct proto_hdr h;
	bool at_max = true, above = true, huge = true;

	for (uint16_t op = 0; op < PROTO_OP_COUNT; op++) {
		for (uint16_t flags = 0; flags <= PROTO_F_RESPONSE; flags++) {
			uint32_t max = proto_max_payload(op, flags);

			if (op == PROTO_OP_ERROR && !flags)
				continue;
			put_hdr(buf, op, flags, max, 1);
			at_max &= hdr_decode_bytes(buf, &h) == 0;
			put_hdr(buf, op, flags, max + 1, 1);
			above &= hdr_decode_bytes(buf, &h) == -EMSGSIZE;
			put_hdr(buf, op, flags, UINT32_MAX, 1);
			huge &= hdr_decode_bytes(buf, &h) == -EMSGSIZE;
		}
	}
	ok(at_max, "every opcode and direction: length == its maximum is accepted");
	ok(above, "every opcode and direction: maximum + 1 is -EMSGSIZE");
	ok(huge, "every opcode and direction: UINT32_MAX is -EMSGSIZE");

	ok(proto_max_payload(PROTO_OP_WRITE, 0) == PROTO_IO_REQ_LEN + PROTO_MAX_IO,
	   "WRITE request limit is fixed part + PROTO_MAX_IO");
	ok(proto_max_payload(PROTO_OP_READ, PROTO_F_RESPONSE) == PROTO_STATUS_LEN + PROTO_MAX_IO,
	   "READ reply limit is status + PROTO_MAX_IO");
	ok(proto_max_payload(PROTO_OP_WRITE, PROTO_F_RESPONSE) == PROTO_MAX_CTL &&
	   proto_max_payload(PROTO_OP_READ, 0) == PROTO_MAX_CTL &&
	   proto_max_payload(PROTO_OP_HELLO, 0) == PROTO_MAX_CTL,
	   "WRITE replies, READ requests and control frames are limited to PROTO_MAX_CTL");
	put_hdr(buf, PROTO_OP_READ, 0, PROTO_MAX_CTL + 1, 1);
	ok(hdr_decode_bytes(buf, &h) == -EMSGSIZE, "a READ request cannot carry data");
}

/* ---- malformed payloads, table driven -------------------------------------- */

/* One fixed-length decoder behind a common signature. */
struct fixed_case {
	const char *name;
	size_t len;
	size_t (*encode)(uint8_t *out);
	int (*decode)(const uint8_t *in, size_t len);
	size_t reserved_off[2]; /* byte offsets of reserved u32s; 0 ends the list */
};

static size_t enc_hello_req(uint8_t *out)
{
	struct proto_hello_req m = { .client_version = 1, .pid = 4242 };

	return proto_hello_req_encode(out, &m);
}

static int dec_hello_req(const uint8_t *in, size_t len)
{
	struct proto_hello_req m;

	return proto_hello_req_decode(in, len, &m);
}

static size_t enc_alloc_req(uint8_t *out)
{
	struct proto_alloc_req m = { .size = 4096 };

	return proto_alloc_req_encode(out, &m);
}

static int dec_alloc_req(const uint8_t *in, size_t len)
{
	struct proto_alloc_req m;

	return proto_alloc_req_decode(in, len, &m);
}

static size_t enc_free_req(uint8_t *out)
{
	struct proto_free_req m = { .id = 7, .rkey = 9 };

	return proto_free_req_encode(out, &m);
}

static int dec_free_req(const uint8_t *in, size_t len)
{
	struct proto_free_req m;

	return proto_free_req_decode(in, len, &m);
}

static size_t enc_read_req(uint8_t *out)
{
	struct proto_io_req m = { .id = 7, .offset = 8, .rkey = 9, .length = 10 };

	return proto_io_req_encode(out, PROTO_OP_READ, &m);
}

static int dec_read_req(const uint8_t *in, size_t len)
{
	struct proto_io_req m;

	return proto_io_req_decode(in, len, PROTO_OP_READ, &m);
}

static size_t enc_list_req(uint8_t *out)
{
	struct proto_list_req m = { .after = 3, .max = 100 };

	return proto_list_req_encode(out, &m);
}

static int dec_list_req(const uint8_t *in, size_t len)
{
	struct proto_list_req m;

	return proto_list_req_decode(in, len, &m);
}

static size_t enc_status(uint8_t *out)
{
	return proto_status_encode(out, 0);
}

static int dec_status(const uint8_t *in, size_t len)
{
	int st;

	return proto_status_decode(in, len, &st);
}

static size_t enc_hello_rep(uint8_t *out)
{
	struct proto_hello_rep m = { .session_id = 1, .server_version = 1, .max_io = 4096 };

	return proto_hello_rep_encode(out, &m);
}

static int dec_hello_rep(const uint8_t *in, size_t len)
{
	struct proto_hello_rep m;
	int st;

	return proto_hello_rep_decode(in, len, &st, &m);
}

static size_t enc_alloc_rep(uint8_t *out)
{
	struct proto_region m = { .id = 1, .addr = 2, .length = 3, .rkey = 4 };

	return proto_alloc_rep_encode(out, &m);
}

static int dec_alloc_rep(const uint8_t *in, size_t len)
{
	struct proto_region m;
	int st;

	return proto_alloc_rep_decode(in, len, &st, &m);
}

static size_t enc_stats_rep(uint8_t *out)
{
	struct proto_stats m = { .v = { 1, 2, 3 } };

	return proto_stats_rep_encode(out, &m);
}

static int dec_stats_rep(const uint8_t *in, size_t len)
{
	struct proto_stats m;
	int st;

	return proto_stats_rep_decode(in, len, &st, &m);
}

static size_t enc_region_list(uint8_t *out)
{
	struct proto_region_rec r = { .id = 1, .length = 4096 };
	size_t n = proto_list_hdr_encode(out, 2);

	n += proto_region_rec_encode(out + n, &r);
	n += proto_region_rec_encode(out + n, &r);
	return n;
}

static int dec_region_list(const uint8_t *in, size_t len)
{
	uint32_t count;
	int st;

	return proto_list_hdr_decode(in, len, PROTO_REGION_REC_LEN, &st, &count);
}

static const struct fixed_case fixed_cases[] = {
	{ "HELLO request", PROTO_HELLO_REQ_LEN, enc_hello_req, dec_hello_req, { 4, 12 } },
	{ "ALLOC request", PROTO_ALLOC_REQ_LEN, enc_alloc_req, dec_alloc_req, { 12 } },
	{ "FREE request", PROTO_FREE_REQ_LEN, enc_free_req, dec_free_req, { 12 } },
	{ "READ request", PROTO_IO_REQ_LEN, enc_read_req, dec_read_req, { 0 } },
	{ "list request", PROTO_LIST_REQ_LEN, enc_list_req, dec_list_req, { 12 } },
	{ "status reply", PROTO_STATUS_LEN, enc_status, dec_status, { 4 } },
	{ "HELLO reply", PROTO_HELLO_REP_LEN, enc_hello_rep, dec_hello_rep, { 4, 44 } },
	{ "ALLOC reply", PROTO_ALLOC_REP_LEN, enc_alloc_rep, dec_alloc_rep, { 4 } },
	{ "STATS reply", PROTO_STATS_REP_LEN, enc_stats_rep, dec_stats_rep, { 4, 12 } },
	{ "REGIONS reply", PROTO_LIST_HDR_LEN + 2 * PROTO_REGION_REC_LEN,
	  enc_region_list, dec_region_list, { 4, 12 } },
};

static void test_fixed_case(const struct fixed_case *c)
{
	uint8_t buf[BUF_LEN];
	size_t n;

	memset(buf, 0, sizeof buf);
	n = c->encode(buf);
	ok(n == c->len, "%s: encoder writes %zu bytes (got %zu)", c->name, c->len, n);
	ok(c->decode(buf, n) == 0, "%s: decodes at its length", c->name);
	ok(c->decode(buf, n - 1) == -EBADMSG, "%s: length - 1 is -EBADMSG", c->name);
	ok(c->decode(buf, n + 1) == -EBADMSG, "%s: length + 1 is -EBADMSG", c->name);
	ok(c->decode(buf, 0) == -EBADMSG, "%s: length 0 is -EBADMSG", c->name);
	for (size_t i = 0; i < 2 && c->reserved_off[i]; i++) {
		size_t off = c->reserved_off[i];

		buf[off + 3] = 0x80;
		ok(c->decode(buf, n) == -EBADMSG, "%s: non-zero reserved word at %zu is -EBADMSG",
		   c->name, off);
		buf[off + 3] = 0;
	}
}

static void test_fixed_cases(void)
{
	for (size_t i = 0; i < sizeof fixed_cases / sizeof fixed_cases[0]; i++)
		test_fixed_case(&fixed_cases[i]);
	ok(proto_empty_decode(0) == 0, "empty payload: length 0 accepted");
	ok(proto_empty_decode(1) == -EBADMSG, "empty payload: length 1 is -EBADMSG");
	ok(proto_empty_decode(SIZE_MAX) == -EBADMSG, "empty payload: SIZE_MAX is -EBADMSG");
}

/* ---- round trips with edge values ------------------------------------------ */

static void test_requests_round_trip(void)
{
	uint8_t buf[BUF_LEN];
	bool good = true;

	for (int edge = 0; edge < 2; edge++) {
		uint64_t v64 = edge ? UINT64_MAX : 0;
		uint32_t v32 = edge ? UINT32_MAX : 0;
		struct proto_hello_req hi = { .client_version = v32, .pid = v32 }, hi2;
		struct proto_alloc_req al = { .size = v64, .flags = v32 }, al2;
		struct proto_free_req fr = { .id = v64, .rkey = v32 }, fr2;
		struct proto_list_req li = { .after = v64, .max = v32 }, li2;

		memset(&hi2, 0xa5, sizeof hi2);
		good &= proto_hello_req_encode(buf, &hi) == PROTO_HELLO_REQ_LEN &&
			proto_hello_req_decode(buf, PROTO_HELLO_REQ_LEN, &hi2) == 0 &&
			hi2.client_version == v32 && hi2.features == 0 && hi2.pid == v32;
		memset(&al2, 0xa5, sizeof al2);
		good &= proto_alloc_req_encode(buf, &al) == PROTO_ALLOC_REQ_LEN &&
			proto_alloc_req_decode(buf, PROTO_ALLOC_REQ_LEN, &al2) == 0 &&
			al2.size == v64 && al2.flags == v32;
		memset(&fr2, 0xa5, sizeof fr2);
		good &= proto_free_req_encode(buf, &fr) == PROTO_FREE_REQ_LEN &&
			proto_free_req_decode(buf, PROTO_FREE_REQ_LEN, &fr2) == 0 &&
			fr2.id == v64 && fr2.rkey == v32;
		memset(&li2, 0xa5, sizeof li2);
		good &= proto_list_req_encode(buf, &li) == PROTO_LIST_REQ_LEN &&
			proto_list_req_decode(buf, PROTO_LIST_REQ_LEN, &li2) == 0 &&
			li2.after == v64 && li2.max == v32;
		ok(good, "HELLO, ALLOC, FREE, list requests round trip with all fields %s",
		   edge ? "max" : "0");
	}
}

static void test_io_req(void)
{
	uint8_t buf[BUF_LEN];
	struct proto_io_req in = { .id = UINT64_MAX, .offset = UINT64_MAX, .rkey = UINT32_MAX,
				   .length = PROTO_MAX_IO }, out;
	struct proto_io_req zero = { 0 };

	ok(proto_io_req_encode(buf, PROTO_OP_READ, &in) == PROTO_IO_REQ_LEN &&
	   proto_io_req_decode(buf, PROTO_IO_REQ_LEN, PROTO_OP_READ, &out) == 0 &&
	   out.id == in.id && out.offset == in.offset && out.rkey == in.rkey &&
	   out.length == PROTO_MAX_IO, "READ request round trips with max values");
	ok(proto_io_req_encode(buf, PROTO_OP_READ, &zero) == PROTO_IO_REQ_LEN &&
	   proto_io_req_decode(buf, PROTO_IO_REQ_LEN, PROTO_OP_READ, &out) == 0 &&
	   out.id == 0 && out.offset == 0 && out.rkey == 0 && out.length == 0,
	   "READ request round trips with zeros");
	in.length = PROTO_MAX_IO + 1;
	proto_io_req_encode(buf, PROTO_OP_READ, &in);
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN, PROTO_OP_READ, &out) == -EMSGSIZE,
	   "READ length PROTO_MAX_IO + 1 is -EMSGSIZE");
	proto_put_u32(buf + 20, UINT32_MAX);
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN, PROTO_OP_READ, &out) == -EMSGSIZE,
	   "READ length UINT32_MAX is -EMSGSIZE");

	/* WRITE: the length word is reserved; the data length is the frame's. */
	in.length = 12345;
	ok(proto_io_req_encode(buf, PROTO_OP_WRITE, &in) == PROTO_IO_REQ_LEN &&
	   proto_get_u32(buf + 20) == 0, "WRITE request encodes its length word as 0");
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN + 100, PROTO_OP_WRITE, &out) == 0 &&
	   out.id == in.id && out.offset == in.offset && out.rkey == in.rkey &&
	   out.length == 100, "WRITE request: length is taken from the payload length");
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN, PROTO_OP_WRITE, &out) == 0 &&
	   out.length == 0, "WRITE request with no data decodes");
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN + PROTO_MAX_IO, PROTO_OP_WRITE, &out) == 0 &&
	   out.length == PROTO_MAX_IO, "WRITE of PROTO_MAX_IO bytes decodes");
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN + PROTO_MAX_IO + 1, PROTO_OP_WRITE,
			       &out) == -EMSGSIZE, "WRITE of PROTO_MAX_IO + 1 bytes is -EMSGSIZE");
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN - 1, PROTO_OP_WRITE, &out) == -EBADMSG,
	   "WRITE request of length - 1 is -EBADMSG");
	ok(proto_io_req_decode(buf, 0, PROTO_OP_WRITE, &out) == -EBADMSG,
	   "WRITE request of length 0 is -EBADMSG");
	proto_put_u32(buf + 20, 1);
	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN, PROTO_OP_WRITE, &out) == -EBADMSG,
	   "WRITE request with non-zero reserved length word is -EBADMSG");

	ok(proto_io_req_decode(buf, PROTO_IO_REQ_LEN, PROTO_OP_FREE, &out) == -EINVAL,
	   "io_req decode with another opcode is -EINVAL");
	ok(proto_io_req_encode(buf, PROTO_OP_ALLOC, &in) == 0,
	   "io_req encode with another opcode writes nothing");
}

static void test_status(void)
{
	uint8_t buf[PROTO_STATUS_LEN];
	int st = 1;

	ok(proto_status_encode(buf, 0) == PROTO_STATUS_LEN && proto_get_u32(buf) == 0 &&
	   proto_status_decode(buf, PROTO_STATUS_LEN, &st) == 0 && st == 0,
	   "status 0 round trips");
	proto_status_encode(buf, -ENOENT);
	ok(proto_get_u32(buf) == ENOENT && proto_status_decode(buf, sizeof buf, &st) == 0 &&
	   st == -ENOENT, "status -ENOENT goes on the wire as +ENOENT and comes back negative");
	proto_status_encode(buf, -4095);
	ok(proto_status_decode(buf, sizeof buf, &st) == 0 && st == -4095,
	   "status -4095 round trips");
	proto_status_encode(buf, EACCES);
	ok(proto_get_u32(buf) == EACCES, "a positive errno is encoded as the same code");
	proto_status_encode(buf, -4096);
	ok(proto_get_u32(buf) == EIO, "status -4096 is sent as EIO");
	proto_status_encode(buf, INT_MIN);
	ok(proto_get_u32(buf) == EIO, "status INT_MIN is sent as EIO");
	proto_status_encode(buf, INT_MAX);
	ok(proto_get_u32(buf) == EIO, "status INT_MAX is sent as EIO");

	st = 1;
	proto_put_u32(buf, 4096);
	ok(proto_status_decode(buf, sizeof buf, &st) == -EBADMSG && st == 1,
	   "wire status 4096 is -EBADMSG, *status untouched");
	proto_put_u32(buf, (uint32_t)-1);
	ok(proto_status_decode(buf, sizeof buf, &st) == -EBADMSG, "wire status -1 is -EBADMSG");
	proto_put_u32(buf, (uint32_t)INT32_MIN);
	ok(proto_status_decode(buf, sizeof buf, &st) == -EBADMSG,
	   "wire status INT32_MIN is -EBADMSG");
}

static void test_hello_rep(void)
{
	uint8_t buf[BUF_LEN];
	struct proto_hello_rep in = { .session_id = UINT64_MAX, .server_version = UINT32_MAX,
				      .max_io = PROTO_MAX_IO }, out;
	struct proto_hello_rep small = { .max_io = 1 };
	int st = 1;

	ok(proto_hello_rep_encode(buf, &in) == PROTO_HELLO_REP_LEN &&
	   proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == 0 && st == 0 &&
	   out.session_id == UINT64_MAX && out.server_version == UINT32_MAX &&
	   out.max_io == PROTO_MAX_IO, "HELLO reply round trips with max values");
	proto_hello_rep_encode(buf, &small);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == 0 && st == 0 &&
	   out.session_id == 0 && out.server_version == 0 && out.max_io == 1,
	   "HELLO reply round trips with zeros and max_io 1");
	small.max_io = 0;
	proto_hello_rep_encode(buf, &small);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == -EBADMSG,
	   "HELLO reply with max_io 0 is -EBADMSG");
	small.max_io = PROTO_MAX_IO + 1;
	proto_hello_rep_encode(buf, &small);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == -EBADMSG,
	   "HELLO reply with max_io above PROTO_MAX_IO is -EBADMSG");

	in = (struct proto_hello_rep){ .max_io = 1, .attach_token = UINT64_MAX,
				       .rdma_port = 7471, .key_mode = PROTO_KEYS_REGION_MR };
	proto_hello_rep_encode(buf, &in);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == 0 &&
	   out.attach_token == UINT64_MAX && out.rdma_port == 7471 &&
	   out.key_mode == PROTO_KEYS_REGION_MR, "HELLO reply carries token, RDMA port, key mode");
	buf[34] = PROTO_KEYS_REGION_MR + 1;
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == -EBADMSG,
	   "HELLO reply with an unknown key mode is -EBADMSG");
	proto_hello_rep_encode(buf, &in);
	buf[35] = 1;
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == -EBADMSG,
	   "HELLO reply with a reserved byte set is -EBADMSG");
	proto_hello_rep_encode(buf, &in);
	proto_put_u32(buf + 36, 1);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == -EBADMSG,
	   "HELLO reply with a reserved word set is -EBADMSG");

	in = (struct proto_hello_rep){ .max_io = 1, .lease_ms = UINT32_MAX };
	proto_hello_rep_encode(buf, &in);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == 0 &&
	   out.lease_ms == UINT32_MAX, "HELLO reply round trips lease_ms UINT32_MAX");
	in.lease_ms = 0;
	proto_hello_rep_encode(buf, &in);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == 0 && out.lease_ms == 0,
	   "HELLO reply round trips lease_ms 0 (no lease)");
	in.lease_ms = 10000;
	proto_hello_rep_encode(buf, &in);
	ok(proto_get_u32(buf + 40) == 10000, "HELLO reply: lease_ms is the u32 at offset 40");

	proto_status_encode(buf, -EPROTO);
	memset(&out, 0xa5, sizeof out);
	ok(proto_hello_rep_decode(buf, PROTO_STATUS_LEN, &st, &out) == 0 && st == -EPROTO &&
	   out.session_id == 0xa5a5a5a5a5a5a5a5ull,
	   "failed HELLO reply: status only, *out untouched");
}

static void test_atomics(void)
{
	uint8_t buf[BUF_LEN];
	struct proto_atomic_req cas = { .id = UINT64_MAX, .offset = 8, .rkey = UINT32_MAX,
					.operand = 1, .desired = UINT64_MAX }, out;
	struct proto_atomic_req faa = { .id = 3, .offset = 16, .rkey = 7, .operand = 5 };
	uint64_t old = 0;
	int st = 1;

	ok(proto_atomic_req_encode(buf, PROTO_OP_CAS, &cas) == PROTO_CAS_REQ_LEN &&
	   proto_atomic_req_decode(buf, PROTO_CAS_REQ_LEN, PROTO_OP_CAS, &out) == 0 &&
	   out.id == UINT64_MAX && out.offset == 8 && out.rkey == UINT32_MAX &&
	   out.operand == 1 && out.desired == UINT64_MAX, "CAS request round trips");
	ok(proto_atomic_req_decode(buf, PROTO_CAS_REQ_LEN - 1, PROTO_OP_CAS, &out) == -EBADMSG &&
	   proto_atomic_req_decode(buf, PROTO_CAS_REQ_LEN + 1, PROTO_OP_CAS, &out) == -EBADMSG &&
	   proto_atomic_req_decode(buf, 0, PROTO_OP_CAS, &out) == -EBADMSG,
	   "CAS request of the wrong length is -EBADMSG");
	ok(proto_atomic_req_encode(buf, PROTO_OP_FAA, &faa) == PROTO_FAA_REQ_LEN &&
	   proto_atomic_req_decode(buf, PROTO_FAA_REQ_LEN, PROTO_OP_FAA, &out) == 0 &&
	   out.id == 3 && out.offset == 16 && out.rkey == 7 && out.operand == 5 &&
	   out.desired == 0, "FAA request round trips");
	ok(proto_atomic_req_decode(buf, PROTO_FAA_REQ_LEN, PROTO_OP_CAS, &out) == -EBADMSG,
	   "an FAA payload is not a CAS request");
	proto_put_u32(buf + 20, 1);
	ok(proto_atomic_req_decode(buf, PROTO_FAA_REQ_LEN, PROTO_OP_FAA, &out) == -EBADMSG,
	   "atomic request with the reserved word set is -EBADMSG");
	ok(proto_atomic_req_decode(buf, PROTO_FAA_REQ_LEN, PROTO_OP_READ, &out) == -EINVAL,
	   "atomic decoder refuses other opcodes");

	ok(proto_atomic_rep_encode(buf, UINT64_MAX - 1) == PROTO_ATOMIC_REP_LEN &&
	   proto_atomic_rep_decode(buf, PROTO_ATOMIC_REP_LEN, &st, &old) == 0 && st == 0 &&
	   old == UINT64_MAX - 1, "atomic reply round trips");
	ok(proto_atomic_rep_decode(buf, PROTO_ATOMIC_REP_LEN - 1, &st, &old) == -EBADMSG,
	   "short atomic reply is -EBADMSG");
	proto_status_encode(buf, -EACCES);
	old = 42;
	ok(proto_atomic_rep_decode(buf, PROTO_STATUS_LEN, &st, &old) == 0 && st == -EACCES &&
	   old == 42, "failed atomic reply: status only, old untouched");
}

static void test_attach(void)
{
	uint8_t buf[64] = { 0 };
	struct proto_attach in = { .session_id = 12, .attach_token = UINT64_MAX }, out;

	ok(proto_attach_encode(buf, &in) == PROTO_ATTACH_LEN &&
	   proto_attach_decode(buf, PROTO_ATTACH_LEN, &out) == 0 && out.session_id == 12 &&
	   out.attach_token == UINT64_MAX, "attach private data round trips");
	ok(proto_attach_decode(buf, sizeof buf, &out) == 0,
	   "attach private data may be padded (rdma_cm pads it)");
	ok(proto_attach_decode(buf, PROTO_ATTACH_LEN - 1, &out) == -EBADMSG,
	   "short attach private data is -EBADMSG");
	buf[0] ^= 1;
	ok(proto_attach_decode(buf, PROTO_ATTACH_LEN, &out) == -EBADMSG,
	   "attach with bad magic is -EBADMSG");
	proto_attach_encode(buf, &in);
	proto_put_u16(buf + 4, PROTO_VERSION + 1);
	ok(proto_attach_decode(buf, PROTO_ATTACH_LEN, &out) == -EPROTO,
	   "attach of another version is -EPROTO");
	proto_attach_encode(buf, &in);
	proto_put_u16(buf + 6, 1);
	ok(proto_attach_decode(buf, PROTO_ATTACH_LEN, &out) == -EBADMSG,
	   "attach with reserved bits is -EBADMSG");
}

static void test_auth(void)
{
	uint8_t buf[PROTO_MAX_CTL] = { 0 }, mac[PROTO_MAC_LEN], mac2[PROTO_MAC_LEN];
	struct proto_auth_begin_req req = { .tenant = "ml" }, rq;
	struct proto_auth_begin_rep rep = { .session_id = 77 }, rp;
	uint8_t msg[PROTO_AUTH_MSG_LEN + 8];
	int status = 1;

	memset(req.client_nonce, 0xc1, sizeof req.client_nonce);
	memset(rep.server_nonce, 0x5e, sizeof rep.server_nonce);
	ok(proto_auth_begin_req_encode(buf, &req) == PROTO_AUTH_BEGIN_REQ_LEN &&
	   proto_auth_begin_req_decode(buf, PROTO_AUTH_BEGIN_REQ_LEN, &rq) == 0 &&
	   !strcmp(rq.tenant, "ml") && !memcmp(rq.client_nonce, req.client_nonce, 32),
	   "AUTH_BEGIN request round trips");
	ok(proto_auth_begin_req_decode(buf, PROTO_AUTH_BEGIN_REQ_LEN - 1, &rq) == -EBADMSG &&
	   proto_auth_begin_req_decode(buf, PROTO_AUTH_BEGIN_REQ_LEN + 1, &rq) == -EBADMSG,
	   "AUTH_BEGIN request of another length is -EBADMSG");
	buf[5] = 'x';
	ok(proto_auth_begin_req_decode(buf, PROTO_AUTH_BEGIN_REQ_LEN, &rq) == -EBADMSG,
	   "a tenant name with bytes after its NUL is -EBADMSG");
	memset(buf, 'a', PROTO_TENANT_LEN);
	ok(proto_auth_begin_req_decode(buf, PROTO_AUTH_BEGIN_REQ_LEN, &rq) == -EBADMSG,
	   "a tenant name of 32 bytes (no NUL) is -EBADMSG");
	memset(buf, 0, PROTO_TENANT_LEN);
	ok(proto_auth_begin_req_decode(buf, PROTO_AUTH_BEGIN_REQ_LEN, &rq) == -EBADMSG,
	   "an empty tenant name is -EBADMSG");

	ok(proto_auth_begin_rep_encode(buf, &rep) == PROTO_AUTH_BEGIN_REP_LEN &&
	   proto_auth_begin_rep_decode(buf, PROTO_AUTH_BEGIN_REP_LEN, &status, &rp) == 0 &&
	   status == 0 && rp.session_id == 77 && !memcmp(rp.server_nonce, rep.server_nonce, 32),
	   "AUTH_BEGIN reply round trips");
	ok(proto_auth_begin_rep_decode(buf, PROTO_AUTH_BEGIN_REP_LEN - 1, &status, &rp) ==
	   -EBADMSG, "a short AUTH_BEGIN reply is -EBADMSG");
	proto_status_encode(buf, -EACCES);
	ok(proto_auth_begin_rep_decode(buf, PROTO_STATUS_LEN, &status, &rp) == 0 &&
	   status == -EACCES, "a failed AUTH_BEGIN reply carries only its status");

	memset(mac, 0xab, sizeof mac);
	ok(proto_auth_req_encode(buf, mac) == PROTO_AUTH_REQ_LEN &&
	   proto_auth_req_decode(buf, PROTO_AUTH_REQ_LEN, mac2) == 0 && !memcmp(mac, mac2, 32),
	   "AUTH request round trips");
	ok(proto_auth_req_decode(buf, PROTO_AUTH_REQ_LEN - 1, mac2) == -EBADMSG &&
	   proto_auth_req_decode(buf, 0, mac2) == -EBADMSG, "a short AUTH request is -EBADMSG");
	memset(mac2, 0, sizeof mac2);
	ok(proto_auth_rep_encode(buf, mac) == PROTO_AUTH_REP_LEN &&
	   proto_auth_rep_decode(buf, PROTO_AUTH_REP_LEN, &status, mac2) == 0 && status == 0 &&
	   !memcmp(mac, mac2, 32), "AUTH reply round trips");
	ok(proto_auth_rep_decode(buf, PROTO_AUTH_REP_LEN + 1, &status, mac2) == -EBADMSG,
	   "a long AUTH reply is -EBADMSG");

	memset(msg, 0xee, sizeof msg);
	ok(proto_auth_transcript(msg, PROTO_AUTH_CLIENT, "ml", rep.server_nonce,
				 req.client_nonce, 0x0102030405060708ull) == PROTO_AUTH_MSG_LEN &&
	   PROTO_AUTH_MSG_LEN == 116 && !memcmp(msg, "rmem-auth-v1", 12) && msg[12] == 0x5e &&
	   msg[44] == 0xc1 && msg[76] == 'm' && msg[78] == 0 && msg[107] == 0 &&
	   msg[108] == 0x08 && msg[115] == 0x01 && msg[116] == 0xee,
	   "the client's transcript is label, server nonce, client nonce, tenant[32], id");
	proto_auth_transcript(msg, PROTO_AUTH_SERVER, "ml", rep.server_nonce, req.client_nonce, 1);
	ok(!memcmp(msg, "rmem-srvr-v1", 12), "the daemon's transcript has its own label");
}

static void test_alloc_rep(void)
{
	uint8_t buf[BUF_LEN];
	struct proto_region out, max = {
		.id = UINT64_MAX, .addr = UINT64_MAX, .length = UINT64_MAX,
		.rkey = UINT32_MAX, .flags = UINT32_MAX,
	}, zero = { 0 };
	int st = 1;

	ok(proto_alloc_rep_encode(buf, &max) == PROTO_ALLOC_REP_LEN &&
	   proto_alloc_rep_decode(buf, PROTO_ALLOC_REP_LEN, &st, &out) == 0 && st == 0 &&
	   memcmp(&out, &max, sizeof out) == 0, "ALLOC reply round trips with max values");
	proto_alloc_rep_encode(buf, &zero);
	ok(proto_alloc_rep_decode(buf, PROTO_ALLOC_REP_LEN, &st, &out) == 0 && st == 0 &&
	   memcmp(&out, &zero, sizeof out) == 0, "ALLOC reply round trips with zeros");

	proto_status_encode(buf, -ENOMEM);
	memset(&out, 0xa5, sizeof out);
	ok(proto_alloc_rep_decode(buf, PROTO_STATUS_LEN, &st, &out) == 0 && st == -ENOMEM &&
	   out.id == 0xa5a5a5a5a5a5a5a5ull, "failed ALLOC reply: -ENOMEM, *out untouched");
	ok(proto_alloc_rep_decode(buf, PROTO_ALLOC_REP_LEN, &st, &out) == -EBADMSG,
	   "failed ALLOC reply with a body is -EBADMSG");
	proto_put_u32(buf, 5000);
	ok(proto_alloc_rep_decode(buf, PROTO_STATUS_LEN, &st, &out) == -EBADMSG,
	   "ALLOC reply with status 5000 is -EBADMSG");
}

static void test_read_rep(void)
{
	uint8_t buf[PROTO_STATUS_LEN];
	size_t data_len = 1;
	int st = 1;

	proto_status_encode(buf, 0);
	ok(proto_read_rep_decode(buf, PROTO_STATUS_LEN + 100, &st, &data_len) == 0 &&
	   st == 0 && data_len == 100, "READ reply: data length from the payload length");
	ok(proto_read_rep_decode(buf, PROTO_STATUS_LEN, &st, &data_len) == 0 && data_len == 0,
	   "READ reply with no data");
	ok(proto_read_rep_decode(buf, PROTO_STATUS_LEN + PROTO_MAX_IO, &st, &data_len) == 0 &&
	   data_len == PROTO_MAX_IO, "READ reply of PROTO_MAX_IO bytes");
	ok(proto_read_rep_decode(buf, PROTO_STATUS_LEN + PROTO_MAX_IO + 1, &st, &data_len) ==
	   -EMSGSIZE, "READ reply of PROTO_MAX_IO + 1 bytes is -EMSGSIZE");
	ok(proto_read_rep_decode(buf, PROTO_STATUS_LEN - 1, &st, &data_len) == -EBADMSG,
	   "READ reply of length - 1 is -EBADMSG");
	ok(proto_read_rep_decode(buf, 0, &st, &data_len) == -EBADMSG,
	   "READ reply of length 0 is -EBADMSG");
	proto_status_encode(buf, -ERANGE);
	ok(proto_read_rep_decode(buf, PROTO_STATUS_LEN, &st, &data_len) == 0 && st == -ERANGE,
	   "failed READ reply gives -ERANGE");
	ok(proto_read_rep_decode(buf, PROTO_STATUS_LEN + 1, &st, &data_len) == -EBADMSG,
	   "failed READ reply followed by data is -EBADMSG");
}

static void test_stats(void)
{
	uint8_t buf[BUF_LEN];
	struct proto_stats in, out;
	size_t n;
	int st = 1;

	for (size_t i = 0; i < PROTO_STAT_COUNT; i++)
		in.v[i] = i & 1 ? UINT64_MAX : i;
	n = proto_stats_rep_encode(buf, &in);
	ok(n == PROTO_STATS_REP_LEN && proto_stats_rep_decode(buf, n, &st, &out) == 0 &&
	   st == 0 && memcmp(&in, &out, sizeof in) == 0, "STATS reply round trips");

	/* An older daemon sends fewer figures: the missing ones read 0. */
	proto_put_u32(buf + 8, 3);
	ok(proto_stats_rep_decode(buf, PROTO_LIST_HDR_LEN + 3 * 8, &st, &out) == 0 &&
	   out.v[2] == in.v[2] && out.v[3] == 0 && out.v[PROTO_STAT_COUNT - 1] == 0,
	   "STATS reply with 3 figures: the rest decode as 0");
	/* A newer daemon sends more: the extra ones are ignored. */
	memset(buf + n, 0xee, 8 * 3);
	proto_put_u32(buf + 8, PROTO_STAT_COUNT + 3);
	ok(proto_stats_rep_decode(buf, n + 8 * 3, &st, &out) == 0 &&
	   memcmp(&in, &out, sizeof in) == 0, "STATS reply with extra figures: ignored");
	ok(proto_stats_rep_decode(buf, n, &st, &out) == -EBADMSG,
	   "STATS count larger than the payload is -EBADMSG");
	proto_put_u32(buf + 8, UINT32_MAX);
	ok(proto_stats_rep_decode(buf, n, &st, &out) == -EBADMSG,
	   "STATS count UINT32_MAX is -EBADMSG");
	proto_put_u32(buf + 8, 0);
	ok(proto_stats_rep_decode(buf, PROTO_LIST_HDR_LEN, &st, &out) == 0 && out.v[0] == 0,
	   "STATS reply with no figures decodes as zeros");
}

/* ---- listings -------------------------------------------------------------- */

static bool pool_rec_equal(const struct proto_pool_rec *a, const struct proto_pool_rec *b)
{
	return memcmp(a->name, b->name, sizeof a->name) == 0 && a->bytes == b->bytes &&
	       a->used == b->used && a->largest_free == b->largest_free &&
	       a->regions == b->regions && a->page_size == b->page_size &&
	       a->alignment == b->alignment;
}

static void test_pool_list(void)
{
	uint8_t buf[BUF_LEN];
	uint32_t max = PROTO_LIST_MAX(PROTO_POOL_REC_LEN), count = 0;
	struct proto_pool_rec in = {
		.name = "hugepages-1G", .bytes = UINT64_MAX, .used = 0,
		.largest_free = UINT64_MAX, .regions = 0, .page_size = UINT32_MAX,
		.alignment = 0,
	}, out;
	size_t n = proto_list_hdr_encode(buf, max);
	bool good = true;
	int st = 1;

	for (uint32_t i = 0; i < max; i++)
		n += proto_pool_rec_encode(buf + n, &in);
	ok(n <= PROTO_MAX_CTL && n + PROTO_POOL_REC_LEN > PROTO_MAX_CTL,
	   "PROTO_LIST_MAX(pool) records fill a control frame (%zu bytes)", n);
	ok(proto_list_hdr_decode(buf, n, PROTO_POOL_REC_LEN, &st, &count) == 0 && st == 0 &&
	   count == max, "POOLS reply of %u records decodes", max);
	for (uint32_t i = 0; i < count; i++) {
		memset(&out, 0xa5, sizeof out);
		proto_pool_rec_decode(buf + PROTO_LIST_HDR_LEN + i * PROTO_POOL_REC_LEN, &out);
		good &= pool_rec_equal(&in, &out);
	}
	ok(good, "every pool record round trips");
	ok(proto_list_hdr_decode(buf, n - PROTO_POOL_REC_LEN, PROTO_POOL_REC_LEN, &st,
				 &count) == -EBADMSG, "count one above the records is -EBADMSG");
	proto_put_u32(buf + 8, max - 2);
	ok(proto_list_hdr_decode(buf, n, PROTO_POOL_REC_LEN, &st, &count) == -EBADMSG,
	   "count below the records is -EBADMSG");
	proto_put_u32(buf + 8, 0);
	ok(proto_list_hdr_decode(buf, PROTO_LIST_HDR_LEN, PROTO_POOL_REC_LEN, &st, &count) == 0 &&
	   count == 0, "empty listing decodes");
	ok(proto_list_hdr_decode(buf, PROTO_LIST_HDR_LEN + 1, PROTO_POOL_REC_LEN, &st, &count) ==
	   -EBADMSG, "listing with a partial record is -EBADMSG");
	ok(proto_list_hdr_decode(buf, PROTO_LIST_HDR_LEN - 1, PROTO_POOL_REC_LEN, &st, &count) ==
	   -EBADMSG, "listing shorter than its header is -EBADMSG");
	ok(proto_list_hdr_decode(buf, PROTO_LIST_HDR_LEN, 0, &st, &count) == -EINVAL,
	   "record length 0 is -EINVAL");

	proto_status_encode(buf, -EACCES);
	count = 7;
	ok(proto_list_hdr_decode(buf, PROTO_STATUS_LEN, PROTO_POOL_REC_LEN, &st, &count) == 0 &&
	   st == -EACCES && count == 0, "refused listing: -EACCES and count 0");
}

static void test_pool_names(void)
{
	uint8_t buf[PROTO_POOL_REC_LEN];
	struct proto_pool_rec in, out;

	memset(&in, 'x', sizeof in);
	proto_pool_rec_encode(buf, &in);
	ok(buf[31] == 0 && buf[30] == 'x', "unterminated name: 31 bytes sent, then NUL");

	memset(buf, 'y', 32);
	proto_pool_rec_decode(buf, &out);
	ok(out.name[31] == 0 && out.name[30] == 'y', "unterminated name on the wire: NUL forced");

	memset(&in, 0, sizeof in);
	memcpy(in.name, "ab", 3);
	memcpy(in.name + 3, "junk", 4); /* after the NUL: must not travel */
	proto_pool_rec_encode(buf, &in);
	ok(memcmp(buf, "ab\0\0\0\0\0", 7) == 0, "name is NUL padded on the wire");
	memcpy(buf + 5, "junk", 4);
	memset(&out, 0xa5, sizeof out);
	proto_pool_rec_decode(buf, &out);
	ok(strcmp(out.name, "ab") == 0 && out.name[5] == 0 && out.name[31] == 0,
	   "bytes after the NUL are dropped on decode");
}

static void test_region_list(void)
{
	uint8_t buf[BUF_LEN];
	uint32_t max = PROTO_LIST_MAX(PROTO_REGION_REC_LEN), count = 0;
	struct proto_region_rec max_rec = {
		.id = UINT64_MAX, .addr = UINT64_MAX, .length = UINT64_MAX,
		.client_id = UINT64_MAX, .pool = UINT32_MAX,
	}, zero = { 0 }, out;
	size_t n = proto_list_hdr_encode(buf, max);
	bool good = true;
	int st = 1;

	for (uint32_t i = 0; i < max; i++)
		n += proto_region_rec_encode(buf + n, i & 1 ? &max_rec : &zero);
	ok(n <= PROTO_MAX_CTL, "PROTO_LIST_MAX(region) records fit a control frame");
	ok(proto_list_hdr_decode(buf, n, PROTO_REGION_REC_LEN, &st, &count) == 0 &&
	   count == max, "REGIONS reply of %u records decodes", max);
	for (uint32_t i = 0; i < count; i++) {
		const struct proto_region_rec *want = i & 1 ? &max_rec : &zero;

		proto_region_rec_decode(buf + PROTO_LIST_HDR_LEN + i * PROTO_REGION_REC_LEN, &out);
		good &= out.id == want->id && out.addr == want->addr &&
			out.length == want->length && out.client_id == want->client_id &&
			out.pool == want->pool;
	}
	ok(good, "region records round trip with 0 and max values");
	buf[n - 1] = 1; /* reserved word of the last record */
	ok(proto_list_hdr_decode(buf, n, PROTO_REGION_REC_LEN, &st, &count) == -EBADMSG,
	   "region record with non-zero reserved is -EBADMSG");
}

/* REGIONS_NAMED: the long records carry access, name id and a 255-byte
 * name, and unknown flag bits are refused. */
static void test_region_named_list(void)
{
	uint8_t buf[BUF_LEN];
	uint32_t max = PROTO_LIST_MAX(PROTO_REGION_NAMED_REC_LEN), count = 0;
	struct proto_region_rec named = {
		.id = UINT64_MAX, .addr = 1, .length = 2, .client_id = 3, .pool = 4,
		.flags = PROTO_ACCESS_READ | PROTO_REGION_F_UNLINKED, .name_id = UINT64_MAX - 1,
	}, anon = { .id = 5 }, out;
	size_t n;
	bool good = true;
	int st = 1;

	memset(named.name, 'x', PROTO_NAME_MAX);
	named.name[PROTO_NAME_MAX] = '\0';
	n = proto_list_hdr_encode(buf, max);
	for (uint32_t i = 0; i < max; i++)
		n += proto_region_named_rec_encode(buf + n, i & 1 ? &named : &anon);
	ok(n <= PROTO_MAX_CTL && max >= 10, "%u named region records fit a control frame", max);
	ok(proto_list_hdr_decode(buf, n, PROTO_REGION_NAMED_REC_LEN, &st, &count) == 0 &&
	   count == max, "a named REGIONS reply decodes");
	for (uint32_t i = 0; i < count; i++) {
		const struct proto_region_rec *want = i & 1 ? &named : &anon;

		memset(&out, 0xa5, sizeof out);
		proto_region_named_rec_decode(buf + PROTO_LIST_HDR_LEN +
					      i * PROTO_REGION_NAMED_REC_LEN, &out);
		good &= out.id == want->id && out.addr == want->addr &&
			out.length == want->length && out.client_id == want->client_id &&
			out.pool == want->pool && out.flags == want->flags &&
			out.name_id == want->name_id && strcmp(out.name, want->name) == 0;
	}
	ok(good, "named region records round trip: access, unlinked, name id, 255-byte name");
	proto_region_rec_decode(buf + PROTO_LIST_HDR_LEN + PROTO_REGION_NAMED_REC_LEN, &out);
	ok(out.flags == 0 && out.name_id == 0 && out.name[0] == '\0',
	   "the short decoder leaves the named fields empty");
	buf[PROTO_LIST_HDR_LEN + PROTO_REGION_NAMED_REC_LEN + 36] |= 0x4;
	ok(proto_list_hdr_decode(buf, n, PROTO_REGION_NAMED_REC_LEN, &st, &count) == -EBADMSG,
	   "a named record with an unknown flag bit is -EBADMSG");
}

/* CREATE, OPEN, UNLINK: one layout, a name of 1..255 bytes without NUL. */
static void test_name_reqs(void)
{
	static const uint16_t ops[] = { PROTO_OP_CREATE, PROTO_OP_OPEN, PROTO_OP_UNLINK };
	uint8_t buf[BUF_LEN];
	struct proto_name_req in = { .size = 0, .flags = PROTO_ACCESS_READ }, out;
	size_t n;

	memset(in.name, 'n', PROTO_NAME_MAX);
	in.name_len = PROTO_NAME_MAX;
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		in.size = ops[i] == PROTO_OP_CREATE ? UINT64_MAX : 0;
		n = proto_name_req_encode(buf, ops[i], &in);
		ok(n == PROTO_NAME_REQ_FIXED + PROTO_NAME_MAX &&
		   proto_name_req_decode(buf, n, ops[i], &out) == 0 && out.size == in.size &&
		   out.flags == in.flags && out.name_len == PROTO_NAME_MAX &&
		   strlen(out.name) == PROTO_NAME_MAX && !memcmp(out.name, in.name, PROTO_NAME_MAX),
		   "opcode %u: a %d-byte name round trips", ops[i], PROTO_NAME_MAX);
		ok(proto_name_req_decode(buf, n - 1, ops[i], &out) == -EBADMSG &&
		   proto_name_req_decode(buf, n + 1, ops[i], &out) == -EBADMSG &&
		   proto_name_req_decode(buf, PROTO_NAME_REQ_FIXED - 1, ops[i], &out) == -EBADMSG,
		   "opcode %u: a payload shorter or longer than its name_len is -EBADMSG", ops[i]);
	}
	memcpy(in.name, "t/a", 4);
	in.name_len = 3;
	in.size = 4096;
	n = proto_name_req_encode(buf, PROTO_OP_CREATE, &in);
	buf[PROTO_NAME_REQ_FIXED + 1] = 0;
	ok(proto_name_req_decode(buf, n, PROTO_OP_CREATE, &out) == -EBADMSG,
	   "a NUL inside the name is -EBADMSG");
	n = proto_name_req_encode(buf, PROTO_OP_CREATE, &in);
	buf[12] = 0, buf[13] = 0;
	ok(proto_name_req_decode(buf, PROTO_NAME_REQ_FIXED, PROTO_OP_CREATE, &out) == -EBADMSG,
	   "an empty name is -EBADMSG");
	buf[12] = 0, buf[13] = 1; /* name_len 256 */
	ok(proto_name_req_decode(buf, PROTO_NAME_REQ_FIXED + 256, PROTO_OP_CREATE, &out) ==
	   -EBADMSG, "a 256-byte name is -EBADMSG");
	n = proto_name_req_encode(buf, PROTO_OP_CREATE, &in);
	buf[14] = 1;
	ok(proto_name_req_decode(buf, n, PROTO_OP_CREATE, &out) == -EBADMSG,
	   "a reserved field that is not 0 is -EBADMSG");
	n = proto_name_req_encode(buf, PROTO_OP_CREATE, &in);
	ok(proto_name_req_decode(buf, n, PROTO_OP_OPEN, &out) == -EBADMSG,
	   "OPEN with a size is -EBADMSG");
	ok(proto_name_req_decode(buf, n, PROTO_OP_ALLOC, &out) == -EINVAL,
	   "the name decoder refuses other opcodes (-EINVAL)");
	n = proto_name_req_encode(buf, PROTO_OP_OPEN, &in);
	ok(n == PROTO_NAME_REQ_FIXED + 3 && proto_get_u64(buf) == 0,
	   "OPEN's encoder writes size 0 whatever it is given");
}

/* UNLINK with PROTO_UNLINK_NS: "TENANT:NAME" may be PROTO_NAME_NS_MAX long;
 * other opcodes and flags keep the PROTO_NAME_MAX bound. */
static void test_name_req_ns(void)
{
	uint8_t buf[BUF_LEN];
	struct proto_name_req in = { .flags = PROTO_UNLINK_NS | PROTO_UNLINK_REVOKE }, out;
	size_t n;

	memset(in.name, 'n', PROTO_NAME_NS_MAX);
	memcpy(in.name, "tenant:", 7);
	in.name_len = PROTO_NAME_NS_MAX;
	n = proto_name_req_encode(buf, PROTO_OP_UNLINK, &in);
	ok(n == PROTO_NAME_REQ_FIXED + PROTO_NAME_NS_MAX &&
	   proto_name_req_decode(buf, n, PROTO_OP_UNLINK, &out) == 0 && out.flags == in.flags &&
	   out.name_len == PROTO_NAME_NS_MAX && strlen(out.name) == PROTO_NAME_NS_MAX &&
	   !memcmp(out.name, in.name, PROTO_NAME_NS_MAX),
	   "UNLINK_NS: a %d-byte \"TENANT:NAME\" round trips", PROTO_NAME_NS_MAX);
	proto_put_u16(buf + 12, PROTO_NAME_NS_MAX + 1);
	ok(proto_name_req_decode(buf, n + 1, PROTO_OP_UNLINK, &out) == -EBADMSG,
	   "UNLINK_NS: one byte more is -EBADMSG");
	proto_put_u16(buf + 12, PROTO_NAME_NS_MAX);
	proto_put_u32(buf + 8, PROTO_UNLINK_REVOKE);
	ok(proto_name_req_decode(buf, n, PROTO_OP_UNLINK, &out) == -EBADMSG,
	   "UNLINK without the flag: a name past %d bytes is -EBADMSG", PROTO_NAME_MAX);
	proto_put_u32(buf + 8, PROTO_UNLINK_NS);
	ok(proto_name_req_decode(buf, n, PROTO_OP_OPEN, &out) == -EBADMSG,
	   "OPEN with the same bit in its access: still bound to %d bytes", PROTO_NAME_MAX);
}

static void test_name_len(void)
{
	char name[PROTO_NAME_MAX + 2];

	memset(name, 'n', sizeof name - 1);
	name[sizeof name - 1] = '\0';
	ok(proto_name_len(name) == -ENAMETOOLONG, "proto_name_len: %d bytes is -ENAMETOOLONG",
	   PROTO_NAME_MAX + 1);
	name[PROTO_NAME_MAX - 1] = '\n';
	ok(proto_name_len(name) == -ENAMETOOLONG, "...whatever the bytes within the limit hold");
	name[PROTO_NAME_MAX - 1] = 'n';
	name[PROTO_NAME_MAX] = '\0';
	ok(proto_name_len(name) == PROTO_NAME_MAX, "proto_name_len: %d bytes is the length",
	   PROTO_NAME_MAX);
	ok(proto_name_len("a/b~!") == 5, "proto_name_len: 0x21..0x7e, '/' among them");
	ok(proto_name_len("") == -EINVAL && proto_name_len(NULL) == -EINVAL,
	   "proto_name_len: empty and NULL are -EINVAL");
	ok(proto_name_len("a b") == -EINVAL && proto_name_len("a\x7f") == -EINVAL &&
	   proto_name_len("\x80") == -EINVAL, "proto_name_len: a space, DEL, a high byte: -EINVAL");
}

static void test_name_list(void)
{
	uint8_t buf[BUF_LEN];
	uint32_t count = 0, max = PROTO_LIST_MAX(PROTO_NAME_REC_LEN);
	struct proto_name_rec in = {
		.id = UINT64_MAX, .length = 1, .age_ms = UINT64_MAX, .handles = UINT32_MAX,
		.flags = PROTO_NAME_F_UNLINKED, .tenant = "ml",
	}, out;
	size_t n = proto_list_hdr_encode(buf, max);
	bool good = true;
	int st = 1;

	memset(in.name, 'x', PROTO_NAME_MAX);
	for (uint32_t i = 0; i < max; i++)
		n += proto_name_rec_encode(buf + n, &in);
	ok(max >= 12 && n <= PROTO_MAX_CTL, "%u name records fit a control frame", max);
	ok(proto_list_hdr_decode(buf, n, PROTO_NAME_REC_LEN, &st, &count) == 0 && st == 0 &&
	   count == max, "NAMES reply decodes");
	for (uint32_t i = 0; i < count; i++) {
		proto_name_rec_decode(buf + PROTO_LIST_HDR_LEN + i * PROTO_NAME_REC_LEN, &out);
		good &= !memcmp(&out, &in, sizeof in);
	}
	ok(good, "name records round trip, 255-byte name and all");
}

static void test_client_list(void)
{
	uint8_t buf[BUF_LEN];
	uint32_t count = 0;
	struct proto_client_rec in = {
		.id = UINT64_MAX, .regions = 0, .used = UINT64_MAX, .connected_ms = 0,
		.idle_ms = UINT64_MAX, .transport = "unix", .peer = "uid=0 pid=12",
	}, out;
	size_t n = proto_list_hdr_encode(buf, 1);
	int st = 1;

	n += proto_client_rec_encode(buf + n, &in);
	ok(n == PROTO_LIST_HDR_LEN + PROTO_CLIENT_REC_LEN &&
	   proto_list_hdr_decode(buf, n, PROTO_CLIENT_REC_LEN, &st, &count) == 0 && count == 1,
	   "CLIENTS reply of one record decodes");
	memset(&out, 0xa5, sizeof out);
	proto_client_rec_decode(buf + PROTO_LIST_HDR_LEN, &out);
	ok(memcmp(&in, &out, sizeof in) == 0, "client record round trips");
	ok(PROTO_LIST_MAX(PROTO_CLIENT_REC_LEN) * PROTO_CLIENT_REC_LEN + PROTO_LIST_HDR_LEN <=
	   PROTO_MAX_CTL, "PROTO_LIST_MAX(client) records fit a control frame");

	memset(in.transport, 't', sizeof in.transport);
	memset(in.peer, 'p', sizeof in.peer);
	proto_client_rec_encode(buf, &in);
	proto_client_rec_decode(buf, &out);
	ok(strlen(out.transport) == sizeof out.transport - 1 &&
	   strlen(out.peer) == sizeof out.peer - 1, "over-long strings are cut, NUL-terminated");
}

/* ---- resume (docs/protocol.md 7.13) ------------------------------------------ */

static void test_resume(void)
{
	uint8_t buf[BUF_LEN];
	struct proto_hello_req hi = { .client_version = 1, .features = PROTO_HELLO_F_RESUMABLE }, hi2;
	struct proto_hello_rep in = { .session_id = 77, .max_io = 1, .resumable = 1 }, out;
	struct proto_resume_req rq = { .session_id = UINT64_MAX, .client_version = 1,
				       .features = PROTO_HELLO_F_RESUMABLE, .pid = 9 }, rq2;
	struct proto_rekey_req rk = { .id = UINT64_MAX }, rk2;
	int st = 1;

	ok(proto_hello_req_encode(buf, &hi) == PROTO_HELLO_REQ_LEN &&
	   proto_hello_req_decode(buf, PROTO_HELLO_REQ_LEN, &hi2) == 0 &&
	   hi2.features == PROTO_HELLO_F_RESUMABLE, "HELLO request carries the RESUMABLE bit");
	proto_put_u32(buf + 4, PROTO_HELLO_F_RESUMABLE | 0x2);
	ok(proto_hello_req_decode(buf, PROTO_HELLO_REQ_LEN, &hi2) == -EBADMSG,
	   "HELLO request with an unknown feature bit is -EBADMSG");

	for (int i = 0; i < PROTO_RESUME_TOKEN_LEN; i++)
		in.resume_token[i] = (uint8_t)(0xf0 + i);
	ok(proto_hello_rep_encode(buf, &in) == PROTO_HELLO_REP_RESUME_LEN &&
	   buf[PROTO_HELLO_REP_LEN] == 0xf0 && buf[PROTO_HELLO_REP_RESUME_LEN - 1] == 0xff,
	   "resumable HELLO reply: 64 bytes, the token at offset 48");
	memset(&out, 0, sizeof out);
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_RESUME_LEN, &st, &out) == 0 && st == 0 &&
	   out.resumable == 1 && out.session_id == 77 &&
	   memcmp(out.resume_token, in.resume_token, PROTO_RESUME_TOKEN_LEN) == 0,
	   "resumable HELLO reply round trips its token");
	ok(proto_hello_rep_decode(buf, PROTO_HELLO_REP_RESUME_LEN - 1, &st, &out) == -EBADMSG &&
	   proto_hello_rep_decode(buf, PROTO_HELLO_REP_RESUME_LEN + 1, &st, &out) == -EBADMSG,
	   "HELLO reply of 63 or 65 bytes is -EBADMSG");
	in.resumable = 0;
	memset(&out, 0xa5, sizeof out);
	ok(proto_hello_rep_encode(buf, &in) == PROTO_HELLO_REP_LEN &&
	   proto_hello_rep_decode(buf, PROTO_HELLO_REP_LEN, &st, &out) == 0 &&
	   out.resumable == 0 && out.resume_token[0] == 0 && out.resume_token[15] == 0,
	   "plain HELLO reply: 48 bytes, no token (zeros)");

	for (int i = 0; i < PROTO_RESUME_TOKEN_LEN; i++)
		rq.resume_token[i] = (uint8_t)i;
	memset(&rq2, 0xa5, sizeof rq2);
	ok(proto_resume_req_encode(buf, &rq) == PROTO_RESUME_REQ_LEN &&
	   proto_resume_req_decode(buf, PROTO_RESUME_REQ_LEN, &rq2) == 0 &&
	   rq2.session_id == UINT64_MAX && rq2.client_version == 1 &&
	   rq2.features == PROTO_HELLO_F_RESUMABLE && rq2.pid == 9 &&
	   memcmp(rq2.resume_token, rq.resume_token, PROTO_RESUME_TOKEN_LEN) == 0,
	   "RESUME request round trips");
	ok(proto_get_u64(buf) == UINT64_MAX && buf[8] == 0 && buf[23] == 15 &&
	   proto_get_u32(buf + 24) == 1 && proto_get_u32(buf + 32) == 9,
	   "RESUME request layout: session_id, token at 8, version at 24, pid at 32");
	ok(proto_resume_req_decode(buf, PROTO_RESUME_REQ_LEN - 1, &rq2) == -EBADMSG &&
	   proto_resume_req_decode(buf, PROTO_RESUME_REQ_LEN + 1, &rq2) == -EBADMSG &&
	   proto_resume_req_decode(buf, 0, &rq2) == -EBADMSG,
	   "RESUME request of another length is -EBADMSG");
	proto_put_u32(buf + 36, 1);
	ok(proto_resume_req_decode(buf, PROTO_RESUME_REQ_LEN, &rq2) == -EBADMSG,
	   "RESUME request with its reserved word set is -EBADMSG");
	proto_resume_req_encode(buf, &rq);
	proto_put_u32(buf + 28, 0x80000000u);
	ok(proto_resume_req_decode(buf, PROTO_RESUME_REQ_LEN, &rq2) == -EBADMSG,
	   "RESUME request with an unknown feature bit is -EBADMSG");

	memset(&rk2, 0xa5, sizeof rk2);
	ok(proto_rekey_req_encode(buf, &rk) == PROTO_REKEY_REQ_LEN &&
	   proto_rekey_req_decode(buf, PROTO_REKEY_REQ_LEN, &rk2) == 0 && rk2.id == UINT64_MAX &&
	   rk2.flags == 0, "REKEY request round trips");
	ok(proto_rekey_req_decode(buf, PROTO_REKEY_REQ_LEN - 1, &rk2) == -EBADMSG &&
	   proto_rekey_req_decode(buf, PROTO_REKEY_REQ_LEN + 1, &rk2) == -EBADMSG,
	   "REKEY request of another length is -EBADMSG");
	proto_put_u32(buf + 8, 1);
	ok(proto_rekey_req_decode(buf, PROTO_REKEY_REQ_LEN, &rk2) == -EBADMSG,
	   "REKEY request with a flag set is -EBADMSG");
	proto_rekey_req_encode(buf, &rk);
	proto_put_u32(buf + 12, 1);
	ok(proto_rekey_req_decode(buf, PROTO_REKEY_REQ_LEN, &rk2) == -EBADMSG,
	   "REKEY request with its reserved word set is -EBADMSG");
}

int main(void)
{
	test_hdr_bytes();
	test_hdr_round_trip();
	test_hdr_magic_version();
	test_hdr_flags_reserved();
	test_hdr_opcode();
	test_hdr_length();
	test_fixed_cases();
	test_requests_round_trip();
	test_io_req();
	test_status();
	test_hello_rep();
	test_atomics();
	test_attach();
	test_auth();
	test_alloc_rep();
	test_read_rep();
	test_stats();
	test_pool_list();
	test_pool_names();
	test_region_list();
	test_region_named_list();
	test_client_list();
	test_name_reqs();
	test_name_req_ns();
	test_name_len();
	test_name_list();
	test_resume();
	return tap_done();
}
