/*
 * rmem.h - the only public header of librmem, the rmem remote-memory client.
 *
 * Conventions (they hold for every call below):
 *  - Calls that return int return 0 (or a count where stated) on success and a
 *    negative errno on failure; rmem_strerror() turns either into text.
 *  - The library never prints, never exits and holds no global state.
 *  - An rmem_client is one session with one rmemd.  It is thread-safe: any
 *    number of threads may call on the same client at once.  Each call holds
 *    the client for its whole run (a lock per client, granted in the order
 *    threads ask), so calls on one client take turns; a call that waits (a
 *    synchronous call for its reply, rmem_poll() for a completion) makes the
 *    others wait meanwhile.  For parallel waits use several clients.  Only
 *    rmem_close() must not race with any other call on the same client.
 *  - struct rmem_region is a plain value the caller owns; copy it freely.
 *
 * Errors common to every call that talks to the daemon:
 *  -ECONNREFUSED  nothing listens at the endpoint
 *  -ETIMEDOUT     the daemon did not answer within opts.timeout_ms
 *  -ECONNRESET    the connection broke (and could not be resumed within
 *                 opts.resume_ms); the client is unusable, rmem_close() it
 *  -ECONNABORTED  the connection broke while the request was in flight and
 *                 the client has resumed: the request (an atomic, an alloc,
 *                 a free, a create, an open or an unlink) may or may not
 *                 have taken effect; the client works on (librmem(7), RESUME)
 *  -EPROTO        the peer speaks another protocol version, or sent garbage
 */
#ifndef RMEM_H
#define RMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of this header.  It matches the newest node of the library's
 * symbol map (RMEM_1.4): a release that adds calls adds a node and a minor
 * version; PATCH counts releases that add none.  The major version is the
 * SONAME's (librmem.so.1).  rmem_version() says which library runs.
 */
#define RMEM_VERSION_MAJOR 1
#define RMEM_VERSION_MINOR 4
#define RMEM_VERSION_PATCH 0
/* Packed as rmem_version() returns it: 0x00MMmmpp. */
#define RMEM_VERSION_PACK(major, minor, patch) \
	(((uint32_t)(major) << 16) | ((uint32_t)(minor) << 8) | (uint32_t)(patch))
#define RMEM_VERSION \
	RMEM_VERSION_PACK(RMEM_VERSION_MAJOR, RMEM_VERSION_MINOR, RMEM_VERSION_PATCH)

/*
 * Marks the calls of the API: the library is built with every other symbol
 * hidden (-fvisibility=hidden), so only these are exported.  Harmless to
 * the application.
 */
#if defined(__GNUC__) || defined(__clang__)
#define RMEM_API __attribute__((visibility("default")))
#else
#define RMEM_API
#endif

/* Opaque; one session with one rmemd. */
typedef struct rmem_client rmem_client;

/* A region handed out by rmem_alloc().  Plain value; copy it freely. */
struct rmem_region {
	uint64_t id;     /* never reused while the daemon runs */
	uint64_t addr;   /* remote address of byte 0 (meaningful on RDMA) */
	uint64_t length; /* usable bytes, >= the size asked */
	uint32_t rkey;   /* RDMA rkey, or the TCP path's random key */
	uint32_t flags;  /* a named handle (rmem_create, rmem_open): the access it
			    grants, RMEM_READ | RMEM_WRITE bits; an anonymous
			    region (rmem_alloc): 0, and it grants both.
			    Writes and atomics through a handle without
			    RMEM_WRITE fail with -EACCES before any I/O. */
	/* Room to grow (since RMEM_1.2): 0 on a single-server client.
	 * Callers built against RMEM_1.0/1.1 headers, whose struct ends
	 * before it, keep working: rmem_alloc@RMEM_1.0 and
	 * rmem_post_alloc@RMEM_1.1 write only the fields they knew.
	 * On a cluster client (an etcd:// endpoint) reserved[0] names the
	 * region's server: the library's tag in the high 32 bits and the
	 * server's slot in that client's table in the low 32; reserved[1]
	 * is 0.  The value means something only to the client that handed
	 * the region out; copy the struct whole.  (So the cluster calls
	 * need RMEM_1.2's struct: rmem_alloc@RMEM_1.0 and
	 * rmem_post_alloc@RMEM_1.1 are -EOPNOTSUPP on a cluster client.) */
	uint64_t reserved[2];
};

