/*
 * proto.h - the rmem wire protocol: one codec shared by rmemd and librmem.
 *
 * Pure functions over byte buffers: no I/O, no allocation, no globals.  Every
 * decoder checks each length before it reads, and rejects what it does not
 * understand.  The normative description is docs/protocol.md.
 *
 * Version history (PROTO_VERSION):
 *   1  first version: HELLO ALLOC FREE WRITE READ STATS PING POOLS REGIONS CLIENTS
 *      CAS FAA; the HELLO reply names the RDMA port, key mode and attach token.
 *      AUTH_BEGIN and AUTH (additive): a tenant's challenge-response before HELLO.
 *      The HELLO reply gains lease_ms (appended, 8 bytes longer).
 *      Named regions (1.2): CREATE OPEN UNLINK NAMES.
 *      Resume after a daemon restart (additive, docs/protocol.md 7.13): the
 *      HELLO feature bit PROTO_HELLO_F_RESUMABLE asks for a resume token
 *      (the reply is then PROTO_HELLO_REP_RESUME_LEN bytes); RESUME and REKEY.
 *      OPEN's PROTO_ACCESS_EXCL (additive, after 1.4.0): the one writer fences
 *      the others; an older daemon answers it -EINVAL.
 *
 * Frame = header (PROTO_HDR_LEN bytes) + payload (hdr.length bytes).
 * All integers little-endian, fixed width.
 *
 *   off size field
 *    0   4   magic      PROTO_MAGIC ("RMEM" as bytes 'R' 'M' 'E' 'M')
 *    4   2   version    PROTO_VERSION
 *    6   2   opcode     enum proto_op
 *    8   2   flags      PROTO_F_RESPONSE on replies; other bits must be 0
 *   10   2   reserved   must be 0
 *   12   4   length     payload bytes that follow the header
 *   16   8   req_id     chosen by the requester, echoed in the reply
 *
 * Every reply payload starts with an int32 status: 0 or a positive Linux errno.
 * A reply whose status is not 0 is exactly PROTO_STATUS_LEN bytes long, whatever
 * the opcode: the reply decoders accept that and report the status.
 * FREE, WRITE and PING replies and ERROR frames carry only the status.
 */
#ifndef RMEM_PROTO_H
#define RMEM_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC       0x4d454d52u /* "RMEM" read as little-endian u32 */
#define PROTO_VERSION     1
#define PROTO_HDR_LEN     24

#define PROTO_F_RESPONSE  0x0001u

/* Largest payload of any frame other than WRITE requests and READ replies. */
#define PROTO_MAX_CTL     4096u
/* Longest name of a named region, in bytes (section 7.12). */
#define PROTO_NAME_MAX    255
/* Largest data part of one WRITE request or READ reply.  Larger transfers are
 * split by the client into several frames. */
#define PROTO_MAX_IO      (16u << 20)

enum proto_op {
	PROTO_OP_ERROR   = 0,  /* reply only: the request could not be decoded */
	PROTO_OP_HELLO   = 1,
	PROTO_OP_ALLOC   = 2,
	PROTO_OP_FREE    = 3,
	PROTO_OP_WRITE   = 4,
	PROTO_OP_READ    = 5,
	PROTO_OP_STATS   = 6,
	PROTO_OP_PING    = 7,
	PROTO_OP_POOLS   = 8,  /* admin */
	PROTO_OP_REGIONS = 9,  /* admin */
	PROTO_OP_CLIENTS = 10, /* admin */
	PROTO_OP_CAS     = 11,
	PROTO_OP_FAA     = 12,
	PROTO_OP_AUTH_BEGIN = 13, /* tenants: before HELLO, see PROTO_AUTH_* below */
	PROTO_OP_AUTH    = 14,
	PROTO_OP_CREATE  = 15, /* named regions, see PROTO_NAME_* below */
	PROTO_OP_OPEN    = 16,
	PROTO_OP_UNLINK  = 17,
	PROTO_OP_NAMES   = 18, /* admin */
	PROTO_OP_RESUME  = 19, /* instead of HELLO: take back a restored session */
	PROTO_OP_REKEY   = 20, /* a region's new key (and address) after RESUME */
	PROTO_OP_REGIONS_NAMED = 21, /* admin: REGIONS with each handle's name */
	PROTO_OP_COUNT
};

