/*
 * proto.c - the rmem wire codec (see proto.h; docs/protocol.md is normative).
 *
 * Each decoder checks the length first, then every field it can judge, and
 * only then writes its outputs: a frame is either understood whole or not at
 * all, and a caller never acts on half of one.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "proto.h"

/* Linux errnos stay far below this; anything above is not a status. */
#define PROTO_MAX_ERRNO 4095

/* ---- header ---------------------------------------------------------------- */

uint32_t proto_max_payload(uint16_t opcode, uint16_t flags)
{
	bool reply = flags & PROTO_F_RESPONSE;

	if (opcode == PROTO_OP_WRITE && !reply)
		return PROTO_IO_REQ_LEN + PROTO_MAX_IO;
	if (opcode == PROTO_OP_READ && reply)
		return PROTO_STATUS_LEN + PROTO_MAX_IO;
	return PROTO_MAX_CTL;
}

void proto_hdr_encode(uint8_t out[PROTO_HDR_LEN], const struct proto_hdr *h)
{
	proto_put_u32(out + 0, PROTO_MAGIC);
	proto_put_u16(out + 4, PROTO_VERSION);
	proto_put_u16(out + 6, h->opcode);
	proto_put_u16(out + 8, h->flags);
	proto_put_u16(out + 10, 0);
	proto_put_u32(out + 12, h->length);
	proto_put_u64(out + 16, h->req_id);
}

static bool opcode_known(uint16_t opcode, uint16_t flags)
{
	if (opcode >= PROTO_OP_COUNT)
		return false;
	/* ERROR answers a request that could not be decoded; nobody asks for it. */
	return opcode != PROTO_OP_ERROR || (flags & PROTO_F_RESPONSE);
}

int proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *h)
{
	h->magic = proto_get_u32(in + 0);
	h->version = proto_get_u16(in + 4);
	h->opcode = proto_get_u16(in + 6);
	h->flags = proto_get_u16(in + 8);
	h->reserved = proto_get_u16(in + 10);
	h->length = proto_get_u32(in + 12);
	h->req_id = proto_get_u64(in + 16);

	if (h->magic != PROTO_MAGIC)
		return -EBADMSG;
	/* Checked before everything a later version may redefine, so that a peer
	 * of another version always learns that, and nothing else. */
	if (h->version != PROTO_VERSION)
		return -EPROTO;
	if ((h->flags & ~PROTO_F_RESPONSE) || h->reserved)
		return -EBADMSG;
	if (!opcode_known(h->opcode, h->flags))
		return -EOPNOTSUPP;
	if (h->length > proto_max_payload(h->opcode, h->flags))
		return -EMSGSIZE;
	return 0;
}

/* ---- request payloads ------------------------------------------------------ */

size_t proto_hello_req_encode(uint8_t *out, const struct proto_hello_req *m)
{
	proto_put_u32(out + 0, m->client_version);
	proto_put_u32(out + 4, m->features);
	proto_put_u32(out + 8, m->pid);
	proto_put_u32(out + 12, 0);
	return PROTO_HELLO_REQ_LEN;
}

int proto_hello_req_decode(const uint8_t *in, size_t len, struct proto_hello_req *m)
{
	uint32_t features;

	if (len != PROTO_HELLO_REQ_LEN)
		return -EBADMSG;
	/* A feature bit we do not know is one we cannot honour. */
	features = proto_get_u32(in + 4);
	if ((features & ~PROTO_HELLO_F_KNOWN) || proto_get_u32(in + 12))
		return -EBADMSG;
	m->client_version = proto_get_u32(in + 0);
	m->features = features;
	m->pid = proto_get_u32(in + 8);
	return 0;
}

size_t proto_alloc_req_encode(uint8_t *out, const struct proto_alloc_req *m)
{
	proto_put_u64(out + 0, m->size);
	proto_put_u32(out + 8, m->flags);
	proto_put_u32(out + 12, 0);
	return PROTO_ALLOC_REQ_LEN;
}

int proto_alloc_req_decode(const uint8_t *in, size_t len, struct proto_alloc_req *m)
{
	if (len != PROTO_ALLOC_REQ_LEN || proto_get_u32(in + 12))
		return -EBADMSG;
	/* flags are the daemon's to judge (EINVAL), not the codec's. */
	m->size = proto_get_u64(in + 0);
	m->flags = proto_get_u32(in + 8);
	return 0;
}

