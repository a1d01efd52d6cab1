/*
 * config_keys.c - the keys of rmemd.conf(5), one row each (config_keys.h).
 * The defaults go through the same validation as the file, so a default can
 * never be out of its bounds.
 */
#include <stdio.h>

#include "config_keys.h"
#include "config_types.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define FIELD(type, member) .offset = offsetof(type, member), .size = sizeof(((type *)0)->member)

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define PIB (UINT64_C(1) << 50)

_Static_assert(sizeof(enum config_hugepages) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum config_log_level) == sizeof(int), "enum stored as int");
_Static_assert(sizeof(enum config_rdma_keys) == sizeof(int), "enum stored as int");

static const struct enum_word hugepages_words[] = {
	{ "auto", CONFIG_HUGEPAGES_AUTO },
	{ "on", CONFIG_HUGEPAGES_ON },
	{ "off", CONFIG_HUGEPAGES_OFF },
	{ NULL, 0 },
};

static const struct enum_word key_mode_words[] = {
	{ "auto", CONFIG_KEYS_AUTO },
	{ "window", CONFIG_KEYS_WINDOW },
	{ "region-mr", CONFIG_KEYS_REGION_MR },
	{ NULL, 0 },
};

/* rdma.required: a libconfig boolean, or "on"/"off". */
static const struct enum_word required_words[] = {
	{ "off", 0 },
	{ "on", 1 },
	{ NULL, 0 },
};

static const struct enum_word log_level_words[] = {
	{ "err", CONFIG_LOG_ERR },
	{ "warning", CONFIG_LOG_WARNING },
	{ "notice", CONFIG_LOG_NOTICE },
	{ "info", CONFIG_LOG_INFO },
	{ "debug", CONFIG_LOG_DEBUG },
	{ NULL, 0 },
};

/* listen.tls.ktls: kernel TLS when the kernel has it, or never. */
static const struct enum_word ktls_words[] = {
	{ "auto", 1 },
	{ "off", 0 },
	{ NULL, 0 },
};

static const struct key_desc listen_tls_keys[] = {
	{ .name = "cert", .kind = KIND_FILE, FIELD(struct config, listen_tls_cert),
	  .flags = KEY_EMPTY_OK, .def = "" },
	{ .name = "key", .kind = KIND_FILE, FIELD(struct config, listen_tls_key),
	  .flags = KEY_EMPTY_OK, .def = "" },
	{ .name = "ca", .kind = KIND_FILE, FIELD(struct config, listen_tls_ca),
	  .flags = KEY_EMPTY_OK, .def = "" },
	{ .name = "require_client_cert", .kind = KIND_ENUM,
	  FIELD(struct config, listen_tls_require_cert), .flags = KEY_BOOL_ONOFF,
	  .words = required_words, .def = "off" },
	{ .name = "ktls", .kind = KIND_ENUM, FIELD(struct config, listen_tls_ktls),
	  .words = ktls_words, .def = "auto" },
	{ .name = "cert_tenants", .kind = KIND_ENUM,
	  FIELD(struct config, listen_tls_cert_tenants), .flags = KEY_BOOL_ONOFF,
	  .words = required_words, .def = "off" },
};

static const struct key_desc listen_keys[] = {
	{ .name = "tcp", .kind = KIND_HOSTPORT, FIELD(struct config, listen_tcp),
	  .def = "0.0.0.0:7470" },
	{ .name = "rdma", .kind = KIND_HOSTPORT, FIELD(struct config, listen_rdma),
	  .def = "0.0.0.0:7471" },
	{ .name = "admin", .kind = KIND_PATH, FIELD(struct config, listen_admin),
	  .def = "/run/rmemd/rmemd.sock" },
	{ .name = "metrics", .kind = KIND_HOSTPORT, FIELD(struct config, listen_metrics),
	  .def = "127.0.0.1:9470" },
	{ .name = "tls", .kind = KIND_GROUP, FIELD(struct config, listen_tls_cert),
	  .sub = listen_tls_keys,
	  .nsub = ARRAY_SIZE(listen_tls_keys) },
};

static const struct key_desc pool_keys[] = {
	{ .name = "name", .kind = KIND_NAME, FIELD(struct config_pool, name),
	  .def = "default" },
	{ .name = "size", .kind = KIND_SIZE, FIELD(struct config_pool, size),
	  .min = MIB, .max = PIB, .def = "1G" },
	{ .name = "hugepages", .kind = KIND_ENUM, FIELD(struct config_pool, hugepages),
	  .flags = KEY_BOOL_ONOFF, .words = hugepages_words, .def = "auto" },
	{ .name = "alignment", .kind = KIND_SIZE, FIELD(struct config_pool, alignment),
	  .min = 8, .max = GIB, .flags = KEY_POW2, .def = "64" },
};

/* "auto" is a valid device name too; nic_dev.c reads it as "pick one". */
static const struct key_desc nic_group_keys[] = {
	{ .name = "device", .kind = KIND_NAME, FIELD(struct config, rdma_device),
	  .def = "auto" },
	{ .name = "keys", .kind = KIND_ENUM, FIELD(struct config, rdma_keys),
	  .words = key_mode_words, .def = "auto" },
	{ .name = "required", .kind = KIND_ENUM, FIELD(struct config, rdma_required),
	  .flags = KEY_BOOL_ONOFF, .words = required_words, .def = "off" },
};

