/*
 * seeds_dispatch.c - writes the seed corpus of fuzz_dispatch: whole client
 * conversations (good ones, and ones that break the protocol in each way the
 * daemon must survive), one file each, in the format of fuzz_dispatch.h.
 *
 *   make fuzz-seeds     (writes tests/fuzz/corpus/dispatch/)
 *
 * Region n of a conversation has id n + 1 and key FUZZ_REGION_KEY(n).  A TCP
 * conversation authenticates as FUZZ_TENANT before its HELLO, with the MAC
 * the daemon will expect (its nonce is known in advance, fuzz_dispatch.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "authmac.h"
#include "fuzz_dispatch.h"
#include "proto.h"
#include "raw.h"

struct seed {
	struct raw_out out;
	uint64_t req_id;
	bool tcp;
};

static struct seed sd;

static void begin(uint8_t mode)
{
	raw_out_fini(&sd.out);
	sd.req_id = 1;
	sd.tcp = mode & FUZZ_MODE_TCP;
	raw_out_put(&sd.out, &mode, 1);
}

static void put(const void *p, size_t n)
{
	raw_out_put(&sd.out, p, n);
}

/* A request header, as a client builds it. */
static void hdr(uint16_t opcode, uint32_t length)
{
	uint8_t h[PROTO_HDR_LEN];

	raw_hdr(h, PROTO_VERSION, opcode, 0, length, sd.req_id++);
	put(h, sizeof h);
}

static void frame(uint16_t opcode, const void *payload, size_t len)
{
	raw_out_frame(&sd.out, opcode, sd.req_id++, payload, len);
}

static void auth_begin(const char *tenant, uint8_t nonce[PROTO_NONCE_LEN])
{
	uint8_t p[PROTO_AUTH_BEGIN_REQ_LEN];
	struct proto_auth_begin_req m = { .tenant = { 0 } };

	snprintf(m.tenant, sizeof m.tenant, "%s", tenant);
	for (unsigned i = 0; i < PROTO_NONCE_LEN; i++)
		m.client_nonce[i] = (uint8_t)(0xc0 + i);
	memcpy(nonce, m.client_nonce, PROTO_NONCE_LEN);
	frame(PROTO_OP_AUTH_BEGIN, p, proto_auth_begin_req_encode(p, &m));
}

/* The MAC the daemon expects from session 1 of an input. */
static void client_mac(const char *secret, const uint8_t client_nonce[PROTO_NONCE_LEN],
		       uint8_t mac[PROTO_MAC_LEN])
{
	uint8_t server_nonce[PROTO_NONCE_LEN];
	char tenant[PROTO_TENANT_LEN] = { 0 };

	snprintf(tenant, sizeof tenant, "%s", FUZZ_TENANT);
	for (unsigned i = 0; i < PROTO_NONCE_LEN; i++)
		server_nonce[i] = (uint8_t)(FUZZ_RANDOM_WORD(i / 4) >> (8 * (i % 4)));
	authmac_compute((const uint8_t *)secret, strlen(secret), PROTO_AUTH_CLIENT, tenant, server_nonce,
		 client_nonce, 1, mac);
}

static void auth_as(const char *secret)
{
	uint8_t nonce[PROTO_NONCE_LEN], mac[PROTO_MAC_LEN], p[PROTO_AUTH_REQ_LEN];

	auth_begin(FUZZ_TENANT, nonce);
	client_mac(secret, nonce, mac);
	frame(PROTO_OP_AUTH, p, proto_auth_req_encode(p, mac));
}

static void hello_only(void)
{
	uint8_t p[PROTO_HELLO_REQ_LEN];
	struct proto_hello_req m = { .client_version = PROTO_VERSION, .pid = 4242 };

	frame(PROTO_OP_HELLO, p, proto_hello_req_encode(p, &m));
}

/* A TCP client must prove its tenant first. */
static void hello(void)
{
	if (sd.tcp)
		auth_as(FUZZ_TENANT_SECRET);
	hello_only();
}

static void alloc(uint64_t size)
{
	uint8_t p[PROTO_ALLOC_REQ_LEN];
	struct proto_alloc_req m = { .size = size };

	frame(PROTO_OP_ALLOC, p, proto_alloc_req_encode(p, &m));
}

static void free_(unsigned n, uint32_t key)
{
	uint8_t p[PROTO_FREE_REQ_LEN];
	struct proto_free_req m = { .id = n + 1, .rkey = key };

	frame(PROTO_OP_FREE, p, proto_free_req_encode(p, &m));
}