/*
 * Connection options.  Always initialise with rmem_opts_init() so that fields
 * added later get their defaults; pass sizeof the struct you were built with.
 */
struct rmem_opts {
	size_t size;           /* sizeof(struct rmem_opts), set by rmem_opts_init */
	const char *transport; /* "auto" (default), "rdma" or "tcp"; NULL = "auto" */
	int timeout_ms;        /* connect and per-request timeout; default 10000,
	                          <= 0 waits forever */
	/* Tenants: authenticate as this tenant of the daemon,
	 * proving knowledge of the secret in secret_file (its bytes, one
	 * trailing newline stripped) without sending it.  Both NULL (default):
	 * anonymous, which a daemon only allows from its own host, or on its
	 * Unix socket.  One set without the other is -EINVAL. */
	const char *tenant;
	const char *secret_file;
	/* Since RMEM_1.2: resume after a daemon restart.  When
	 * the connection to rmemd is lost (the daemon restarted, or crashed
	 * and systemd started it again), the library reconnects with backoff
	 * for up to resume_ms milliseconds, takes its session back (RESUME,
	 * the tenant handshake again when a tenant is used), attaches a new
	 * queue pair on RDMA, and gets its regions' new keys: the
	 * application's struct rmem_region values stay valid, reads and
	 * writes in flight are sent again, atomics in flight end with
	 * -ECONNABORTED (outcome unknown).  Default 5000; 0 turns it off (a
	 * lost connection is -ECONNRESET for good, as before).  See
	 * librmem(7), RESUME. */
	int resume_ms;
	/* Added after RMEM_1.2 (read only when o->size covers it): the TCP
	 * congestion control of this client's connection (TCP_CONGESTION),
	 * e.g. "cubic" or "bbr"; it governs what the client sends, the
	 * daemon's tcp.congestion what the daemon sends.  NULL or ""
	 * (default): the system's, net.ipv4.tcp_congestion_control.  Ignored
	 * on unix: endpoints.  rmem_connect fails with -EINVAL for a name that
	 * is no name, -ENOPROTOOPT for one this kernel does not have, -EPERM
	 * for one outside net.ipv4.tcp_allowed_congestion_control without
	 * CAP_NET_ADMIN.  See rmemd.conf(5), tcp.congestion. */
	const char *tcp_congestion;
	/* Added after RMEM_1.3 (read only when o->size covers it): "K+R"
	 * (K 1..16, R 1..4) makes every region a cluster client allocates or
	 * creates erasure-coded over K+R distinct servers, any R of which may
	 * die, as the etcd:// URL's "?redundancy=K+R" does (both given must
	 * agree).  NULL or "" (default): plain regions.  -EINVAL for a
	 * malformed value, or for any value on a single-server endpoint.
	 * See librmem(7), REDUNDANCY. */
	const char *redundancy;
	/* Added after RMEM_1.4 (read only when o->size covers it): etcd over
	 * TLS for a cluster client, as the etcds:// URL's "?etcd_ca=PATH&
	 * etcd_cert=PATH&etcd_key=PATH" (where both name one, they must
	 * agree): the CA file the etcd members' certificates must verify
	 * against, and the client certificate and key presented to them
	 * (PEM; both or neither).  NULL or "" (default): none.  Any of them
	 * with an etcd:// (plain HTTP) or a single-server endpoint is -EINVAL.
	 * See librmem(7), CLUSTER. */
	const char *etcd_ca;
	const char *etcd_cert;
	const char *etcd_key;
	/* Added after RMEM_1.4 (read only when o->size covers it): TLS 1.3
	 * to a daemon with listen.tls, as the tls:// URL's "?tls_ca=PATH&
	 * tls_cert=PATH&tls_key=PATH&tls_name=NAME" (where both give one,
	 * they must agree): the CA file the daemon's certificate must verify
	 * against (NULL: the system's), a client certificate and its key
	 * (PEM; both or neither), and the name the daemon's certificate must
	 * be made out to (NULL: the endpoint's host).  Any of them with an
	 * endpoint that is not TLS (tls:// or "?tls=1") is -EINVAL: nothing
	 * asked to be TLS ever goes in clear text.  See librmem(7), TLS. */
	const char *tls_ca;
	const char *tls_cert;
	const char *tls_key;
	const char *tls_name;
};

