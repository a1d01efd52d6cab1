/*
 * fuzz_proto.c - libFuzzer target for the wire codec.
 *
 * The input is a stream of frames.  Each header is decoded; when it is valid,
 * its payload goes to every decoder that matches the opcode, in the request
 * and in the reply direction whatever the flags say.  Whatever decodes is
 * encoded again and must decode to the same value, and for messages with one
 * encoding the bytes must come back identical.  Any disagreement aborts.
 *
 * Linked with replay.c instead of libFuzzer it is a plain program that replays
 * the seed corpus (or the files and directories given as arguments), one TAP
 * line per file, so `make test` runs the corpus with gcc and ASan.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto.h"

/* Big enough for any control payload the codec may produce. */
#define SCRATCH_LEN (PROTO_MAX_CTL + 256)

/* ---- header ---------------------------------------------------------------- */

static void check_hdr(const uint8_t *in, const struct proto_hdr *h, int rc)
{
	uint8_t again[PROTO_HDR_LEN];
	struct proto_hdr h2;

	CHECK(h->magic == proto_get_u32(in) && h->req_id == proto_get_u64(in + 16));
	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTO || rc == -EOPNOTSUPP ||
	      rc == -EMSGSIZE);
	if (rc == -EPROTO)
		CHECK(h->magic == PROTO_MAGIC && h->version != PROTO_VERSION);
	if (rc != 0)
		return;
	CHECK(h->length <= proto_max_payload(h->opcode, h->flags));
	/* A valid header has exactly one encoding. */
	proto_hdr_encode(again, h);
	CHECK(memcmp(again, in, PROTO_HDR_LEN) == 0);
	CHECK(proto_hdr_decode(again, &h2) == 0);
	CHECK(memcmp(&h2, h, sizeof h2) == 0);
}

/* ---- requests -------------------------------------------------------------- */

static void check_hello_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_hello_req m, m2;
	size_t n;

	if (proto_hello_req_decode(in, len, &m) < 0)
		return;
	n = proto_hello_req_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_hello_req_decode(out, n, &m2) == 0);
	CHECK(m2.client_version == m.client_version && m2.features == m.features &&
	      m2.pid == m.pid);
}

static void check_resume_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_resume_req m, m2;
	size_t n;

	if (proto_resume_req_decode(in, len, &m) < 0)
		return;
	n = proto_resume_req_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_resume_req_decode(out, n, &m2) == 0);
	CHECK(m2.session_id == m.session_id && m2.client_version == m.client_version &&
	      m2.features == m.features && m2.pid == m.pid &&
	      memcmp(m2.resume_token, m.resume_token, PROTO_RESUME_TOKEN_LEN) == 0);
}

static void check_rekey_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_rekey_req m, m2;
	size_t n;

	if (proto_rekey_req_decode(in, len, &m) < 0)
		return;
	n = proto_rekey_req_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_rekey_req_decode(out, n, &m2) == 0 && m2.id == m.id && m2.flags == m.flags);
}

static void check_alloc_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_alloc_req m, m2;
	size_t n;

	if (proto_alloc_req_decode(in, len, &m) < 0)
		return;
	n = proto_alloc_req_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_alloc_req_decode(out, n, &m2) == 0);
	CHECK(m2.size == m.size && m2.flags == m.flags);
}

static void check_free_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_free_req m, m2;
	size_t n;

	if (proto_free_req_decode(in, len, &m) < 0)
		return;
	n = proto_free_req_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_free_req_decode(out, n, &m2) == 0);
	CHECK(m2.id == m.id && m2.rkey == m.rkey);
}

static void check_io_req(const uint8_t *in, size_t len, uint16_t opcode)
{
	uint8_t out[PROTO_IO_REQ_LEN];
	struct proto_io_req m, m2;
	size_t n, len2;

	if (proto_io_req_decode(in, len, opcode, &m) < 0)
		return;
	CHECK(m.length <= PROTO_MAX_IO);
	n = proto_io_req_encode(out, opcode, &m);
	CHECK(n == PROTO_IO_REQ_LEN && memcmp(out, in, n) == 0);
	/* For WRITE the decoder must read the fixed part only: out holds nothing
	 * more, and ASan watches. */
	len2 = opcode == PROTO_OP_WRITE ? PROTO_IO_REQ_LEN + (size_t)m.length : n;
	CHECK(len2 == len);
	CHECK(proto_io_req_decode(out, len2, opcode, &m2) == 0);
	CHECK(m2.id == m.id && m2.offset == m.offset && m2.rkey == m.rkey &&
	      m2.length == m.length);
}

