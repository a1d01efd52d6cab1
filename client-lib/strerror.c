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
		return "no such region (never allocated, or freed)";
	case EACCES:
		return "access refused: wrong key or not this client's region, admin request "
		       "off the Unix socket, or tenant authentication refused";
	case EDQUOT:
		return "the tenant's quota (bytes or regions) would be exceeded";
	case ERANGE:
		return "offset + length past the end of the region";
	case ENOTSUP:
		return "transport not available in this build or on this machine";
	case EPROTO:
		return "peer speaks another protocol version or sent garbage";
	case ENOMEM:
		return "no pool can hold that size";
	case ECONNREFUSED:
		return "nothing listens at the endpoint";
	case ETIMEDOUT:
		return "the daemon did not answer in time";
	case ECONNRESET:
		return "connection to the daemon broke; close this client";
	case EHOSTUNREACH:
		return "host unreachable, or its name does not resolve";
	case EUSERS:
		return "the daemon serves as many clients as it may";
	case EBADMSG:
		return "the daemon could not decode a request";
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