/* Fills *o with defaults.  size is sizeof(*o) as the caller sees it. */
RMEM_API void rmem_opts_init(struct rmem_opts *o, size_t size);

/*
 * Connects to rmemd and opens a session.
 *  endpoint: "HOST:PORT", "tcp://HOST:PORT", "rdma://HOST:PORT" or "unix:PATH";
 *  or "etcd://HOST:PORT[,HOST:PORT...]/NAME" for a cluster client: the
 *  memory servers of cluster NAME (rmemd.conf's cluster.name; "rmem" when
 *  "/NAME" is left out) as one pool, found through those etcd members.
 *  Every call below works on a cluster client: allocations are placed by
 *  free bytes (the next server on -ENOMEM), each region's calls go to its
 *  server, stats are summed, names live in etcd.  Calls on the regions of
 *  a server that is gone fail with -EHOSTDOWN; rmem_pools, rmem_regions,
 *  rmem_clients and rmem_unlink_ns are -EOPNOTSUPP; rmem_names lists the
 *  cluster's names.  "etcds://..." reaches the etcd members over https://
 *  (TLS), with "?etcd_ca=PATH&etcd_cert=PATH&etcd_key=PATH" for the CA to
 *  verify them against and the client certificate to present; these
 *  parameters need etcds://, never plain HTTP.  librmem(7), CLUSTER.
 *  o: NULL for defaults (a cluster client opens every server with them).
 * On success *out owns the session; release it with rmem_close().
 * Errors: -EINVAL (bad endpoint or options), -ENOTSUP (transport "rdma" or an
 * rdma:// endpoint on a build or machine without RDMA; never a silent fallback),
 * -EHOSTUNREACH (etcd://: no etcd member answered), etcds://: -EBADE (a
 * member's certificate does not verify against etcd_ca, or etcd_ca cannot
 * be read), -ENOKEY (etcd_cert or etcd_key cannot be read or used),
 * -EKEYREJECTED (the members refused etcd_cert, or want one and none was
 * given),
 * tls:// (a TCP endpoint under TLS 1.3, with "?tls_ca=PATH&tls_cert=PATH&
 * tls_key=PATH&tls_name=NAME"): -EBADE (the daemon's certificate does not
 * verify: another CA, expired, or not made out to the name), -ENOKEY (a
 * tls_* file cannot be read or used), -EKEYREJECTED (the daemon refused
 * our certificate, or wants one and none was given), -EPROTO (TLS on one
 * end only: a tls:// client on a plain port, or a plain one on a TLS port),
 * -EUSERS (the daemon is at its limits.max_clients), -EACCES (refused: wrong
 * tenant or secret, or anonymous where the daemon wants a tenant; also a
 * daemon that could not prove it knows the secret), -ENOENT and the other
 * errors of open(2) for secret_file, -ENOMEM, and the connection errors above.
 */
RMEM_API int rmem_connect(const char *endpoint, const struct rmem_opts *o, rmem_client **out);

