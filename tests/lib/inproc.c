/*
 * inproc.c - see inproc.h.  The one in-process server set-up of the unit
 * tests and the fuzzers.
 */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "config.h"
#include "inproc.h"
#include "log.h"
#include "names.h"
#include "pool.h"
#include "region.h"
#include "server.h"
#include "session.h"
#include "slots.h"
#include "tenant.h"

void inproc_opts_init(struct inproc_opts *o, const char *pool_name, uint64_t pool_size)
{
	memset(o, 0, sizeof *o);
	o->pool_name = pool_name;
	o->pool_size = pool_size;
	o->open_pool = true;
	o->log_level = LOG_ERR;
}

static void add_tenant(struct config *cfg, const struct inproc_opts *o)
{
	struct config_tenant *t = &cfg->tenants[0];

	snprintf(t->name, sizeof t->name, "%s", o->tenant);
	if (o->tenant_secret) {
		snprintf(t->secret_file, sizeof t->secret_file, "/nonexistent/%s.key", o->tenant);
		t->secret_len = strlen(o->tenant_secret);
		if (t->secret_len > sizeof t->secret)
			t->secret_len = sizeof t->secret;
		memcpy(t->secret, o->tenant_secret, t->secret_len);
	}
	t->quota = o->tenant_quota;
	t->max_regions = o->tenant_max_regions;
	cfg->ntenants = 1;
}

struct server *inproc_new(const struct inproc_opts *o, char *err, size_t errlen)
{
	struct server *srv = calloc(1, sizeof *srv);
	struct config_pool *pc;

	if (!srv) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	log_set_level(o->log_level);
	config_defaults(&srv->cfg);
	/* No listener: nothing of the test's reaches a socket by name. */
	srv->cfg.listen_tcp[0] = srv->cfg.listen_rdma[0] = srv->cfg.listen_admin[0] = '\0';
	srv->cfg.npools = 1;
	pc = &srv->cfg.pools[0];
	snprintf(pc->name, sizeof pc->name, "%s", o->pool_name);
	pc->size = o->pool_size;
	pc->hugepages = CONFIG_HUGEPAGES_OFF;
	pc->alignment = 64;
	if (o->tenant)
		add_tenant(&srv->cfg, o);
	if (tenant_init(srv) < 0) {
		snprintf(err, errlen, "tenant_init failed");
		goto fail;
	}
	srv->base = event_base_new();
	if (!srv->base) {
		snprintf(err, errlen, "event_base_new failed");
		goto fail;
	}
	if (o->open_pool) {
		if (pool_open(&srv->pools[0], pc, 0, NULL, NULL, err, errlen) < 0)
			goto fail;
		srv->npools = 1;
	}
	srv->regions = region_table_new();
	srv->names = names_new();
	if (!srv->regions || !srv->names || session_quarantine_init(srv) < 0) {
		snprintf(err, errlen, "region table, names or quarantine: out of memory");
		goto fail;
	}
	return srv;
fail:
	inproc_free(srv);
	return NULL;
}

void inproc_free(struct server *srv)
{
	if (!srv)
		return;
	if (srv->base)
		session_quarantine_flush(srv);
	names_free(srv->names);
	region_table_free(srv->regions);
	for (uint32_t i = 0; i < srv->npools; i++)
		pool_close(&srv->pools[i]);
	slots_free(srv->slots);
	if (srv->base)
		event_base_free(srv->base);
	free(srv);
}
