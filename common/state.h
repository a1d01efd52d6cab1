/*
 * state.h - the persistent state codec: the bytes of the state memfd that
 * describes rmemd's pools across a restart (docs/architecture.md, "Restart
 * without loss").
 *
 * Pure functions over byte buffers, like proto.h: no I/O, no allocation, no
 * globals; every length and field checked before it is trusted, so a damaged
 * or hostile fd store is refused, never half-believed.  Unit-tested
 * (tests/unit/test_state.c) and fuzzed (tests/fuzz/fuzz_state.c).
 *
 * The memfd is a header (STATE_HDR_LEN bytes) and nslots fixed-size slots
 * (STATE_SLOT_LEN bytes each).  All integers little-endian.
 *
 * Header:
 *   off size field
 *    0   4   magic      STATE_MAGIC ("RMST")
 *    4   4   version    STATE_VERSION
 *    8   4   hdr_len    STATE_HDR_LEN
 *   12   4   slot_len   STATE_SLOT_LEN
 *   16   4   nslots     1..STATE_MAX_SLOTS
 *   20   4   npools     1..STATE_MAX_POOLS
 *   24   8   generation the generation of this memory (below 2^63), 0: none
 *   32  56*  pools      npools records: name[32] (NUL padded), size u64,
 *                       alignment u64, page_size u32, reserved u32; the
 *                       records past npools are zero
 *  928  32   server_id  the server's cluster id (NUL padded), "": none
 *  960   *   reserved   zero
 * 4088   4   check      CRC-32C of bytes [0, 4088)
 * 4092   4   reserved
 * The header is written when the memfd is made, and again only when a
 * restart grows the pools (below); slots change all the time.
 * generation and server_id never change: the server's identity in a cluster
 * (docs/architecture.md, "Cluster"): both are drawn when the memory is new
 * and must stay what they are for as long as the memory lives, so that a
 * server restarted without loss is the same server with the same memory.
 * They were reserved zeros before (a state of an older rmemd decodes with
 * none; an older rmemd refuses ours as damaged and starts fresh, which is
 * what it would do without them).
 *
 * Slot (STATE_SLOT_LEN bytes):
 *   off size field
 *    0   2   type       enum state_type; 0 = free (then nothing else counts)
 *    2   2   reserved
 *    4   4   check      CRC-32C of (slot index u32, bytes [0, 4), the body)
 *    8   *   body       by type, below; every byte past the body is 0 (and
 *                       checked as such, so the CRC need not cover it)
 *
 * The writer (daemon/slots.c) fills the body of a free slot, then stores the
 * first 8 bytes with one aligned 8-byte store: a slot is free or whole at
 * every instant, and a crash mid-write leaves it free.  A check that fails
 * is therefore damage, never a torn write, and the whole state is refused.
 * The index in the check makes a slot copied to another place fail too.
 *
 * Bodies (offsets from the start of the slot):
 *   COUNTERS  gen u64 @8, next_region u64 @16, next_session u64 @24,
 *             next_name u64 @32: the ids below these may have been handed
 *             out; the higher gen of the two COUNTERS slots (0 and 1) is the
 *             current one.
 *   SESSION   id u64 @8, tenant[32] @16 ("" anonymous), token[16] @48
 *   REGION    id u64 @8, session u64 @16, pool u32 @24, reserved u32 @28,
 *             offset u64 @32, length u64 @40 (an anonymous region)
 *   OBJECT    id u64 @8, pool u32 @16, reserved u32 @20, offset u64 @24,
 *             length u64 @32, ns[32] @40, charged[32] @72 (a named region's
 *             range: its namespace and whose quota holds it)
 *   NAME      object u64 @8, name_len u16 @16, flags u16 @18,
 *             reserved u32 @20, name[name_len] @24 (1..255 bytes, no NUL).
 *             flags: STATE_NAME_F_PIECE, a redundant region's piece
 *             (PROTO_CREATE_F_PIECE); any other bit is -EBADMSG.  A
 *             reserved 0 before, without a version change: an older
 *             state's names are ordinary, as they were made, and an older
 *             rmemd refuses a state holding a piece as damaged and starts
 *             fresh, as for a PENDING slot.
 *   HANDLE    region u64 @8, session u64 @16, object u64 @24, access u32 @32,
 *             reserved u32 @36
 *   PENDING   object u64 @8: a change of several slots to that object is
 *             under way (a CREATE, an UNLINK with REVOKE).  Written before
 *             the first slot the change writes or frees and freed after the
 *             last, so that this one store decides it: a restore that finds
 *             it drops the object, its name and every handle of it (a CREATE
 *             is then absent, a revoke complete; docs/architecture.md,
 *             "Invariant: a change is whole or absent after a crash").
 *             Added without a version change: it exists only while such a
 *             change runs, and an older rmemd that meets one refuses the
 *             state as damaged and starts fresh, as for any type it does
 *             not know.
 * Strings (tenant, ns, charged): at most 31 bytes, NUL padded; a byte after
 * the first NUL that is not NUL, or 32 bytes without one, is -EBADMSG.
 *
 * Versions (docs/architecture.md, "Upgrade and rollback").  The header's
 * version is the format's: what a reader must know to read every byte.  It
 * is bumped when a state could hold something an older rmemd cannot read,
 * so that an older rmemd says "a newer format" (-EPROTO) and refuses, and
 * a newer one restores every version from STATE_VERSION_MIN on.  Version 1
 * was written, unbumped, by every release so far, in steps that an older
 * reader of version 1 refuses as damage when it meets them (before there
 * was a rule; each step is optional, so all of them are still version 1):
 *   1.2.0  the codec; generation and server_id (once reserved zeros)
 *   1.2.1  PENDING slots
 *   1.4.0  NAME flags (a redundant region's piece)
 * "Starts fresh" in the notes on each step is what 1.3 and older do with a
 * state they cannot read; from 1.4 on such a state is refused and kept
 * (persist.c), never dropped without --discard-state.
 * Pool sizes in the header may grow from one start to the next (rmemd
 * rewrites the header then; the layout is the same), so the header is no
 * longer written only once.  The writer's release is not in these bytes (a
 * field here would make every state unreadable to 1.3 and older): the
 * state memfd's name carries it, "rmem-state rmemd VERSION", for the log
 * line of a refusal only (persist.c), never for a decision.
 */