/* Ends the session; the daemon frees every region the session still holds.
 * Accepts NULL. */
RMEM_API void rmem_close(rmem_client *c);

/* "rdma", "tcp", "unix", or over TLS "tls" (user space) or "ktls" / "ktls-tx"
 * (the kernel seals records both ways / when sending): the path this client
 * really uses.  Never NULL. */
RMEM_API const char *rmem_transport(const rmem_client *c);

/*
 * remote_malloc: carves at least size bytes from the daemon's pools.
 * flags must be 0 (no flags are defined yet).  The bytes read as zero.
 * Errors: -EINVAL (size 0, unknown flags, NULL), -ENOMEM (no pool can hold it),
 * -EDQUOT (the tenant's quota or max_regions would be exceeded).
 */
RMEM_API int rmem_alloc(rmem_client *c, uint64_t size, uint32_t flags, struct rmem_region *out);

/*
 * remote_free: returns the region's bytes to the pool.  The key stops working.
 * Errors: -ENOENT (never allocated, or already freed), -EACCES (wrong key, or
 * another client's region), -EINVAL (NULL).
 */
RMEM_API int rmem_free(rmem_client *c, const struct rmem_region *r);

/*
 * Copies len bytes from buf to the region at byte off (rmem_write), or from the
 * region at off into buf (rmem_read).  Any length is accepted; large transfers
 * stream in bounded chunks.  len 0 is a no-op that still checks the handle.
 * Errors: -ERANGE (off + len past r->length), -ENOENT, -EACCES, -EINVAL.
 */
RMEM_API int rmem_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
	       const void *buf, size_t len);
RMEM_API int rmem_read(rmem_client *c, const struct rmem_region *r, uint64_t off,
	      void *buf, size_t len);

/*
 * 8-byte atomics on a region; off must be a multiple of 8.  rmem_cas writes
 * desired where the 8 bytes equal expect; rmem_faa adds add.  Both store the
 * 8 bytes as they were before into *old (old may be NULL).  The value is in
 * host byte order.  Atomic against every other atomic on the same transport.
 * Errors: -EINVAL (off not aligned, NULL r), -ERANGE, -ENOENT, -EACCES, and
 * -ECONNABORTED: the connection was lost while the atomic was in flight and
 * the client has resumed; the atomic is not sent again (it is not
 * idempotent) and may or may not have been applied: read the word to learn.
 */
RMEM_API int rmem_cas(rmem_client *c, const struct rmem_region *r, uint64_t off,
	     uint64_t expect, uint64_t desired, uint64_t *old);
RMEM_API int rmem_faa(rmem_client *c, const struct rmem_region *r, uint64_t off,
	     uint64_t add, uint64_t *old);

/*
 * Asynchronous reads and writes: many may be in flight at once.  The call
 * queues the operation and returns 0 (or an error for it, without queueing);
 * its outcome arrives later through rmem_poll() under the caller's cookie.
 * buf must stay valid and untouched until then.  Completions come in the
 * order the operations were posted.
 * The checks of rmem_read()/rmem_write() (-EINVAL, -ERANGE, -EACCES for a
 * handle without RMEM_WRITE) and a broken client (-ECONNRESET) are
 * returned at once; what the daemon refuses
 * (-EACCES, -ENOENT) arrives as the completion's status.  A post may wait
 * while too much is in flight (64 operations or 64 MiB on the TCP path), and
 * handles replies meanwhile.
 * On the TCP path posts are batched: a posted request has been sent when
 * the post returns if it filled the send queue (16 requests or 64 KiB), or
 * if nothing else was in flight, unless an rmem_poll() has returned
 * completions since the client last sent (posts made in answer to a batch
 * of completions go out together, with the next rmem_poll()); otherwise at
 * the latest when the next call on the client that may wait starts
 * (rmem_poll() with any timeout, any synchronous call) or the keepalive
 * thread runs.  After posting, and before working long without the
 * library, call rmem_poll(c, out, n, 0).
 * On RDMA, reads and writes go to the queue pair in the call itself.  Any thread may post, and any thread's
 * rmem_poll() may return the completion.  rmem_close() drops operations
 * still in flight: their buffers are the caller's again when it returns.
 */