struct proto_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t opcode;
	uint16_t flags;
	uint16_t reserved;
	uint32_t length;
	uint64_t req_id;
};

/*
 * Header codec.  proto_hdr_encode() always writes PROTO_MAGIC, PROTO_VERSION
 * and a zero reserved field, whatever h->magic, h->version and h->reserved
 * say (those are outputs of decode); opcode, flags, length and req_id are
 * written as given.
 *
 * proto_hdr_decode() needs exactly PROTO_HDR_LEN bytes.  It always stores the
 * raw fields in *h (so after any error but bad magic the receiver can echo
 * h->req_id in an ERROR frame), then checks them in this order and returns:
 *   0        a header this version understands
 *  -EBADMSG  bad magic
 *  -EPROTO   good magic, other version
 *  -EBADMSG  unknown flags, or non-zero reserved bits
 *  -EOPNOTSUPP unknown opcode, or PROTO_OP_ERROR without PROTO_F_RESPONSE
 *  -EMSGSIZE length above proto_max_payload(opcode, flags)
 */
void proto_hdr_encode(uint8_t out[PROTO_HDR_LEN], const struct proto_hdr *h);
int proto_hdr_decode(const uint8_t in[PROTO_HDR_LEN], struct proto_hdr *h);
/* The largest payload a frame with this opcode and flags may carry:
 * PROTO_IO_REQ_LEN + PROTO_MAX_IO for WRITE requests, PROTO_STATUS_LEN +
 * PROTO_MAX_IO for READ replies, PROTO_MAX_CTL for everything else. */
uint32_t proto_max_payload(uint16_t opcode, uint16_t flags);

/* ---- request payloads ---------------------------------------------------- */

/* HELLO request: client_version u32, features u32, pid u32, reserved u32.
 * One feature bit is defined: PROTO_HELLO_F_RESUMABLE asks for the session's
 * resume token in the reply (docs/protocol.md 7.13).  The decoder rejects
 * any other bit (-EBADMSG): a feature we do not know is one we cannot honour. */
#define PROTO_HELLO_F_RESUMABLE 0x1u
#define PROTO_HELLO_F_KNOWN     PROTO_HELLO_F_RESUMABLE
struct proto_hello_req {
	uint32_t client_version;
	uint32_t features;
	uint32_t pid;
};
#define PROTO_HELLO_REQ_LEN 16

/* ALLOC request: size u64, flags u32, reserved u32 */
struct proto_alloc_req {
	uint64_t size;
	uint32_t flags;
};
#define PROTO_ALLOC_REQ_LEN 16

/* FREE request: id u64, rkey u32, reserved u32 */
struct proto_free_req {
	uint64_t id;
	uint32_t rkey;
};
#define PROTO_FREE_REQ_LEN 16

/*
 * WRITE request: id u64, offset u64, rkey u32, reserved u32, then data.
 * READ request:  id u64, offset u64, rkey u32, length u32.
 * For WRITE, length is the data that follows (hdr.length - PROTO_IO_REQ_LEN).
 */
struct proto_io_req {
	uint64_t id;
	uint64_t offset;
	uint32_t rkey;
	uint32_t length;
};
#define PROTO_IO_REQ_LEN 24

/* POOLS request: empty.  REGIONS/REGIONS_NAMED/CLIENTS/NAMES request:
 * after u64, max u32, reserved u32 */
struct proto_list_req {
	uint64_t after;
	uint32_t max;
};
#define PROTO_LIST_REQ_LEN 16

/* STATS and PING requests: empty payload. */

/* ---- reply payloads (all start with status i32, reserved u32) -------------- */
#define PROTO_STATUS_LEN 8