#ifndef RMEM_STATE_H
#define RMEM_STATE_H

#include <stddef.h>
#include <stdint.h>

#define STATE_MAGIC      0x54534d52u /* "RMST" read as little-endian u32 */
#define STATE_VERSION    1  /* what this rmemd writes */
#define STATE_VERSION_MIN 1  /* the oldest it reads */
#define STATE_HDR_LEN    4096u
#define STATE_SLOT_LEN   384u
#define STATE_MAX_POOLS  16
#define STATE_MAX_SLOTS  (1u << 22)
#define STATE_STR_LEN    32   /* pool names, tenant names: 31 bytes and a NUL */
#define STATE_NAME_MAX   255
#define STATE_TOKEN_LEN  16
#define STATE_POOL_REC_LEN 56
#define STATE_HEAD_LEN   8    /* the part of a slot stored last, in one store */

enum state_type {
	STATE_FREE = 0,
	STATE_COUNTERS = 1,
	STATE_SESSION = 2,
	STATE_REGION = 3,
	STATE_OBJECT = 4,
	STATE_NAME = 5,
	STATE_HANDLE = 6,
	STATE_PENDING = 7,
	STATE_TYPE_COUNT
};

#define STATE_NAME_F_PIECE 0x1u  /* NAME flags: a redundant region's piece */
#define STATE_NAME_F_KNOWN STATE_NAME_F_PIECE

struct state_pool {
	char name[STATE_STR_LEN];
	uint64_t size, alignment;
	uint32_t page_size;
};

