/*
 * named.c - named regions (since RMEM_1.2): rmem_create, rmem_open,
 * rmem_unlink, rmem_unlink2 and the admin calls rmem_unlink_ns and
 * rmem_names.
 *
 * CREATE and OPEN travel like ALLOC and are answered like it (a region, its
 * flags the access the handle grants), UNLINK like FREE, NAMES like
 * REGIONS: the request steps are client.c's.  What is this file's own is
 * checking names, access and flags before anything is sent, so that a bad
 * argument costs no round trip, and a name longer than RMEM_NAME_MAX is
 * -ENAMETOOLONG, which the wire cannot say (its decoder would take the
 * request for garbage).  A daemon from before named regions answers every
 * request here -EOPNOTSUPP, which is passed on as it is.
 */
#include <errno.h>
#include <string.h>

#include "client.h"

_Static_assert(RMEM_NAME_MAX == PROTO_NAME_MAX, "name lengths differ");
_Static_assert(RMEM_READ == PROTO_ACCESS_READ && RMEM_WRITE == PROTO_ACCESS_WRITE,
	       "access bits differ");
_Static_assert(RMEM_UNLINK_REVOKE == PROTO_UNLINK_REVOKE, "unlink flags differ");
_Static_assert(RMEM_NAME_UNLINKED == PROTO_NAME_F_UNLINKED, "name flags differ");
_Static_assert(RMEM_NAME_PIECE == PROTO_NAME_F_PIECE, "name flags differ");

#define ACCESS_ALL (RMEM_READ | RMEM_WRITE)

/* name into req once proto_name_len() finds it valid (its error else). */
static int name_put(const char *name, struct proto_name_req *req)
{
	int len = proto_name_len(name);

	if (len < 0)
		return len;
	memcpy(req->name, name, (size_t)len);
	req->name[len] = '\0';
	req->name_len = (uint16_t)len;
	return 0;
}

/*
 * Sends CREATE, OPEN or UNLINK for req (name checked): with out, the reply
 * is a region (CREATE, OPEN); without, a status (UNLINK).
 */
static int name_call(rmem_client *c, uint16_t opcode, const struct proto_name_req *req,
		     struct rmem_region *out)
{
	uint8_t buf[PROTO_NAME_REQ_FIXED + PROTO_NAME_NS_MAX];
	size_t len = proto_name_req_encode(buf, opcode, req);
	int err;

	client_hold(c);
	if (out)
		err = client_region_call(c, opcode, buf, len, out);
	else
		err = client_status_call(c, opcode, buf, len);
	/* None of them is sent again: a lost CREATE, OPEN or UNLINK may have
	 * taken effect (a retried CREATE would say EEXIST of its own name). */
	err = client_once(c, err);
	client_release(c);
	return err;
}

int single_create(rmem_client *c, const char *name, uint64_t size, uint32_t flags,
		struct rmem_region *out)
{
	struct proto_name_req req = { .size = size, .flags = flags };
	int err = client_check_alloc(c, size, flags, out);

	if (!err)
		err = name_put(name, &req);
	if (err)
		return err;
	return name_call(c, PROTO_OP_CREATE, &req, out);
}

int single_create_piece(rmem_client *c, const char *name, uint64_t size, struct rmem_region *out)
{
	struct proto_name_req req = { .size = size, .flags = PROTO_CREATE_F_PIECE };
	int err = client_check_alloc(c, size, 0, out);

	if (!err)
		err = name_put(name, &req);
	if (err)
		return err;
	return name_call(c, PROTO_OP_CREATE, &req, out);
}

int single_open(rmem_client *c, const char *name, uint32_t access, struct rmem_region *out)
{
	struct proto_name_req req = { .flags = access };
	int err;

	if (!c || !out || access == 0 || (access & ~ACCESS_ALL))
		return -EINVAL;
	err = name_put(name, &req);
	if (err)
		return err;
	return name_call(c, PROTO_OP_OPEN, &req, out);
}