size_t proto_free_req_encode(uint8_t *out, const struct proto_free_req *m)
{
	proto_put_u64(out + 0, m->id);
	proto_put_u32(out + 8, m->rkey);
	proto_put_u32(out + 12, 0);
	return PROTO_FREE_REQ_LEN;
}

int proto_free_req_decode(const uint8_t *in, size_t len, struct proto_free_req *m)
{
	if (len != PROTO_FREE_REQ_LEN || proto_get_u32(in + 12))
		return -EBADMSG;
	m->id = proto_get_u64(in + 0);
	m->rkey = proto_get_u32(in + 8);
	return 0;
}

size_t proto_io_req_encode(uint8_t *out, uint16_t opcode, const struct proto_io_req *m)
{
	if (opcode != PROTO_OP_WRITE && opcode != PROTO_OP_READ)
		return 0;
	proto_put_u64(out + 0, m->id);
	proto_put_u64(out + 8, m->offset);
	proto_put_u32(out + 16, m->rkey);
	/* A WRITE's length is the frame's; sending it twice invites disagreement. */
	proto_put_u32(out + 20, opcode == PROTO_OP_READ ? m->length : 0);
	return PROTO_IO_REQ_LEN;
}

int proto_io_req_decode(const uint8_t *in, size_t len, uint16_t opcode, struct proto_io_req *m)
{
	uint32_t data_len;

	if (opcode == PROTO_OP_WRITE) {
		if (len < PROTO_IO_REQ_LEN)
			return -EBADMSG;
		if (len - PROTO_IO_REQ_LEN > PROTO_MAX_IO)
			return -EMSGSIZE;
		if (proto_get_u32(in + 20))
			return -EBADMSG;
		data_len = (uint32_t)(len - PROTO_IO_REQ_LEN);
	} else if (opcode == PROTO_OP_READ) {
		if (len != PROTO_IO_REQ_LEN)
			return -EBADMSG;
		data_len = proto_get_u32(in + 20);
		if (data_len > PROTO_MAX_IO)
			return -EMSGSIZE;
	} else {
		return -EINVAL;
	}
	m->id = proto_get_u64(in + 0);
	m->offset = proto_get_u64(in + 8);
	m->rkey = proto_get_u32(in + 16);
	m->length = data_len;
	return 0;
}

size_t proto_list_req_encode(uint8_t *out, const struct proto_list_req *m)
{
	proto_put_u64(out + 0, m->after);
	proto_put_u32(out + 8, m->max);
	proto_put_u32(out + 12, 0);
	return PROTO_LIST_REQ_LEN;
}

int proto_list_req_decode(const uint8_t *in, size_t len, struct proto_list_req *m)
{
	if (len != PROTO_LIST_REQ_LEN || proto_get_u32(in + 12))
		return -EBADMSG;
	m->after = proto_get_u64(in + 0);
	m->max = proto_get_u32(in + 8);
	return 0;
}

int proto_empty_decode(size_t len)
{
	return len ? -EBADMSG : 0;
}

/* ---- reply status ---------------------------------------------------------- */

size_t proto_status_encode(uint8_t *out, int status)
{
	uint32_t wire = EIO;

	if (status <= 0 && status >= -PROTO_MAX_ERRNO)
		wire = (uint32_t)-status;
	else if (status > 0 && status <= PROTO_MAX_ERRNO)
		wire = (uint32_t)status;
	proto_put_u32(out + 0, wire);
	proto_put_u32(out + 4, 0);
	return PROTO_STATUS_LEN;
}

/*
 * The status prefix every reply decoder starts with.  full_len is the length
 * of a successful reply, or 0 when the caller checks that itself.  A failed
 * reply carries nothing but its status.
 */
static int reply_status(const uint8_t *in, size_t len, size_t full_len, int *status)
{
	uint32_t wire;

	if (len < PROTO_STATUS_LEN)
		return -EBADMSG;
	wire = proto_get_u32(in + 0);
	/* As a u32, a negative int32 is above the limit too. */
	if (wire > PROTO_MAX_ERRNO || proto_get_u32(in + 4))
		return -EBADMSG;
	if (wire != 0 && len != PROTO_STATUS_LEN)
		return -EBADMSG;
	if (wire == 0 && full_len && len != full_len)
		return -EBADMSG;
	*status = -(int)wire;
	return 0;
}