struct state_hdr {
	uint32_t nslots, npools;
	struct state_pool pools[STATE_MAX_POOLS];
	uint64_t generation;              /* <= INT64_MAX; 0: none */
	char server_id[STATE_STR_LEN];    /* "": none */
};

struct state_slot {
	uint16_t type; /* enum state_type */
	union {
		struct {
			uint64_t gen, next_region, next_session, next_name;
		} counters;
		struct {
			uint64_t id;
			char tenant[STATE_STR_LEN];
			uint8_t token[STATE_TOKEN_LEN];
		} session;
		struct {
			uint64_t id, session;
			uint32_t pool;
			uint64_t offset, length;
		} region;
		struct {
			uint64_t id;
			uint32_t pool;
			uint64_t offset, length;
			char ns[STATE_STR_LEN], charged[STATE_STR_LEN];
		} object;
		struct {
			uint64_t object;
			uint16_t name_len;
			char name[STATE_NAME_MAX + 1]; /* the decoder NUL-terminates it */
			uint16_t flags;                /* STATE_NAME_F_* */
		} name;
		struct {
			uint64_t region, session, object;
			uint32_t access;
		} handle;
		struct {
			uint64_t object;
		} pending;
	} u;
};

/* Bytes of a state memfd with nslots slots. */
uint64_t state_size(uint32_t nslots);

/*
 * Header codec.  encode writes STATE_HDR_LEN bytes (the check included) and
 * returns that; it needs npools 1..STATE_MAX_POOLS, a generation of at most
 * INT64_MAX and a server_id of at most 31 bytes (else it writes nothing
 * and returns 0).  decode takes the whole state: len must be
 * state_size(nslots) for the nslots the header gives.  Returns 0, or
 *  -EBADMSG  short buffer, bad magic, a failed check, a reserved field not 0,
 *            a generation past INT64_MAX, a server_id not NUL padded,
 *            hdr_len or slot_len other than ours, nslots or npools out of
 *            range, a pool record that is not canonical (name empty, not
 *            NUL padded, size 0, page_size 0) or a record past npools not 0
 *  -EPROTO   good magic and check, a version outside STATE_VERSION_MIN..
 *            STATE_VERSION (state_hdr_version says which)
 *  -EMSGSIZE len is not state_size(nslots)
 * and writes nothing to *h when it fails.
 */
size_t state_hdr_encode(uint8_t *out, const struct state_hdr *h);
int state_hdr_decode(const uint8_t *in, size_t len, struct state_hdr *h);
/* The version field of a header that state_hdr_decode refused with
 * -EPROTO (in is STATE_HDR_LEN bytes); meaningless otherwise. */
uint32_t state_hdr_version(const uint8_t *in);

/*
 * Slot codec.  encode writes STATE_SLOT_LEN bytes for slot number index (the
 * check depends on it) and returns that; a type it does not know, a string
 * too long or a name_len out of 1..STATE_NAME_MAX writes nothing and returns
 * 0.  decode reads STATE_SLOT_LEN bytes: 0 with s->type STATE_FREE when the
 * type is 0 (the rest is not looked at), 0 and the record for a whole slot,
 * -EBADMSG for anything else (a failed check, an unknown type, a reserved
 * field, bytes after the body, a bad string or name) without writing *s.
 */
size_t state_slot_encode(uint8_t *out, uint32_t index, const struct state_slot *s);
int state_slot_decode(const uint8_t *in, uint32_t index, struct state_slot *s);

/* The id a record is filed and sorted under: a session's, a region's or an
 * object's own id, the object a NAME or PENDING names, the region a HANDLE
 * opens; 0 for COUNTERS and FREE. */
uint64_t state_slot_id(const struct state_slot *s);

/* CRC-32C (Castagnoli), continued from crc (0 to start). */
uint32_t state_crc32c(uint32_t crc, const uint8_t *p, size_t n);

#endif /* RMEM_STATE_H */