int single_open_excl(rmem_client *c, const char *name, uint32_t access, struct rmem_region *out,
		     bool *fenced)
{
	struct proto_name_req req = { .flags = access | PROTO_ACCESS_EXCL };
	int err;

	*fenced = false;
	if (!c || !out || !(access & RMEM_WRITE) || (access & ~ACCESS_ALL))
		return -EINVAL;
	err = name_put(name, &req);
	if (err)
		return err;
	err = name_call(c, PROTO_OP_OPEN, &req, out);
	if (err == -EINVAL)
		return single_open(c, name, access, out); /* a daemon before EXCL */
	if (!err) {
		*fenced = out->flags & PROTO_ACCESS_FENCED;
		out->flags &= ACCESS_ALL;
	}
	return err;
}

int single_unlink2(rmem_client *c, const char *name, uint32_t flags)
{
	struct proto_name_req req = { .flags = flags };
	int err;

	if (!c || (flags & ~RMEM_UNLINK_REVOKE))
		return -EINVAL;
	err = name_put(name, &req);
	if (err)
		return err;
	return name_call(c, PROTO_OP_UNLINK, &req, NULL);
}

int single_unlink(rmem_client *c, const char *name)
{
	return single_unlink2(c, name, 0);
}

/*
 * The admin's unlink in tenant's namespace: UNLINK with PROTO_UNLINK_NS and
 * "TENANT:NAME" (docs/protocol.md).  A tenant name is what rmemd.conf
 * allows (A-Z a-z 0-9 _ . -, at most 31 bytes), so it never holds the ':'
 * that ends it; anything else is -EINVAL before a round trip.
 */
static int tenant_put(const char *tenant, struct proto_name_req *req)
{
	size_t len;

	if (!tenant)
		return -EINVAL;
	len = strnlen(tenant, PROTO_TENANT_LEN);
	if (len >= PROTO_TENANT_LEN)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)tenant[i];

		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
			return -EINVAL;
	}
	memcpy(req->name, tenant, len);
	req->name[len] = ':';
	req->name_len = (uint16_t)(len + 1);
	return 0;
}

int single_unlink_ns(rmem_client *c, const char *tenant, const char *name, uint32_t flags)
{
	struct proto_name_req req = { .flags = flags | PROTO_UNLINK_NS }, nm;
	int err;

	if (!c || (flags & ~RMEM_UNLINK_REVOKE))
		return -EINVAL;
	err = tenant_put(tenant, &req);
	if (!err)
		err = name_put(name, &nm);
	if (err)
		return err;
	memcpy(req.name + req.name_len, nm.name, nm.name_len + 1u);
	req.name_len = (uint16_t)(req.name_len + nm.name_len);
	return name_call(c, PROTO_OP_UNLINK, &req, NULL);
}

/* ---- the admin listing ------------------------------------------------------------ */

static void name_info_fill(struct rmem_name_info *out, const struct proto_name_rec *rec)
{
	_Static_assert(sizeof(out->tenant) == sizeof(rec->tenant), "tenant sizes differ");
	_Static_assert(sizeof(out->name) == sizeof(rec->name), "name sizes differ");

	*out = (struct rmem_name_info){
		.id = rec->id,
		.length = rec->length,
		.age_ms = rec->age_ms,
		.handles = rec->handles,
		.flags = rec->flags,
	};
	/* The record decoder NUL-terminates both. */
	memcpy(out->tenant, rec->tenant, sizeof(out->tenant));
	memcpy(out->name, rec->name, sizeof(out->name));
}

static int names_locked(struct rmem_client *c, const struct client_list_ask *a)
{
	struct rmem_name_info *out = a->out;
	uint32_t count;
	int err;

	err = client_page_call(c, PROTO_OP_NAMES, a->after, a->max, PROTO_NAME_REC_LEN, &count);
	if (err)
		return err;
	for (uint32_t i = 0; i < count; i++) {
		struct proto_name_rec rec;

		proto_name_rec_decode(client_list_record(c, PROTO_NAME_REC_LEN, i), &rec);
		name_info_fill(&out[i], &rec);
	}
	return (int)count;
}

int single_names(rmem_client *c, uint64_t after, struct rmem_name_info *out, size_t max)
{
	const struct client_list_ask a = { .after = after, .out = out, .max = max };

	return client_listing(c, &a, names_locked);
}
