/*
 * config_types.h - what rmemd's configuration holds: struct config and its
 * parts, the data every module reads.  Apart from config.h (which loads it)
 * so that the table describing these fields (config_keys.c) needs the types
 * and not the loader that uses the table.
 */
#ifndef RMEMD_CONFIG_TYPES_H
#define RMEMD_CONFIG_TYPES_H

#include <stddef.h>
#include <stdint.h>

#define CONFIG_DEFAULT_PATH "/etc/rmemd/rmemd.conf"
#define CONFIG_MAX_POOLS    16
#define CONFIG_NAME_MAX     32
#define CONFIG_ETCD_MAX     512  /* cluster.etcd: the endpoint list */

enum config_hugepages { CONFIG_HUGEPAGES_OFF, CONFIG_HUGEPAGES_ON, CONFIG_HUGEPAGES_AUTO };
/* rdma.keys: how region keys are made on the RDMA path (rmemd.conf(5)). */
enum config_rdma_keys { CONFIG_KEYS_AUTO, CONFIG_KEYS_WINDOW, CONFIG_KEYS_REGION_MR };
enum config_log_level { CONFIG_LOG_ERR = 3, CONFIG_LOG_WARNING = 4, CONFIG_LOG_NOTICE = 5,
			CONFIG_LOG_INFO = 6, CONFIG_LOG_DEBUG = 7 };

struct config_pool {
	char name[CONFIG_NAME_MAX];     /* default "default" */
	uint64_t size;                  /* bytes; default 1 GiB; >= 1 MiB */
	enum config_hugepages hugepages;/* default auto */
	uint64_t alignment;             /* bytes, power of two in [8, 1 GiB]; default 64 */
};

/*
 * tenants = ( { name = "ml"; secret_file = "/etc/rmemd/ml.key"; quota = "8G";
 *               max_regions = 100000; } );
 * The secret is the file's bytes, one trailing newline stripped; the file
 * must not be open to group or others.  Loaded with the config, so a bad
 * secret file is a config error (file:line of secret_file).
 */
#define CONFIG_MAX_TENANTS 64
/* The state slots (limits.state_slots): what each costs (common/state.h's
 * STATE_SLOT_LEN, checked in persist.c), the three no client ever holds (the
 * two id counters, and the one PENDING record a multi-slot change writes
 * first: session.c, pending_begin), the sessions past limits.max_clients kept for admin
 * sessions (the Unix socket, a trusted uid) and the least share of records
 * a tenant (or the anonymous clients) may be left with. */
#define CONFIG_SLOT_BYTES 384u
#define CONFIG_FIXED_SLOTS 3u
#define CONFIG_ADMIN_SESSIONS 4u
#define CONFIG_SHARE_MIN 16u
#define CONFIG_SLOTS_MIN 64u
#define CONFIG_SECRET_MIN  16
#define CONFIG_SECRET_MAX  256
struct config_tenant {
	char name[CONFIG_NAME_MAX];     /* required, unique */
	char secret_file[256];          /* required, absolute */
	uint64_t quota;                 /* bytes the tenant may hold; 0 (default): no limit */
	uint32_t max_regions;           /* regions it may hold; 0 (default): no limit */
	uint8_t secret[CONFIG_SECRET_MAX];
	size_t secret_len;              /* CONFIG_SECRET_MIN..CONFIG_SECRET_MAX */
};

