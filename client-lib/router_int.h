/*
 * router_int.h - the router's own state, shared by client-lib/router*.c.
 *
 * Who calls whom: router.c (connect, close, the region calls),
 * router_poll.c (posted calls, rmem_poll) and router_names.c (names in
 * etcd) call router_members.c and the single-server calls; router.c also
 * starts and stops router_watch.c, whose thread feeds router_members.c.
 * router_redund.c starts the names watch (router_watch.c) and loads its
 * buckets.  router_members.c calls only the single-server calls;
 * router_url.c is pure.  Redundant regions: router.c and router_poll.c send a redundant
 * handle's calls to router_redund.c (reads, writes),
 * router_redund_post.c (posted reads and writes, which calls
 * router_redund.c) and router_redund_make.c (alloc, free), router_names.c
 * its names'; they call
 * router_members.c, the single-server calls and stripe.c, and reach a
 * name's record only through the function router_names.c gave the region
 * (redund_named).  None calls back up.
 *
 * Locking (order: a member's conn_mu, then reg_mu, then mu; names_mu
 * alone):
 *  - mu guards the table (every member's record, presence, estimate,
 *    client pointer, failure, in-flight count), the posted-operation table
 *    and the random state; it is held only for short copies, never across
 *    a call to a server or to etcd;
 *  - a member's conn_mu is held while that member's client is connected,
 *    so two threads never connect the same server twice;
 *  - reg_mu orders rmem_register_buf/unregister_buf against connects, so a
 *    server connected later gets every kept buffer;
 *  - names_mu guards the etcd client that names use (any thread may call).
 * The watch thread owns its own etcd client.
 */
#ifndef RMEM_ROUTER_INT_H
#define RMEM_ROUTER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_rec.h"
#include "etcd_endpoints.h"
#include "rmem.h"

/* The table's size: a member's slot never changes while the client lives
 * (handles name it), so the table is one array made at connect. */
#define CLUSTER_MAX_SERVERS 128
/* struct rmem_region.reserved[0] of a cluster region: this tag in the high
 * 32 bits, the server's slot in the low ones.  A region from elsewhere
 * (a single-server client: 0) is refused with -EINVAL. */
#define CLUSTER_REGION_TAG 0x636c7573u /* "clus" */
#define CLUSTER_MAX_BUFS 64
/* Each etcd request's limit per endpoint: a dead member costs this once. */
#define CLUSTER_ETCD_TIMEOUT_MS 2000u
/* Buckets of the names watch (router_watch.c): a record's change raises
 * its name's bucket, so a change elsewhere in the same bucket costs a
 * reader one needless look at its record, never a missed one. */
#define ROUTER_NAME_BUCKETS 64
#define CLUSTER_NAME_MAX 64            /* the cluster's name, NUL included */
/* A name's claim lives under a lease of this many seconds, renewed every
 * third of it while its creator works (router_names.c); the URL's
 * "?claim_ttl=S" sets it, up to the maximum. */
#define CLUSTER_CLAIM_TTL_S 30
/* How long a piece of a redundant region this client may write stays out
 * before its next call repairs the region ("?repair_grace_ms=MS"; 0:
 * never by itself), as rmemd's cluster.repair_grace_ms by default. */
#define CLUSTER_REPAIR_GRACE_MS     30000u
#define CLUSTER_REPAIR_GRACE_MAX_MS 86400000u
#define CLUSTER_CLAIM_TTL_MAX_S 3600
/* Anonymous clients' namespace in /rmem/<cluster>/names/: '@' is never
 * part of a tenant's name (rmemd.conf(5): A-Z a-z 0-9 _ . -). */
#define CLUSTER_ANON_TENANT "@anonymous"

struct etcd_client;
struct router_watch;
struct rset;

struct member {
	pthread_mutex_t conn_mu;
	struct cluster_rec rec;   /* the last record etcd gave */
	bool present;             /* its key is in etcd now */
	bool failed;              /* its client lost the server for good */
	bool back;                /* failed, then its key went and came back */
	uint64_t free_est;        /* rec.free_bytes less what this client placed since */
	rmem_client *client;      /* NULL until first used */
	uint64_t conn_start_ms;   /* rec.start_time_ms when client connected */
	uint32_t inflight;        /* posted operations not yet polled */
	int64_t key_rev;          /* its key's create revision in etcd */
	/* Times its membership moved as this client saw it: its key left
	 * the set, or came back as another key (another create revision) or
	 * another process or generation, or its client was (re)connected.
	 * With its client's resumes, members_epoch_locked. */
	uint32_t moves;
};