/*
 * HELLO reply: status, reserved, session_id u64, server_version u32, max_io u32,
 * attach_token u64, rdma_port u16, key_mode u8, reserved u8, reserved u32,
 * lease_ms u32, reserved u32.
 * max_io must be 1..PROTO_MAX_IO (else -EBADMSG): a client splits transfers
 * into frames of at most max_io data bytes.  rdma_port is the daemon's rdma_cm
 * port (0: no RDMA); a client that wants the RDMA data path connects there
 * with (session_id, attach_token) as private data, which ties its queue pair
 * to this session.  key_mode says how the daemon makes region keys on RDMA.
 * lease_ms is the daemon's lease: a session that sends no frame for that
 * long is ended (0: no lease).  It was appended in version 1 before any
 * release; nothing else changed.
 * resume_token (16 bytes at offset 48) follows only when the client asked
 * for it (PROTO_HELLO_F_RESUMABLE) and in every RESUME reply: the reply is
 * then PROTO_HELLO_REP_RESUME_LEN bytes.  The encoder writes the token when
 * m->resumable is set; the decoder accepts both lengths and sets
 * m->resumable to say which it got (the token is zeros without it).
 */
enum proto_key_mode {
	PROTO_KEYS_NONE = 0,      /* no RDMA: keys are the TCP path's random keys */
	PROTO_KEYS_WINDOW = 1,    /* type 2 memory windows bound on the client's QP */
	PROTO_KEYS_REGION_MR = 2, /* one MR per region in the client's own PD */
};
struct proto_hello_rep {
	uint64_t session_id;
	uint32_t server_version;
	uint32_t max_io;
	uint64_t attach_token;
	uint16_t rdma_port;
	uint8_t key_mode;         /* enum proto_key_mode; others -EBADMSG */
	uint32_t lease_ms;        /* 0: the daemon ends no session for silence */
	uint8_t resumable;        /* 1: resume_token is sent (64-byte reply) */
	uint8_t resume_token[16]; /* PROTO_RESUME_TOKEN_LEN */
};
#define PROTO_HELLO_REP_LEN (PROTO_STATUS_LEN + 40)
#define PROTO_RESUME_TOKEN_LEN 16
#define PROTO_HELLO_REP_RESUME_LEN (PROTO_HELLO_REP_LEN + PROTO_RESUME_TOKEN_LEN)

/* The rdma_cm private data of a client's connect request (bytes, LE):
 * magic u32 (PROTO_MAGIC), version u16, reserved u16, session_id u64,
 * attach_token u64. */
struct proto_attach {
	uint64_t session_id;
	uint64_t attach_token;
};
#define PROTO_ATTACH_LEN 24
size_t proto_attach_encode(uint8_t *out, const struct proto_attach *m);
/* -EBADMSG for a short buffer, bad magic or reserved bits, -EPROTO for another
 * version.  len may exceed PROTO_ATTACH_LEN (rdma_cm pads private data). */
int proto_attach_decode(const uint8_t *in, size_t len, struct proto_attach *m);

/*
 * CAS request: id u64, offset u64, rkey u32, reserved u32, expect u64, desired u64.
 * FAA request: id u64, offset u64, rkey u32, reserved u32, add u64.
 * Reply of both: status, reserved, old u64 (the 8 bytes before the operation).
 * The offset must be a multiple of 8 (the daemon answers EINVAL otherwise).
 */
struct proto_atomic_req {
	uint64_t id;
	uint64_t offset;
	uint32_t rkey;
	uint64_t operand;  /* CAS: expect; FAA: add */
	uint64_t desired;  /* CAS only */
};
#define PROTO_CAS_REQ_LEN 40
#define PROTO_FAA_REQ_LEN 32
#define PROTO_ATOMIC_REP_LEN (PROTO_STATUS_LEN + 8)
/* opcode is PROTO_OP_CAS or PROTO_OP_FAA (-EINVAL otherwise). */
size_t proto_atomic_req_encode(uint8_t *out, uint16_t opcode, const struct proto_atomic_req *m);
int proto_atomic_req_decode(const uint8_t *in, size_t len, uint16_t opcode,
			    struct proto_atomic_req *m);
size_t proto_atomic_rep_encode(uint8_t *out, uint64_t old);
int proto_atomic_rep_decode(const uint8_t *in, size_t len, int *status, uint64_t *old);

/* ALLOC reply: status, reserved, id u64, addr u64, length u64, rkey u32, flags u32 */
struct proto_region {
	uint64_t id;
	uint64_t addr;
	uint64_t length;
	uint32_t rkey;
	uint32_t flags;
};
#define PROTO_ALLOC_REP_LEN (PROTO_STATUS_LEN + 32)

