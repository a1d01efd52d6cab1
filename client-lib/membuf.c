/*
 * membuf.c - rmem_register_buf and rmem_unregister_buf: buffers the
 * application registers once for the data path, as with ucp_mem_map() or
 * fi_mr_reg().  The table is the client's (c->eng.kept); the registration itself
 * is the data path's (datapath.c), made only when the data goes on RDMA, so that the same
 * application code runs on every transport.
 */
#include <errno.h>

#include "client.h"
#include "datapath.h"

int single_register_buf(rmem_client *c, void *buf, size_t len)
{
	int err;

	if (!c || !buf || len == 0)
		return -EINVAL;
	client_hold(c);
	err = c->eng.broken ? -ECONNRESET : dp_keep(&c->eng, buf, len);
	client_release(c);
	return err;
}

int single_unregister_buf(rmem_client *c, void *buf)
{
	int err;

	if (!c || !buf)
		return -EINVAL;
	client_hold(c);
	/* A broken client may still hold registrations: letting them go is
	 * what the caller wants before freeing the memory. */
	err = dp_unkeep(&c->eng, buf);
	client_release(c);
	return err;
}