RMEM_API int rmem_post_read(rmem_client *c, const struct rmem_region *r, uint64_t off,
		   void *buf, size_t len, uint64_t cookie);
RMEM_API int rmem_post_write(rmem_client *c, const struct rmem_region *r, uint64_t off,
		    const void *buf, size_t len, uint64_t cookie);

/*
 * Asynchronous remote_malloc and remote_free (since RMEM_1.1): the same
 * requests as rmem_alloc()/rmem_free(), queued and sent like
 * rmem_post_read() on the TCP path (batched, on RDMA clients too), so
 * that many can be in flight.  rmem_post_alloc() fills *out when its
 * completion is returned by rmem_poll() with status 0; out must stay valid
 * and untouched until then.  rmem_post_free() copies what it needs from *r
 * at once.  -EINVAL (the checks of rmem_alloc/rmem_free) and -ECONNRESET
 * are returned at once; -ENOMEM (no pool can hold it), -ENOENT and -EACCES
 * arrive as the completion's status.  They travel on the control stream
 * even on an RDMA client; there they complete in order among themselves,
 * not necessarily in order with posted reads and writes.
 */
RMEM_API int rmem_post_alloc(rmem_client *c, uint64_t size, uint32_t flags,
			     struct rmem_region *out, uint64_t cookie);
RMEM_API int rmem_post_free(rmem_client *c, const struct rmem_region *r, uint64_t cookie);

/*
 * Registered buffers (since RMEM_1.1).  On RDMA a transfer above 4 KiB
 * registers the caller's buffer while it is in flight, every time.
 * rmem_register_buf() pins [buf, buf + len) for the data path until
 * rmem_unregister_buf(buf): reads and writes (synchronous or posted) whose
 * buffer lies wholly inside it use that registration, whatever their size,
 * and never register again; others work as before.  The memory must stay
 * allocated and mapped while it is registered.  On a TCP or Unix client the
 * range is only recorded, so the same code runs everywhere.  At most 64
 * ranges per client; rmem_close() releases those left.
 * Errors of rmem_register_buf: -EINVAL (NULL, len 0, overlaps a registered
 * range), -ENOSPC (64 registered), -ENOMEM (memlock limit), -EFAULT (memory
 * the device cannot register), -ECONNRESET.  Of rmem_unregister_buf:
 * -ENOENT (no range starts at buf), -EBUSY (transfers on it in flight on
 * RDMA: poll them first), -EINVAL (NULL).
 */
RMEM_API int rmem_register_buf(rmem_client *c, void *buf, size_t len);
RMEM_API int rmem_unregister_buf(rmem_client *c, void *buf);

struct rmem_completion {
	uint64_t cookie; /* as given to rmem_post_*() */
	int status;      /* 0 or a negative errno, as the synchronous call would return */
};

/*
 * Sends every posted request still queued, then waits up to timeout_ms (0:
 * do not wait, < 0: forever) for at least one completion, then returns how
 * many (<= max) it stored in out, 0 on timeout, or a negative errno for the
 * connection.
 * With nothing in flight it returns 0 at once, whatever timeout_ms.  When the
 * connection breaks (or makes no progress for opts.timeout_ms), every
 * operation in flight completes with -ECONNRESET; once those have been
 * returned, rmem_poll() returns -ECONNRESET.  -EINVAL: c or out NULL, max < 1.
 */
RMEM_API int rmem_poll(rmem_client *c, struct rmem_completion *out, int max, int timeout_ms);