/* READ reply: status, reserved, then the data (only when status is 0). */

/*
 * STATS reply: status, reserved, count u32, reserved u32, then count u64
 * values in enum proto_stat order.  A decoder takes the values it knows and
 * ignores extra ones, so later versions may append figures; figures an older
 * peer did not send decode as 0.  The encoder writes PROTO_STATS_REP_LEN bytes.
 */
enum proto_stat {
	PROTO_STAT_POOL_BYTES, PROTO_STAT_USED_BYTES, PROTO_STAT_FREE_BYTES,
	PROTO_STAT_LARGEST_FREE, PROTO_STAT_REGIONS, PROTO_STAT_CLIENTS,
	PROTO_STAT_PEAK_USED, PROTO_STAT_ALLOCS, PROTO_STAT_FREES,
	PROTO_STAT_KEY_MODE, /* enum proto_key_mode of the daemon's RDMA side */
	PROTO_STAT_SLOTS_USED, PROTO_STAT_SLOTS_TOTAL, /* state slots (since 1.2.2) */
	PROTO_STAT_COUNT
};
struct proto_stats {
	uint64_t v[PROTO_STAT_COUNT];
};
#define PROTO_STATS_REP_LEN (PROTO_LIST_HDR_LEN + 8 * PROTO_STAT_COUNT)

/*
 * Listing replies: status, reserved, count u32, reserved u32, then count
 * fixed-size records:
 *   POOLS   (PROTO_POOL_REC_LEN): name[32] (NUL padded), bytes u64, used u64,
 *           largest_free u64, regions u64, page_size u32, alignment u32
 *   REGIONS (PROTO_REGION_REC_LEN): id u64, addr u64, length u64,
 *           client_id u64, pool u32, reserved u32
 *   CLIENTS (PROTO_CLIENT_REC_LEN): id u64, regions u64, used u64,
 *           connected_ms u64, idle_ms u64, transport[8], peer[64]
 * count * record length must equal the rest of the payload exactly.
 * Strings: the encoder sends at most size - 1 bytes and NUL-pads the field;
 * the decoder stops at the first NUL and always NUL-terminates.
 */
#define PROTO_LIST_HDR_LEN   (PROTO_STATUS_LEN + 8)
#define PROTO_POOL_REC_LEN   72
#define PROTO_REGION_REC_LEN 40
#define PROTO_CLIENT_REC_LEN 112
/* REGIONS_NAMED: the short record whose reserved word is flags, then
 * name_id u64, name[PROTO_NAME_MAX + 1] (NUL padded).  A second opcode, not
 * a flag of REGIONS: an older daemon refuses it with EOPNOTSUPP, and the
 * short records (102 a reply, not 13) stay for tools that page millions. */
#define PROTO_REGION_NAMED_REC_LEN (48 + PROTO_NAME_MAX + 1)
#define PROTO_REGION_F_UNLINKED 0x100u /* the handle's name was unlinked */

struct proto_pool_rec {
	char name[32];
	uint64_t bytes, used, largest_free, regions;
	uint32_t page_size, alignment;
};
struct proto_region_rec {
	uint64_t id, addr, length, client_id;
	uint32_t pool;
	/* REGIONS_NAMED records only; the short record has none. */
	uint32_t flags;   /* a named handle: its PROTO_ACCESS_* bits, and
			     PROTO_REGION_F_UNLINKED; 0: anonymous */
	uint64_t name_id; /* the name's id (NAMES listing); 0: anonymous */
	char name[PROTO_NAME_MAX + 1];
};
struct proto_client_rec {
	uint64_t id, regions, used, connected_ms, idle_ms;
	char transport[8];
	char peer[64];
};
/* How many records fit in one listing reply (PROTO_MAX_CTL bound). */
#define PROTO_LIST_MAX(reclen) ((PROTO_MAX_CTL - PROTO_LIST_HDR_LEN) / (reclen))

/*
 * Payload codecs.  encode functions write exactly the documented length into
 * out (which must hold it) and return that length.  decode functions take the
 * payload and its length and return 0, or -EBADMSG when the length is wrong or
 * a reserved field is not 0 (-EMSGSIZE and -EINVAL where stated); they write
 * nothing to their outputs when they fail.  Reply decoders also return the
 * peer's status as *status (0 or a negative errno); the rest of *out is only
 * filled when it is 0.  A wire status outside 0..4095 is -EBADMSG.
 */
