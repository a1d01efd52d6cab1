/*
 * config.c - see config.h.
 *
 * Every key is one row of a table (config_keys.c): name, kind, where it is
 * stored, bounds and its default written as it would be in the file.  The
 * defaults go through the same validation as the file, so a default can never
 * be out of its bounds.  The file is walked setting by setting (not looked up key by key), which is
 * what makes every unknown key an error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libconfig.h>

#include "config.h"
#include "config_keys.h"
#include "config_num.h"
#include "etcd_endpoints.h"
#include "secret.h"
#include "tcp_cc.h"
#include "tls.h"

_Static_assert(CONFIG_SECRET_MAX == SECRET_MAX, "the daemon keeps what secret_read reads");

/* Longest piece of a user's string quoted back in a message. */
#define QUOTE_MAX 64

/* Where messages go, and the file to name when a setting does not say. */
struct ctx {
	const char *file;
	char *err;
	size_t errlen;
};

/* ---- messages ------------------------------------------------------------ */

__attribute__((format(printf, 5, 6)))
static int fail_at(struct ctx *ctx, const char *file, int line, const char *path,
		   const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	if (!ctx->err || !ctx->errlen)
		return -EINVAL;
	if (!file)
		file = ctx->file;
	if (line > 0 && path)
		snprintf(ctx->err, ctx->errlen, "%s:%d: %s: %s", file, line, path, what);
	else if (line > 0)
		snprintf(ctx->err, ctx->errlen, "%s:%d: %s", file, line, what);
	else if (path)
		snprintf(ctx->err, ctx->errlen, "%s: %s: %s", file, path, what);
	else
		snprintf(ctx->err, ctx->errlen, "%s: %s", file, what);
	return -EINVAL;
}

/* s is the setting the problem is about; NULL only while applying defaults. */
#define fail(ctx, s, path, ...)							\
	fail_at(ctx, (s) ? config_setting_source_file(s) : "(defaults)",	\
		(s) ? (int)config_setting_source_line(s) : 0, path, __VA_ARGS__)

/* A user's string made safe for a one-line message: printable, bounded. */
static const char *quote(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	for (; *s && n + 4 < len && n < QUOTE_MAX; s++)
		buf[n++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
	if (*s && n + 4 <= len) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
	return buf;
}

static const char *type_name(int type)
{
	switch (type) {
	case CONFIG_TYPE_GROUP:  return "a group { }";
	case CONFIG_TYPE_INT:    return "an integer";
	case CONFIG_TYPE_INT64:  return "an integer";
	case CONFIG_TYPE_FLOAT:  return "a floating-point number";
	case CONFIG_TYPE_STRING: return "a string";
	case CONFIG_TYPE_BOOL:   return "a boolean";
	case CONFIG_TYPE_ARRAY:  return "an array [ ]";
	case CONFIG_TYPE_LIST:   return "a list ( )";
	default:                 return "nothing";
	}
}

/* ---- sizes ----------------------------------------------------------------- */

static int unit_shift(char c)
{
	switch (c) {
	case 'k': case 'K': return 10;
	case 'm': case 'M': return 20;
	case 'g': case 'G': return 30;
	case 't': case 'T': return 40;
	case 'p': case 'P': return 50;
	case 'e': case 'E': return 60;
	default:            return -1;
	}
}

int config_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	/* strtoull would take "-1", " 1" and "+1"; sizes start with a digit. */
	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end && unit_shift(*end) >= 0)
		shift = unit_shift(*end++);
	if (shift && end[0] == 'i' && end[1] == 'B')
		end += 2;
	else if (end[0] == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

/* ---- one key ------------------------------------------------------------- */

/*
 * A value as read: a string, or an integer.  Defaults are always strings, so
 * numeric kinds also accept a string here; the file's types are checked
 * before, in read_value().
 */
struct value {
	const char *str;
	long long num;
};

static int check_range(struct ctx *ctx, const config_setting_t *s, const char *path,
		       const struct key_desc *k, bool negative, long long num, uint64_t v)
{
	char a[48], lo[48], hi[48];

	if (negative || v < k->min || v > k->max) {
		if (negative)
			snprintf(a, sizeof a, "%lld", num);
		else if (k->kind == KIND_SIZE)
			config_size_text(v, a, sizeof a);
		else
			snprintf(a, sizeof a, "%llu", (unsigned long long)v);
		if (k->kind == KIND_SIZE)
			return fail(ctx, s, path, "%s is out of range [%s, %s]", a,
				    config_size_text(k->min, lo, sizeof lo),
				    config_size_text(k->max, hi, sizeof hi));
		return fail(ctx, s, path, "%s is out of range [%llu, %llu]", a,
			    (unsigned long long)k->min, (unsigned long long)k->max);
	}
	if ((k->flags & KEY_POW2) && (v & (v - 1)))
		return fail(ctx, s, path, "%s is not a power of two", config_size_text(v, a, sizeof a));
	return 0;
}

static int store_number(struct ctx *ctx, const config_setting_t *s, const char *path,
			const struct key_desc *k, const struct value *val, void *field)
{
	char q[QUOTE_MAX + 8];
	uint64_t v = 0;
	int rc;

	if (val->str) {
		rc = config_parse_size(val->str, &v);
		if (rc == -ERANGE)
			return fail(ctx, s, path, "\"%s\" is too large",
				    quote(val->str, q, sizeof q));
		if (rc < 0)
			return fail(ctx, s, path, "\"%s\" is not a size (examples: 4096, \"64K\", "
				    "\"256M\", \"4G\", \"1T\", \"64KiB\")",
				    quote(val->str, q, sizeof q));
	} else if (val->num >= 0) {
		v = (uint64_t)val->num;
	}
	rc = check_range(ctx, s, path, k, !val->str && val->num < 0, val->num, v);
	if (rc < 0)
		return rc;
	if (k->kind == KIND_U32) {
		uint32_t v32 = (uint32_t)v;

		memcpy(field, &v32, sizeof v32);
	} else {
		memcpy(field, &v, sizeof v);
	}
	return 0;
}

static int store_enum(struct ctx *ctx, const config_setting_t *s, const char *path,
		      const struct key_desc *k, const char *word, void *field)
{
	char choices[128] = "", q[QUOTE_MAX + 8];
	size_t used = 0;

	for (const struct enum_word *w = k->words; w->word; w++) {
		if (!strcmp(word, w->word)) {
			memcpy(field, &w->value, sizeof w->value);
			return 0;
		}
		used += (size_t)snprintf(choices + used, sizeof choices - used, "%s\"%s\"",
					 w == k->words ? "" : ", ", w->word);
		if (used >= sizeof choices)
			break;
	}
	return fail(ctx, s, path, "\"%s\" is not one of %s", quote(word, q, sizeof q), choices);
}

static bool valid_port(const char *p)
{
	unsigned port = 0;

	if (!*p || strlen(p) > 5)
		return false;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		port = port * 10 + (unsigned)(*p - '0');
	}
	return port >= 1 && port <= 65535;
}

