/*
 * region.c - rmem.Region: a region (rmem_alloc) or a handle of a named
 * region (rmem_create, rmem_open), and its I/O.
 *
 * Zero-copy: write() and read_into() hand the library the caller's own
 * buffer (the buffer protocol, exported for the whole call); on RDMA the
 * library registers it for the transfer (or uses a Client.register()
 * registration that covers it) and the NIC moves the bytes in place.
 * read() makes one bytes object and reads straight into it.
 */
#include "rmempy.h"

#include <errno.h>
#include <string.h>

PyObject *rmempy_region_type;

PyObject *rmempy_region_new(ClientObject *co, const struct rmem_region *r, PyObject *name)
{
	RegionObject *ro;

	ro = (RegionObject *)PyType_GenericAlloc((PyTypeObject *)rmempy_region_type, 0);
	if (!ro) {
		/* Give the region back rather than lose it for the session. */
		Py_BEGIN_ALLOW_THREADS
		rmem_free(co->c, r);
		Py_END_ALLOW_THREADS
		return NULL;
	}
	Py_INCREF((PyObject *)co);
	ro->client = co;
	ro->r = *r;
	Py_INCREF(name);
	ro->name = name;
	return (PyObject *)ro;
}

/* With the GIL: ValueError for a freed region or a closed client; else
 * the client counts the call in (rmempy_leave after). */
static int region_enter(RegionObject *ro)
{
	if (ro->freed) {
		PyErr_SetString(PyExc_ValueError, "I/O operation on a freed rmem region");
		return -1;
	}
	return rmempy_enter(ro->client);
}

/* Frees the region if it is live and its client open; 0 or a negative errno. */
static int region_release(RegionObject *ro)
{
	ClientObject *co = ro->client;
	struct rmem_region r = ro->r;
	int rc;

	if (ro->freed || !co || co->closed)
		return 0;
	ro->freed = true;
	co->busy++;
	Py_BEGIN_ALLOW_THREADS
	rc = rmem_free(co->c, &r);
	Py_END_ALLOW_THREADS
	co->busy--;
	return rc;
}

static void region_dealloc(PyObject *self)
{
	RegionObject *ro = (RegionObject *)self;

	/* Like a file object, an unreferenced region gives its memory back. */
	(void)region_release(ro);
	Py_CLEAR(ro->client);
	Py_CLEAR(ro->name);
	rmempy_type_free(self);
}

static PyObject *region_new(PyTypeObject *t, PyObject *a, PyObject *k)
{
	(void)t;
	(void)a;
	(void)k;
	PyErr_SetString(PyExc_TypeError, "regions come from Client.alloc(), create() and open()");
	return NULL;
}

PyDoc_STRVAR(free_doc,
"free()\n\nReturns the region (rmem_free(3)); for a named region's handle, releases\n"
"that handle only.  Later calls on the region raise ValueError.  A second\n"
"free(), or one after the client's close(), is a no-op.  Leaving a with block, or the last reference going, frees too.");

static PyObject *region_free(PyObject *self, PyObject *unused)
{
	RegionObject *ro = (RegionObject *)self;
	int rc;

	(void)unused;
	/* Freed already, or with its session: nothing left to do, as a
	 * second close() of a file. */
	if (ro->freed || ro->client->closed) {
		ro->freed = true;
		Py_RETURN_NONE;
	}
	rc = region_release(ro);
	if (rc < 0)
		return rmempy_error(rc);
	Py_RETURN_NONE;
}

static PyObject *region_enter_cm(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (region_enter((RegionObject *)self) < 0)
		return NULL;
	rmempy_leave(((RegionObject *)self)->client);
	Py_INCREF(self);
	return self;
}

static PyObject *region_exit_cm(PyObject *self, PyObject *args)
{
	(void)args;
	/* A closed client has freed it already. */
	(void)region_release((RegionObject *)self);
	((RegionObject *)self)->freed = true;
	Py_RETURN_FALSE;
}