static void check_list_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_list_req m, m2;
	size_t n;

	if (proto_list_req_decode(in, len, &m) < 0)
		return;
	n = proto_list_req_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_list_req_decode(out, n, &m2) == 0);
	CHECK(m2.after == m.after && m2.max == m.max);
}

static void check_atomic_req(const uint8_t *in, size_t len, uint16_t opcode)
{
	uint8_t out[PROTO_CAS_REQ_LEN];
	struct proto_atomic_req m, m2;
	size_t n;

	if (proto_atomic_req_decode(in, len, opcode, &m) < 0)
		return;
	n = proto_atomic_req_encode(out, opcode, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_atomic_req_decode(out, n, opcode, &m2) == 0);
	CHECK(m2.id == m.id && m2.offset == m.offset && m2.rkey == m.rkey &&
	      m2.operand == m.operand && m2.desired == m.desired);
}

static void check_name_req(const uint8_t *in, size_t len, uint16_t opcode)
{
	uint8_t out[PROTO_NAME_REQ_FIXED + PROTO_NAME_NS_MAX];
	struct proto_name_req m, m2;
	size_t n;

	if (proto_name_req_decode(in, len, opcode, &m) < 0)
		return;
	/* Past PROTO_NAME_MAX only as UNLINK's "TENANT:NAME" (PROTO_UNLINK_NS). */
	CHECK(m.name_len >= 1 && strlen(m.name) == m.name_len);
	CHECK(m.name_len <= PROTO_NAME_MAX ||
	      (opcode == PROTO_OP_UNLINK && (m.flags & PROTO_UNLINK_NS) &&
	       m.name_len <= PROTO_NAME_NS_MAX));
	CHECK(opcode == PROTO_OP_CREATE || m.size == 0);
	n = proto_name_req_encode(out, opcode, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_name_req_decode(out, n, opcode, &m2) == 0);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

/* The rdma_cm private data is not a frame, but it comes from the network too. */
static void check_attach(const uint8_t *in, size_t len)
{
	uint8_t out[PROTO_ATTACH_LEN];
	struct proto_attach m, m2;

	if (proto_attach_decode(in, len, &m) < 0)
		return;
	CHECK(len >= PROTO_ATTACH_LEN);
	CHECK(proto_attach_encode(out, &m) == PROTO_ATTACH_LEN &&
	      memcmp(out, in, PROTO_ATTACH_LEN) == 0);
	CHECK(proto_attach_decode(out, PROTO_ATTACH_LEN, &m2) == 0 &&
	      m2.session_id == m.session_id && m2.attach_token == m.attach_token);
}

/* Round trips: what decodes must re-encode to the very same bytes. */
static void check_auth_begin_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_auth_begin_req m, m2;
	size_t n;

	if (proto_auth_begin_req_decode(in, len, &m) < 0)
		return;
	CHECK(m.tenant[0] != '\0' && memchr(m.tenant, '\0', sizeof m.tenant) != NULL);
	n = proto_auth_begin_req_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_auth_begin_req_decode(out, n, &m2) == 0);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_auth_req(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN], mac[PROTO_MAC_LEN];
	size_t n;

	if (proto_auth_req_decode(in, len, mac) < 0)
		return;
	n = proto_auth_req_encode(out, mac);
	CHECK(n == len && memcmp(out, in, n) == 0);
}

static void check_request(uint16_t opcode, const uint8_t *in, size_t len)
{
	switch (opcode) {
	case PROTO_OP_HELLO:
		check_hello_req(in, len);
		break;
	case PROTO_OP_ALLOC:
		check_alloc_req(in, len);
		break;
	case PROTO_OP_FREE:
		check_free_req(in, len);
		break;
	case PROTO_OP_WRITE:
	case PROTO_OP_READ:
		check_io_req(in, len, opcode);
		break;
	case PROTO_OP_STATS:
	case PROTO_OP_PING:
	case PROTO_OP_POOLS:
		CHECK((proto_empty_decode(len) == 0) == (len == 0));
		break;
	case PROTO_OP_REGIONS:
	case PROTO_OP_CLIENTS:
		check_list_req(in, len);
		break;
	case PROTO_OP_CAS:
	case PROTO_OP_FAA:
		check_atomic_req(in, len, opcode);
		break;
	case PROTO_OP_AUTH_BEGIN:
		check_auth_begin_req(in, len);
		break;
	case PROTO_OP_AUTH:
		check_auth_req(in, len);
		break;
	case PROTO_OP_CREATE:
	case PROTO_OP_OPEN:
	case PROTO_OP_UNLINK:
		check_name_req(in, len, opcode);
		break;
	case PROTO_OP_NAMES:
	case PROTO_OP_REGIONS_NAMED:
		check_list_req(in, len);
		break;
	case PROTO_OP_RESUME:
		check_resume_req(in, len);
		break;
	case PROTO_OP_REKEY:
		check_rekey_req(in, len);
		break;
	default:
		break;
	}
}