int proto_status_decode(const uint8_t *in, size_t len, int *status)
{
	return reply_status(in, len, PROTO_STATUS_LEN, status);
}

int proto_read_rep_decode(const uint8_t *in, size_t len, int *status, size_t *data_len)
{
	int st;
	int rc = reply_status(in, len, 0, &st);

	if (rc < 0)
		return rc;
	if (len - PROTO_STATUS_LEN > PROTO_MAX_IO)
		return -EMSGSIZE;
	*status = st;
	*data_len = len - PROTO_STATUS_LEN;
	return 0;
}

/* ---- atomics and the RDMA attach ------------------------------------------- */

size_t proto_atomic_req_encode(uint8_t *out, uint16_t opcode, const struct proto_atomic_req *m)
{
	proto_put_u64(out + 0, m->id);
	proto_put_u64(out + 8, m->offset);
	proto_put_u32(out + 16, m->rkey);
	proto_put_u32(out + 20, 0);
	proto_put_u64(out + 24, m->operand);
	if (opcode != PROTO_OP_CAS)
		return PROTO_FAA_REQ_LEN;
	proto_put_u64(out + 32, m->desired);
	return PROTO_CAS_REQ_LEN;
}

int proto_atomic_req_decode(const uint8_t *in, size_t len, uint16_t opcode,
			    struct proto_atomic_req *m)
{
	size_t want;

	if (opcode == PROTO_OP_CAS)
		want = PROTO_CAS_REQ_LEN;
	else if (opcode == PROTO_OP_FAA)
		want = PROTO_FAA_REQ_LEN;
	else
		return -EINVAL;
	if (len != want || proto_get_u32(in + 20))
		return -EBADMSG;
	m->id = proto_get_u64(in + 0);
	m->offset = proto_get_u64(in + 8);
	m->rkey = proto_get_u32(in + 16);
	m->operand = proto_get_u64(in + 24);
	m->desired = opcode == PROTO_OP_CAS ? proto_get_u64(in + 32) : 0;
	return 0;
}

size_t proto_atomic_rep_encode(uint8_t *out, uint64_t old)
{
	proto_status_encode(out, 0);
	proto_put_u64(out + 8, old);
	return PROTO_ATOMIC_REP_LEN;
}

int proto_atomic_rep_decode(const uint8_t *in, size_t len, int *status, uint64_t *old)
{
	int st;
	int rc = reply_status(in, len, PROTO_ATOMIC_REP_LEN, &st);

	if (rc < 0)
		return rc;
	if (st == 0)
		*old = proto_get_u64(in + 8);
	*status = st;
	return 0;
}

size_t proto_attach_encode(uint8_t *out, const struct proto_attach *m)
{
	proto_put_u32(out + 0, PROTO_MAGIC);
	proto_put_u16(out + 4, PROTO_VERSION);
	proto_put_u16(out + 6, 0);
	proto_put_u64(out + 8, m->session_id);
	proto_put_u64(out + 16, m->attach_token);
	return PROTO_ATTACH_LEN;
}

int proto_attach_decode(const uint8_t *in, size_t len, struct proto_attach *m)
{
	if (len < PROTO_ATTACH_LEN || proto_get_u32(in + 0) != PROTO_MAGIC)
		return -EBADMSG;
	if (proto_get_u16(in + 4) != PROTO_VERSION)
		return -EPROTO;
	if (proto_get_u16(in + 6))
		return -EBADMSG;
	m->session_id = proto_get_u64(in + 8);
	m->attach_token = proto_get_u64(in + 16);
	return 0;
}

/* ---- fixed replies --------------------------------------------------------- */

