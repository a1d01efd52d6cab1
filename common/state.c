/*
 * state.c - the persistent state codec (see state.h; docs/architecture.md,
 * "Restart without loss").
 *
 * Every decoder checks the length, the check and every field before it
 * writes its output, and refuses any byte it would not have written itself:
 * one encoding per record, so the fuzzer can demand exact round trips, and
 * garbage can never decode as a record that happens to look plausible.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "proto.h"
#include "state.h"

#define HDR_CHECK_OFF (STATE_HDR_LEN - 8)
#define HDR_POOLS_OFF 32
#define HDR_GEN_OFF   24  /* once reserved (0): see state.h */
#define HDR_ID_OFF    (HDR_POOLS_OFF + STATE_MAX_POOLS * STATE_POOL_REC_LEN)
_Static_assert(HDR_ID_OFF + STATE_STR_LEN <= HDR_CHECK_OFF, "the server id fits the header");

_Static_assert(HDR_POOLS_OFF + STATE_MAX_POOLS * STATE_POOL_REC_LEN <= HDR_CHECK_OFF,
	       "pool records fit the header");
_Static_assert(24 + STATE_NAME_MAX <= STATE_SLOT_LEN, "a name fits a slot");
_Static_assert(72 + STATE_STR_LEN <= STATE_SLOT_LEN, "an object fits a slot");

/* ---- CRC-32C --------------------------------------------------------------- */

/* One table lookup per byte (the table is made on first use).  A slot's
 * check covers its head and body only (bytes after the body must be 0 and
 * are checked as such), so a region's slot costs 48 bytes of CRC: it runs
 * once per acknowledged change, on the request's path. */
static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (c & 1 ? 0x82f63b78u : 0);
		crc_table[i] = c;
	}
}

uint32_t state_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
	/* Entry 1 is never 0 once made: the one-thread daemon makes it on its
	 * first call, and a race of two makers writes the same values. */
	if (!crc_table[1])
		crc_init();
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = (crc >> 8) ^ crc_table[(crc ^ p[i]) & 0xff];
	return ~crc;
}

/* ---- helpers ----------------------------------------------------------------- */

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* A string field: at most size - 1 bytes, NUL padded.  false when s is too long. */
static bool put_str(uint8_t *out, const char *s, size_t size)
{
	size_t n = strnlen(s, size);

	if (n >= size)
		return false;
	memcpy(out, s, n);
	memset(out + n, 0, size - n);
	return true;
}

/* The canonical form only: a NUL within the field and nothing but NULs after it. */
static bool get_str(char *s, const uint8_t *in, size_t size, bool may_be_empty)
{
	const uint8_t *nul = memchr(in, 0, size);

	if (!nul || (!may_be_empty && nul == in))
		return false;
	if (!all_zero(nul, (size_t)(in + size - nul)))
		return false;
	memcpy(s, in, size);
	return true;
}

uint64_t state_size(uint32_t nslots)
{
	return STATE_HDR_LEN + (uint64_t)nslots * STATE_SLOT_LEN;
}

/* ---- header ------------------------------------------------------------------ */

size_t state_hdr_encode(uint8_t *out, const struct state_hdr *h)
{
	if (h->npools < 1 || h->npools > STATE_MAX_POOLS || h->nslots < 1 ||
	    h->nslots > STATE_MAX_SLOTS || h->generation > INT64_MAX)
		return 0;
	memset(out, 0, STATE_HDR_LEN);
	proto_put_u32(out + 0, STATE_MAGIC);
	proto_put_u32(out + 4, STATE_VERSION);
	proto_put_u32(out + 8, STATE_HDR_LEN);
	proto_put_u32(out + 12, STATE_SLOT_LEN);
	proto_put_u32(out + 16, h->nslots);
	proto_put_u32(out + 20, h->npools);
	for (uint32_t i = 0; i < h->npools; i++) {
		uint8_t *r = out + HDR_POOLS_OFF + i * STATE_POOL_REC_LEN;

		if (!put_str(r, h->pools[i].name, STATE_STR_LEN))
			return 0;
		proto_put_u64(r + 32, h->pools[i].size);
		proto_put_u64(r + 40, h->pools[i].alignment);
		proto_put_u32(r + 48, h->pools[i].page_size);
	}
	proto_put_u64(out + HDR_GEN_OFF, h->generation);
	if (!put_str(out + HDR_ID_OFF, h->server_id, STATE_STR_LEN))
		return 0;
	proto_put_u32(out + HDR_CHECK_OFF, state_crc32c(0, out, HDR_CHECK_OFF));
	return STATE_HDR_LEN;
}