/* ---- replies --------------------------------------------------------------- */

/* A failed reply is its status and nothing else: one encoding. */
static void check_failed(const uint8_t *in, size_t len, int status)
{
	uint8_t out[PROTO_STATUS_LEN];
	int st2 = 0;

	CHECK(status < 0 && status >= -4095 && len == PROTO_STATUS_LEN);
	CHECK(proto_status_encode(out, status) == PROTO_STATUS_LEN);
	CHECK(memcmp(out, in, PROTO_STATUS_LEN) == 0);
	CHECK(proto_status_decode(out, PROTO_STATUS_LEN, &st2) == 0 && st2 == status);
}

static void check_status_rep(const uint8_t *in, size_t len)
{
	uint8_t out[PROTO_STATUS_LEN];
	int st, st2;

	if (proto_status_decode(in, len, &st) < 0)
		return;
	CHECK(len == PROTO_STATUS_LEN && st <= 0 && st >= -4095);
	proto_status_encode(out, st);
	CHECK(memcmp(out, in, PROTO_STATUS_LEN) == 0);
	CHECK(proto_status_decode(out, PROTO_STATUS_LEN, &st2) == 0 && st2 == st);
}

static void check_read_rep(const uint8_t *in, size_t len)
{
	size_t data_len;
	int st;

	if (proto_read_rep_decode(in, len, &st, &data_len) < 0)
		return;
	if (st) {
		check_failed(in, len, st);
		return;
	}
	CHECK(data_len == len - PROTO_STATUS_LEN && data_len <= PROTO_MAX_IO);
}