static bool all_chars_in(const char *s, size_t len, const char *extra)
{
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || (c && strchr(extra, c))))
			return false;
	}
	return true;
}

/*
 * "HOST:PORT" with HOST a name or IPv4 address, or "[IPV6]:PORT".  Only the
 * shape is checked here; whether it resolves is the listener's business.
 */
static int check_hostport(struct ctx *ctx, const config_setting_t *s, const char *path,
			  const char *str)
{
	char q[QUOTE_MAX + 8];
	const char *colon, *host = str;
	size_t hostlen;

	if (str[0] == '[') {
		const char *close = strchr(str, ']');

		if (!close || close[1] != ':')
			goto shape;
		host = str + 1;
		hostlen = (size_t)(close - host);
		colon = close + 1;
		if (!hostlen || !memchr(host, ':', hostlen) ||
		    !all_chars_in(host, hostlen, ":.%_-"))
			return fail(ctx, s, path, "\"%s\": bad IPv6 address",
				    quote(str, q, sizeof q));
	} else {
		colon = strrchr(str, ':');
		if (!colon || colon == str)
			goto shape;
		hostlen = (size_t)(colon - str);
		if (memchr(str, ':', hostlen))
			return fail(ctx, s, path, "\"%s\": write IPv6 addresses in brackets, "
				    "as in \"[::1]:7470\"", quote(str, q, sizeof q));
		if (!all_chars_in(host, hostlen, ".-_"))
			return fail(ctx, s, path, "\"%s\": bad host name",
				    quote(str, q, sizeof q));
	}
	if (!valid_port(colon + 1))
		return fail(ctx, s, path, "\"%s\": the port must be a number in [1, 65535]",
			    quote(str, q, sizeof q));
	return 0;
shape:
	return fail(ctx, s, path, "\"%s\" is not HOST:PORT (examples: \"0.0.0.0:7470\", "
		    "\"[::1]:7470\"; \"\" disables)", quote(str, q, sizeof q));
}