size_t proto_hello_req_encode(uint8_t *out, const struct proto_hello_req *m);
int proto_hello_req_decode(const uint8_t *in, size_t len, struct proto_hello_req *m);
size_t proto_alloc_req_encode(uint8_t *out, const struct proto_alloc_req *m);
int proto_alloc_req_decode(const uint8_t *in, size_t len, struct proto_alloc_req *m);
size_t proto_free_req_encode(uint8_t *out, const struct proto_free_req *m);
int proto_free_req_decode(const uint8_t *in, size_t len, struct proto_free_req *m);
/* io_req: the PROTO_IO_REQ_LEN fixed part of WRITE and READ; len must be >=
 * PROTO_IO_REQ_LEN for WRITE (data follows) and == for READ.  For WRITE the
 * decoder sets m->length to the data length itself (len - PROTO_IO_REQ_LEN)
 * and reads only the fixed part, so len may be hdr.length before the data has
 * arrived; the encoder writes m->length for READ and 0 for WRITE.  A data
 * length (WRITE) or m->length (READ) above PROTO_MAX_IO is -EMSGSIZE.  An
 * opcode other than WRITE or READ is -EINVAL on decode, and encodes nothing
 * (returns 0). */
size_t proto_io_req_encode(uint8_t *out, uint16_t opcode, const struct proto_io_req *m);
int proto_io_req_decode(const uint8_t *in, size_t len, uint16_t opcode, struct proto_io_req *m);
size_t proto_list_req_encode(uint8_t *out, const struct proto_list_req *m);
int proto_list_req_decode(const uint8_t *in, size_t len, struct proto_list_req *m);
/* Requests with an empty payload: len must be 0. */
int proto_empty_decode(size_t len);

/*
 * Every reply begins with this; status is 0 or a negative errno.  The encoder
 * also takes a positive errno as the same code, and sends anything beyond
 * 4095 as EIO, so that it never puts an undecodable status on the wire.
 * proto_status_decode() decodes a status-only reply (FREE, WRITE, PING,
 * ERROR, or any failed reply): len must be exactly PROTO_STATUS_LEN.
 */
size_t proto_status_encode(uint8_t *out, int status);
int proto_status_decode(const uint8_t *in, size_t len, int *status);
/*
 * READ reply: len is the whole payload (hdr.length) but only the first
 * PROTO_STATUS_LEN bytes of in are read, so the status can be decoded before
 * the data arrives.  On status 0, *data_len = len - PROTO_STATUS_LEN
 * (-EMSGSIZE above PROTO_MAX_IO); a failed reply must be PROTO_STATUS_LEN.
 */
int proto_read_rep_decode(const uint8_t *in, size_t len, int *status, size_t *data_len);

size_t proto_hello_rep_encode(uint8_t *out, const struct proto_hello_rep *m);
int proto_hello_rep_decode(const uint8_t *in, size_t len, int *status, struct proto_hello_rep *m);
size_t proto_alloc_rep_encode(uint8_t *out, const struct proto_region *m);
int proto_alloc_rep_decode(const uint8_t *in, size_t len, int *status, struct proto_region *m);
size_t proto_stats_rep_encode(uint8_t *out, const struct proto_stats *m);
int proto_stats_rep_decode(const uint8_t *in, size_t len, int *status, struct proto_stats *m);

/* Listing replies: encode the list header for count records (records are
 * appended by the caller with the *_rec_encode functions). */
size_t proto_list_hdr_encode(uint8_t *out, uint32_t count);
/* Checks status, count and that len == PROTO_LIST_HDR_LEN + count * reclen;
 * for REGIONS records (reclen PROTO_REGION_REC_LEN) also that every record's
 * reserved field is 0, and for named ones (PROTO_REGION_NAMED_REC_LEN) that
 * flags holds only known bits, since the record decoders cannot fail.  *count is 0
 * when the status is not.  reclen 0 is -EINVAL. */
int proto_list_hdr_decode(const uint8_t *in, size_t len, size_t reclen,
			  int *status, uint32_t *count);