size_t proto_hello_rep_encode(uint8_t *out, const struct proto_hello_rep *m)
{
	proto_status_encode(out, 0);
	proto_put_u64(out + 8, m->session_id);
	proto_put_u32(out + 16, m->server_version);
	proto_put_u32(out + 20, m->max_io);
	proto_put_u64(out + 24, m->attach_token);
	proto_put_u16(out + 32, m->rdma_port);
	out[34] = m->key_mode;
	out[35] = 0;
	proto_put_u32(out + 36, 0);
	proto_put_u32(out + 40, m->lease_ms);
	proto_put_u32(out + 44, 0);
	if (!m->resumable)
		return PROTO_HELLO_REP_LEN;
	memcpy(out + PROTO_HELLO_REP_LEN, m->resume_token, PROTO_RESUME_TOKEN_LEN);
	return PROTO_HELLO_REP_RESUME_LEN;
}

int proto_hello_rep_decode(const uint8_t *in, size_t len, int *status, struct proto_hello_rep *m)
{
	uint32_t max_io;
	int st;
	/* Two lengths: with the resume token or without (proto.h). */
	int rc = reply_status(in, len, 0, &st);

	if (rc < 0)
		return rc;
	if (st == 0) {
		if (len != PROTO_HELLO_REP_LEN && len != PROTO_HELLO_REP_RESUME_LEN)
			return -EBADMSG;
		/* A client would loop forever on 0, or overrun frames above it. */
		max_io = proto_get_u32(in + 20);
		if (max_io == 0 || max_io > PROTO_MAX_IO)
			return -EBADMSG;
		if (in[34] > PROTO_KEYS_REGION_MR || in[35] || proto_get_u32(in + 36) ||
		    proto_get_u32(in + 44))
			return -EBADMSG;
		m->session_id = proto_get_u64(in + 8);
		m->server_version = proto_get_u32(in + 16);
		m->max_io = max_io;
		m->attach_token = proto_get_u64(in + 24);
		m->rdma_port = proto_get_u16(in + 32);
		m->key_mode = in[34];
		m->lease_ms = proto_get_u32(in + 40);
		m->resumable = len == PROTO_HELLO_REP_RESUME_LEN;
		if (m->resumable)
			memcpy(m->resume_token, in + PROTO_HELLO_REP_LEN, PROTO_RESUME_TOKEN_LEN);
		else
			memset(m->resume_token, 0, PROTO_RESUME_TOKEN_LEN);
	}
	*status = st;
	return 0;
}

size_t proto_alloc_rep_encode(uint8_t *out, const struct proto_region *m)
{
	proto_status_encode(out, 0);
	proto_put_u64(out + 8, m->id);
	proto_put_u64(out + 16, m->addr);
	proto_put_u64(out + 24, m->length);
	proto_put_u32(out + 32, m->rkey);
	proto_put_u32(out + 36, m->flags);
	return PROTO_ALLOC_REP_LEN;
}

int proto_alloc_rep_decode(const uint8_t *in, size_t len, int *status, struct proto_region *m)
{
	int st;
	int rc = reply_status(in, len, PROTO_ALLOC_REP_LEN, &st);

	if (rc < 0)
		return rc;
	if (st == 0) {
		m->id = proto_get_u64(in + 8);
		m->addr = proto_get_u64(in + 16);
		m->length = proto_get_u64(in + 24);
		m->rkey = proto_get_u32(in + 32);
		m->flags = proto_get_u32(in + 36);
	}
	*status = st;
	return 0;
}

/* ---- counted replies: STATS and the listings ------------------------------- */

/* Writes the status 0, count, reserved prefix shared by STATS and listings. */
static void put_counted_hdr(uint8_t *out, uint32_t count)
{
	proto_status_encode(out, 0);
	proto_put_u32(out + 8, count);
	proto_put_u32(out + 12, 0);
}

/*
 * Checks the prefix of a counted reply of items of itemlen bytes.  On status 0
 * sets *count, having made sure exactly count items follow.
 */
static int counted_hdr(const uint8_t *in, size_t len, size_t itemlen, int *status,
		       uint32_t *count)
{
	uint32_t n;
	int rc = reply_status(in, len, 0, status);

	if (rc < 0 || *status)
		return rc;
	if (len < PROTO_LIST_HDR_LEN || proto_get_u32(in + 12))
		return -EBADMSG;
	n = proto_get_u32(in + 8);
	/* Divide rather than multiply: count * itemlen may not fit. */
	len -= PROTO_LIST_HDR_LEN;
	if (len % itemlen || len / itemlen != n)
		return -EBADMSG;
	*count = n;
	return 0;
}