/* A posted operation: its internal cookie is its index here. */
struct router_pend {
	uint64_t cookie;          /* the application's */
	struct rmem_region *out;  /* a posted alloc's, else NULL */
	uint64_t size;            /* a posted alloc's */
	uint64_t tried[CLUSTER_MAX_SERVERS / 64]; /* servers a posted alloc went to */
	uint32_t slot;            /* PEND_UNPLACED while a posted alloc looks for one */
	bool used;
	/* A part of a posted call on a redundant region (router_redund_post.c):
	 * its completion goes to rpost_end, not to the application. */
	struct rpost *rp;
	unsigned part;
};

#define PEND_UNPLACED UINT32_MAX

struct retiree;

struct router {
	pthread_mutex_t mu;
	struct member *members;   /* CLUSTER_MAX_SERVERS */
	size_t nmembers;          /* slots used, never fewer */
	uint64_t rng;
	/* The server of the last placement that succeeded, +1 (0: none):
	 * members_pick keeps to it while capacity allows. */
	uint32_t last_placed;
	char name[CLUSTER_NAME_MAX];
	unsigned claim_ttl_s;
	char etcd_list[ETCD_MAX_ENDPOINTS * ETCD_ENDPOINT_MAX];
	struct etcd_tls etcd_tls;  /* the URL's etcd_ca, etcd_cert, etcd_key */
	/* The options each member's client gets (strings are copies). */
	struct rmem_opts opts;
	char *transport, *tenant, *secret_file;
	/* The watch (router_watch.c). */
	struct router_watch *watch;
	/* The names watch (router_watch.c), started by the first read-only
	 * open of a redundant name, from names_from (both under names_mu);
	 * per bucket, the highest revision of a change it delivered to a
	 * record of the tenant's names (written by its thread alone, read
	 * with atomic loads: names_rev). */
	struct router_watch *names_watch;
	int64_t names_from;
	int64_t name_rev[ROUTER_NAME_BUCKETS];
	/* Names (router_names.c). */
	pthread_mutex_t names_mu;
	struct etcd_client *names_etcd;
	/* Kept buffers, registered on every member. */
	pthread_mutex_t reg_mu;
	struct { void *buf; size_t len; } bufs[CLUSTER_MAX_BUFS];
	size_t nbufs;
	/* Posted operations (router_poll.c). */
	struct router_pend *pend;
	size_t npend;
	/* What a call may still hold, given up once no call that may hold
	 * it is left (router_members.c, members_enter, members_retire):
	 * clients of servers that came back, freed redundant regions' state,
	 * replaced pieces' handles.  A call counts in calls[cur]; retired
	 * ones wait for the next flip of cur, then in draining until
	 * calls[cur ^ 1] is 0.  Under mu. */
	unsigned calls[2];
	unsigned cur;
	struct retiree *retired, *draining;
	/* Redundancy asked for (router_redund.c): K+R, 0 when not; how long
	 * a piece stays out before a call repairs its region. */
	unsigned red_k, red_r, repair_grace_ms;
	/* Redundant regions: a handle names its index here (under mu).
	 * rmem_free takes an entry out and retires it (members_retire): the
	 * application's other threads may still be inside calls on it. */
	struct rset **rsets;
	size_t nrsets;
	uint64_t rset_ids;
	/* One scratch block kept between redundant calls (under mu; NULL
	 * while a call has it): a megabyte or so malloc'd and freed per
	 * call is given back to the system each time (the heap's top is
	 * trimmed) and faulted in again, page by page, by the next. */
	unsigned char *red_scratch;
	size_t red_scratch_len;
	/* This client's figures for rmem_stats (under mu): bytes of pieces
	 * repair rebuilt (router_redund_repair.c), reads that rebuilt a lost
	 * piece's bytes, parity chunks written (router_redund*.c). */
	uint64_t repaired_bytes, degraded_reads, parity_updates;
	/* Completions of posted calls on redundant regions that ended
	 * outside rmem_poll (a write, made whole when posted; a read whose
	 * pieces were all out): handed out by the next rmem_poll.  Room for
	 * one per call alive (red_alive) is kept, so ending one never fails
	 * for want of memory.  Under mu. */
	struct rmem_completion *red_done;
	size_t red_ndone, red_cap, red_alive;
	/* Their buffers, kept when they end for the next ones (under mu;
	 * at most RPOST_KEEP of them, RPOST_KEEP_BYTES in all): 16 posted
	 * 1 MiB writes malloc'd and freed each time left the heap trimmed
	 * and faulted in again, page by page, by every call. */
#define RPOST_KEEP 16u
#define RPOST_KEEP_BYTES (32u << 20)
	struct { unsigned char *p; size_t len; } red_kept[RPOST_KEEP];
	size_t red_nkept, red_kept_bytes;
};