/*
 * A descriptor for an event loop (since RMEM_1.3): it polls readable
 * (POLLIN; select, epoll, asyncio's add_reader) when rmem_poll(c, .., 0)
 * has something to do: completions to return, replies to take in, posts
 * to send, or a broken connection to report.  Call rmem_poll(c, out, n, 0)
 * then, until it returns 0; the descriptor is level-triggered and is armed
 * again by every call on the client, so never read it yourself.  On RDMA,
 * while transfers are on the queue pair, it stays readable (the
 * completion queue is polled, not slept on).  The client owns it:
 * rmem_close() closes it; every call returns the same one.
 * Errors: -EINVAL (NULL), -EOPNOTSUPP (an etcd:// cluster client),
 * -EMFILE, -ENFILE, -ENOMEM.
 */
RMEM_API int rmem_fd(rmem_client *c);

/*
 * Repairs a redundant region (since RMEM_1.4; etcd:// clients with
 * ?redundancy=K+R, librmem(7) CLUSTER): every piece that is lost or stale
 * is rebuilt from K others onto a server that holds no piece of the
 * region, and put in its place (for a named region, in its record first,
 * so every later opener uses it).  The region stays readable meanwhile;
 * writes on this client wait.  Needs the write right (a named region
 * opened RMEM_WRITE, whose writer this client is).  rmemd's repair agent
 * does this by itself for named regions nobody writes (rmemd.conf(5),
 * cluster.repair_grace_ms); a region a client holds as writer (or
 * allocated) is that client's: its next call on the region repairs it
 * once a piece has been lost for the URL's repair_grace_ms (30 s by
 * default), or it calls this.
 * 0 when every piece is healthy (nothing to do included).  Errors:
 * -EINVAL (not a redundant region of c), -EACCES (opened without
 * RMEM_WRITE), -EHOSTDOWN (fewer than K pieces left), -ENOSPC (no server
 * to take a piece), -ESTALE (another repaired it meanwhile: open again),
 * -EOPNOTSUPP (not a cluster client), or a call's error.
 */
RMEM_API int rmem_repair(rmem_client *c, const struct rmem_region *r);

/* How the daemon makes region keys on RDMA (rmem_stats.key_mode); the
 * values are those of rmemd.conf(5)'s rdma.keys and of the wire protocol. */
enum rmem_key_mode {
	RMEM_KEYS_NONE = 0,      /* no RDMA: the TCP path's random keys */
	RMEM_KEYS_WINDOW = 1,    /* type 2 memory windows bound on the client's queue pair */
	RMEM_KEYS_REGION_MR = 2, /* one MR per region in the client's own protection domain */
};

/* Pool-wide figures, summed over every pool of the daemon. */
struct rmem_stats {
	uint64_t pool_bytes;   /* bytes of all pools */
	uint64_t used_bytes;   /* bytes held by live regions */
	uint64_t free_bytes;   /* pool_bytes - used_bytes */
	uint64_t largest_free; /* the largest single allocation that can succeed */
	uint64_t regions;      /* live regions */
	uint64_t clients;      /* connected sessions */
	uint64_t peak_used;    /* highest used_bytes since start */
	uint64_t allocs;       /* successful allocations since start */
	uint64_t frees;        /* regions returned since start (any cause) */
	uint64_t key_mode;     /* enum rmem_key_mode: how the daemon keys regions on RDMA
				  (uint64_t, as in RMEM_1.0) */
	/* Since 1.2.2 (0 from an older rmemd): the daemon's state slots, one
	 * per session, region, handle and two per named region, charged to
	 * their tenants (rmemd.conf(5), limits.state_slots). */
	uint64_t state_slots_used;
	uint64_t state_slots_total;
	/* Since 1.4.0, an etcd:// client's own figures for its redundant
	 * regions (0 on other clients; librmem(7), REDUNDANCY): reads (posted
	 * or not) that rebuilt a lost piece's bytes, parity chunks its writes
	 * updated (by delta or by a whole stripe's encode), and bytes of the
	 * pieces its repairs rebuilt (rmem_repair(3)). */
	uint64_t degraded_reads;
	uint64_t parity_updates;
	uint64_t repaired_bytes;
	/* Room to grow (since RMEM_1.2): 0 today.  rmem_stats@RMEM_1.0 writes
	 * only the fields up to key_mode, for callers built against older
	 * headers. */
	uint64_t reserved[1];
};