size_t proto_stats_rep_encode(uint8_t *out, const struct proto_stats *m)
{
	put_counted_hdr(out, PROTO_STAT_COUNT);
	for (size_t i = 0; i < PROTO_STAT_COUNT; i++)
		proto_put_u64(out + PROTO_LIST_HDR_LEN + 8 * i, m->v[i]);
	return PROTO_STATS_REP_LEN;
}

int proto_stats_rep_decode(const uint8_t *in, size_t len, int *status, struct proto_stats *m)
{
	uint32_t count = 0;
	int st;
	int rc = counted_hdr(in, len, 8, &st, &count);

	if (rc < 0)
		return rc;
	if (st == 0) {
		for (size_t i = 0; i < PROTO_STAT_COUNT; i++)
			m->v[i] = i < count ? proto_get_u64(in + PROTO_LIST_HDR_LEN + 8 * i) : 0;
	}
	*status = st;
	return 0;
}

size_t proto_list_hdr_encode(uint8_t *out, uint32_t count)
{
	put_counted_hdr(out, count);
	return PROTO_LIST_HDR_LEN;
}

int proto_list_hdr_decode(const uint8_t *in, size_t len, size_t reclen,
			  int *status, uint32_t *count)
{
	uint32_t n = 0;
	int st;
	int rc;

	if (reclen == 0)
		return -EINVAL;
	rc = counted_hdr(in, len, reclen, &st, &n);
	if (rc < 0)
		return rc;
	/* The record decoders cannot fail, so the reserved word of every region
	 * record is judged here, before the caller decodes any of them. */
	if (st == 0 && (reclen == PROTO_REGION_REC_LEN || reclen == PROTO_REGION_NAMED_REC_LEN)) {
		const uint32_t known = reclen == PROTO_REGION_REC_LEN ? 0 :
			PROTO_ACCESS_READ | PROTO_ACCESS_WRITE | PROTO_REGION_F_UNLINKED;

		for (uint32_t i = 0; i < n; i++) {
			if (proto_get_u32(in + PROTO_LIST_HDR_LEN + i * reclen + 36) & ~known)
				return -EBADMSG;
		}
	}
	*status = st;
	*count = n;
	return 0;
}

/* ---- records --------------------------------------------------------------- */

/* At most size - 1 bytes of s, then NULs: the field always ends in a NUL. */
static void put_str(uint8_t *out, const char *s, size_t size)
{
	size_t n = strnlen(s, size - 1);

	memcpy(out, s, n);
	memset(out + n, 0, size - n);
}

/* Up to the first NUL of the field, never more than size - 1 bytes; the rest
 * of s is zeroed, so equal strings decode to equal arrays. */
static void get_str(char *s, const uint8_t *in, size_t size)
{
	const uint8_t *nul = memchr(in, 0, size - 1);
	size_t n = nul ? (size_t)(nul - in) : size - 1;

	memcpy(s, in, n);
	memset(s + n, 0, size - n);
}

size_t proto_pool_rec_encode(uint8_t *out, const struct proto_pool_rec *m)
{
	put_str(out + 0, m->name, sizeof m->name);
	proto_put_u64(out + 32, m->bytes);
	proto_put_u64(out + 40, m->used);
	proto_put_u64(out + 48, m->largest_free);
	proto_put_u64(out + 56, m->regions);
	proto_put_u32(out + 64, m->page_size);
	proto_put_u32(out + 68, m->alignment);
	return PROTO_POOL_REC_LEN;
}

void proto_pool_rec_decode(const uint8_t *in, struct proto_pool_rec *m)
{
	get_str(m->name, in + 0, sizeof m->name);
	m->bytes = proto_get_u64(in + 32);
	m->used = proto_get_u64(in + 40);
	m->largest_free = proto_get_u64(in + 48);
	m->regions = proto_get_u64(in + 56);
	m->page_size = proto_get_u32(in + 64);
	m->alignment = proto_get_u32(in + 68);
}

size_t proto_region_rec_encode(uint8_t *out, const struct proto_region_rec *m)
{
	proto_put_u64(out + 0, m->id);
	proto_put_u64(out + 8, m->addr);
	proto_put_u64(out + 16, m->length);
	proto_put_u64(out + 24, m->client_id);
	proto_put_u32(out + 32, m->pool);
	proto_put_u32(out + 36, 0);
	return PROTO_REGION_REC_LEN;
}

