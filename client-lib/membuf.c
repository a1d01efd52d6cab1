/*
 * membuf.c - rmem_register_buf and rmem_unregister_buf: buffers the
 * application registers once for the data path, as with ucp_mem_map() or
 * fi_mr_reg().  The table is the client's (c->kept); the registration itself
 * is rdma.c's, made only when the data goes on RDMA, so that the same
 * application code runs on every transport.
 */
#include <errno.h>

#include "client.h"
#include "rdma.h"

int rmem_register_buf(rmem_client *c, void *buf, size_t len)
{
	int err;

	if (!c || !buf || len == 0)
		return -EINVAL;
	client_lock(c);
	err = c->broken ? -ECONNRESET : rdma_keep(c, buf, len);
	client_unlock(c);
	return err;
}

int rmem_unregister_buf(rmem_client *c, void *buf)
{
	int err;

	if (!c || !buf)
		return -EINVAL;
	client_lock(c);
	/* A broken client may still hold registrations: letting them go is
	 * what the caller wants before freeing the memory. */
	err = rdma_unkeep(c, buf);
	client_unlock(c);
	return err;
}