struct config {
	/* listen = { tcp = "0.0.0.0:7470"; rdma = "0.0.0.0:7471"; admin = "/run/rmemd/rmemd.sock"; } */
	char listen_tcp[128];           /* "" disables the TCP listener */
	char listen_rdma[128];          /* "" disables the RDMA listener */
	char listen_admin[108];         /* Unix socket path; "" disables */
	/* listen.metrics = "127.0.0.1:9470": Prometheus text at GET /metrics */
	char listen_metrics[128];       /* "" disables the metrics endpoint */
	/* listen.tls = { cert = "..."; key = "..."; ca = "..."; require_client_cert
	 * = false; ktls = "auto"; }: TLS 1.3 on listen.tcp (common/tls.h); cert
	 * and key set turn it on, checked at load (config.c, check_listen_tls). */
	char listen_tls_cert[256];
	char listen_tls_key[256];
	char listen_tls_ca[256];        /* clients' certificates verify against it */
	int listen_tls_require_cert;    /* 1: a client without a good certificate is refused */
	int listen_tls_ktls;            /* 1 (auto): kernel TLS where the kernel has it */
	int listen_tls_cert_tenants;    /* 1: a verified client certificate whose subject CN
					   is a tenant's name proves that tenant (no HMAC) */
	struct config_pool pools[CONFIG_MAX_POOLS];
	size_t npools;                  /* >= 1; default one pool as above */
	/* rdma = { device = "auto"; keys = "auto"; } */
	char rdma_device[CONFIG_NAME_MAX];  /* "auto" or a device name such as "rxe0" */
	enum config_rdma_keys rdma_keys;    /* default auto */
	int rdma_required;                  /* 1: no RDMA is fatal at start (default 0) */
	/* limits = { max_clients = 1024; lease_timeout_ms = 10000; } */
	uint32_t max_clients;           /* [1, 1000000], default 1024 */
	uint32_t lease_timeout_ms;      /* [100, 86400000], default 10000 */
	/* limits = { frame_timeout_ms = 5000; conn_max_requests = 1024;
	 *            conn_max_buffered = "256K"; }  (per connection, conn.c) */
	uint32_t frame_timeout_ms;      /* [100, 3600000], default 5000 */
	uint32_t conn_max_requests;     /* [1, 1000000], default 1024 */
	uint64_t conn_max_buffered;     /* bytes, [4 KiB, 1 GiB], default 256 KiB */
	/* limits = { max_handles = 65536; }: named-region handles one session
	 * may hold (session.c); each costs a region entry and a NIC key. */
	uint32_t max_handles;           /* [1, 16777216], default 65536 */
	/* limits = { state_slots = 262144; }: records of the state memfd
	 * (persist.c), each CONFIG_SLOT_BYTES of memory once used; shared out
	 * among the tenants whether or not the fd store is there (tenant.c). */
	uint32_t state_slots;           /* [CONFIG_SLOTS_MIN, 16777216], default 262144 */
	/* limits = { metrics_timeout_ms = 10000; }: a listen.metrics connection
	 * has this long for its whole request, and as long again for its whole
	 * reply (metrics_http.c), however it paces its bytes. */
	uint32_t metrics_timeout_ms;    /* [100, 3600000], default 10000 */
	/* log = { level = "info"; } */
	enum config_log_level log_level;
	struct config_tenant tenants[CONFIG_MAX_TENANTS];
	size_t ntenants;                /* 0: no tenants, anonymous local clients only */
	/* cluster = { etcd = "http://h1:2379,http://h2:2379"; name = "rmem"; id = "";
	 *             advertise = "HOST:PORT"; lease_ms = 3000; }  (member.c) */
	char cluster_etcd[CONFIG_ETCD_MAX]; /* "" (default): no cluster */
	char cluster_name[CONFIG_NAME_MAX]; /* default "rmem" */
	char cluster_id[CONFIG_NAME_MAX];   /* "" (default): a random id at each start */
	char cluster_advertise[128];        /* "" (default): listen.tcp */
	uint32_t cluster_lease_ms;          /* [1000, 600000], default 3000 */
	/* How long a redundant region's piece stays lost before the repair
	 * agent rebuilds it elsewhere (repair_agent.h): 0 turns the agent off;
	 * [0, 86400000], default 30000 (longer than a systemctl restart). */
	uint32_t cluster_repair_grace_ms;
	/* cluster = { etcd_ca = "/etc/rmemd/etcd-ca.pem"; etcd_cert = "...";
	 *             etcd_key = "..."; }: etcd over TLS (common/etcd_endpoints.h,
	 * struct etcd_tls); "" (default): none.  With any set every endpoint of
	 * cluster.etcd is https://; cert and key go together; each file must
	 * open when the config is loaded (rmemd -t). */
	char cluster_etcd_ca[256];
	char cluster_etcd_cert[256];
	char cluster_etcd_key[256];
	/* tcp = { congestion = ""; }: TCP_CONGESTION of every client
	 * connection (common/tcp_cc.h); "" (default) keeps the system's. */
	char tcp_congestion[16];
};

#endif /* RMEMD_CONFIG_TYPES_H */