void proto_region_rec_decode(const uint8_t *in, struct proto_region_rec *m)
{
	m->id = proto_get_u64(in + 0);
	m->addr = proto_get_u64(in + 8);
	m->length = proto_get_u64(in + 16);
	m->client_id = proto_get_u64(in + 24);
	m->pool = proto_get_u32(in + 32);
	m->flags = 0;
	m->name_id = 0;
	m->name[0] = '\0';
}

size_t proto_region_named_rec_encode(uint8_t *out, const struct proto_region_rec *m)
{
	proto_region_rec_encode(out, m);
	proto_put_u32(out + 36, m->flags);
	proto_put_u64(out + 40, m->name_id);
	put_str(out + 48, m->name, sizeof m->name);
	return PROTO_REGION_NAMED_REC_LEN;
}

void proto_region_named_rec_decode(const uint8_t *in, struct proto_region_rec *m)
{
	proto_region_rec_decode(in, m);
	m->flags = proto_get_u32(in + 36);
	m->name_id = proto_get_u64(in + 40);
	get_str(m->name, in + 48, sizeof m->name);
}

size_t proto_client_rec_encode(uint8_t *out, const struct proto_client_rec *m)
{
	proto_put_u64(out + 0, m->id);
	proto_put_u64(out + 8, m->regions);
	proto_put_u64(out + 16, m->used);
	proto_put_u64(out + 24, m->connected_ms);
	proto_put_u64(out + 32, m->idle_ms);
	put_str(out + 40, m->transport, sizeof m->transport);
	put_str(out + 48, m->peer, sizeof m->peer);
	return PROTO_CLIENT_REC_LEN;
}

void proto_client_rec_decode(const uint8_t *in, struct proto_client_rec *m)
{
	m->id = proto_get_u64(in + 0);
	m->regions = proto_get_u64(in + 8);
	m->used = proto_get_u64(in + 16);
	m->connected_ms = proto_get_u64(in + 24);
	m->idle_ms = proto_get_u64(in + 32);
	get_str(m->transport, in + 40, sizeof m->transport);
	get_str(m->peer, in + 48, sizeof m->peer);
}

/* ---- tenant authentication ------------------------------------------------- */

/* A tenant name as the wire carries it: 1..31 bytes, then only NULs. */
static int get_tenant(char *s, const uint8_t *in)
{
	const uint8_t *nul = memchr(in, 0, PROTO_TENANT_LEN);

	if (!nul || nul == in)
		return -EBADMSG;
	for (const uint8_t *p = nul; p < in + PROTO_TENANT_LEN; p++)
		if (*p)
			return -EBADMSG;
	memcpy(s, in, PROTO_TENANT_LEN);
	return 0;
}

size_t proto_auth_begin_req_encode(uint8_t *out, const struct proto_auth_begin_req *m)
{
	put_str(out, m->tenant, PROTO_TENANT_LEN);
	memcpy(out + PROTO_TENANT_LEN, m->client_nonce, PROTO_NONCE_LEN);
	return PROTO_AUTH_BEGIN_REQ_LEN;
}

int proto_auth_begin_req_decode(const uint8_t *in, size_t len, struct proto_auth_begin_req *m)
{
	char tenant[PROTO_TENANT_LEN];

	if (len != PROTO_AUTH_BEGIN_REQ_LEN || get_tenant(tenant, in) < 0)
		return -EBADMSG;
	memcpy(m->tenant, tenant, sizeof tenant);
	memcpy(m->client_nonce, in + PROTO_TENANT_LEN, PROTO_NONCE_LEN);
	return 0;
}

size_t proto_auth_begin_rep_encode(uint8_t *out, const struct proto_auth_begin_rep *m)
{
	proto_status_encode(out, 0);
	proto_put_u64(out + PROTO_STATUS_LEN, m->session_id);
	memcpy(out + PROTO_STATUS_LEN + 8, m->server_nonce, PROTO_NONCE_LEN);
	return PROTO_AUTH_BEGIN_REP_LEN;
}

