/*
 * config_keys.h - the table of rmemd.conf's keys (config_keys.c), shared by
 * the parser (config.c) and the dump of the effective config (config_dump.c).
 *
 * Every key is one row: name, kind, where it is stored, bounds and its
 * default written as it would be in the file.
 */
#ifndef RMEMD_CONFIG_KEYS_H
#define RMEMD_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest key path we build, e.g. "pools[15].hugepages". */
#define CONFIG_PATH_MAX_LEN 64

enum key_kind {
	KIND_U32,       /* integer only */
	KIND_SIZE,      /* integer or size string; uint64_t */
	KIND_ENUM,      /* one word of key->words; stored as int */
	KIND_HOSTPORT,  /* "HOST:PORT", "[V6]:PORT" or "" */
	KIND_PATH,      /* absolute path or "" */
	KIND_NAME,      /* 1..CONFIG_NAME_MAX-1 of [A-Za-z0-9_.-] */
	KIND_FILE,      /* absolute path of a file */
	KIND_ETCD,      /* "" or etcd endpoints "http://HOST:PORT,..." (etcd_endpoints.h) */
	KIND_GROUP,     /* a group { } of its own keys, key->sub (listen.tls); its
			   offset names the string that turns it on (the dump
			   leaves it out while that is "") */
};

#define KEY_POW2       0x1  /* value must be a power of two */
#define KEY_BOOL_ONOFF 0x2  /* true/false are accepted as "on"/"off" */
#define KEY_EMPTY_OK   0x4  /* KIND_NAME, KIND_FILE: "" is allowed too */

struct enum_word {
	const char *word;
	int value;
};

struct key_desc {
	const char *name;
	enum key_kind kind;
	size_t offset;                  /* in struct config or struct config_pool */
	size_t size;                    /* of the field */
	uint64_t min, max;              /* KIND_U32, KIND_SIZE */
	unsigned flags;
	const struct enum_word *words;  /* KIND_ENUM, ends with a NULL word */
	const char *def;                /* default, as written in the file */
	const struct key_desc *sub;     /* KIND_GROUP: its keys, offsets in the same struct */
	size_t nsub;
};

struct section {
	const char *name;
	const struct key_desc *keys;
	size_t nkeys;
	bool is_pool_list;              /* a list of groups, keys in struct config_pool */
	bool is_tenant_list;            /* a list of groups, keys in struct config_tenant */
};

extern const struct section config_sections[];
extern const size_t config_nsections;

/* "1073741824 (1G)": the exact bytes, and the largest unit that divides
 * them, into buf.  Returns buf. */
const char *config_size_text(uint64_t v, char *buf, size_t len);

#endif /* RMEMD_CONFIG_KEYS_H */