/* ---- router_url.c ------------------------------------------------------------- */

/* "etcd://H:P[,H:P...]/NAME[?claim_ttl=S][&redundancy=K+R][&repair_grace_ms=MS]"
 * (etcds://, and etcd_ca, etcd_cert, etcd_key: common/etcd_url.h) -> *u
 * ("http[s]://H:P,...", NAME, the TLS files), S (default
 * CLUSTER_CLAIM_TTL_S), K, R (0, 0 without redundancy) and MS (default
 * CLUSTER_REPAIR_GRACE_MS).  0 or -EINVAL. */
struct etcd_url;
int router_url_parse(const char *url, struct etcd_url *u, unsigned *claim_ttl_s,
		     unsigned *red_k, unsigned *red_r, unsigned *grace_ms);

/* ---- router_members.c ----------------------------------------------------------- */

int members_init(struct router *cl);
void members_fini(struct router *cl);
/* The watch's news: a record put (key_rev: its key's create revision), a
 * server's key deleted, or (full read) the whole set, every server not in
 * it gone. */
void members_put(struct router *cl, const struct cluster_rec *rec, int64_t key_rev);
void members_gone(struct router *cl, const char *id);
void members_only(struct router *cl, const struct cluster_rec *recs, const int64_t *key_revs,
		  size_t n);
/* Slot's membership epoch: moves whenever this client may have missed
 * something of the server's (its key left etcd and came back, a new
 * process, a new connection, its session resumed), so that a redundant
 * region's handle knows when a piece there must be checked against its
 * record again (redund_validate).  Under mu. */
uint64_t members_epoch_locked(struct router *cl, uint32_t slot);
/* How many servers are present. */
size_t members_present(struct router *cl);
/*
 * Placement: a present server not in tried (a bitmap of slots) that may
 * hold size bytes, by two random choices weighed by free bytes, keeping to
 * the server of the last placement while it is within an eighth.  0 and
 * *slot, or -ENOMEM (no present server left that could), -EHOSTDOWN (no
 * server present at all).
 */
int members_pick(struct router *cl, uint64_t size, const uint64_t *tried, uint32_t *slot);
/* Whether a server's answer to a placement (an ALLOC or CREATE) sends it
 * on to the next choice: no room (-ENOMEM), the tenant's quota there
 * (-EDQUOT), or the server is draining (-ESHUTDOWN: this client has not
 * seen its record say so yet). */
bool members_refused_room(int err);
/* Whether slot's server is draining (its record says so): members_pick
 * skips it, and the pieces on it are moved (router_redund_repair.c).
 * Under mu. */
bool members_draining_locked(const struct router *cl, uint32_t slot);
/* size bytes were placed on slot (rc 0), freed there (rc 1), or it said
 * -ENOMEM (then its estimate drops below size, until its next record). */
void members_placed(struct router *cl, uint32_t slot, uint64_t size, int rc);
/* The slot a region names: 0, -EINVAL (not a region of this cluster). */
int members_slot_of(struct router *cl, const struct rmem_region *r, uint32_t *slot);
void members_tag(struct rmem_region *r, uint32_t slot);
/* Around every call of the application on the cluster (api.c): a member's
 * client replaced meanwhile is closed once every call that began before
 * the replacement has left, so a thread inside it never finds it freed,
 * and a client of a server that restarts again and again holds one
 * connection to it, not one per restart.  members_leave takes what
 * members_enter gave. */
unsigned members_enter(struct router *cl);
void members_leave(struct router *cl, unsigned epoch);
/* Something no new call can reach any more, which calls that began before
 * may still hold (a replaced client, a freed region's state, a replaced
 * piece's handle): fn(cl, self) runs once none of them is left, outside
 * every lock, on the thread of the call that leaves last; fn(NULL, self)
 * at the router's close, when only memory is to be given back.  Embedded
 * in what it retires, so that retiring never fails. */
struct retiree {
	struct retiree *next;
	void (*fn)(struct router *cl, struct retiree *self);
};
void members_retire(struct router *cl, struct retiree *r);
/* The member's client, connected now if it was not: 0, -EHOSTDOWN (its key
 * is gone, or its client lost it and it has not come back), or connect's
 * error. */