int state_hdr_decode(const uint8_t *in, size_t len, struct state_hdr *h)
{
	struct state_hdr tmp;
	uint32_t nslots, npools;

	if (len < STATE_HDR_LEN || proto_get_u32(in) != STATE_MAGIC)
		return -EBADMSG;
	if (proto_get_u32(in + HDR_CHECK_OFF) != state_crc32c(0, in, HDR_CHECK_OFF))
		return -EBADMSG;
	/* After the check, so that a garbled version reads as damage. */
	if (proto_get_u32(in + 4) < STATE_VERSION_MIN || proto_get_u32(in + 4) > STATE_VERSION)
		return -EPROTO;
	nslots = proto_get_u32(in + 16);
	npools = proto_get_u32(in + 20);
	if (proto_get_u32(in + 8) != STATE_HDR_LEN || proto_get_u32(in + 12) != STATE_SLOT_LEN ||
	    nslots < 1 || nslots > STATE_MAX_SLOTS || npools < 1 || npools > STATE_MAX_POOLS ||
	    proto_get_u32(in + HDR_CHECK_OFF + 4))
		return -EBADMSG;
	memset(&tmp, 0, sizeof tmp);
	tmp.nslots = nslots;
	tmp.npools = npools;
	/* 0 and "" in a state written before they were kept: no identity. */
	tmp.generation = proto_get_u64(in + HDR_GEN_OFF);
	if (tmp.generation > INT64_MAX || !get_str(tmp.server_id, in + HDR_ID_OFF, STATE_STR_LEN, true))
		return -EBADMSG;
	for (uint32_t i = 0; i < STATE_MAX_POOLS; i++) {
		const uint8_t *r = in + HDR_POOLS_OFF + i * STATE_POOL_REC_LEN;
		struct state_pool *p = &tmp.pools[i];

		if (i >= npools) {
			if (!all_zero(r, STATE_POOL_REC_LEN))
				return -EBADMSG;
			continue;
		}
		if (!get_str(p->name, r, STATE_STR_LEN, false))
			return -EBADMSG;
		p->size = proto_get_u64(r + 32);
		p->alignment = proto_get_u64(r + 40);
		p->page_size = proto_get_u32(r + 48);
		if (!p->size || !p->page_size || proto_get_u32(r + 52))
			return -EBADMSG;
	}
	if (!all_zero(in + HDR_ID_OFF + STATE_STR_LEN, HDR_CHECK_OFF - HDR_ID_OFF - STATE_STR_LEN))
		return -EBADMSG;
	if (len != state_size(nslots))
		return -EMSGSIZE;
	*h = tmp;
	return 0;
}

uint32_t state_hdr_version(const uint8_t *in)
{
	return proto_get_u32(in + 4);
}

/* ---- slots ------------------------------------------------------------------- */

/* The check of a slot whose body ends at end. */
static uint32_t slot_check(const uint8_t *slot, uint32_t index, size_t end)
{
	uint8_t idx[4];

	proto_put_u32(idx, index);
	return state_crc32c(state_crc32c(state_crc32c(0, idx, 4), slot, 4),
			    slot + STATE_HEAD_LEN, end - STATE_HEAD_LEN);
}