size_t proto_pool_rec_encode(uint8_t *out, const struct proto_pool_rec *m);
void proto_pool_rec_decode(const uint8_t *in, struct proto_pool_rec *m);
size_t proto_region_rec_encode(uint8_t *out, const struct proto_region_rec *m);
void proto_region_rec_decode(const uint8_t *in, struct proto_region_rec *m);
size_t proto_region_named_rec_encode(uint8_t *out, const struct proto_region_rec *m);
void proto_region_named_rec_decode(const uint8_t *in, struct proto_region_rec *m);
size_t proto_client_rec_encode(uint8_t *out, const struct proto_client_rec *m);
void proto_client_rec_decode(const uint8_t *in, struct proto_client_rec *m);

/*
 * Tenant authentication (docs/protocol.md 7.11), before HELLO:
 *   AUTH_BEGIN request: tenant[32] (1..31 bytes, NUL padded), client_nonce[32].
 *   AUTH_BEGIN reply:   status, reserved, session_id u64, server_nonce[32].
 *   AUTH request:       mac[32] = HMAC-SHA256(secret, transcript "rmem-auth-v1").
 *   AUTH reply:         status, reserved, mac[32] = HMAC-SHA256(secret, transcript
 *                       "rmem-srvr-v1"): the daemon knows the secret too.
 * The tenant decoder refuses an empty name, a name of 32 bytes, and bytes
 * after the first NUL that are not NUL (-EBADMSG).
 */
#define PROTO_NONCE_LEN          32
#define PROTO_MAC_LEN            32
#define PROTO_TENANT_LEN         32
#define PROTO_AUTH_BEGIN_REQ_LEN (PROTO_TENANT_LEN + PROTO_NONCE_LEN)
#define PROTO_AUTH_BEGIN_REP_LEN (PROTO_STATUS_LEN + 8 + PROTO_NONCE_LEN)
#define PROTO_AUTH_REQ_LEN       PROTO_MAC_LEN
#define PROTO_AUTH_REP_LEN       (PROTO_STATUS_LEN + PROTO_MAC_LEN)
struct proto_auth_begin_req {
	char tenant[PROTO_TENANT_LEN];
	uint8_t client_nonce[PROTO_NONCE_LEN];
};
struct proto_auth_begin_rep {
	uint64_t session_id;
	uint8_t server_nonce[PROTO_NONCE_LEN];
};
size_t proto_auth_begin_req_encode(uint8_t *out, const struct proto_auth_begin_req *m);
int proto_auth_begin_req_decode(const uint8_t *in, size_t len, struct proto_auth_begin_req *m);
size_t proto_auth_begin_rep_encode(uint8_t *out, const struct proto_auth_begin_rep *m);
int proto_auth_begin_rep_decode(const uint8_t *in, size_t len, int *status,
				struct proto_auth_begin_rep *m);
/* AUTH request and reply: one MAC (the reply after its status). */
size_t proto_auth_req_encode(uint8_t *out, const uint8_t mac[PROTO_MAC_LEN]);
int proto_auth_req_decode(const uint8_t *in, size_t len, uint8_t mac[PROTO_MAC_LEN]);
size_t proto_auth_rep_encode(uint8_t *out, const uint8_t mac[PROTO_MAC_LEN]);
int proto_auth_rep_decode(const uint8_t *in, size_t len, int *status,
			  uint8_t mac[PROTO_MAC_LEN]);

/*
 * The bytes both sides MAC: label (12 bytes), server_nonce, client_nonce,
 * tenant[32] as on the wire, session_id u64.  The session id and the
 * daemon's fresh nonce make a recorded AUTH useless on any other
 * connection; the two labels keep the client's MAC from serving as the
 * daemon's.  Writes PROTO_AUTH_MSG_LEN bytes and returns that.
 */
enum proto_auth_role { PROTO_AUTH_CLIENT, PROTO_AUTH_SERVER };
#define PROTO_AUTH_LABEL_LEN 12
#define PROTO_AUTH_MSG_LEN \
	(PROTO_AUTH_LABEL_LEN + 2 * PROTO_NONCE_LEN + PROTO_TENANT_LEN + 8)