int members_client(struct router *cl, uint32_t slot, rmem_client **out);
/* After a call on slot's client returned err: the error for the caller
 * (-EHOSTDOWN for a server lost), marking the member failed when so. */
int members_err(struct router *cl, uint32_t slot, int err);
/* The slot of server id, or -ENOENT. */
int members_find(struct router *cl, const char *id, uint32_t *slot);
/* Every connected client, for calls made on all (stats, buffers): up to
 * max into out with their slots; how many.  Under reg_mu for buffers. */
size_t members_connected(struct router *cl, rmem_client **out, uint32_t *slots, size_t max);

/* ---- router_redund.c ------------------------------------------------------------ */

/* struct rmem_region.reserved[0] of a redundant region: this tag in the
 * high 32 bits, its index in the router's rsets in the low ones;
 * reserved[1] its id (so a handle of a freed region never names another). */
#define REDUND_REGION_TAG 0x72656475u /* "redu" */

/* Whether r is a redundant region's handle (by its tag alone). */
int redund_is(const struct rmem_region *r);
/* The calls on a redundant region (docs/architecture.md, "Redundancy").
 * alloc: -ENOSPC with fewer than K+R servers present or able to hold a
 * piece; read: rebuilds around lost pieces, -EHOSTDOWN with fewer than K;
 * write: data and parity by delta, -EHOSTDOWN when fewer than K pieces
 * took it.  Atomics, posted allocs and frees: -EOPNOTSUPP; posted reads
 * and writes: router_redund_post.c. */
int redund_alloc(struct router *cl, uint64_t size, struct rmem_region *out);
int redund_free(struct router *cl, const struct rmem_region *r);
int redund_read(struct router *cl, const struct rmem_region *r, uint64_t off, void *buf,
		size_t len);
int redund_write(struct router *cl, const struct rmem_region *r, uint64_t off,
		 const void *buf, size_t len);
/* Named ones (router_names.c keeps the record, cluster_layout.h):
 * create makes the K+R pieces "<name>~1.<i>" on distinct servers and fills
 * *lay (-ENOSPC, -ENAMETOOLONG); redund_create_undo unlinks them again
 * (the record could not be written); redund_enter gives the handle (it
 * takes rs either way; redund_named first gives it its record).  open opens the pieces of lay that are healthy and
 * whose servers are present in their generation: -EHOSTDOWN with fewer
 * than K, -ENOENT when more than R are unknown to their servers.  unlink
 * unlinks every piece whose server answers. */
struct cluster_layout;
struct cluster_piece;
/* How a named region's rset reaches its record (router_names.c's, handed
 * down: the redundant modules never call up).  mark: pieces (bits of mask)
 * are out.  read: the record as it is now.  swap: piece i of the record,
 * still *old, becomes *new (healthy), layout_gen past new->made; -ESTALE
 * when piece i is no longer *old (someone else repaired it).  mark and
 * swap change the record only while hold (the handle's writer key hold,
 * its release_arg; NULL: none) is still the key it made: -EACCES else. */
struct redund_record_ops {
	int (*mark)(struct router *cl, const char *name, void *hold, uint32_t mask);
	int (*read)(struct router *cl, const char *name, struct cluster_layout *lay);
	int (*swap)(struct router *cl, const char *name, void *hold, unsigned i,
		    const struct cluster_piece *old, const struct cluster_piece *new);
	/* A repair of name begins (on) or ends: said in etcd for rmemctl,
	 * under the lease of the writer key hold (the handle's release_arg),
	 * so that a repairer's death says it ended. */
	void (*repairing)(struct router *cl, const char *name, void *hold, bool on);
	/* Whether the writer key hold (the handle's release_arg) is surely
	 * still this client's (its last confirmed renewal younger than the
	 * key's TTL): false, and the handle may no longer write. */
	bool (*held)(struct router *cl, void *hold);
};
/* What rmem_free (or rmem_close) of the handle gives back: its writer key. */
typedef void (*redund_release_fn)(struct router *cl, void *arg);
void redund_named(struct rset *rs, const char *name, const struct redund_record_ops *ops,
		  redund_release_fn release, void *arg);
/* A named handle opened read-only, whose record was read at revision rev:
 * watched from now on (names_watch_ensure), so that a change of its
 * record by anyone makes its next read look at it again, whatever the
 * membership epochs say.  Without the watch (it could not start), only
 * the epochs guard it. */