static int check_string(struct ctx *ctx, const config_setting_t *s, const char *path,
			const struct key_desc *k, const char *str)
{
	size_t len = strlen(str);
	char q[QUOTE_MAX + 8], why[128];

	if (len >= k->size)
		return fail(ctx, s, path, "\"%s\" is too long (at most %zu characters)",
			    quote(str, q, sizeof q), k->size - 1);
	switch (k->kind) {
	case KIND_HOSTPORT:
		return len ? check_hostport(ctx, s, path, str) : 0;
	case KIND_PATH:
		if (len && (str[0] != '/' || str[len - 1] == '/'))
			return fail(ctx, s, path, "\"%s\" is not an absolute path to a socket "
				    "(\"\" disables)", quote(str, q, sizeof q));
		return 0;
	case KIND_FILE:
		if (!len && (k->flags & KEY_EMPTY_OK))
			return 0;
		if (!len || str[0] != '/' || str[len - 1] == '/')
			return fail(ctx, s, path, "\"%s\" is not an absolute path to a file",
				    quote(str, q, sizeof q));
		return 0;
	case KIND_ETCD:
		if (len && etcd_endpoints_parse(str, NULL, why, sizeof why) < 0)
			return fail(ctx, s, path, "\"%s\": %s", quote(str, q, sizeof q), why);
		return 0;
	case KIND_NAME:
		if (!len && (k->flags & KEY_EMPTY_OK))
			return 0;
		if (!len || !all_chars_in(str, len, "_.-"))
			return fail(ctx, s, path, "\"%s\": a name is 1 to %zu characters of "
				    "A-Z a-z 0-9 _ . -", quote(str, q, sizeof q), k->size - 1);
		return 0;
	default:
		return 0;
	}
}

/* Validates val against key k and stores it at base + k->offset. */
static int store_value(struct ctx *ctx, const config_setting_t *s, const char *path,
		       const struct key_desc *k, const struct value *val, void *base)
{
	void *field = (char *)base + k->offset;
	int rc;

	switch (k->kind) {
	case KIND_U32:
	case KIND_SIZE:
		return store_number(ctx, s, path, k, val, field);
	case KIND_ENUM:
		return store_enum(ctx, s, path, k, val->str, field);
	case KIND_HOSTPORT:
	case KIND_PATH:
	case KIND_NAME:
	case KIND_FILE:
	case KIND_ETCD:
		rc = check_string(ctx, s, path, k, val->str);
		if (rc < 0)
			return rc;
		memset(field, 0, k->size);
		memcpy(field, val->str, strlen(val->str));
		return 0;
	case KIND_GROUP: /* load_group and apply_defaults go into it */
		return -EINVAL;
	}
	return -EINVAL;
}

static bool is_integer(int type)
{
	return type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64;
}

/* Checks the setting's libconfig type against what the key's kind accepts. */
static int read_value(struct ctx *ctx, const config_setting_t *s, const char *path,
		      const struct key_desc *k, struct value *val)
{
	int type = config_setting_type(s);
	const char *want = "a string";

	memset(val, 0, sizeof *val);
	switch (k->kind) {
	case KIND_U32:
		if (is_integer(type)) {
			val->num = config_setting_get_int64(s);
			return 0;
		}
		want = "an integer";
		break;
	case KIND_SIZE:
		if (is_integer(type)) {
			val->num = config_setting_get_int64(s);
			return 0;
		}
		if (type == CONFIG_TYPE_STRING) {
			val->str = config_setting_get_string(s);
			return 0;
		}
		want = "a size (an integer, or a string such as \"64K\")";
		break;
	case KIND_ENUM:
		if (type == CONFIG_TYPE_BOOL && (k->flags & KEY_BOOL_ONOFF)) {
			val->str = config_setting_get_bool(s) ? "on" : "off";
			return 0;
		}
		if (type == CONFIG_TYPE_STRING) {
			val->str = config_setting_get_string(s);
			return 0;
		}
		break;
	case KIND_HOSTPORT:
	case KIND_PATH:
	case KIND_NAME:
	case KIND_FILE:
	case KIND_ETCD:
		if (type == CONFIG_TYPE_STRING) {
			val->str = config_setting_get_string(s);
			return 0;
		}
		break;
	case KIND_GROUP:
		want = "a group { key = value; ... }";
		break;
	}
	return fail(ctx, s, path, "expected %s, got %s", want, type_name(type));
}

/* ---- groups ---------------------------------------------------------------- */

