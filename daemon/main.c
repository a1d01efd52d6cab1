/*
 * main.c - rmemd's lifecycle, in order: config, memlock check, pools, region
 * table, quarantine, RDMA, listeners, READY; then the loop; then the same in
 * reverse.  main.c also answers the NIC module's events (nic.h): it is the
 * one module above both the NIC and the sessions and connections, so the NIC
 * never calls up.
 */
#include <errno.h>
#include <event2/event.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "member.h"
#include "repair_agent.h"
#include "conn.h"
#include "lease.h"
#include "listen.h"
#include "log.h"
#include "metrics.h"
#include "names.h"
#include "persist.h"
#include "pool.h"
#include "nic.h"
#include "region.h"
#include "server.h"
#include "session.h"

#ifndef RMEM_VERSION_STRING
#define RMEM_VERSION_STRING "unknown"
#endif

struct options {
	const char *config_path;
	bool config_given;
	bool test_only;
	bool discard_state;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: rmemd [-c FILE] [-t] [--discard-state] [--version] [-h]\n"
		"Serves pinned memory regions to remote clients (see rmemd(8)).\n\n"
		"  -c, --config FILE  configuration file (default %s;\n"
		"                     when that is missing, embedded defaults are used)\n"
		"  -t, --test         check the configuration and exit\n"
		"      --discard-state  drop what systemd's fd store keeps (every region of\n"
		"                     the last rmemd) and start fresh; without it a state\n"
		"                     that cannot be restored is kept and nothing served\n"
		"  -V, --version      print the version and exit\n"
		"  -h, --help         print this help and exit\n",
		CONFIG_DEFAULT_PATH);
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "test", no_argument, NULL, 't' },
		{ "discard-state", no_argument, NULL, 'D' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	o->config_path = CONFIG_DEFAULT_PATH;
	while ((ch = getopt_long(argc, argv, "c:tVh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->config_path = optarg;
			o->config_given = true;
			break;
		case 't':
			o->test_only = true;
			break;
		case 'D':
			o->discard_state = true;
			break;
		case 'V':
			printf("rmemd %s (protocol %d)\n", RMEM_VERSION_STRING, PROTO_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rmemd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	return -1;
}

static int load_config(const struct options *o, struct config *cfg)
{
	char err[512];
	int rc;

	config_defaults(cfg);
	rc = config_load(cfg, o->config_path, err, sizeof err);
	if (rc == -ENOENT && !o->config_given) {
		log_notice("%s not found; using the embedded defaults", o->config_path);
		return 0;
	}
	if (rc < 0) {
		/* config errors go to stderr as they are: "FILE:LINE: what" */
		fprintf(stderr, "%s\n", err);
		return rc;
	}
	return 0;
}

static void log_config_line(void *arg, const char *text)
{
	(void)arg;
	log_info("config: %s", text);
}

static void pin_progress(void *arg, const struct pool *p, uint64_t done, uint64_t total)
{
	const struct server *srv = arg;

	sd_notifyf(0, "STATUS=pinning pool %s %u/%u (%" PRIu64 "%%)", p->name, p->index + 1,
		   (unsigned)srv->cfg.npools, total ? done * 100 / total : 100);
}

static int open_pools(struct server *srv)
{
	char err[512];
	int rc;

	rc = pool_check_memlock(&srv->cfg, err, sizeof err);
	if (rc < 0) {
		log_err("%s", err);
		return rc;
	}
	for (uint32_t i = 0; i < srv->cfg.npools; i++) {
		const struct config_pool *pc = &srv->cfg.pools[i];

		rc = pool_open(&srv->pools[i], pc, i, pin_progress, srv, err, sizeof err);
		if (rc < 0) {
			log_err("%s", err);
			return rc;
		}
		srv->npools = i + 1;
		log_info("pool %s: %" PRIu64 " bytes pinned at %p, %u-byte pages%s, alignment %" PRIu64,
			 pc->name, srv->pools[i].size, (void *)srv->pools[i].base,
			 srv->pools[i].page_size, srv->pools[i].thp ? " (transparent 2 MiB)" : "",
			 pc->alignment);
	}
	return 0;
}

/* Says once when a pool of 4 KiB pages gets no transparent hugepages: its
 * restarts then cost in proportion to its size (pool.c, finish_open). */
static void note_small_pages(const struct server *srv)
{
	char policy[32];

	for (uint32_t i = 0; i < srv->npools; i++) {
		const struct pool *p = &srv->pools[i];

		if (p->page_size >= (2u << 20) || p->thp)
			continue;
		pool_thp_policy(policy, sizeof policy);
		log_notice("pool %s: 4 KiB pages, no transparent hugepages (shmem_enabled: %s): "
			   "a restart costs time in proportion to the pool; \"advise\" in "
			   "/sys/kernel/mm/transparent_hugepage/shmem_enabled makes it cost what "
			   "clients hold (rmemd(8), RESTART)", p->name, policy[0] ? policy : "unknown");
		return;
	}
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct server *srv = arg;

	(void)what;
	log_notice("signal %d: stopping", (int)sig);
	sd_notify(0, "STOPPING=1");
	event_base_loopbreak(srv->base);
}

/* ---- what the NIC module asks of sessions and connections (nic.h) ---------- */

static struct session *nic_find(void *arg, uint64_t id, uint64_t token,
				struct nic_peer **current)
{
	struct session *s = session_find(arg, id);

	if (!s || !session_token_ok(s, token))
		return NULL;
	*current = s->nic;
	return s;
}

static const char *nic_describe(void *arg, const struct session *s)
{
	(void)arg;
	return s->peer;
}

static void nic_attached(void *arg, struct session *s, struct nic_peer *p)
{
	(void)arg;
	s->nic = p;
}

static void nic_end(void *arg, struct session *s, int status, const char *why)
{
	conn_end_session(arg, s, status, why);
}

/* Sessions end first (each stops its queue pair, then drops its keys); the
 * quarantine is emptied at once since no queue pair is left; then the
 * device lets go of the pools, which go last. */
static void server_close(struct server *srv)
{
	/* The fd store keeps the pools and their state for the next start;
	 * first, so that the cluster agent knows this is a restart. */
	persist_keep(srv);
	/* The cluster hears next that we go: on a stop the lease is revoked,
	 * so that no client places memory here while we close; on a restart
	 * it is kept for the next start (member.h).  The repair agent before
	 * it: it may be a client of this very server. */
	repair_agent_stop(srv);
	member_stop(srv);
	lease_fini(srv);
	conn_close_all(srv);
	if (srv->base)
		session_quarantine_flush(srv);
	nic_close(srv);
	metrics_close(srv);
	listeners_close(srv);
	/* Named regions still linked die with the pools (phase 1: they outlive
	 * sessions, not the daemon). */
	names_free(srv->names);
	region_table_free(srv->regions);
	persist_close(srv);
	for (uint32_t i = 0; i < srv->npools; i++)
		pool_close(&srv->pools[i]);
	if (srv->base)
		event_base_free(srv->base);
}

/* SIGTERM and SIGINT stop the loop (on_signal); the caller frees sigs. */
static int watch_signals(struct server *srv, struct event **sigs, const int *signos)
{
	for (int i = 0; i < 2; i++) {
		sigs[i] = evsignal_new(srv->base, signos[i], on_signal, srv);
		if (!sigs[i] || evsignal_add(sigs[i], NULL) < 0) {
			log_err("cannot watch signal %d", signos[i]);
			return -1;
		}
	}
	return 0;
}

/*
 * A kept state that cannot be restored (persist.c said why): rmemd stays
 * up and serves nothing, no listener, no cluster agent, until it is
 * stopped.  Exiting would be a failed unit, and systemd before 254 empties
 * the fd store of a failed unit (FileDescriptorStorePreserve= is newer):
 * the memory would go without anyone asking.  READY=1 is sent, for the
 * same reason: a start that never gets ready times out and fails the
 * unit; STATUS= (sent by persist.c) says what is wrong instead.  A SIGTERM
 * ends it with status 0 and the store untouched, so `systemctl restart`
 * after the config is fixed restores.
 */
static int refuse(struct server *srv, struct event **sigs, const int *signos)
{
	if (watch_signals(srv, sigs, signos) < 0)
		return -1;
	sd_notify(0, "READY=1");
	return event_base_dispatch(srv->base) < 0 ? -1 : 0;
}

static int serve(struct server *srv, bool discard)
{
	const struct nic_events nic_events = {
		.arg = srv, .find = nic_find, .describe = nic_describe,
		.attached = nic_attached, .end = nic_end,
	};
	struct event *sigs[2] = { NULL, NULL };
	const int signos[2] = { SIGTERM, SIGINT };
	char err[512];
	int rc = -1, nrc;

	srv->base = event_base_new();
	if (!srv->base) {
		log_err("event_base_new failed");
		goto out;
	}
	srv->regions = region_table_new();
	srv->names = names_new();
	if (!srv->regions || !srv->names) {
		log_err("out of memory");
		goto out;
	}
	/* Under systemd the pools and their state go into its fd store and
	 * come back from it after a restart (persist.c); elsewhere a start is
	 * fresh, as it always was. */
	if (!persist_possible()) {
		if (discard)
			log_notice("--discard-state: no fd store here (no NOTIFY_SOCKET): nothing to "
				   "discard");
		if (open_pools(srv) < 0)
			goto out;
	} else {
		int prc = persist_open(srv, pin_progress, open_pools, discard);

		if (prc == PERSIST_REFUSED) {
			rc = refuse(srv, sigs, signos);
			goto out;
		}
		if (prc < 0)
			goto out;
	}
	if (session_quarantine_init(srv) < 0 || lease_init(srv) < 0) {
		log_err("out of memory");
		goto out;
	}
	/* Not fatal for want of RDMA, unless rdma.required: without it rmemd
	 * serves TCP.  nic_open says why it failed. */
	/* Window keys register each pool whole here, before READY. */
	if (srv->cfg.listen_rdma[0])
		sd_notify(0, "STATUS=bringing up RDMA");
	nrc = nic_open(srv, &nic_events);
	if (nrc < 0) {
		if (nrc == -ENOMEM)
			log_err("out of memory");
		goto out;
	}
	if (listeners_open(srv, err, sizeof err) < 0) {
		log_err("%s", err);
		goto out;
	}
	/* A metrics address that cannot be had is as fatal as listen.tcp's:
	 * the operator asked for it, and would scrape nothing unawares. */
	if (metrics_open(srv, err, sizeof err) < 0) {
		log_err("%s", err);
		goto out;
	}
	if (watch_signals(srv, sigs, signos) < 0)
		goto out;
	/* After the listeners and the NIC: what it advertises is true now.
	 * etcd being out of reach is not an error: the agent keeps trying. */
	rc = member_start(srv);
	if (rc < 0) {
		log_err("cluster: cannot start the agent: %s", strerror(-rc));
		rc = -1;
		goto out;
	}
	rc = repair_agent_start(srv);
	if (rc < 0) {
		log_err("repair: cannot start the agent: %s", strerror(-rc));
		rc = -1;
		goto out;
	}
	note_small_pages(srv);
	log_notice("rmemd %s ready: %u pool(s); tcp %s; admin %s; metrics %s; rdma port %u, keys %s",
		   RMEM_VERSION_STRING, srv->npools,
		   srv->cfg.listen_tcp[0] ? srv->cfg.listen_tcp : "off",
		   srv->cfg.listen_admin[0] ? srv->cfg.listen_admin : "off",
		   srv->cfg.listen_metrics[0] ? srv->cfg.listen_metrics : "off",
		   srv->nic_port, nic_mode_name(srv->key_mode));
	/* Last before READY: the time restored sessions have to RESUME starts
	 * when they can reach us, not before the NIC and listeners are up. */
	if (persist_ready(srv) < 0) {
		rc = -1;
		goto out;
	}
	sd_notify(0, "READY=1\nSTATUS=serving");
	if (event_base_dispatch(srv->base) < 0)
		log_err("event loop failed");
	else
		rc = 0;
out:
	for (int i = 0; i < 2; i++)
		if (sigs[i])
			event_free(sigs[i]);
	server_close(srv);
	return rc;
}

int main(int argc, char **argv)
{
	struct options opts = { 0 };
	struct server *srv;
	int rc;

	rc = parse_args(argc, argv, &opts);
	if (rc >= 0)
		return rc;
	srv = calloc(1, sizeof *srv);
	if (!srv) {
		fprintf(stderr, "rmemd: out of memory\n");
		return 1;
	}
	if (load_config(&opts, &srv->cfg) < 0) {
		free(srv);
		return 1;
	}
	if (opts.test_only) {
		char why[512];

		/* rdma.required is a promise about this host: -t checks it. */
		if (nic_probe(&srv->cfg, why, sizeof why) < 0) {
			fprintf(stderr, "%s: %s\n", opts.config_path, why);
			free(srv);
			return 1;
		}
		printf("%s: configuration OK\n", opts.config_path);
		free(srv);
		return 0;
	}
	log_set_level((int)srv->cfg.log_level);
	config_dump(&srv->cfg, log_config_line, NULL);
	/* A client that vanishes mid-reply must cost us an error, not our life. */
	signal(SIGPIPE, SIG_IGN);
	sd_notify(0, "STATUS=pinning pools");
	rc = serve(srv, opts.discard_state);
	free(srv);
	libevent_global_shutdown();
	return rc < 0 ? 1 : 0;
}