int proto_auth_begin_rep_decode(const uint8_t *in, size_t len, int *status,
				struct proto_auth_begin_rep *m)
{
	int st;
	int rc = reply_status(in, len, PROTO_AUTH_BEGIN_REP_LEN, &st);

	if (rc < 0)
		return rc;
	*status = st;
	if (st)
		return 0;
	m->session_id = proto_get_u64(in + PROTO_STATUS_LEN);
	memcpy(m->server_nonce, in + PROTO_STATUS_LEN + 8, PROTO_NONCE_LEN);
	return 0;
}

size_t proto_auth_req_encode(uint8_t *out, const uint8_t mac[PROTO_MAC_LEN])
{
	memcpy(out, mac, PROTO_MAC_LEN);
	return PROTO_AUTH_REQ_LEN;
}

int proto_auth_req_decode(const uint8_t *in, size_t len, uint8_t mac[PROTO_MAC_LEN])
{
	if (len != PROTO_AUTH_REQ_LEN)
		return -EBADMSG;
	memcpy(mac, in, PROTO_MAC_LEN);
	return 0;
}

size_t proto_auth_rep_encode(uint8_t *out, const uint8_t mac[PROTO_MAC_LEN])
{
	proto_status_encode(out, 0);
	memcpy(out + PROTO_STATUS_LEN, mac, PROTO_MAC_LEN);
	return PROTO_AUTH_REP_LEN;
}

int proto_auth_rep_decode(const uint8_t *in, size_t len, int *status, uint8_t mac[PROTO_MAC_LEN])
{
	int st;
	int rc = reply_status(in, len, PROTO_AUTH_REP_LEN, &st);

	if (rc < 0)
		return rc;
	*status = st;
	if (!st)
		memcpy(mac, in + PROTO_STATUS_LEN, PROTO_MAC_LEN);
	return 0;
}

size_t proto_auth_transcript(uint8_t *out, enum proto_auth_role role, const char *tenant,
			     const uint8_t server_nonce[PROTO_NONCE_LEN],
			     const uint8_t client_nonce[PROTO_NONCE_LEN], uint64_t session_id)
{
	static const char labels[2][PROTO_AUTH_LABEL_LEN + 1] = { "rmem-auth-v1", "rmem-srvr-v1" };
	size_t at = 0;

	memcpy(out, labels[role == PROTO_AUTH_SERVER], PROTO_AUTH_LABEL_LEN);
	at += PROTO_AUTH_LABEL_LEN;
	memcpy(out + at, server_nonce, PROTO_NONCE_LEN);
	at += PROTO_NONCE_LEN;
	memcpy(out + at, client_nonce, PROTO_NONCE_LEN);
	at += PROTO_NONCE_LEN;
	put_str(out + at, tenant, PROTO_TENANT_LEN);
	at += PROTO_TENANT_LEN;
	proto_put_u64(out + at, session_id);
	return at + 8;
}

/* ---- named regions ------------------------------------------------------------ */

static bool is_name_op(uint16_t opcode)
{
	return opcode == PROTO_OP_CREATE || opcode == PROTO_OP_OPEN || opcode == PROTO_OP_UNLINK;
}

int proto_name_len(const char *name)
{
	size_t len;

	if (!name)
		return -EINVAL;
	len = strnlen(name, PROTO_NAME_MAX + 1);
	if (len > PROTO_NAME_MAX)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x21 || (unsigned char)name[i] > 0x7e)
			return -EINVAL;
	return len ? (int)len : -EINVAL;
}

size_t proto_name_req_encode(uint8_t *out, uint16_t opcode, const struct proto_name_req *m)
{
	size_t n = m->name_len;

	proto_put_u64(out + 0, opcode == PROTO_OP_CREATE ? m->size : 0);
	proto_put_u32(out + 8, m->flags);
	proto_put_u16(out + 12, m->name_len);
	proto_put_u16(out + 14, 0);
	memcpy(out + PROTO_NAME_REQ_FIXED, m->name, n);
	return PROTO_NAME_REQ_FIXED + n;
}

int proto_name_req_decode(const uint8_t *in, size_t len, uint16_t opcode,
			  struct proto_name_req *m)
{
	size_t max = PROTO_NAME_MAX;
	uint64_t size;
	uint32_t flags;
	uint16_t n;

