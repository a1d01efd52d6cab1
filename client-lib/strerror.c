/*
 * strerror.c - rmem_strerror(): what each errno means when librmem or rmemd
 * returns it.  Static strings only, so it is thread-safe and cannot fail.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "rmem.h"

static const char *rmem_meaning(int code)
{
	switch (code) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument (NULL pointer, size 0, unknown flags, bad endpoint "
		       "or options)";
	case ENOENT:
		return "no such region or name (never allocated, freed, or unlinked)";
	case EACCES:
		return "access refused: wrong key or not this client's region, a handle "
		       "without that access (or revoked, on RDMA), admin request off the "
		       "Unix socket, or tenant authentication refused";
	case EDQUOT:
		return "the tenant's quota (bytes or regions) would be exceeded";
	case ERANGE:
		return "offset + length past the end of the region";
	case ENOTSUP:
		/* ENOTSUP is EOPNOTSUPP on Linux: both meanings share it. */
		return "not supported: transport not available in this build or on this "
		       "machine, a request the daemon is too old for (named regions), or "
		       "one daemon's admin call on a cluster client";
	case EPROTO:
		return "peer speaks another protocol version or sent garbage, or TLS on one end "
		       "only (a tls:// client on a plain port, a plain client on a listen.tls "
		       "port)";
	case ENOMEM:
		return "no pool can hold that size";
	case ECONNREFUSED:
		return "nothing listens at the endpoint";
	case ETIMEDOUT:
		return "the daemon did not answer in time";
	case ECONNRESET:
		return "connection to the daemon broke (and was not resumed); close this client";
	case ECONNABORTED:
		return "outcome unknown: the connection to the daemon broke while the request "
		       "was in flight (an atomic, alloc, free, create, open or unlink is never "
		       "sent again); the client has resumed and works on";
	case EHOSTUNREACH:
		return "host unreachable, or its name does not resolve (etcd://: no etcd "
		       "member answered)";
	case EHOSTDOWN:
		return "the cluster server holding this region is gone (its key left etcd, "
		       "or its connection was lost and could not be resumed)";
	case ENODATA:
		return "cluster: more pieces of this redundant region are lost (their servers "
		       "started again without their memory) than its parity can rebuild; the "
		       "name stays until rmem_unlink";
	case EUSERS:
		return "the daemon serves as many clients as it may";
	case EEXIST:
		return "a named region of that name exists (cluster: or another creator took "
		       "the name while this one's claim had lapsed)";
	case ECANCELED:
		return "cluster: the create's claim on the name lapsed before its record was "
		       "written; nothing was made, the call may be made again";
	case ENAMETOOLONG:
		return "name longer than RMEM_NAME_MAX (255) bytes";
	case EBADMSG:
		return "the daemon could not decode a request";
	case ESHUTDOWN:
		return "the server is draining (rmemctl cluster drain): it takes no new "
		       "regions or names; a cluster client places them on the others";
	case EBADE:
		return "TLS: the peer's certificate does not verify against the etcd_ca file "
		       "(tls://: tls_ca; rmemd: listen.tls.ca) (another CA, expired, or not made "
		       "out to the host or IP in the URL, or tls_name), or the CA file cannot be "
		       "read or is no CA certificate";
	case ENOKEY:
		return "TLS: the etcd_cert or etcd_key file cannot be read or used (tls://: "
		       "tls_cert, tls_key or tls_ca) (missing, unreadable, not PEM, or the key "
		       "is not the certificate's)";
	case EKEYREJECTED:
		return "TLS: the peer (the etcd members, or rmemd's listen.tls) refused this "
		       "client's certificate (expired, or not signed by a CA it trusts), or wants "
		       "one and no etcd_cert was given (tls://: tls_cert)";
	default:
		return NULL;
	}
}

const char *rmem_strerror(int err)
{
	const char *text;

	/* -INT_MIN does not exist; no errno is that large anyway. */
	if (err == INT_MIN)
		return "unknown error";
	if (err < 0)
		err = -err;
	text = rmem_meaning(err);
	if (!text)
		text = strerrordesc_np(err);
	return text ? text : "unknown error";
}
