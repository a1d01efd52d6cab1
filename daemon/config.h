/*
 * config.h - rmemd's configuration: libconfig file -> one typed struct.
 *
 * Every key has a type, bounds and a default in one table (config_keys.c);
 * unknown keys are errors; every error names file:line.  The file is optional
 * only in the sense that a missing default path (/etc/rmemd/rmemd.conf) means
 * "all defaults"; a path given with -c must exist.  The struct itself is in
 * config_types.h.
 */
#ifndef RMEMD_CONFIG_H
#define RMEMD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "config_types.h"

/* Fills *cfg with the embedded defaults. */
void config_defaults(struct config *cfg);

/*
 * Loads path over the defaults.  On error returns a negative errno and writes
 * a one-line message "FILE:LINE: what" (or "FILE: what") into err.
 * -ENOENT when the file does not exist (the caller decides whether that is
 * fine), -EINVAL for any content error.
 */
int config_load(struct config *cfg, const char *path, char *err, size_t errlen);

/* Parses "4096", "64K", "256M", "4G", "1T" (binary units, optional "B"/"iB"
 * suffix as in "64KiB").  Returns 0 or -EINVAL (syntax) / -ERANGE (overflow). */
int config_parse_size(const char *s, uint64_t *out);

/* cluster.etcd_ca, etcd_cert and etcd_key as the etcd client takes them
 * (common/etcd_endpoints.h). */
struct etcd_tls;
void config_etcd_tls(const struct config *cfg, struct etcd_tls *tls);

/* listen.tls as common/tls.h takes it (its strings point into cfg). */
struct tls_config;
void config_listen_tls(const struct config *cfg, struct tls_config *tls);

/* Writes the effective configuration as "key = value" lines through the
 * callback, so main can log it at start. */
void config_dump(const struct config *cfg, void (*line)(void *arg, const char *text), void *arg);

#endif /* RMEMD_CONFIG_H */