static void free_n(unsigned n)
{
	free_(n, FUZZ_REGION_KEY(n));
}

static void write_(unsigned n, uint64_t off, size_t len, uint8_t fill)
{
	uint8_t p[PROTO_IO_REQ_LEN];
	struct proto_io_req m = { .id = n + 1, .offset = off, .rkey = FUZZ_REGION_KEY(n) };

	hdr(PROTO_OP_WRITE, (uint32_t)(PROTO_IO_REQ_LEN + len));
	put(p, proto_io_req_encode(p, PROTO_OP_WRITE, &m));
	for (size_t i = 0; i < len; i++)
		put(&(uint8_t){ (uint8_t)(fill + i) }, 1);
}

static void read_(unsigned n, uint64_t off, uint32_t len, uint32_t key)
{
	uint8_t p[PROTO_IO_REQ_LEN];
	struct proto_io_req m = { .id = n + 1, .offset = off, .rkey = key, .length = len };

	frame(PROTO_OP_READ, p, proto_io_req_encode(p, PROTO_OP_READ, &m));
}

static void read_n(unsigned n, uint64_t off, uint32_t len)
{
	read_(n, off, len, FUZZ_REGION_KEY(n));
}

static void atomic(uint16_t op, unsigned n, uint64_t off, uint64_t operand, uint64_t desired)
{
	uint8_t p[PROTO_CAS_REQ_LEN];
	struct proto_atomic_req m = { .id = n + 1, .offset = off, .rkey = FUZZ_REGION_KEY(n),
				      .operand = operand, .desired = desired };

	frame(op, p, proto_atomic_req_encode(p, op, &m));
}

static void empty(uint16_t op)
{
	frame(op, NULL, 0);
}

static void list(uint16_t op, uint64_t after, uint32_t max)
{
	uint8_t p[PROTO_LIST_REQ_LEN];
	struct proto_list_req m = { .after = after, .max = max };

	frame(op, p, proto_list_req_encode(p, &m));
}

/* CREATE, OPEN or UNLINK of name (size and flags as the request has them). */
static void name_op(uint16_t op, const char *name, uint64_t size, uint32_t flags)
{
	uint8_t p[PROTO_NAME_REQ_FIXED + PROTO_NAME_MAX];
	struct proto_name_req m = { .size = size, .flags = flags,
				    .name_len = (uint16_t)strlen(name) };

	memcpy(m.name, name, m.name_len);
	frame(op, p, proto_name_req_encode(p, op, &m));
}