/* Errors: -EINVAL (NULL) and the connection errors. */
RMEM_API int rmem_stats(rmem_client *c, struct rmem_stats *out);

/*
 * Admin listings.  They are served only on the daemon's Unix admin socket
 * ("unix:PATH" endpoint); elsewhere they fail with -EACCES.  Each call fills up
 * to max entries and returns how many it filled (>= 0).
 */
struct rmem_pool_info {
	char name[32];         /* NUL-terminated */
	uint64_t bytes;        /* pool size */
	uint64_t used_bytes;
	uint64_t largest_free;
	uint64_t regions;
	uint32_t page_size;    /* bytes per page backing the pool: 4096, 2 MiB... */
	uint32_t alignment;    /* every region starts and ends on this */
};
RMEM_API int rmem_pools(rmem_client *c, struct rmem_pool_info *out, size_t max);

struct rmem_region_info {
	uint64_t id;
	uint64_t addr;
	uint64_t length;
	uint64_t client_id;    /* the session that owns it */
	uint32_t pool;         /* index into rmem_pools() */
	uint32_t access;       /* a handle of a named region (rmem_create,
				  rmem_open): the RMEM_READ | RMEM_WRITE it
				  grants; 0: an anonymous region.  (Before
				  RMEM_1.2 this was reserved and 0.) */
	/* Since RMEM_1.2; rmem_regions@RMEM_1.0 writes only the fields above. */
	uint64_t name_id;      /* the name's id, as rmem_names() gives it; 0: anonymous */
	uint32_t flags;        /* RMEM_REGION_UNLINKED */
	uint32_t reserved;     /* 0 */
	char name[256];        /* NUL-terminated; "" for an anonymous region */
};
#define RMEM_REGION_UNLINKED 0x1u /* the handle's name was unlinked; the
				     handle lives on until it is freed */
/* Regions with id > after, in id order; page through with the last id seen.
 * A page holds fewer entries since RMEM_1.2 (the names make them longer):
 * page until 0 is returned, never assume a full page. */
RMEM_API int rmem_regions(rmem_client *c, uint64_t after, struct rmem_region_info *out,
			  size_t max);

struct rmem_client_info {
	uint64_t id;           /* session id */
	uint64_t regions;
	uint64_t used_bytes;
	uint64_t connected_ms; /* how long the session has lived */
	uint64_t idle_ms;      /* its lease's age: time since it last sent the daemon a
	                          byte or took one; limits.lease_timeout_ms ends it */
	char transport[8];     /* "tcp", "unix", "rdma" */
	char peer[64];         /* "1.2.3.4:5678", "uid=0 pid=12" ... */
};
/* Sessions with id > after, in id order. */
RMEM_API int rmem_clients(rmem_client *c, uint64_t after, struct rmem_client_info *out,
			  size_t max);

/* ---- named regions (since RMEM_1.2) ----------------------------------------
 *
 * A named region outlives every session, as shm_open(3) memory does: it lives
 * until it is unlinked and the last handle to it is released.  Each handle
 * (what rmem_create and rmem_open fill in) has a key of its own with only the
 * access it was opened with, enforced by the NIC on RDMA and by the daemon on
 * TCP.  rmem_free() on a handle releases that handle only.  Names are 1 to
 * RMEM_NAME_MAX bytes of printable ASCII (0x21-0x7e), '/' making namespaces;
 * each tenant has its own set of names, and anonymous local clients share
 * one.  The bytes count in the creator's tenant quota until they are
 * returned.
 */