void redund_watched(struct router *cl, struct rset *rs, int64_t rev);
int redund_create(struct router *cl, const char *name, uint64_t size,
		  struct cluster_layout *lay, struct rset **out);
void redund_create_undo(struct router *cl, const char *name, struct rset *rs);
int redund_enter(struct router *cl, struct rset *rs, uint32_t flags, struct rmem_region *out);
int redund_open(struct router *cl, const char *name, const struct cluster_layout *lay,
		uint32_t access, struct rset **rsp);
int redund_unlink(struct router *cl, const char *name, const struct cluster_layout *lay,
		  uint32_t flags);
/* Repair (router_redund_repair.c): every piece of r that is out (or not
 * healthy in its record) rebuilt from K others onto a server holding no
 * piece of r, and put in its place (in the record first, for a named
 * one).  Needs the write right (the writer key, for a named one): writes
 * wait meanwhile.  0 when every piece is in; -EHOSTDOWN with fewer than K
 * in, -ENOSPC with no server to take a piece, -EACCES without RMEM_WRITE,
 * -ESTALE when another repaired the record meanwhile (open it again). */
int redund_repair(struct router *cl, const struct rmem_region *r);
/* Frees every redundant region's bookkeeping (not its pieces: the
 * servers free a closed session's regions). */
void redund_fini(struct router *cl);

/* ---- router_redund_post.c ------------------------------------------------------- */

/* A posted read or write on a redundant region (docs/architecture.md,
 * "Redundancy", posted calls).  router_poll.c posts its parts, one per
 * data piece a read touches, each under a table entry naming the call and
 * the part, and hands each part's completion to rpost_end; the part that
 * ends the call gives the application's completion. */
struct rpost;
/* A posted call of the application: 0 and *out with *nparts parts to post,
 * or the error of a call that is refused (no completion will come).  A
 * write is made here, whole (router_redund.c's rules), and has no parts. */
int rpost_new(struct router *cl, const struct rmem_region *r, bool write, uint64_t off,
	      void *buf, size_t len, uint64_t cookie, struct rpost **out, unsigned *nparts);
/* Where part p goes: 0 and its slot, piece handle, offset, buffer and
 * length, and (seg > 0) the runs a spaced read lands in
 * (single_post_read_spaced); -EHOSTDOWN when its piece is out (then end
 * it so). */
int rpost_part(struct router *cl, struct rpost *rp, unsigned p, uint32_t *slot,
	       const struct rmem_region **piece, uint64_t *off, void **buf, size_t *len,
	       uint32_t *seg, uint32_t *gap, uint32_t *phase);
/* Part p, whose client cannot take a spaced read, lands in a buffer of
 * its own instead, gathered at the end: 0 and *buf, or -ENOMEM. */
int rpost_part_own(struct router *cl, struct rpost *rp, unsigned p, void **buf);
/* Part p ended with status; p == nparts is the poster's own share, ended
 * once every part was posted or ended.  The call ends with its last share:
 * then a rebuild of any part whose piece was lost, the gather into the
 * caller's buffer, 1 and *done (rp freed).  0 while parts are left. */
int rpost_end(struct router *cl, struct rpost *rp, unsigned p, int status,
	      struct rmem_completion *done);
/* done queued for the next rmem_poll (room kept by rpost_new). */
void rpost_queue(struct router *cl, const struct rmem_completion *done);
/* Up to max queued completions: how many. */
int rpost_take(struct router *cl, struct rmem_completion *out, int max);
/* At close: every call still in flight forgotten, the queue freed. */
void rpost_fini(struct router *cl);

/* ---- router_watch.c ------------------------------------------------------------- */

/* Reads the server set once (so the first call has servers), then watches
 * it on a thread of its own.  0, or the etcd client's error
 * (-EHOSTUNREACH: no etcd endpoint answered). */
int watch_start(struct router *cl, unsigned timeout_ms);
/* Stops and joins the thread (within about a second: libcurl polls the
 * stop at that pace on an idle stream).  Accepts NULL. */
void watch_stop(struct router_watch *w);
/* The names watch running, started now from rev + 1 if it was not (rev:
 * the revision a record was just read at): 1 when every change after rev
 * will reach name_rev, 0 when it started later (that record must be read
 * again once), or why it could not start. */
int names_watch_ensure(struct router *cl, int64_t rev);
/* A name's bucket, and the highest revision the watch delivered for that
 * bucket (an atomic load: the read path's whole cost). */
unsigned names_bucket(const char *name);
int64_t names_rev(struct router *cl, unsigned bucket);

#endif /* RMEM_ROUTER_INT_H */