static void check_hello_rep(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_hello_rep m, m2;
	size_t n;
	int st, st2;

	/* The struct has padding after key_mode: zero it so memcmp compares fields. */
	memset(&m, 0, sizeof m);
	memset(&m2, 0, sizeof m2);
	if (proto_hello_rep_decode(in, len, &st, &m) < 0)
		return;
	if (st) {
		check_failed(in, len, st);
		return;
	}
	CHECK(m.max_io >= 1 && m.max_io <= PROTO_MAX_IO);
	n = proto_hello_rep_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_hello_rep_decode(out, n, &st2, &m2) == 0 && st2 == 0);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_alloc_rep(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_region m, m2;
	size_t n;
	int st, st2;

	if (proto_alloc_rep_decode(in, len, &st, &m) < 0)
		return;
	if (st) {
		check_failed(in, len, st);
		return;
	}
	n = proto_alloc_rep_encode(out, &m);
	CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_alloc_rep_decode(out, n, &st2, &m2) == 0 && st2 == 0);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_stats_rep(const uint8_t *in, size_t len)
{
	uint8_t out[SCRATCH_LEN];
	struct proto_stats m, m2;
	size_t n;
	int st, st2;

	if (proto_stats_rep_decode(in, len, &st, &m) < 0)
		return;
	if (st) {
		check_failed(in, len, st);
		return;
	}
	n = proto_stats_rep_encode(out, &m);
	CHECK(n == PROTO_STATS_REP_LEN);
	/* Only a reply with exactly our figures has our encoding. */
	if (proto_get_u32(in + 8) == PROTO_STAT_COUNT)
		CHECK(n == len && memcmp(out, in, n) == 0);
	CHECK(proto_stats_rep_decode(out, n, &st2, &m2) == 0 && st2 == 0);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_pool_rec(const uint8_t *in)
{
	uint8_t out[PROTO_POOL_REC_LEN];
	struct proto_pool_rec m, m2;

	proto_pool_rec_decode(in, &m);
	CHECK(m.name[sizeof m.name - 1] == 0);
	CHECK(proto_pool_rec_encode(out, &m) == PROTO_POOL_REC_LEN);
	CHECK(memcmp(out + 32, in + 32, PROTO_POOL_REC_LEN - 32) == 0);
	proto_pool_rec_decode(out, &m2);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_region_rec(const uint8_t *in)
{
	uint8_t out[PROTO_REGION_REC_LEN];
	struct proto_region_rec m, m2;

	proto_region_rec_decode(in, &m);
	/* proto_list_hdr_decode() vouched for the reserved word. */
	CHECK(proto_region_rec_encode(out, &m) == PROTO_REGION_REC_LEN);
	CHECK(memcmp(out, in, PROTO_REGION_REC_LEN) == 0);
	proto_region_rec_decode(out, &m2);
	CHECK(m2.id == m.id && m2.addr == m.addr && m2.length == m.length &&
	      m2.client_id == m.client_id && m2.pool == m.pool);
}

static void check_region_named_rec(const uint8_t *in)
{
	uint8_t out[PROTO_REGION_NAMED_REC_LEN];
	struct proto_region_rec m, m2;

	proto_region_named_rec_decode(in, &m);
	/* proto_list_hdr_decode() vouched for the flags; the name field is
	 * canonical only up to its NUL, so compare what the decoder keeps. */
	CHECK(!(m.flags & ~(PROTO_ACCESS_READ | PROTO_ACCESS_WRITE | PROTO_REGION_F_UNLINKED)));
	CHECK(strlen(m.name) <= PROTO_NAME_MAX);
	CHECK(proto_region_named_rec_encode(out, &m) == PROTO_REGION_NAMED_REC_LEN);
	CHECK(memcmp(out, in, 48) == 0);
	proto_region_named_rec_decode(out, &m2);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_client_rec(const uint8_t *in)
{
	uint8_t out[PROTO_CLIENT_REC_LEN];
	struct proto_client_rec m, m2;

	proto_client_rec_decode(in, &m);
	CHECK(m.transport[sizeof m.transport - 1] == 0 && m.peer[sizeof m.peer - 1] == 0);
	CHECK(proto_client_rec_encode(out, &m) == PROTO_CLIENT_REC_LEN);
	CHECK(memcmp(out, in, 40) == 0);
	proto_client_rec_decode(out, &m2);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_name_rec(const uint8_t *in)
{
	uint8_t out[PROTO_NAME_REC_LEN];
	struct proto_name_rec m, m2;

	proto_name_rec_decode(in, &m);
	CHECK(m.tenant[sizeof m.tenant - 1] == 0 && m.name[sizeof m.name - 1] == 0);
	CHECK(proto_name_rec_encode(out, &m) == PROTO_NAME_REC_LEN);
	CHECK(memcmp(out, in, 32) == 0);
	proto_name_rec_decode(out, &m2);
	CHECK(memcmp(&m2, &m, sizeof m) == 0);
}

static void check_list_rep(uint16_t opcode, const uint8_t *in, size_t len)
{
	size_t reclen = opcode == PROTO_OP_POOLS   ? PROTO_POOL_REC_LEN :
			opcode == PROTO_OP_REGIONS ? PROTO_REGION_REC_LEN :
			opcode == PROTO_OP_NAMES   ? PROTO_NAME_REC_LEN :
			opcode == PROTO_OP_REGIONS_NAMED ? PROTO_REGION_NAMED_REC_LEN :
						     PROTO_CLIENT_REC_LEN;
	uint8_t out[PROTO_LIST_HDR_LEN];
	uint32_t count, count2;
	int st, st2;

	if (proto_list_hdr_decode(in, len, reclen, &st, &count) < 0)
		return;
	if (st) {
		CHECK(count == 0);
		check_failed(in, len, st);
		return;
	}
	CHECK(len == PROTO_LIST_HDR_LEN + (size_t)count * reclen);
	CHECK(proto_list_hdr_encode(out, count) == PROTO_LIST_HDR_LEN);
	CHECK(memcmp(out, in, PROTO_LIST_HDR_LEN) == 0);
	/* The header alone, with len claiming no records, must disagree unless
	 * there are none. */
	CHECK((proto_list_hdr_decode(out, PROTO_LIST_HDR_LEN, reclen, &st2, &count2) == 0) ==
	      (count == 0));
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *rec = in + PROTO_LIST_HDR_LEN + (size_t)i * reclen;

		if (opcode == PROTO_OP_POOLS)
			check_pool_rec(rec);
		else if (opcode == PROTO_OP_REGIONS)
			check_region_rec(rec);
		else if (opcode == PROTO_OP_NAMES)
			check_name_rec(rec);
		else if (opcode == PROTO_OP_REGIONS_NAMED)
			check_region_named_rec(rec);
		else
			check_client_rec(rec);
	}
}

static void check_atomic_rep(const uint8_t *in, size_t len)
{
	uint8_t out[PROTO_ATOMIC_REP_LEN];
	uint64_t old = 0, old2 = 0;
	int st, st2;

	if (proto_atomic_rep_decode(in, len, &st, &old) < 0)
		return;
	if (st) {
		check_failed(in, len, st);
		return;
	}
	CHECK(proto_atomic_rep_encode(out, old) == len && memcmp(out, in, len) == 0);
	CHECK(proto_atomic_rep_decode(out, len, &st2, &old2) == 0 && st2 == 0 && old2 == old);
}

static void check_auth_begin_rep(const uint8_t *in, size_t len)
{
	uint8_t out[PROTO_AUTH_BEGIN_REP_LEN];
	struct proto_auth_begin_rep m, m2;
	int st, st2;

	if (proto_auth_begin_rep_decode(in, len, &st, &m) < 0)
		return;
	if (st) {
		check_failed(in, len, st);
		return;
	}
	CHECK(proto_auth_begin_rep_encode(out, &m) == len && memcmp(out, in, len) == 0);
	CHECK(proto_auth_begin_rep_decode(out, len, &st2, &m2) == 0 && st2 == 0);
	CHECK(m2.session_id == m.session_id &&
	      memcmp(m2.server_nonce, m.server_nonce, sizeof m.server_nonce) == 0);
}

static void check_auth_rep(const uint8_t *in, size_t len)
{
	uint8_t out[PROTO_AUTH_REP_LEN], mac[PROTO_MAC_LEN];
	int st;

	if (proto_auth_rep_decode(in, len, &st, mac) < 0)
		return;
	if (st) {
		check_failed(in, len, st);
		return;
	}
	CHECK(proto_auth_rep_encode(out, mac) == len && memcmp(out, in, len) == 0);
}

static void check_reply(uint16_t opcode, const uint8_t *in, size_t len)
{
	switch (opcode) {
	case PROTO_OP_ERROR:
	case PROTO_OP_FREE:
	case PROTO_OP_WRITE:
	case PROTO_OP_PING:
		check_status_rep(in, len);
		break;
	case PROTO_OP_HELLO:
		check_hello_rep(in, len);
		break;
	case PROTO_OP_ALLOC:
		check_alloc_rep(in, len);
		break;
	case PROTO_OP_READ:
		check_read_rep(in, len);
		break;
	case PROTO_OP_STATS:
		check_stats_rep(in, len);
		break;
	case PROTO_OP_POOLS:
	case PROTO_OP_REGIONS:
	case PROTO_OP_CLIENTS:
	case PROTO_OP_NAMES:
	case PROTO_OP_REGIONS_NAMED:
		check_list_rep(opcode, in, len);
		break;
	case PROTO_OP_CREATE:
	case PROTO_OP_OPEN:
	case PROTO_OP_REKEY:
		check_alloc_rep(in, len);
		break;
	case PROTO_OP_RESUME:
		check_hello_rep(in, len);
		break;
	case PROTO_OP_UNLINK:
		check_status_rep(in, len);
		break;
	case PROTO_OP_CAS:
	case PROTO_OP_FAA:
		check_atomic_rep(in, len);
		break;
	case PROTO_OP_AUTH_BEGIN:
		check_auth_begin_rep(in, len);
		break;
	case PROTO_OP_AUTH:
		check_auth_rep(in, len);
		break;
	default:
		break;
	}
}

/* ---- the stream ------------------------------------------------------------ */

/* Checks one frame at in; returns the bytes it used, 0 to end the stream. */
static size_t check_frame(const uint8_t *in, size_t avail)
{
	struct proto_hdr h;
	size_t len;
	int rc;

	if (avail < PROTO_HDR_LEN)
		return 0;
	rc = proto_hdr_decode(in, &h);
	check_hdr(in, &h, rc);
	if (rc < 0)
		return 0; /* as the daemon does: nothing after a bad header is trusted */
	/* A short last frame still feeds the decoders whatever arrived. */
	len = h.length < avail - PROTO_HDR_LEN ? h.length : avail - PROTO_HDR_LEN;
	check_request(h.opcode, in + PROTO_HDR_LEN, len);
	check_reply(h.opcode, in + PROTO_HDR_LEN, len);
	check_attach(in + PROTO_HDR_LEN, len);
	return PROTO_HDR_LEN + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t used;

	while ((used = check_frame(data, size)) != 0) {
		data += used;
		size -= used;
	}
	return 0;
}