#define RMEM_READ          0x1u  /* RDMA READ; served READ */
#define RMEM_WRITE         0x2u  /* RDMA WRITE and atomics; served WRITE, CAS, FAA */
#define RMEM_UNLINK_REVOKE 0x1u  /* rmem_unlink2: also invalidate every open handle */
#define RMEM_NAME_MAX      255

/*
 * Creates the named region name of at least size bytes (zeroed) and opens
 * it for RMEM_READ | RMEM_WRITE into *out.  flags as rmem_alloc's.
 * Errors: as rmem_alloc, and -EEXIST (the name exists;
 * unlinked names are free again at once), -ENAMETOOLONG, -EINVAL (a bad name),
 * -EMFILE (this session holds the daemon's limits.max_handles handles).
 */
RMEM_API int rmem_create(rmem_client *c, const char *name, uint64_t size, uint32_t flags,
			 struct rmem_region *out);
/*
 * Opens the named region name with access (RMEM_READ, RMEM_WRITE or both)
 * into *out.  Errors: -ENOENT (no such name in this client's namespace, or
 * unlinked), -EACCES, -EINVAL (access 0 or unknown bits, a bad name),
 * -ENAMETOOLONG, -EMFILE (this session holds limits.max_handles handles).
 */
RMEM_API int rmem_open(rmem_client *c, const char *name, uint32_t access,
		       struct rmem_region *out);
/*
 * Removes the name at once: opens fail with -ENOENT and the name can be
 * created again.  The memory returns once every handle is released.  With
 * RMEM_UNLINK_REVOKE (rmem_unlink2), every open handle, whoever holds it, is
 * invalidated now (by the NIC on RDMA) and the memory returns after the
 * quarantine.  Errors: -ENOENT, -EINVAL (unknown flags, a bad name),
 * -ENAMETOOLONG.
 */
RMEM_API int rmem_unlink(rmem_client *c, const char *name);
RMEM_API int rmem_unlink2(rmem_client *c, const char *name, uint32_t flags);

/*
 * Admin (the Unix socket; since RMEM_1.2): rmem_unlink2() in the namespace
 * of tenant ("" for the anonymous namespace) instead of the caller's.
 * Errors: -EACCES (not an admin session), -ENOENT (no such tenant, or no
 * such name in its namespace), -EINVAL (unknown flags, a bad name, or a
 * tenant name rmemd.conf would refuse), -ENAMETOOLONG.
 */
RMEM_API int rmem_unlink_ns(rmem_client *c, const char *tenant, const char *name,
			    uint32_t flags);

/* Admin (the Unix socket): the named regions of every namespace. */
#define RMEM_NAME_UNLINKED 0x1u  /* unlinked; waits for its last handle */
#define RMEM_NAME_PIECE    0x2u  /* a piece of a cluster's redundant region
				    (librmem made it so; rmem_create cannot) */
struct rmem_name_info {
	uint64_t id;                   /* the name's id, for paging */
	uint64_t length;
	uint64_t age_ms;               /* since it was created */
	uint32_t handles;              /* open handles */
	uint32_t flags;                /* RMEM_NAME_UNLINKED */
	char tenant[32];               /* "" for the anonymous namespace */
	char name[RMEM_NAME_MAX + 1];  /* NUL-terminated */
};
/* Names with id > after, in id order: the count, or a negative errno. */
RMEM_API int rmem_names(rmem_client *c, uint64_t after, struct rmem_name_info *out,
			size_t max);

/*
 * The version of the library that runs (since RMEM_1.2), packed as
 * RMEM_VERSION is: (major << 16) | (minor << 8) | patch.  It may be newer
 * than the header the caller was built with, never older in major.
 */
RMEM_API uint32_t rmem_version(void);

/* Text for a negative (or positive) errno value, including the rmem meanings
 * of each code.  Never NULL; the string is static. */
RMEM_API const char *rmem_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* RMEM_H */