static const struct key_desc *find_key(const struct key_desc *keys, size_t nkeys,
				       const char *name)
{
	for (size_t i = 0; i < nkeys; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

static int unknown_key(struct ctx *ctx, const config_setting_t *s, const char *path,
		       const struct key_desc *keys, size_t nkeys)
{
	char known[160] = "";
	size_t used = 0;

	for (size_t i = 0; i < nkeys && used < sizeof known; i++)
		used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
					 i ? ", " : "", keys[i].name);
	return fail(ctx, s, path, "unknown key (known here: %s)", known);
}

static void apply_defaults(const struct key_desc *keys, size_t nkeys, void *base)
{
	struct ctx quiet = { "(defaults)", NULL, 0 };

	for (size_t i = 0; i < nkeys; i++) {
		struct value val = { .str = keys[i].def };

		if (keys[i].kind == KIND_GROUP)
			apply_defaults(keys[i].sub, keys[i].nsub, base);
		else
			store_value(&quiet, NULL, keys[i].name, &keys[i], &val, base);
	}
}

/* Every member of group must be one of keys; each is validated and stored. */
static int load_group(struct ctx *ctx, const config_setting_t *group, const char *prefix,
		      const struct key_desc *keys, size_t nkeys, void *base)
{
	char path[CONFIG_PATH_MAX_LEN];

	if (!config_setting_is_group(group))
		return fail(ctx, group, prefix, "expected a group { key = value; ... }, got %s",
			    type_name(config_setting_type(group)));
	for (int i = 0; i < config_setting_length(group); i++) {
		const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
		const char *name = config_setting_name(s);
		const struct key_desc *k = find_key(keys, nkeys, name);
		struct value val;
		int rc;

		snprintf(path, sizeof path, "%s.%s", prefix, name);
		if (!k)
			return unknown_key(ctx, s, path, keys, nkeys);
		if (k->kind == KIND_GROUP && config_setting_is_group(s)) {
			rc = load_group(ctx, s, path, k->sub, k->nsub, base);
			if (rc < 0)
				return rc;
			continue;
		}
		rc = read_value(ctx, s, path, k, &val);
		if (rc < 0)
			return rc;
		rc = store_value(ctx, s, path, k, &val, base);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Checks that need the whole pool: alignment (load_list: unique names). */
static int check_pool(struct ctx *ctx, struct config *cfg, size_t i,
		      const config_setting_t *group)
{
	const struct config_pool *p = &cfg->pools[i];
	const config_setting_t *s;
	char path[CONFIG_PATH_MAX_LEN], a[48], b[48];

	if (p->alignment > p->size) {
		s = config_setting_get_member(group, "alignment");
		snprintf(path, sizeof path, "pools[%zu].alignment", i);
		return fail(ctx, s ? s : group, path, "%s is larger than the pool size %s",
			    config_size_text(p->alignment, a, sizeof a),
			    config_size_text(p->size, b, sizeof b));
	}
	return 0;
}

_Static_assert(offsetof(struct config_pool, name) == 0, "unique_name() reads it there");
_Static_assert(offsetof(struct config_tenant, name) == 0, "unique_name() reads it there");

/* Elements of a list (name[i], i < n, each size bytes from base) whose
 * struct starts with its name: name[n]'s must be none of theirs. */
static int unique_name(struct ctx *ctx, const config_setting_t *group, const char *name,
		       const void *base, size_t size, size_t n)
{
	const char *mine = (const char *)base + n * size;
	const config_setting_t *s = config_setting_get_member(group, "name");
	char path[CONFIG_PATH_MAX_LEN];

	for (size_t j = 0; j < n; j++) {
		if (strcmp((const char *)base + j * size, mine))
			continue;
		snprintf(path, sizeof path, "%s[%zu].name", name, n);
		return fail(ctx, s ? s : group, path, "\"%s\" is already the name of %s[%zu]%s",
			    mine, name, j, s ? "" : " (give each a name)");
	}
	return 0;
}

/*
 * The groups of a list section (pools, tenants), name[i] each: its keys
 * into base + i * size, defaults first, then a name of its own and
 * check(ctx, cfg, i, group); at most max of them.  0 with their number in *count,
 * or a negative errno.
 */
static int load_list(struct ctx *ctx, const struct section *sec, const config_setting_t *list,
		     struct config *cfg, const char *name, int max, void *base, size_t size,
		     int (*check)(struct ctx *ctx, struct config *cfg, size_t i,
				  const config_setting_t *group),
		     size_t *count)
{
	int n = config_setting_length(list);
	char prefix[CONFIG_PATH_MAX_LEN];
	int rc;

	for (int i = 0; i < n; i++) {
		const config_setting_t *group = config_setting_get_elem(list, (unsigned)i);
		void *elem;

		snprintf(prefix, sizeof prefix, "%s[%d]", name, i);
		if (i >= max)
			return fail(ctx, group, prefix, "too many %s (at most %d)", name, max);
		elem = (char *)base + (size_t)i * size;
		apply_defaults(sec->keys, sec->nkeys, elem);
		rc = load_group(ctx, group, prefix, sec->keys, sec->nkeys, elem);
		if (rc < 0)
			return rc;
		rc = unique_name(ctx, group, name, base, size, (size_t)i);
		if (rc == 0)
			rc = check(ctx, cfg, (size_t)i, group);
		if (rc < 0)
			return rc;
	}
	*count = (size_t)n;
	return 0;
}

static int load_pools(struct ctx *ctx, const struct section *sec, const config_setting_t *list,
		      struct config *cfg)
{
	if (!config_setting_is_list(list))
		return fail(ctx, list, "pools", "expected a list ( { name = ...; size = ...; }, "
			    "... ), got %s", type_name(config_setting_type(list)));
	if (config_setting_length(list) == 0)
		return fail(ctx, list, "pools", "the list is empty; at least one pool is needed");
	return load_list(ctx, sec, list, cfg, "pools", CONFIG_MAX_POOLS, cfg->pools,
			 sizeof cfg->pools[0], check_pool, &cfg->npools);
}

/* ---- tenants ---------------------------------------------------------------- */

/*
 * The secret (common/secret.c): the file's bytes with one trailing newline
 * stripped.  A file others may read is refused rather than used: its secret
 * is no longer one.
 */
static int read_secret(struct ctx *ctx, const config_setting_t *s, const char *path,
		       struct config_tenant *t)
{
	struct secret sec;
	char why[2 * sizeof t->secret_file + 128];
	int rc = 0;

	if (secret_read(t->secret_file, SECRET_PRIVATE, CONFIG_SECRET_MIN, &sec, why,
			sizeof why) < 0)
		rc = fail(ctx, s, path, "%s", why);
	else {
		memcpy(t->secret, sec.bytes, sec.len);
		t->secret_len = sec.len;
	}
	secret_wipe(&sec);
	return rc;
}

/* What needs the whole tenant: required keys, then the secret itself
 * (load_list: unique names). */
static int check_tenant(struct ctx *ctx, struct config *cfg, size_t i,
			const config_setting_t *group)
{
	struct config_tenant *t = &cfg->tenants[i];
	const config_setting_t *s;
	char path[CONFIG_PATH_MAX_LEN];

	snprintf(path, sizeof path, "tenants[%zu]", i);
	if (!t->name[0])
		return fail(ctx, group, path, "no name (every tenant needs name and secret_file)");
	if (!t->secret_file[0])
		return fail(ctx, group, path, "tenant \"%s\" has no secret_file", t->name);
	s = config_setting_get_member(group, "secret_file");
	snprintf(path, sizeof path, "tenants[%zu].secret_file", i);
	return read_secret(ctx, s ? s : group, path, t);
}

static int load_tenants(struct ctx *ctx, const struct section *sec, const config_setting_t *list,
			struct config *cfg)
{
	if (!config_setting_is_list(list))
		return fail(ctx, list, "tenants", "expected a list ( { name = ...; secret_file = "
			    "...; }, ... ), got %s", type_name(config_setting_type(list)));
	return load_list(ctx, sec, list, cfg, "tenants", CONFIG_MAX_TENANTS, cfg->tenants,
			 sizeof cfg->tenants[0], check_tenant, &cfg->ntenants);
}

/* ---- cluster ---------------------------------------------------------------- */

/* "0.0.0.0:7470", "[::]:7470": a listener address no other machine can use. */
static bool wildcard_host(const char *hostport)
{
	return !strncmp(hostport, "0.0.0.0:", 8) || !strncmp(hostport, "[::]:", 5);
}

/* cluster.etcd_ca, etcd_cert, etcd_key as the etcd client takes them. */
void config_etcd_tls(const struct config *cfg, struct etcd_tls *tls)
{
	memset(tls, 0, sizeof *tls);
	_Static_assert(sizeof tls->ca == sizeof cfg->cluster_etcd_ca, "same paths");
	memcpy(tls->ca, cfg->cluster_etcd_ca, sizeof tls->ca);
	memcpy(tls->cert, cfg->cluster_etcd_cert, sizeof tls->cert);
	memcpy(tls->key, cfg->cluster_etcd_key, sizeof tls->key);
}

/* A TLS file of the cluster group (key "etcd_ca"...): it opens now, as
 * rmemd (and the user running rmemd -t) will open it. */
static int check_tls_file(struct ctx *ctx, const config_setting_t *group, const char *prefix,
			  const char *key, const char *path)
{
	const config_setting_t *s = config_setting_get_member(group, key);
	char name[CONFIG_PATH_MAX_LEN];
	struct stat st;
	int fd;

	if (!path[0])
		return 0;
	snprintf(name, sizeof name, "%s.%s", prefix, key);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(ctx, s, name, "cannot open \"%s\": %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(ctx, s, name, "\"%s\" is not a file", path);
	}
	close(fd);
	return 0;
}

/* etcd over TLS: the rules of etcd_tls_check, said at the key they are
 * about, then each file. */
static int check_etcd_tls(struct ctx *ctx, const config_setting_t *group,
			  const struct config *cfg)
{
	struct etcd_endpoints e;
	struct etcd_tls tls;
	char why[256];
	const char *key = cfg->cluster_etcd_ca[0] ? "etcd_ca" :
			  cfg->cluster_etcd_cert[0] ? "etcd_cert" : "etcd_key";
	int rc;

	config_etcd_tls(cfg, &tls);
	if (!etcd_tls_any(&tls))
		return 0;
	if (!cfg->cluster_etcd[0])
		return fail(ctx, config_setting_get_member(group, key), "cluster", "cluster.%s is "
			    "set but cluster.etcd is not", key);
	if (!tls.cert[0] != !tls.key[0]) {
		key = tls.cert[0] ? "etcd_cert" : "etcd_key";
		return fail(ctx, config_setting_get_member(group, key), "cluster", "cluster.%s "
			    "is set without cluster.%s (a client certificate needs its key)", key,
			    tls.cert[0] ? "etcd_key" : "etcd_cert");
	}
	if (etcd_endpoints_parse(cfg->cluster_etcd, &e, why, sizeof why) < 0 ||
	    etcd_tls_check(&e, &tls, why, sizeof why) < 0)
		return fail(ctx, config_setting_get_member(group, "etcd"), "cluster.etcd", "%s",
			    why);
	rc = check_tls_file(ctx, group, "cluster", "etcd_ca", tls.ca);
	if (rc == 0)
		rc = check_tls_file(ctx, group, "cluster", "etcd_cert", tls.cert);
	return rc < 0 ? rc : check_tls_file(ctx, group, "cluster", "etcd_key", tls.key);
}

/* ---- listen.tls --------------------------------------------------------------- */

void config_listen_tls(const struct config *cfg, struct tls_config *tls)
{
	memset(tls, 0, sizeof *tls);
	tls->server = true;
	tls->cert = cfg->listen_tls_cert;
	tls->key = cfg->listen_tls_key;
	tls->ca = cfg->listen_tls_ca;
	tls->require_peer_cert = cfg->listen_tls_require_cert;
	tls->ktls = cfg->listen_tls_ktls;
}

/*
 * TLS on listen.tcp: a certificate with its key, a CA when client
 * certificates are required, and files OpenSSL takes, all tried now (the
 * context made and dropped), so that rmemd -t says what rmemd would.
 */
static int check_listen_tls(struct ctx *ctx, const config_setting_t *root,
			    const struct config *cfg)
{
	const config_setting_t *listen = config_setting_get_member(root, "listen");
	const config_setting_t *g = listen ? config_setting_get_member(listen, "tls") : NULL;
	const char *key = cfg->listen_tls_cert[0] ? "key" : "cert";
	struct tls_config tc;
	struct tls_ctx *tctx;
	char why[512];
	int rc;

	if (!g || (!cfg->listen_tls_cert[0] && !cfg->listen_tls_key[0] &&
		   !cfg->listen_tls_ca[0] && !cfg->listen_tls_require_cert &&
		   !cfg->listen_tls_cert_tenants))
		return 0;
	if (!cfg->listen_tls_cert[0] || !cfg->listen_tls_key[0])
		return fail(ctx, g, "listen.tls", "listen.tls.%s is missing (TLS needs a "
			    "certificate and its key)", key);
	if (cfg->listen_tls_require_cert && !cfg->listen_tls_ca[0])
		return fail(ctx, config_setting_get_member(g, "require_client_cert"),
			    "listen.tls.require_client_cert", "needs listen.tls.ca, the CA that "
			    "clients' certificates verify against");
	if (cfg->listen_tls_cert_tenants && !cfg->listen_tls_ca[0])
		return fail(ctx, config_setting_get_member(g, "cert_tenants"),
			    "listen.tls.cert_tenants", "needs listen.tls.ca, the CA that "
			    "vouches for the certificates' names");
	if (!cfg->listen_tcp[0])
		return fail(ctx, g, "listen.tls", "listen.tcp is off: TLS has nothing to serve");
	/* The port would be TLS only, and etcd:// clients (the repair agent
	 * among them) dial servers in clear text: a broken cluster, unless
	 * said here. */
	if (cfg->cluster_etcd[0])
		return fail(ctx, g, "listen.tls", "cluster.etcd is set: cluster clients (etcd://) "
			    "reach their servers over plain TCP only so far");
	rc = check_tls_file(ctx, g, "listen.tls", "cert", cfg->listen_tls_cert);
	if (rc == 0)
		rc = check_tls_file(ctx, g, "listen.tls", "key", cfg->listen_tls_key);
	if (rc == 0)
		rc = check_tls_file(ctx, g, "listen.tls", "ca", cfg->listen_tls_ca);
	if (rc < 0)
		return rc;
	config_listen_tls(cfg, &tc);
	rc = tls_ctx_new(&tc, &tctx, why, sizeof why);
	tls_ctx_free(tctx);
	return rc < 0 ? fail(ctx, g, "listen.tls", "%s", why) : 0;
}

/* What the other servers and the clients are told must be an address they
 * can reach: cluster.advertise, or listen.tcp when that names one. */
static int check_cluster(struct ctx *ctx, const config_setting_t *root, const struct config *cfg)
{
	const config_setting_t *group = config_setting_get_member(root, "cluster");
	int rc;

	if (!group)
		return 0;
	rc = check_etcd_tls(ctx, group, cfg);
	if (rc < 0 || !cfg->cluster_etcd[0] || cfg->cluster_advertise[0])
		return rc;
	if (!cfg->listen_tcp[0])
		return fail(ctx, group, "cluster", "listen.tcp is off: set cluster.advertise "
			    "to the HOST:PORT clients reach this server at");
	if (wildcard_host(cfg->listen_tcp))
		return fail(ctx, group, "cluster", "listen.tcp \"%s\" is a wildcard address: set "
			    "cluster.advertise to the HOST:PORT clients reach this server at",
			    cfg->listen_tcp);
	return 0;
}

/* ---- limits.state_slots ------------------------------------------------------------ */

/*
 * Every session past HELLO holds a slot, and limits.max_clients of them plus
 * the admin sessions' are set aside for sessions; what is left is shared
 * among the tenants and the anonymous clients (tenant.c): each share must
 * hold a few records, or a tenant could never allocate at all.
 */
static int check_slots(struct ctx *ctx, const config_setting_t *root, const struct config *cfg)
{
	const config_setting_t *limits = config_setting_get_member(root, "limits");
	const config_setting_t *s = limits ? config_setting_get_member(limits, "state_slots") : NULL;
	uint64_t need = (uint64_t)CONFIG_FIXED_SLOTS + cfg->max_clients + CONFIG_ADMIN_SESSIONS +
			(uint64_t)CONFIG_SHARE_MIN * (cfg->ntenants + 1);

	if (cfg->state_slots >= need)
		return 0;
	return fail(ctx, s ? s : limits, "limits.state_slots", "%u slots are too few: %llu "
		    "needed for limits.max_clients (%u) + %u admin sessions + %u fixed + %u "
		    "records for each of %zu tenant(s) and the anonymous clients",
		    cfg->state_slots, (unsigned long long)need, cfg->max_clients,
		    CONFIG_ADMIN_SESSIONS, CONFIG_FIXED_SLOTS, CONFIG_SHARE_MIN, cfg->ntenants);
}

/* ---- tcp ------------------------------------------------------------------------ */

/* The first line of a /proc/sys file into buf ("" when unreadable). */
static void read_sysctl(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	buf[0] = 0;
	if (f && fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = 0;
	if (f)
		fclose(f);
}

/* tcp.congestion must be one this kernel lets rmemd set: tried now on a
 * throwaway socket, so that rmemd -t says so instead of every connection. */
static int check_tcp(struct ctx *ctx, const config_setting_t *root, const struct config *cfg)
{
	const config_setting_t *group = config_setting_get_member(root, "tcp");
	const config_setting_t *s = group ? config_setting_get_member(group, "congestion") : NULL;
	const char *name = cfg->tcp_congestion;
	char list[256];
	int rc;

	if (!name[0])
		return 0;
	rc = tcp_cc_probe(name);
	if (rc == -ENOENT || rc == -EINVAL) {
		read_sysctl("/proc/sys/net/ipv4/tcp_available_congestion_control", list,
			    sizeof list);
		return fail(ctx, s, "tcp.congestion", "\"%s\" is not a congestion control this "
			    "kernel has (net.ipv4.tcp_available_congestion_control: %s; others may "
			    "need their module: modprobe tcp_%s)", name, list[0] ? list : "?", name);
	}
	if (rc == -EPERM) {
		read_sysctl("/proc/sys/net/ipv4/tcp_allowed_congestion_control", list,
			    sizeof list);
		return fail(ctx, s, "tcp.congestion", "\"%s\" is not in "
			    "net.ipv4.tcp_allowed_congestion_control (%s) and rmemd lacks "
			    "CAP_NET_ADMIN", name, list[0] ? list : "?");
	}
	if (rc < 0)
		return fail(ctx, s, "tcp.congestion", "\"%s\": %s", name, strerror(-rc));
	return 0;
}

static int load_root(struct ctx *ctx, const config_setting_t *root, struct config *cfg)
{
	char known[80] = "";
	size_t used = 0;
	int rc;

	for (size_t j = 0; j < config_nsections; j++)
		used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
					 j ? ", " : "", config_sections[j].name);
	for (int i = 0; i < config_setting_length(root); i++) {
		const config_setting_t *s = config_setting_get_elem(root, (unsigned)i);
		const char *name = config_setting_name(s);
		const struct section *sec = NULL;

		for (size_t j = 0; j < config_nsections; j++)
			if (!strcmp(config_sections[j].name, name))
				sec = &config_sections[j];
		if (!sec)
			return fail(ctx, s, name, "unknown key (known here: %s)", known);
		if (sec->is_pool_list)
			rc = load_pools(ctx, sec, s, cfg);
		else if (sec->is_tenant_list)
			rc = load_tenants(ctx, sec, s, cfg);
		else
			rc = load_group(ctx, s, name, sec->keys, sec->nkeys, cfg);
		if (rc < 0)
			return rc;
	}
	rc = check_cluster(ctx, root, cfg);
	if (rc == 0)
		rc = check_listen_tls(ctx, root, cfg);
	if (rc == 0)
		rc = check_slots(ctx, root, cfg);
	return rc < 0 ? rc : check_tcp(ctx, root, cfg);
}

/* ---- libconfig 1.5 integer truncation ---------------------------------------- */

/* config_num.c finds the literal; here it is tied to its key and reported. */

/* The setting (in file, at line) that holds a scalar, as a key path. */
static bool path_at(const config_setting_t *s, const char *file, int line, char *path,
		    size_t len)
{
	size_t used = strlen(path);

	if (!config_setting_is_aggregate(s))
		return config_setting_source_file(s) &&
		       !strcmp(config_setting_source_file(s), file) &&
		       (int)config_setting_source_line(s) == line;
	for (int i = 0; i < config_setting_length(s); i++) {
		const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		const char *name = config_setting_name(e);

		if (name)
			snprintf(path + used, len - used, "%s%s", used ? "." : "", name);
		else
			snprintf(path + used, len - used, "[%d]", i);
		if (path_at(e, file, line, path, len))
			return true;
		path[used] = '\0';
	}
	return false;
}

static int check_truncated_ints(struct ctx *ctx, const config_t *lc)
{
	int rc = 0;

	for (unsigned i = 0; i < lc->num_filenames && !rc; i++) {
		const char *name = lc->filenames[i];
		char path[CONFIG_PATH_MAX_LEN] = "";
		const char *literal = NULL;
		int literal_len = 0, line;
		char *text = config_num_read_text(name);

		if (!text)
			continue;
		line = config_num_find_truncated(text, &literal, &literal_len);
		if (line) {
			if (literal_len > 40)
				literal_len = 40;
			path_at(config_root_setting(lc), name, line, path, sizeof path);
			rc = fail_at(ctx, name, line, path[0] ? path : NULL,
				     "%.*s does not fit in a 32-bit integer and libconfig would "
				     "truncate it; write %.*sL, or a size string such as \"4G\"",
				     literal_len, literal, literal_len, literal);
		}
		free(text);
	}
	return rc;
}

/* ---- entry points ---------------------------------------------------------- */

void config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof *cfg);
	for (size_t i = 0; i < config_nsections; i++) {
		if (config_sections[i].is_tenant_list)
			continue; /* no tenants unless the file names some */
		if (config_sections[i].is_pool_list)
			apply_defaults(config_sections[i].keys, config_sections[i].nkeys, &cfg->pools[0]);
		else
			apply_defaults(config_sections[i].keys, config_sections[i].nkeys, cfg);
	}
	cfg->npools = 1;
}