size_t proto_auth_transcript(uint8_t *out, enum proto_auth_role role, const char *tenant,
			     const uint8_t server_nonce[PROTO_NONCE_LEN],
			     const uint8_t client_nonce[PROTO_NONCE_LEN], uint64_t session_id);

/* Little-endian helpers, also used by callers that build frames by hand. */
static inline void proto_put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}
static inline void proto_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void proto_put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t proto_get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t proto_get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}
static inline uint64_t proto_get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* ---- named regions (proto_names.c; docs/protocol.md, "Named regions") ------- */

/*
 * CREATE, OPEN and UNLINK requests share one layout:
 *   size u64, flags u32, name_len u16, reserved u16, then name_len bytes of
 *   name (no NUL).
 * CREATE: size and the ALLOC flags.  OPEN: size 0, flags the access asked
 * for (PROTO_ACCESS_*).  UNLINK: size 0, flags PROTO_UNLINK_*.
 * name_len is 1..PROTO_NAME_MAX and the payload is exactly 16 + name_len
 * bytes; a NUL inside the name, a reserved field or (OPEN, UNLINK) a size
 * that is not 0 is -EBADMSG.  What a name may contain, and what access and
 * flags mean, is the daemon's to judge (-EINVAL).
 * CREATE and OPEN are answered like ALLOC (struct proto_region), with
 * flags = the access the handle grants (and, to an OPEN with
 * PROTO_ACCESS_EXCL, PROTO_ACCESS_FENCED); UNLINK with a status alone.
 *
 * UNLINK with PROTO_UNLINK_NS (admin only, since 1.2): the name field is
 * "TENANT:NAME", the namespace of tenant TENANT ("" before the ':' for the
 * anonymous namespace) instead of the sender's.  Tenant names cannot hold
 * ':' (A-Z a-z 0-9 _ . -), so the first ':' splits the two; the name after
 * it may hold ':'.  Its name_len may then reach PROTO_NAME_NS_MAX, so that
 * every name of every tenant can be reached; the codec allows that length
 * for this flag only.  The daemon answers -EACCES to a sender that is not
 * admin, -ENOENT for a tenant it does not know, -EINVAL without a ':'.
 */
/* PROTO_NAME_MAX (255) is defined with the frame limits above. */
#define PROTO_NAME_REQ_FIXED 16
#define PROTO_ACCESS_READ    0x1u  /* RDMA READ, served READ */
#define PROTO_ACCESS_WRITE   0x2u  /* RDMA WRITE and atomics, served WRITE, CAS, FAA */
/* OPEN only, with WRITE (additive, after 1.4.0): the name's one writer takes it.  Every
 * other handle of the name that has WRITE is revoked first, as
 * PROTO_UNLINK_REVOKE revokes (keys first, data of a WRITE in flight
 * dropped), so that a writer that lost its right without knowing (stopped
 * past its claim) cannot land another byte.  The handle itself is granted
 * READ and WRITE bits only; the reply's flags carry PROTO_ACCESS_FENCED
 * besides when some handle was revoked. */
#define PROTO_ACCESS_EXCL    0x4u
#define PROTO_ACCESS_FENCED  0x8u  /* OPEN's reply: EXCL revoked another writer */
#define PROTO_UNLINK_REVOKE  0x1u  /* also invalidate every open handle now */
#define PROTO_UNLINK_NS      0x100u /* admin: the name is "TENANT:NAME" (above); a
                                    * high bit, apart from the flags rmem_unlink2
                                    * passes through */
/* CREATE with PROTO_CREATE_F_PIECE (since 1.2, additive): the object is a
 * piece of a redundant region (docs/architecture.md, "Redundancy"), which
 * its name must spell as "<base>~<made>.<i>" (cluster_layout.h; else
 * -EINVAL).  rmemd records it with the object, lists it
 * (PROTO_NAME_F_PIECE) and keeps it across a restart; its repair agent
 * gives back only such objects, never an ordinary region of the same name.
 * It marks the sender's own namespace only.  An older rmemd answers
 * -EINVAL (CREATE's flags were 0). */
#define PROTO_CREATE_F_PIECE 0x100u
/* An UNLINK_NS name: a tenant (at most PROTO_TENANT_LEN - 1), ':', a name. */
#define PROTO_NAME_NS_MAX    (PROTO_TENANT_LEN + PROTO_NAME_MAX)