static const struct key_desc limits_keys[] = {
	{ .name = "max_clients", .kind = KIND_U32, FIELD(struct config, max_clients),
	  .min = 1, .max = 1000000, .def = "1024" },
	{ .name = "lease_timeout_ms", .kind = KIND_U32, FIELD(struct config, lease_timeout_ms),
	  .min = 100, .max = 86400000, .def = "10000" },
	{ .name = "frame_timeout_ms", .kind = KIND_U32, FIELD(struct config, frame_timeout_ms),
	  .min = 100, .max = 3600000, .def = "5000" },
	{ .name = "conn_max_requests", .kind = KIND_U32, FIELD(struct config, conn_max_requests),
	  .min = 1, .max = 1000000, .def = "1024" },
	{ .name = "conn_max_buffered", .kind = KIND_SIZE, FIELD(struct config, conn_max_buffered),
	  .min = 4096, .max = GIB, .def = "256K" },
	{ .name = "max_handles", .kind = KIND_U32, FIELD(struct config, max_handles),
	  .min = 1, .max = 16777216, .def = "65536" },
	{ .name = "state_slots", .kind = KIND_U32, FIELD(struct config, state_slots),
	  .min = CONFIG_SLOTS_MIN, .max = 16777216, .def = "262144" },
	{ .name = "metrics_timeout_ms", .kind = KIND_U32,
	  FIELD(struct config, metrics_timeout_ms), .min = 100, .max = 3600000, .def = "10000" },
};

static const struct key_desc log_keys[] = {
	{ .name = "level", .kind = KIND_ENUM, FIELD(struct config, log_level),
	  .words = log_level_words, .def = "info" },
};

/* name and secret_file have no default: load_tenants() insists on them. */
static const struct key_desc tenant_keys[] = {
	{ .name = "name", .kind = KIND_NAME, FIELD(struct config_tenant, name), .def = "" },
	{ .name = "secret_file", .kind = KIND_FILE, FIELD(struct config_tenant, secret_file),
	  .def = "" },
	{ .name = "quota", .kind = KIND_SIZE, FIELD(struct config_tenant, quota),
	  .min = 0, .max = PIB, .def = "0" },
	{ .name = "max_regions", .kind = KIND_U32, FIELD(struct config_tenant, max_regions),
	  .min = 0, .max = 100000000, .def = "0" },
};

/* No etcd, no cluster: the default is a lone rmemd, as before. */
static const struct key_desc cluster_keys[] = {
	{ .name = "etcd", .kind = KIND_ETCD, FIELD(struct config, cluster_etcd), .def = "" },
	{ .name = "name", .kind = KIND_NAME, FIELD(struct config, cluster_name), .def = "rmem" },
	{ .name = "id", .kind = KIND_NAME, FIELD(struct config, cluster_id),
	  .flags = KEY_EMPTY_OK, .def = "" },
	{ .name = "advertise", .kind = KIND_HOSTPORT, FIELD(struct config, cluster_advertise),
	  .def = "" },
	{ .name = "lease_ms", .kind = KIND_U32, FIELD(struct config, cluster_lease_ms),
	  .min = 1000, .max = 600000, .def = "3000" },
	{ .name = "repair_grace_ms", .kind = KIND_U32,
	  FIELD(struct config, cluster_repair_grace_ms), .min = 0, .max = 86400000,
	  .def = "30000" },
	{ .name = "etcd_ca", .kind = KIND_FILE, FIELD(struct config, cluster_etcd_ca),
	  .flags = KEY_EMPTY_OK, .def = "" },
	{ .name = "etcd_cert", .kind = KIND_FILE, FIELD(struct config, cluster_etcd_cert),
	  .flags = KEY_EMPTY_OK, .def = "" },
	{ .name = "etcd_key", .kind = KIND_FILE, FIELD(struct config, cluster_etcd_key),
	  .flags = KEY_EMPTY_OK, .def = "" },
};

/* Checked against the kernel once loaded (config.c, check_tcp). */
static const struct key_desc tcp_keys[] = {
	{ .name = "congestion", .kind = KIND_NAME, FIELD(struct config, tcp_congestion),
	  .flags = KEY_EMPTY_OK, .def = "" },
};

const struct section config_sections[] = {
	{ "listen", listen_keys, ARRAY_SIZE(listen_keys), false, false },
	{ "pools", pool_keys, ARRAY_SIZE(pool_keys), true, false },
	{ "rdma", nic_group_keys, ARRAY_SIZE(nic_group_keys), false, false },
	{ "limits", limits_keys, ARRAY_SIZE(limits_keys), false, false },
	{ "log", log_keys, ARRAY_SIZE(log_keys), false, false },
	{ "tenants", tenant_keys, ARRAY_SIZE(tenant_keys), false, true },
	{ "cluster", cluster_keys, ARRAY_SIZE(cluster_keys), false, false },
	{ "tcp", tcp_keys, ARRAY_SIZE(tcp_keys), false, false },
};

const size_t config_nsections = ARRAY_SIZE(config_sections);

const char *config_size_text(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	int unit = -1;

	for (int i = 0; i < 6 && v && !(v & ((UINT64_C(1) << (10 * (i + 1))) - 1)); i++)
		unit = i;
	if (unit < 0)
		snprintf(buf, len, "%llu", (unsigned long long)v);
	else
		snprintf(buf, len, "%llu (%llu%c)", (unsigned long long)v,
			 (unsigned long long)(v >> (10 * (unit + 1))), units[unit]);
	return buf;
}