/* Writes the body of s into out (zeroed before); the body's end, 0 if s is bad. */
static size_t put_body(uint8_t *out, const struct state_slot *s)
{
	switch (s->type) {
	case STATE_COUNTERS:
		proto_put_u64(out + 8, s->u.counters.gen);
		proto_put_u64(out + 16, s->u.counters.next_region);
		proto_put_u64(out + 24, s->u.counters.next_session);
		proto_put_u64(out + 32, s->u.counters.next_name);
		return 40;
	case STATE_SESSION:
		proto_put_u64(out + 8, s->u.session.id);
		if (!put_str(out + 16, s->u.session.tenant, STATE_STR_LEN))
			return 0;
		memcpy(out + 48, s->u.session.token, STATE_TOKEN_LEN);
		return 64;
	case STATE_REGION:
		proto_put_u64(out + 8, s->u.region.id);
		proto_put_u64(out + 16, s->u.region.session);
		proto_put_u32(out + 24, s->u.region.pool);
		proto_put_u64(out + 32, s->u.region.offset);
		proto_put_u64(out + 40, s->u.region.length);
		return 48;
	case STATE_OBJECT:
		proto_put_u64(out + 8, s->u.object.id);
		proto_put_u32(out + 16, s->u.object.pool);
		proto_put_u64(out + 24, s->u.object.offset);
		proto_put_u64(out + 32, s->u.object.length);
		if (!put_str(out + 40, s->u.object.ns, STATE_STR_LEN) ||
		    !put_str(out + 72, s->u.object.charged, STATE_STR_LEN))
			return 0;
		return 104;
	case STATE_NAME:
		if (s->u.name.name_len < 1 || s->u.name.name_len > STATE_NAME_MAX ||
		    memchr(s->u.name.name, 0, s->u.name.name_len) ||
		    (s->u.name.flags & ~STATE_NAME_F_KNOWN))
			return 0;
		proto_put_u64(out + 8, s->u.name.object);
		proto_put_u16(out + 16, s->u.name.name_len);
		proto_put_u16(out + 18, s->u.name.flags);
		memcpy(out + 24, s->u.name.name, s->u.name.name_len);
		return 24 + (size_t)s->u.name.name_len;
	case STATE_HANDLE:
		proto_put_u64(out + 8, s->u.handle.region);
		proto_put_u64(out + 16, s->u.handle.session);
		proto_put_u64(out + 24, s->u.handle.object);
		proto_put_u32(out + 32, s->u.handle.access);
		return 40;
	case STATE_PENDING:
		proto_put_u64(out + 8, s->u.pending.object);
		return 16;
	default:
		return 0;
	}
}

size_t state_slot_encode(uint8_t *out, uint32_t index, const struct state_slot *s)
{
	uint8_t tmp[STATE_SLOT_LEN];
	size_t end;

	memset(tmp, 0, sizeof tmp);
	if (s->type == STATE_FREE) {
		memcpy(out, tmp, sizeof tmp);
		return STATE_SLOT_LEN;
	}
	end = put_body(tmp, s);
	if (!end)
		return 0;
	proto_put_u16(tmp, s->type);
	proto_put_u32(tmp + 4, slot_check(tmp, index, end));
	memcpy(out, tmp, sizeof tmp);
	return STATE_SLOT_LEN;
}