PyDoc_STRVAR(write_doc,
"write(offset, data)\n\nWrites data, any bytes-like object (bytes, bytearray, memoryview, a\n"
"contiguous numpy array), at offset (rmem_write(3)), from the object's\n"
"own memory: no copy is made.  Raises OSError(ERANGE) past the end,\n"
"PermissionError on a read-only handle.");

/* write() and read_into(): one rmem_write or rmem_read at offset of the
 * caller's own buffer, parsed with fmt ("Ky*" or "Kw*") and exported for the
 * whole call.  The buffer's length in bytes, or -1 (exception set). */
static Py_ssize_t region_buffer_io(PyObject *self, PyObject *args, const char *fmt, bool write)
{
	RegionObject *ro = (RegionObject *)self;
	unsigned long long off;
	Py_buffer view;
	struct rmem_region r = ro->r;
	int rc;

	if (!PyArg_ParseTuple(args, fmt, &off, &view))
		return -1;
	if (region_enter(ro) < 0) {
		PyBuffer_Release(&view);
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = write ? rmem_write(ro->client->c, &r, off, view.buf, (size_t)view.len)
		   : rmem_read(ro->client->c, &r, off, view.buf, (size_t)view.len);
	Py_END_ALLOW_THREADS
	rmempy_leave(ro->client);
	PyBuffer_Release(&view);
	if (rc < 0) {
		rmempy_error(rc);
		return -1;
	}
	return view.len;
}

static PyObject *region_write(PyObject *self, PyObject *args)
{
	if (region_buffer_io(self, args, "Ky*:write", true) < 0)
		return NULL;
	Py_RETURN_NONE;
}

PyDoc_STRVAR(read_doc,
"read(offset, size) -> bytes\n\nReads size bytes at offset (rmem_read(3)) into a new bytes object.");

static PyObject *region_read(PyObject *self, PyObject *args)
{
	RegionObject *ro = (RegionObject *)self;
	unsigned long long off, n;
	struct rmem_region r = ro->r;
	PyObject *b;
	char *p;
	int rc;

	if (!PyArg_ParseTuple(args, "KK:read", &off, &n))
		return NULL;
	if (n > PY_SSIZE_T_MAX)
		return PyErr_NoMemory();
	if (region_enter(ro) < 0)
		return NULL;
	b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
	if (!b || !(p = PyBytes_AsString(b))) {
		rmempy_leave(ro->client);
		Py_XDECREF(b);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rmem_read(ro->client->c, &r, off, p, (size_t)n);
	Py_END_ALLOW_THREADS
	rmempy_leave(ro->client);
	if (rc < 0) {
		Py_DECREF(b);
		return rmempy_error(rc);
	}
	return b;
}

PyDoc_STRVAR(read_into_doc,
"read_into(offset, buffer) -> int\n\nFills buffer, any writable contiguous buffer (bytearray, memoryview,\n"
"numpy array, mmap), with the bytes at offset, in place: no copy is made.\n"
"Returns the number of bytes read, len(buffer) in bytes.");

static PyObject *region_read_into(PyObject *self, PyObject *args)
{
	Py_ssize_t n = region_buffer_io(self, args, "Kw*:read_into", false);

	return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

PyDoc_STRVAR(cas_doc,
"cas(offset, expect, new) -> int\n\nCompare-and-swap of the 8-byte word at offset (a multiple of 8;\n"
"rmem_cas(3)): stores new where the word equals expect.  Returns the word\n"
"as it was.  Values are unsigned 64-bit, host byte order.");

PyDoc_STRVAR(faa_doc,
"faa(offset, add) -> int\n\nFetch-and-add on the 8-byte word at offset (rmem_faa(3)), modulo 2**64.\n"
"Returns the word as it was.");

static PyObject *atomic(RegionObject *ro, bool cas, uint64_t off, uint64_t a, uint64_t b)
{
	struct rmem_region r = ro->r;
	uint64_t old = 0;
	int rc;

	if (region_enter(ro) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = cas ? rmem_cas(ro->client->c, &r, off, a, b, &old)
		 : rmem_faa(ro->client->c, &r, off, a, &old);
	Py_END_ALLOW_THREADS
	rmempy_leave(ro->client);
	if (rc < 0)
		return rmempy_error(rc);
	return PyLong_FromUnsignedLongLong(old);
}

static PyObject *region_cas(PyObject *self, PyObject *args)
{
	PyObject *o, *e, *n;
	uint64_t off, expect, desired;

	if (!PyArg_ParseTuple(args, "OOO:cas", &o, &e, &n) || rmempy_u64(o, &off) < 0 ||
	    rmempy_u64(e, &expect) < 0 || rmempy_u64(n, &desired) < 0)
		return NULL;
	return atomic((RegionObject *)self, true, off, expect, desired);
}

static PyObject *region_faa(PyObject *self, PyObject *args)
{
	PyObject *o, *a;
	uint64_t off, add;

	if (!PyArg_ParseTuple(args, "OO:faa", &o, &a) || rmempy_u64(o, &off) < 0)
		return NULL;
	/* A negative add wraps, as the C call's uint64_t does. */
	if (PyLong_Check(a)) {
		long long s = PyLong_AsLongLong(a);

		if (!(s == -1 && PyErr_Occurred()) && s < 0) {
			add = (uint64_t)s;
			return atomic((RegionObject *)self, false, off, add, 0);
		}
		PyErr_Clear();
	}
	if (rmempy_u64(a, &add) < 0)
		return NULL;
	return atomic((RegionObject *)self, false, off, add, 0);
}

/* aread(off, n), aread_into(off, buf), awrite(off, buf): rmem._aio. */
static PyObject *aio(PyObject *self, const char *fn, PyObject *args)
{
	PyObject *a, *res;
	Py_ssize_t i, n = PyTuple_Size(args);

	a = PyTuple_New(n + 1);
	if (!a)
		return NULL;
	Py_INCREF(self);
	PyTuple_SetItem(a, 0, self);
	for (i = 0; i < n; i++) {
		PyObject *x = PyTuple_GetItem(args, i);

		Py_INCREF(x);
		PyTuple_SetItem(a, i + 1, x);
	}
	res = rmempy_aio_call(fn, a);
	Py_DECREF(a);
	return res;
}

static PyObject *region_aread(PyObject *self, PyObject *args)
{
	return aio(self, "aread", args);
}

static PyObject *region_aread_into(PyObject *self, PyObject *args)
{
	return aio(self, "aread_into", args);
}

static PyObject *region_awrite(PyObject *self, PyObject *args)
{
	return aio(self, "awrite", args);
}

static Py_ssize_t region_len(PyObject *self)
{
	RegionObject *ro = (RegionObject *)self;

	if (ro->r.length > PY_SSIZE_T_MAX) {
		PyErr_SetString(PyExc_OverflowError, "region longer than sys.maxsize");
		return -1;
	}
	return (Py_ssize_t)ro->r.length;
}

static PyObject *region_writable(PyObject *self, void *closure)
{
	RegionObject *ro = (RegionObject *)self;

	(void)closure;
	/* An anonymous region (flags 0) grants both. */
	return PyBool_FromLong(ro->r.flags == 0 || (ro->r.flags & RMEM_WRITE));
}

static PyObject *region_name(PyObject *self, void *closure)
{
	(void)closure;
	Py_INCREF(((RegionObject *)self)->name);
	return ((RegionObject *)self)->name;
}

static PyObject *region_id(PyObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromUnsignedLongLong(((RegionObject *)self)->r.id);
}

static PyObject *region_freed(PyObject *self, void *closure)
{
	RegionObject *ro = (RegionObject *)self;

	(void)closure;
	return PyBool_FromLong(ro->freed || ro->client->closed);
}

static PyObject *region_client(PyObject *self, void *closure)
{
	(void)closure;
	Py_INCREF((PyObject *)((RegionObject *)self)->client);
	return (PyObject *)((RegionObject *)self)->client;
}

static PyObject *region_repr(PyObject *self)
{
	RegionObject *ro = (RegionObject *)self;

	return PyUnicode_FromFormat("<rmem.Region id=%llu length=%llu name=%R%s>",
				    (unsigned long long)ro->r.id,
				    (unsigned long long)ro->r.length, ro->name,
				    ro->freed ? " freed" : "");
}

PyDoc_STRVAR(repair_doc,
"repair()\n\nRebuilds a redundant region's lost or stale pieces on other servers\n"
"(rmem_repair(3)): a cluster client's region, allocated or opened \"rw\".\n"
"Raises OSError (EINVAL: not a redundant region; EOPNOTSUPP: not a cluster\n"
"client; EACCES: opened read-only; EHOSTDOWN: fewer than K pieces left).");

static PyObject *region_repair(PyObject *self, PyObject *unused)
{
	RegionObject *ro = (RegionObject *)self;
	struct rmem_region r = ro->r;
	int rc;

	(void)unused;
	if (region_enter(ro) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rmem_repair(ro->client->c, &r);
	Py_END_ALLOW_THREADS
	rmempy_leave(ro->client);
	if (rc < 0)
		return rmempy_error(rc);
	Py_RETURN_NONE;
}

static PyMethodDef region_methods[] = {
	{ "free", region_free, METH_NOARGS, free_doc },
	{ "__enter__", region_enter_cm, METH_NOARGS, NULL },
	{ "__exit__", region_exit_cm, METH_VARARGS, NULL },
	{ "write", region_write, METH_VARARGS, write_doc },
	{ "read", region_read, METH_VARARGS, read_doc },
	{ "read_into", region_read_into, METH_VARARGS, read_into_doc },
	{ "cas", region_cas, METH_VARARGS, cas_doc },
	{ "faa", region_faa, METH_VARARGS, faa_doc },
	{ "repair", region_repair, METH_NOARGS, repair_doc },
	{ "aread", region_aread, METH_VARARGS,
	  "aread(offset, size) -> awaitable bytes\n\nread() for asyncio (rmem_post_read(3))." },
	{ "aread_into", region_aread_into, METH_VARARGS,
	  "aread_into(offset, buffer) -> awaitable int\n\nread_into() for asyncio, in place." },
	{ "awrite", region_awrite, METH_VARARGS,
	  "awrite(offset, data) -> awaitable None\n\nwrite() for asyncio, from data in place;\n"
	  "data stays exported (cannot be resized) until the write completes." },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef region_getset[] = {
	{ "writable", region_writable, NULL, "True when writes and atomics are allowed.", NULL },
	{ "name", region_name, NULL, "The name of a named region's handle, or None.", NULL },
	{ "id", region_id, NULL, "The daemon's id of the region (or handle).", NULL },
	{ "freed", region_freed, NULL, "True once freed, or its client closed.", NULL },
	{ "client", region_client, NULL, "The Client the region belongs to.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(region_doc,
"Remote memory: a region from Client.alloc(), or a handle of a named\n"
"region from Client.create() or Client.open().\n"
"\n"
"len(region) is its usable length (at least the size asked).  A context\n"
"manager that frees it.  After free(), or after its client is closed,\n"
"every call raises ValueError.  Offsets and lengths are checked by the\n"
"library: past the end is OSError(ERANGE).");

static PyType_Slot region_slots[] = {
	{ Py_tp_doc, (void *)region_doc },
	{ Py_tp_dealloc, (void *)region_dealloc },
	{ Py_tp_new, (void *)region_new },
	{ Py_tp_repr, (void *)region_repr },
	{ Py_tp_methods, region_methods },
	{ Py_tp_getset, region_getset },
	{ Py_sq_length, (void *)region_len },
	{ 0, NULL },
};

static PyType_Spec region_spec = {
	"rmem.Region", sizeof(RegionObject), 0, Py_TPFLAGS_DEFAULT, region_slots,
};

int rmempy_region_init_type(PyObject *m)
{
	return rmempy_add_type(m, &region_spec, "Region", &rmempy_region_type);
}