static int end(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (sd.out.err) {
		fprintf(stderr, "%s: %s\n", path, strerror(-sd.out.err));
		return -1;
	}
	f = fopen(path, "wb");
	if (!f || fwrite(sd.out.buf, 1, sd.out.len, f) != sd.out.len || fclose(f) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- the conversations ----------------------------------------------------- */

static void good_session(void)
{
	hello();
	alloc(4096);
	write_(0, 0, 100, 0x41);
	read_n(0, 0, 100);
	read_n(0, 4000, 96);
	free_n(0);
	empty(PROTO_OP_STATS);
}

static void atomics(void)
{
	hello();
	alloc(64);
	atomic(PROTO_OP_FAA, 0, 0, 5, 0);
	atomic(PROTO_OP_CAS, 0, 0, 5, 9);      /* matches: becomes 9 */
	atomic(PROTO_OP_CAS, 0, 0, 5, 11);     /* does not match */
	atomic(PROTO_OP_FAA, 0, 4, 1, 0);      /* misaligned: EINVAL */
	atomic(PROTO_OP_FAA, 0, 64, 1, 0);     /* past the end: ERANGE */
	read_n(0, 0, 8);
	free_n(0);
}

static void admin(void)
{
	hello();
	alloc(1000);
	alloc(5000);
	empty(PROTO_OP_POOLS);
	list(PROTO_OP_REGIONS, 0, 0);
	list(PROTO_OP_REGIONS, 1, 1);
	list(PROTO_OP_CLIENTS, 0, 0);
	empty(PROTO_OP_STATS);
	empty(PROTO_OP_PING);
}

static void refused_io(void)
{
	hello();
	alloc(256);
	write_(0, 0, 32, 1);
	free_(0, 0x12345678);                  /* wrong key: EACCES */
	read_(0, 0, 8, 0x12345678);
	read_(7, 0, 8, FUZZ_REGION_KEY(7));    /* no such region: ENOENT */
	read_n(0, 200, 100);                   /* past the end: ERANGE */
	read_n(0, UINT64_MAX, 1);              /* offset overflow */
	write_(0, 250, 20, 2);                 /* refused WRITE: its data is dropped */
	empty(PROTO_OP_PING);                  /* ...and the stream stays in step */
	free_n(0);
	free_n(0);                             /* twice: ENOENT */
}

static void big_read(void)
{
	hello();
	alloc(256 << 10);
	write_(0, 100000, 3000, 7);
	read_n(0, 0, 256 << 10);               /* queued by reference to the pool */
	empty(PROTO_OP_PING);
	free_n(0);
}

static void fragments(void)
{
	hello();
	for (int i = 0; i < 12; i++)
		alloc((uint64_t)(i + 1) * 3000);
	for (unsigned i = 0; i < 12; i += 2)
		free_n(i);
	alloc(2 << 20);                        /* more than the pool: ENOMEM */
	alloc(0);                              /* EINVAL */
	alloc(9000);
	for (unsigned i = 1; i < 12; i += 2)
		free_n(i);
	empty(PROTO_OP_STATS);
}

static void walk_away(void)
{
	hello();
	alloc(100);
	alloc(70000);
	write_(1, 60000, 500, 3);
	/* no FREE: closing the connection returns both */
}

static void before_hello(void)
{
	alloc(100);
}

static void hello_twice(void)
{
	hello();
	hello();
	empty(PROTO_OP_PING);
}

static void bad_hello_version(void)
{
	uint8_t p[PROTO_HELLO_REQ_LEN];
	struct proto_hello_req m = { .client_version = PROTO_VERSION + 1 };

	frame(PROTO_OP_HELLO, p, proto_hello_req_encode(p, &m));
	hello();
}

static void any_header(uint32_t magic, uint16_t version, uint16_t opcode, uint16_t flags,
		       uint16_t reserved, uint32_t length)
{
	uint8_t h[PROTO_HDR_LEN];

	raw_hdr(h, version, opcode, flags, length, sd.req_id++);
	proto_put_u32(h, magic);
	proto_put_u16(h + 10, reserved);
	put(h, sizeof h);
}

static void malformed_payload(void)
{
	hello();
	alloc(64);
	hdr(PROTO_OP_FREE, 8);                 /* FREE needs 16 bytes */
	put("\1\0\0\0\0\0\0\0", 8);
}

static void truncated(void)
{
	hello();
	alloc(64);
	hdr(PROTO_OP_ALLOC, PROTO_ALLOC_REQ_LEN);
	put("\x40\0\0", 3);                    /* and then nothing */
}

static void partial_write(void)
{
	hello();
	alloc(4096);
	hdr(PROTO_OP_WRITE, PROTO_IO_REQ_LEN + 4000);
	{
		uint8_t p[PROTO_IO_REQ_LEN];
		struct proto_io_req m = { .id = 1, .rkey = FUZZ_REGION_KEY(0) };

		put(p, proto_io_req_encode(p, PROTO_OP_WRITE, &m));
	}
	put("only a few bytes", 16);
}

static void short_write(void)
{
	hello();
	hdr(PROTO_OP_WRITE, 8);                /* shorter than its fixed part */
	put("12345678", 8);
}

static void quota(void)
{
	hello();
	for (unsigned i = 0; i < FUZZ_TENANT_MAX_REGIONS + 1; i++)
		alloc(64);                     /* the last one: EDQUOT (regions) */
	for (unsigned i = 0; i < FUZZ_TENANT_MAX_REGIONS; i++)
		free_n(i);
	alloc(FUZZ_TENANT_QUOTA + 1);          /* past the quota: EDQUOT */
	alloc(FUZZ_TENANT_QUOTA / 2);
	alloc(FUZZ_TENANT_QUOTA / 2);          /* EDQUOT (bytes) */
	free_n(FUZZ_TENANT_MAX_REGIONS);
	alloc(FUZZ_TENANT_QUOTA / 2);
	empty(PROTO_OP_STATS);
}

static void auth_wrong_secret(void)
{
	auth_as("not-the-secret-of-this-tenant!!!");
	hello_only();
}

static void auth_unknown_tenant(void)
{
	uint8_t nonce[PROTO_NONCE_LEN];

	auth_begin("nobody", nonce);
	hello_only();
}

static void auth_without_begin(void)
{
	uint8_t mac[PROTO_MAC_LEN] = { 1 }, p[PROTO_AUTH_REQ_LEN];

	frame(PROTO_OP_AUTH, p, proto_auth_req_encode(p, mac));
	hello_only();
}

static void auth_begin_twice(void)
{
	uint8_t nonce[PROTO_NONCE_LEN];

	auth_begin(FUZZ_TENANT, nonce);
	auth_begin(FUZZ_TENANT, nonce);
	hello_only();
}

static void auth_after_hello(void)
{
	hello();
	auth_as(FUZZ_TENANT_SECRET);
	empty(PROTO_OP_PING);
}

/* Named regions: region n is the n-th handle or region made, as for ALLOC.
 * What a conversation leaves named, the fuzzer unlinks after it. */
static void named(void)
{
	hello();
	name_op(PROTO_OP_CREATE, "f/a", 4096, 0);                  /* region 0 */
	write_(0, 0, 64, 0x61);
	name_op(PROTO_OP_OPEN, "f/a", 0, PROTO_ACCESS_READ);       /* region 1 */
	read_n(1, 0, 64);
	write_(1, 0, 8, 0x70);                                     /* EACCES */
	atomic(PROTO_OP_FAA, 1, 0, 1, 0);                          /* EACCES */
	name_op(PROTO_OP_OPEN, "f/a", 0, PROTO_ACCESS_WRITE);      /* region 2 */
	atomic(PROTO_OP_CAS, 2, 0, 0x6867666564636261ull, 7);
	read_n(2, 0, 8);                                           /* EACCES */
	name_op(PROTO_OP_CREATE, "f/a", 64, 0);                    /* EEXIST */
	name_op(PROTO_OP_OPEN, "f/none", 0, PROTO_ACCESS_READ);    /* ENOENT */
	name_op(PROTO_OP_OPEN, "f/a", 0, 0);                       /* EINVAL */
	name_op(PROTO_OP_CREATE, "f a", 64, 0);                    /* EINVAL */
	list(PROTO_OP_NAMES, 0, 0);
	list(PROTO_OP_REGIONS_NAMED, 0, 0);
	name_op(PROTO_OP_UNLINK, "f/a", 0, 0);
	name_op(PROTO_OP_OPEN, "f/a", 0, PROTO_ACCESS_READ);       /* ENOENT */
	read_n(1, 0, 64);                                          /* still served */
	free_n(1);
	list(PROTO_OP_NAMES, 0, 1);
	name_op(PROTO_OP_CREATE, "f/kept", 100, 0);                /* region 3, kept */
	free_n(3);                                                 /* the name stays */
}

static void revoke(void)
{
	hello();
	name_op(PROTO_OP_CREATE, "f/r", 256, 0);                   /* region 0 */
	name_op(PROTO_OP_OPEN, "f/r", 0, PROTO_ACCESS_READ | PROTO_ACCESS_WRITE); /* 1 */
	name_op(PROTO_OP_UNLINK, "f/r", 0, PROTO_UNLINK_REVOKE);
	read_n(0, 0, 8);                                           /* ENOENT */
	write_(1, 0, 8, 1);                                        /* ENOENT */
	free_n(1);                                                 /* ENOENT */
	name_op(PROTO_OP_UNLINK, "f/r", 0, 2);                     /* EINVAL */
	name_op(PROTO_OP_UNLINK, ":f/r", 0, PROTO_UNLINK_NS);      /* ENOENT; EACCES on TCP */
	name_op(PROTO_OP_CREATE, "f/r", 256, 0);                   /* again: region 2 */
}

typedef void (*conversation_fn)(void);

struct entry {
	const char *name;
	uint8_t mode;
	conversation_fn fn;
};

/* RESUME of a session no restore brought back (ENOENT; the connection goes
 * on), after HELLO (EINVAL); REKEY gives region 0 the next key drawn. */
static void resume_rekey(void)
{
	uint8_t p[PROTO_RESUME_REQ_LEN];
	struct proto_resume_req m = { .session_id = 1, .client_version = PROTO_VERSION,
				      .features = PROTO_HELLO_F_RESUMABLE };
	struct proto_rekey_req k = { .id = 1 };

	frame(PROTO_OP_RESUME, p, proto_resume_req_encode(p, &m));
	hello();
	frame(PROTO_OP_RESUME, p, proto_resume_req_encode(p, &m));
	alloc(4096);
	frame(PROTO_OP_REKEY, p, proto_rekey_req_encode(p, &k));
	write_(0, 0, 16, 0x55);              /* the old key: EACCES */
	read_(0, 0, 16, FUZZ_REGION_KEY(1)); /* the new one */
	free_(0, FUZZ_REGION_KEY(1));
	frame(PROTO_OP_REKEY, p, proto_rekey_req_encode(p, &k)); /* freed: ENOENT */
}

static void garbage_version(void)
{
	any_header(PROTO_MAGIC, 9, 1, 0, 0, 16);
}

static void garbage_reply(void)
{
	hello();
	any_header(PROTO_MAGIC, 1, 7, 1, 0, 8);
	put("\0\0\0\0\0\0\0\0", 8);
}

static void garbage_stats_payload(void)
{
	hello();
	frame(PROTO_OP_STATS, "x", 1);
}


/* After HELLO, a header wrong in one field each: the daemon must close. */
static const struct bad_header {
	const char *name;
	uint32_t magic;
	uint16_t version, opcode, flags, reserved;
	uint32_t length;
} bad_headers[] = {
	{ "bad-magic", 0x12345678, 1, 7, 0, 0, 0 },
	{ "bad-flags", PROTO_MAGIC, 1, 7, 2, 0, 0 },
	{ "bad-reserved", PROTO_MAGIC, 1, 7, 0, 1, 0 },
	{ "bad-opcode", PROTO_MAGIC, 1, 200, 0, 0, 0 },
	{ "error-request", PROTO_MAGIC, 1, PROTO_OP_ERROR, 0, 0, 8 },
	{ "oversize", PROTO_MAGIC, 1, PROTO_OP_ALLOC, 0, 0, 1u << 30 },
};

static const struct entry seeds[] = {
	{ "good-session", 0, good_session },
	{ "good-session-tcp-chunk1", FUZZ_MODE_TCP | 1, good_session },
	{ "good-session-chunk7", 7, good_session },
	{ "atomics", 0, atomics },
	{ "admin", 0, admin },
	{ "admin-eacces", FUZZ_MODE_TCP, admin },
	{ "refused-io", 0, refused_io },
	{ "refused-io-chunk13", 13, refused_io },
	{ "big-read", 0, big_read },
	{ "fragments", 0, fragments },
	{ "walk-away", 0, walk_away },
	{ "before-hello", 0, before_hello },
	{ "hello-twice", 0, hello_twice },
	{ "hello-version", 0, bad_hello_version },
	{ "malformed-payload", 0, malformed_payload },
	{ "truncated", 0, truncated },
	{ "partial-write", 0, partial_write },
	{ "partial-write-chunk3", 3, partial_write },
	{ "short-write", 0, short_write },
	{ "bad-version", 0, garbage_version },
	{ "reply-frame", 0, garbage_reply },
	{ "stats-payload", 0, garbage_stats_payload },
	{ "auth-good-session-tcp", FUZZ_MODE_TCP, good_session },
	{ "auth-atomics-tcp-chunk5", FUZZ_MODE_TCP | 5, atomics },
	{ "auth-quota-tcp", FUZZ_MODE_TCP, quota },
	{ "auth-walk-away-tcp", FUZZ_MODE_TCP, walk_away },
	{ "auth-quota-unix-anonymous", 0, quota },
	{ "auth-wrong-secret-tcp", FUZZ_MODE_TCP, auth_wrong_secret },
	{ "auth-unknown-tenant-tcp", FUZZ_MODE_TCP, auth_unknown_tenant },
	{ "auth-without-begin-tcp", FUZZ_MODE_TCP, auth_without_begin },
	{ "auth-begin-twice-tcp", FUZZ_MODE_TCP, auth_begin_twice },
	{ "auth-after-hello-unix", 0, auth_after_hello },
	{ "auth-anonymous-tcp", FUZZ_MODE_TCP, hello_only },
	{ "named", 0, named },
	{ "named-tcp-chunk9", FUZZ_MODE_TCP | 9, named },
	{ "revoke", 0, revoke },
	{ "revoke-tcp", FUZZ_MODE_TCP, revoke },
	{ "resume-rekey", 0, resume_rekey },
	{ "resume-tcp", FUZZ_MODE_TCP, resume_rekey },
};

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "tests/fuzz/corpus/dispatch";
	const size_t nbad = sizeof bad_headers / sizeof bad_headers[0];

	for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
		begin(seeds[i].mode);
		seeds[i].fn();
		if (end(dir, seeds[i].name) < 0)
			return 1;
	}
	for (size_t i = 0; i < nbad; i++) {
		const struct bad_header *b = &bad_headers[i];

		begin(0);
		hello();
		any_header(b->magic, b->version, b->opcode, b->flags, b->reserved, b->length);
		if (end(dir, b->name) < 0)
			return 1;
	}
	raw_out_fini(&sd.out);
	printf("%zu seeds written to %s\n", sizeof seeds / sizeof seeds[0] + nbad, dir);
	return 0;
}
