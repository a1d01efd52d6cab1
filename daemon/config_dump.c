/*
 * config_dump.c - the effective configuration as "section.key = value"
 * lines, for the log at start and for rmemd -t (config.h).  Secrets never
 * appear; their files do.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_keys.h"

static void dump_keys(const struct key_desc *keys, size_t nkeys, const char *prefix,
		      const void *base, void (*line)(void *arg, const char *text), void *arg)
{
	for (size_t i = 0; i < nkeys; i++) {
		const struct key_desc *k = &keys[i];
		const char *field = (const char *)base + k->offset;
		char text[CONFIG_ETCD_MAX + 96], value[CONFIG_ETCD_MAX + 8];
		uint64_t v64;
		uint32_t v32;
		int v;

		if (k->kind == KIND_GROUP) {
			if (!field[0]) /* off: nothing of it to show */
				continue;
			snprintf(text, sizeof text, "%s.%s", prefix, k->name);
			dump_keys(k->sub, k->nsub, text, base, line, arg);
			continue;
		}
		switch (k->kind) {
		case KIND_U32:
			memcpy(&v32, field, sizeof v32);
			snprintf(value, sizeof value, "%u", v32);
			break;
		case KIND_SIZE:
			memcpy(&v64, field, sizeof v64);
			config_size_text(v64, value, sizeof value);
			break;
		case KIND_ENUM:
			memcpy(&v, field, sizeof v);
			snprintf(value, sizeof value, "?%d", v);
			for (const struct enum_word *w = k->words; w->word; w++)
				if (w->value == v)
					snprintf(value, sizeof value, "%s", w->word);
			break;
		default:
			snprintf(value, sizeof value, "%.*s", (int)k->size, field);
			if (!value[0])
				snprintf(value, sizeof value, "\"\"");
			break;
		}
		snprintf(text, sizeof text, "%s.%s = %s", prefix, k->name, value);
		line(arg, text);
	}
}

void config_dump(const struct config *cfg, void (*line)(void *arg, const char *text), void *arg)
{
	char prefix[CONFIG_PATH_MAX_LEN];

	for (size_t i = 0; i < config_nsections; i++) {
		const struct section *sec = &config_sections[i];

		if (sec->is_tenant_list) {
			/* The secrets never go to the log; their files do. */
			for (size_t t = 0; t < cfg->ntenants && t < CONFIG_MAX_TENANTS; t++) {
				snprintf(prefix, sizeof prefix, "%s[%zu]", sec->name, t);
				dump_keys(sec->keys, sec->nkeys, prefix, &cfg->tenants[t], line,
					  arg);
			}
			continue;
		}
		/* Without etcd there is no cluster, and nothing of it to show. */
		if (!strcmp(sec->name, "cluster") && !cfg->cluster_etcd[0])
			continue;
		/* Nor a tcp group while it only keeps the system's choices. */
		if (!strcmp(sec->name, "tcp") && !cfg->tcp_congestion[0])
			continue;
		if (!sec->is_pool_list) {
			dump_keys(sec->keys, sec->nkeys, sec->name, cfg, line, arg);
			continue;
		}
		for (size_t p = 0; p < cfg->npools && p < CONFIG_MAX_POOLS; p++) {
			snprintf(prefix, sizeof prefix, "%s[%zu]", sec->name, p);
			dump_keys(sec->keys, sec->nkeys, prefix, &cfg->pools[p], line, arg);
		}
	}
}