/* Opening first tells "missing" (ENOENT) from "unreadable" from "bad content",
 * which libconfig folds into one "file I/O error". */
static int check_readable(struct ctx *ctx, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0) {
		rc = -errno;
		fail_at(ctx, path, 0, NULL, "cannot open: %s", strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		fail_at(ctx, path, 0, NULL, "cannot stat: %s", strerror(errno));
	} else if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		fail_at(ctx, path, 0, NULL, "is a directory");
	}
	close(fd);
	return rc;
}

/*
 * No include_dir: libconfig 1.5 would prefix it to absolute @include paths
 * too, so an @include path is used as written (absolute, or relative to the
 * working directory), and every file name in a message is one that opens.
 */
int config_load(struct config *cfg, const char *path, char *err, size_t errlen)
{
	struct ctx ctx = { path, err, errlen };
	struct config tmp;
	config_t lc;
	int rc;

	if (err && errlen)
		err[0] = '\0';
	rc = check_readable(&ctx, path);
	if (rc < 0)
		return rc;
	config_init(&lc);
	if (!config_read_file(&lc, path)) {
		const char *efile = config_error_file(&lc) ? config_error_file(&lc) : path;

		rc = config_error_type(&lc) == CONFIG_ERR_FILE_IO ? -EIO : -EINVAL;
		fail_at(&ctx, efile, config_error_line(&lc), NULL, "%s",
			config_error_text(&lc) ? config_error_text(&lc) : "cannot read");
		goto out;
	}
	rc = check_truncated_ints(&ctx, &lc);
	if (rc < 0)
		goto out;
	config_defaults(&tmp);
	rc = load_root(&ctx, config_root_setting(&lc), &tmp);
	if (rc < 0)
		goto out;
	*cfg = tmp;
out:
	explicit_bzero(&tmp, sizeof tmp); /* the secrets */
	config_destroy(&lc);
	return rc;
}
