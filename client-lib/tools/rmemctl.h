/*
 * rmemctl.h - what rmemctl's command files share: the state of one run,
 * the error report and the paged listing.
 */
#ifndef RMEMCTL_H
#define RMEMCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rmem.h>

#define EXIT_USAGE 2
#define LIST_PAGE 128

struct ctl {
	const char *endpoint;
	bool unix_socket;
	bool json;
	const char *arg;         /* the command's argument: unlink NAME */
	bool revoke;             /* unlink --revoke */
	const char *tenant;      /* --tenant, with --secret-file: whose names */
	const char *secret_file;
	const char *ns;          /* unlink --namespace: an admin's, in this tenant's */
	const char *etcd;        /* -e etcd://HOST:PORT,.../NAME: a cluster's etcd */
	unsigned grace_s;        /* cluster sweep --grace */
	const char *arg2;        /* the second: cluster drain ID */
	bool wait;               /* cluster drain --wait */
	unsigned timeout_s;      /* cluster drain --timeout (0: none) */
	rmem_client *client;
};

/* Prints why what failed (err, a negative errno) to stderr, with advice
 * where there is some; returns EXIT_FAILURE. */
int report(const struct ctl *ctl, const char *what, int err);

/* One page of a listing: rmem_regions(), rmem_clients() or rmem_names()
 * behind one type. */
typedef int (*page_fn)(rmem_client *c, uint64_t after, void *out, size_t max);

/*
 * Every entry of a listing into *out (malloc'd, *count entries of
 * item_size bytes), paging with `after` until the daemon has no more.  Every
 * entry type starts with its uint64_t id, which is what `after` pages on.
 * 0 or a negative errno.
 */
int fetch_all(struct ctl *ctl, page_fn page, size_t item_size, void **out, size_t *count);

/* A listing command (regions, clients, names): its pages and its two ways
 * of printing what fetch_all() read. */
struct listing {
	const char *what;                                 /* for report() */
	page_fn page;
	size_t item_size;
	void (*json)(const void *item);                   /* -j: its members */
	int (*table)(struct ctl *ctl, const void *items, size_t n); /* 0 or -errno */
};

/* Every entry of l, printed as JSON or as a table: the exit status. */
int run_listing(struct ctl *ctl, const struct listing *l);

/* ---- rmemctl_names.c ----------------------------------------------------- */

int cmd_names(struct ctl *ctl);
int cmd_unlink(struct ctl *ctl);

/* ---- rmemctl_cluster.c --------------------------------------------------- */

struct etcd_client;
struct etcd_range;

/* The servers of the cluster ctl->etcd names, read from etcd (no client);
 * with ctl->arg "sweep", cluster_sweep (ctl->client: -s's, or NULL). */
int cmd_cluster(struct ctl *ctl);
/* The keys under /rmem/CLUSTER/WHAT/ into r (etcd_range_free it, whatever
 * this returns), that prefix's length in *plen (when plen is not NULL): 0,
 * or a negative errno, said on stderr as "rmemctl: CMD: reading PREFIX
 * from etcd: ...". */
int cluster_read(struct etcd_client *etcd, const char *cmd, const char *cluster,
		 const char *what, struct etcd_range *r, size_t *plen);

/* ---- rmemctl_sweep.c ----------------------------------------------------- */

/* `cluster sweep` of cluster on etcd: the exit status. */
int cluster_sweep(struct ctl *ctl, struct etcd_client *etcd, const char *cluster);
/* `cluster redundant` (rmemctl_redundant.c): each redundant name's layout
 * and state, from etcd; the exit status. */
int cluster_redundant(struct ctl *ctl, struct etcd_client *etcd, const char *cluster);
/* `cluster drain ID` (on) and `cluster undrain ID` (rmemctl_drain.c; ID is
 * ctl->arg2): the exit status. */
int cluster_drain(struct ctl *ctl, struct etcd_client *etcd, const char *cluster, bool on);

#endif /* RMEMCTL_H */
