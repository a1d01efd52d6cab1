/*
 * rmemctl_names.c - rmemctl's commands of named regions: `names` (the admin
 * listing of every namespace, a table or JSON) and `unlink NAME` (in the
 * namespace rmemctl connects in).
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <rmem.h>

#include "output.h"
#include "rmemctl.h"

_Static_assert(offsetof(struct rmem_name_info, id) == 0, "paging reads the id first");

static int names_page(rmem_client *c, uint64_t after, void *out, size_t max)
{
	return rmem_names(c, after, out, max);
}

static void name_json(const void *item)
{
	const struct rmem_name_info *nm = item;

	json_u64("id", nm->id, true);
	json_str("name", nm->name, true);
	json_str("tenant", nm->tenant, true);
	json_u64("length", nm->length, true);
	json_u64("age_ms", nm->age_ms, true);
	json_u64("handles", nm->handles, true);
	json_bool("unlinked", nm->flags & RMEM_NAME_UNLINKED, true);
	json_bool("piece", nm->flags & RMEM_NAME_PIECE, false);
}

static void name_row(struct table *t, const void *item, const void *arg)
{
	const struct rmem_name_info *nm = item;
	char tenant[CELL_MAX], name[CELL_MAX], size[32], age[32];

	(void)arg;
	/* "-": the anonymous namespace, which local clients share. */
	printable(tenant, sizeof(tenant), nm->tenant[0] ? nm->tenant : "-");
	printable(name, sizeof(name), nm->name);
	format_size(size, sizeof(size), nm->length);
	format_duration(age, sizeof(age), nm->age_ms);
	table_set(t, 0, "%" PRIu64, nm->id);
	table_set(t, 1, "%s", tenant);
	table_set(t, 2, "%s", size);
	table_set(t, 3, "%" PRIu64, nm->length);
	table_set(t, 4, "%s", age);
	table_set(t, 5, "%" PRIu32, nm->handles);
	/* "piece": linked, and a redundant region's piece (rmemd marked it at
	 * its create; its repair agent may give it back). */
	table_set(t, 6, "%s", nm->flags & RMEM_NAME_UNLINKED ? "unlinked" :
			      nm->flags & RMEM_NAME_PIECE    ? "piece" : "linked");
	table_set(t, 7, "%s", name);
}

static int names_table(struct ctl *ctl, const void *items, size_t n)
{
	static const struct column cols[] = {
		{ "ID", true }, { "TENANT", false }, { "SIZE", true }, { "BYTES", true },
		{ "AGE", true }, { "HANDLES", true }, { "STATE", false }, { "NAME", false },
	};

	(void)ctl;
	return table_print_items(cols, sizeof(cols) / sizeof(cols[0]), items, n,
				 sizeof(struct rmem_name_info), name_row, NULL);
}

int cmd_names(struct ctl *ctl)
{
	static const struct listing l = { "names", names_page, sizeof(struct rmem_name_info),
		name_json, names_table };

	return run_listing(ctl, &l);
}

/* Unlinks in the namespace of whoever rmemctl connects as: the anonymous one,
 * or --tenant's. */
/* unlink --namespace: the admin's call, with its own refusals. */
static int unlink_ns(struct ctl *ctl)
{
	int err = rmem_unlink_ns(ctl->client, ctl->ns, ctl->arg,
				 ctl->revoke ? RMEM_UNLINK_REVOKE : 0);

	switch (err) {
	case 0:
		return 0;
	case -ENOENT:
		if (ctl->ns[0])
			fprintf(stderr, "rmemctl: unlink: no name '%s' in %s's namespace (or no "
				"tenant '%s')\n", ctl->arg, ctl->ns, ctl->ns);
		else
			fprintf(stderr, "rmemctl: unlink: no name '%s' in the anonymous "
				"namespace\n", ctl->arg);
		return EXIT_FAILURE;
	case -EINVAL:
		fprintf(stderr, "rmemctl: unlink: '%s' is not a name, or '%s' not a tenant's "
			"name\n", ctl->arg, ctl->ns);
		return EXIT_FAILURE;
	case -EACCES:
		if (!ctl->unix_socket) {
			fprintf(stderr, "rmemctl: unlink --namespace is an admin request: it needs "
				"the Unix socket (-s PATH)\n");
			return EXIT_FAILURE;
		}
		return report(ctl, "unlink --namespace", err);
	default:
		return report(ctl, "unlink --namespace", err);
	}
}

int cmd_unlink(struct ctl *ctl)
{
	int err;

	if (ctl->ns)
		return unlink_ns(ctl);
	err = rmem_unlink2(ctl->client, ctl->arg, ctl->revoke ? RMEM_UNLINK_REVOKE : 0);
	switch (err) {
	case 0:
		return 0;
	case -ENOENT:
		fprintf(stderr, "rmemctl: unlink: no name '%s' in %s%s namespace\n", ctl->arg,
			ctl->tenant ? ctl->tenant : "the anonymous", ctl->tenant ? "'s" : "");
		return EXIT_FAILURE;
	case -EINVAL:
		fprintf(stderr, "rmemctl: unlink: '%s' is not a name (1 to %d bytes of printable "
			"ASCII, no spaces)\n", ctl->arg, RMEM_NAME_MAX);
		return EXIT_FAILURE;
	case -EACCES:
		fprintf(stderr, "rmemctl: unlink: rmemd refused to unlink '%s'\n", ctl->arg);
		return EXIT_FAILURE;
	default:
		return report(ctl, "unlink", err);
	}
}