/* Reads the body of a slot of type t into *s; the body's end, 0 if it is bad. */
static size_t get_body(const uint8_t *in, uint16_t t, struct state_slot *s)
{
	switch (t) {
	case STATE_COUNTERS:
		s->u.counters.gen = proto_get_u64(in + 8);
		s->u.counters.next_region = proto_get_u64(in + 16);
		s->u.counters.next_session = proto_get_u64(in + 24);
		s->u.counters.next_name = proto_get_u64(in + 32);
		return 40;
	case STATE_SESSION:
		s->u.session.id = proto_get_u64(in + 8);
		if (!get_str(s->u.session.tenant, in + 16, STATE_STR_LEN, true))
			return 0;
		memcpy(s->u.session.token, in + 48, STATE_TOKEN_LEN);
		return 64;
	case STATE_REGION:
		s->u.region.id = proto_get_u64(in + 8);
		s->u.region.session = proto_get_u64(in + 16);
		s->u.region.pool = proto_get_u32(in + 24);
		s->u.region.offset = proto_get_u64(in + 32);
		s->u.region.length = proto_get_u64(in + 40);
		return proto_get_u32(in + 28) ? 0 : 48;
	case STATE_OBJECT:
		s->u.object.id = proto_get_u64(in + 8);
		s->u.object.pool = proto_get_u32(in + 16);
		s->u.object.offset = proto_get_u64(in + 24);
		s->u.object.length = proto_get_u64(in + 32);
		if (proto_get_u32(in + 20) ||
		    !get_str(s->u.object.ns, in + 40, STATE_STR_LEN, true) ||
		    !get_str(s->u.object.charged, in + 72, STATE_STR_LEN, true))
			return 0;
		return 104;
	case STATE_NAME: {
		uint16_t n = proto_get_u16(in + 16);

		if (n < 1 || n > STATE_NAME_MAX || (proto_get_u16(in + 18) & ~STATE_NAME_F_KNOWN) ||
		    proto_get_u32(in + 20) || memchr(in + 24, 0, n))
			return 0;
		s->u.name.object = proto_get_u64(in + 8);
		s->u.name.name_len = n;
		s->u.name.flags = proto_get_u16(in + 18);
		memcpy(s->u.name.name, in + 24, n);
		s->u.name.name[n] = '\0';
		return 24 + (size_t)n;
	}
	case STATE_HANDLE:
		s->u.handle.region = proto_get_u64(in + 8);
		s->u.handle.session = proto_get_u64(in + 16);
		s->u.handle.object = proto_get_u64(in + 24);
		s->u.handle.access = proto_get_u32(in + 32);
		return proto_get_u32(in + 36) ? 0 : 40;
	case STATE_PENDING:
		s->u.pending.object = proto_get_u64(in + 8);
		return 16;
	default:
		return 0;
	}
}

/* Where the body of a slot of type t ends, from the bytes (a name's length
 * is read before the check is known good: a garbled one gives another
 * range, and the check fails); 0 for an unknown type or a bad length. */
static size_t body_end(const uint8_t *in, uint16_t t)
{
	static const uint8_t fixed[STATE_TYPE_COUNT] = {
		[STATE_COUNTERS] = 40, [STATE_SESSION] = 64, [STATE_REGION] = 48,
		[STATE_OBJECT] = 104, [STATE_HANDLE] = 40, [STATE_PENDING] = 16,
	};
	uint16_t n;

	if (t >= STATE_TYPE_COUNT)
		return 0;
	if (t != STATE_NAME)
		return fixed[t];
	n = proto_get_u16(in + 16);
	return n >= 1 && n <= STATE_NAME_MAX ? 24 + (size_t)n : 0;
}

int state_slot_decode(const uint8_t *in, uint32_t index, struct state_slot *s)
{
	struct state_slot tmp;
	uint16_t t = proto_get_u16(in);
	size_t end;

	if (t == STATE_FREE) {
		/* The whole head is 0 in a free slot: the writer clears it with one
		 * store.  A type of 0 with anything else in the head is damage. */
		if (proto_get_u16(in + 2) || proto_get_u32(in + 4))
			return -EBADMSG;
		memset(s, 0, sizeof *s);
		return 0;
	}
	end = body_end(in, t);
	if (!end || proto_get_u16(in + 2) || proto_get_u32(in + 4) != slot_check(in, index, end) ||
	    !all_zero(in + end, STATE_SLOT_LEN - end))
		return -EBADMSG;
	memset(&tmp, 0, sizeof tmp);
	tmp.type = t;
	if (get_body(in, t, &tmp) != end)
		return -EBADMSG;
	*s = tmp;
	return 0;
}

uint64_t state_slot_id(const struct state_slot *s)
{
	switch (s->type) {
	case STATE_SESSION: return s->u.session.id;
	case STATE_REGION:  return s->u.region.id;
	case STATE_OBJECT:  return s->u.object.id;
	case STATE_NAME:    return s->u.name.object;
	case STATE_HANDLE:  return s->u.handle.region;
	case STATE_PENDING: return s->u.pending.object;
	default:            return 0;
	}
}