struct proto_name_req {
	uint64_t size;
	uint32_t flags;
	uint16_t name_len;
	char name[PROTO_NAME_NS_MAX + 1]; /* the decoder NUL-terminates it */
};

/* opcode is CREATE, OPEN or UNLINK (-EINVAL otherwise).  encode writes
 * PROTO_NAME_REQ_FIXED + m->name_len bytes (name_len 1..PROTO_NAME_MAX, or
 * ..PROTO_NAME_NS_MAX for UNLINK with PROTO_UNLINK_NS). */
/* The length of the NUL-terminated name when it is a valid name (1 to
 * PROTO_NAME_MAX bytes of 0x21..0x7e); -ENAMETOOLONG when it is longer, judged
 * first and without reading past PROTO_NAME_MAX + 1 bytes, so that any string
 * too long gets it whatever it holds; else -EINVAL (NULL too).  The library's
 * check, on one server or a cluster, before a name goes on the wire. */
int proto_name_len(const char *name);
size_t proto_name_req_encode(uint8_t *out, uint16_t opcode, const struct proto_name_req *m);
int proto_name_req_decode(const uint8_t *in, size_t len, uint16_t opcode,
			  struct proto_name_req *m);

/*
 * NAMES (admin) request: a struct proto_list_req (after: a name's id).
 * Reply: a listing (PROTO_LIST_HDR_LEN) of PROTO_NAME_REC_LEN records:
 *   id u64, length u64, age_ms u64, handles u32, flags u32
 *   (PROTO_NAME_F_UNLINKED, PROTO_NAME_F_PIECE), tenant[32], name[256].
 * A name's id is the daemon's, never reused while it runs; the listing goes
 * in id order.  tenant "" is the anonymous namespace.
 */
#define PROTO_NAME_REC_LEN   320
_Static_assert(PROTO_NAME_REC_LEN == 32 + PROTO_TENANT_LEN + PROTO_NAME_MAX + 1, "name record");
#define PROTO_NAME_F_UNLINKED 0x1u  /* unlinked, waiting for its last handle */
#define PROTO_NAME_F_PIECE    0x2u  /* made by CREATE with PROTO_CREATE_F_PIECE */

struct proto_name_rec {
	uint64_t id, length, age_ms;
	uint32_t handles, flags;
	char tenant[PROTO_TENANT_LEN];
	char name[PROTO_NAME_MAX + 1];
};
size_t proto_name_rec_encode(uint8_t *out, const struct proto_name_rec *m);
void proto_name_rec_decode(const uint8_t *in, struct proto_name_rec *m);

/* ---- resuming a session after a daemon restart (docs/protocol.md 7.13) ---- */

/*
 * RESUME request (instead of HELLO, after the tenant handshake where tenants
 * are used): session_id u64, resume_token[16], client_version u32,
 * features u32 (PROTO_HELLO_F_* as HELLO's; others -EBADMSG), pid u32,
 * reserved u32.  40 bytes.  Reply: a HELLO reply of
 * PROTO_HELLO_REP_RESUME_LEN bytes (the same session_id and resume_token, a
 * new attach_token).
 */
struct proto_resume_req {
	uint64_t session_id;
	uint8_t resume_token[PROTO_RESUME_TOKEN_LEN];
	uint32_t client_version;
	uint32_t features;
	uint32_t pid;
};
#define PROTO_RESUME_REQ_LEN 40
size_t proto_resume_req_encode(uint8_t *out, const struct proto_resume_req *m);
int proto_resume_req_decode(const uint8_t *in, size_t len, struct proto_resume_req *m);

/*
 * REKEY request: id u64, flags u32 (0, else -EBADMSG), reserved u32.  16 bytes.
 * Reply: an ALLOC reply (struct proto_region): the region's current address,
 * length, a new key and (handles) its access.
 */
struct proto_rekey_req {
	uint64_t id;
	uint32_t flags;
};
#define PROTO_REKEY_REQ_LEN 16
size_t proto_rekey_req_encode(uint8_t *out, const struct proto_rekey_req *m);
int proto_rekey_req_decode(const uint8_t *in, size_t len, struct proto_rekey_req *m);

#endif /* RMEM_PROTO_H */