	if (!is_name_op(opcode))
		return -EINVAL;
	if (len < PROTO_NAME_REQ_FIXED)
		return -EBADMSG;
	size = proto_get_u64(in + 0);
	flags = proto_get_u32(in + 8);
	n = proto_get_u16(in + 12);
	if (opcode == PROTO_OP_UNLINK && (flags & PROTO_UNLINK_NS))
		max = PROTO_NAME_NS_MAX; /* "TENANT:NAME" */
	if (n == 0 || n > max || len != PROTO_NAME_REQ_FIXED + (size_t)n ||
	    proto_get_u16(in + 14) || (opcode != PROTO_OP_CREATE && size))
		return -EBADMSG;
	/* A NUL would cut the name short on one side and not the other. */
	if (memchr(in + PROTO_NAME_REQ_FIXED, 0, n))
		return -EBADMSG;
	m->size = size;
	m->flags = flags;
	m->name_len = n;
	memcpy(m->name, in + PROTO_NAME_REQ_FIXED, n);
	memset(m->name + n, 0, sizeof m->name - n);
	return 0;
}

size_t proto_name_rec_encode(uint8_t *out, const struct proto_name_rec *m)
{
	proto_put_u64(out + 0, m->id);
	proto_put_u64(out + 8, m->length);
	proto_put_u64(out + 16, m->age_ms);
	proto_put_u32(out + 24, m->handles);
	proto_put_u32(out + 28, m->flags);
	put_str(out + 32, m->tenant, PROTO_TENANT_LEN);
	put_str(out + 32 + PROTO_TENANT_LEN, m->name, PROTO_NAME_MAX + 1);
	return PROTO_NAME_REC_LEN;
}

void proto_name_rec_decode(const uint8_t *in, struct proto_name_rec *m)
{
	m->id = proto_get_u64(in + 0);
	m->length = proto_get_u64(in + 8);
	m->age_ms = proto_get_u64(in + 16);
	m->handles = proto_get_u32(in + 24);
	m->flags = proto_get_u32(in + 28);
	get_str(m->tenant, in + 32, PROTO_TENANT_LEN);
	get_str(m->name, in + 32 + PROTO_TENANT_LEN, PROTO_NAME_MAX + 1);
}

/* ---- resume (docs/protocol.md 7.13) ----------------------------------------- */

size_t proto_resume_req_encode(uint8_t *out, const struct proto_resume_req *m)
{
	proto_put_u64(out + 0, m->session_id);
	memcpy(out + 8, m->resume_token, PROTO_RESUME_TOKEN_LEN);
	proto_put_u32(out + 24, m->client_version);
	proto_put_u32(out + 28, m->features);
	proto_put_u32(out + 32, m->pid);
	proto_put_u32(out + 36, 0);
	return PROTO_RESUME_REQ_LEN;
}

int proto_resume_req_decode(const uint8_t *in, size_t len, struct proto_resume_req *m)
{
	uint32_t features;

	if (len != PROTO_RESUME_REQ_LEN)
		return -EBADMSG;
	features = proto_get_u32(in + 28);
	if ((features & ~PROTO_HELLO_F_KNOWN) || proto_get_u32(in + 36))
		return -EBADMSG;
	m->session_id = proto_get_u64(in + 0);
	memcpy(m->resume_token, in + 8, PROTO_RESUME_TOKEN_LEN);
	m->client_version = proto_get_u32(in + 24);
	m->features = features;
	m->pid = proto_get_u32(in + 32);
	return 0;
}

size_t proto_rekey_req_encode(uint8_t *out, const struct proto_rekey_req *m)
{
	proto_put_u64(out + 0, m->id);
	proto_put_u32(out + 8, m->flags);
	proto_put_u32(out + 12, 0);
	return PROTO_REKEY_REQ_LEN;
}

int proto_rekey_req_decode(const uint8_t *in, size_t len, struct proto_rekey_req *m)
{
	/* No flag is defined: one set is a request we would misread. */
	if (len != PROTO_REKEY_REQ_LEN || proto_get_u32(in + 8) || proto_get_u32(in + 12))
		return -EBADMSG;
	m->id = proto_get_u64(in + 0);
	m->flags = 0;
	return 0;
}
