/*
 * client.c - rmem.Client: one session with rmemd (rmem_client).
 */
#include "rmempy.h"

#include <errno.h>
#include <string.h>
#include <time.h>

PyObject *rmempy_client_type;

int rmempy_enter(ClientObject *co)
{
	if (co->closed || !co->c) {
		PyErr_SetString(PyExc_ValueError, "I/O operation on a closed rmem client");
		return -1;
	}
	co->busy++;
	return 0;
}

void rmempy_leave(ClientObject *co)
{
	co->busy--;
}

/* asyncio operations in flight: rmem._aio fails their futures and drops
 * the reader before rmem_close() closes the descriptor.  Only when
 * rmem._aio is loaded already (it is, if anything was posted); an error
 * there must not keep the client open. */
static void aio_on_close(ClientObject *co)
{
	PyObject *mods = PyImport_GetModuleDict(), *mod, *res;
	PyObject *type, *value, *tb;

	PyErr_Fetch(&type, &value, &tb);
	mod = mods ? PyDict_GetItemString(mods, "rmem._aio") : NULL;
	if (mod) {
		res = PyObject_CallMethod(mod, "_on_close", "O", (PyObject *)co);
		if (!res)
			PyErr_WriteUnraisable((PyObject *)co);
		Py_XDECREF(res);
	}
	PyErr_Restore(type, value, tb);
}

/* Ends the session once no call is inside the library (see rmempy.h). */
static void client_shut(ClientObject *co)
{
	rmem_client *c = co->c;

	co->closed = true;
	if (!c)
		return;
	if (co->pending && PyDict_Size(co->pending) > 0)
		aio_on_close(co);
	while (co->busy > 0) {
		/* Another thread is in a call with the GIL released: let it
		 * finish (it cannot start another: closed is set). */
		Py_BEGIN_ALLOW_THREADS
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
		Py_END_ALLOW_THREADS
	}
	co->c = NULL;
	Py_BEGIN_ALLOW_THREADS
	rmem_close(c);
	Py_END_ALLOW_THREADS
	/* Operations still posted were dropped by rmem_close: their buffers
	 * are ours again. */
	Py_CLEAR(co->pending);
}

static void client_dealloc(PyObject *self)
{
	ClientObject *co = (ClientObject *)self;

	client_shut(co);
	rmempy_type_free(self);
}

static PyObject *client_new(PyTypeObject *t, PyObject *a, PyObject *k)
{
	(void)t;
	(void)a;
	(void)k;
	PyErr_SetString(PyExc_TypeError, "use rmem.connect() to make a Client");
	return NULL;
}

PyDoc_STRVAR(close_doc,
"close()\n\nEnds the session (rmem_close(3)): the daemon frees every anonymous\n"
"region it holds.  Waits for calls other threads are making on this client.\n"
"Later calls on the client and its regions raise ValueError.  Idempotent.");

static PyObject *client_close(PyObject *self, PyObject *unused)
{
	(void)unused;
	client_shut((ClientObject *)self);
	Py_RETURN_NONE;
}

static PyObject *client_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	if (rmempy_enter((ClientObject *)self) < 0)
		return NULL;
	rmempy_leave((ClientObject *)self);
	Py_INCREF(self);
	return self;
}

static PyObject *client_exit(PyObject *self, PyObject *args)
{
	(void)args;
	client_shut((ClientObject *)self);
	Py_RETURN_FALSE;
}

/* alloc(size) and create(name, size) */
static PyObject *do_alloc(ClientObject *co, PyObject *name_obj, const char *name, uint64_t size)
{
	struct rmem_region r;
	int rc;

	if (rmempy_enter(co) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = name ? rmem_create(co->c, name, size, 0, &r) : rmem_alloc(co->c, size, 0, &r);
	Py_END_ALLOW_THREADS
	rmempy_leave(co);
	if (rc < 0)
		return rmempy_error(rc);
	return rmempy_region_new(co, &r, name_obj);
}

PyDoc_STRVAR(alloc_doc,
"alloc(size) -> Region\n\nAllocates at least size bytes of remote memory, zeroed (rmem_alloc(3)).\n"
"The region is a context manager that frees it.\n"
"Raises MemoryError-like OSError(ENOMEM), OSError(EDQUOT), ValueError (closed).");

static PyObject *client_alloc(PyObject *self, PyObject *arg)
{
	uint64_t size;

	if (rmempy_u64(arg, &size) < 0)
		return NULL;
	return do_alloc((ClientObject *)self, Py_None, NULL, size);
}

PyDoc_STRVAR(create_doc,
"create(name, size) -> Region\n\nCreates the named region name (rmem_create(3)) and opens it\n"
"read-write.  It outlives the session until unlink().\n"
"Raises FileExistsError when the name exists.");

static PyObject *client_create(PyObject *self, PyObject *args)
{
	struct rmempy_cstr name;
	unsigned long long size;

	if (!PyArg_ParseTuple(args, "O&K:create", rmempy_cstr_conv, &name, &size))
		return NULL;
	return do_alloc((ClientObject *)self, name.obj, name.s, size);
}

PyDoc_STRVAR(open_doc,
"open(name, mode=\"r\") -> Region\n\nOpens the named region name (rmem_open(3)); mode \"r\" reads only,\n"
"\"rw\" reads and writes.  Raises FileNotFoundError for no such name.");

static PyObject *client_open(PyObject *self, PyObject *args)
{
	ClientObject *co = (ClientObject *)self;
	struct rmempy_cstr name;
	const char *mode = "r";
	struct rmem_region r;
	uint32_t access;
	int rc;

	if (!PyArg_ParseTuple(args, "O&|s:open", rmempy_cstr_conv, &name, &mode))
		return NULL;
	if (strcmp(mode, "r") == 0)
		access = RMEM_READ;
	else if (strcmp(mode, "rw") == 0 || strcmp(mode, "wr") == 0)
		access = RMEM_READ | RMEM_WRITE;
	else if (strcmp(mode, "w") == 0)
		access = RMEM_WRITE;
	else {
		PyErr_Format(PyExc_ValueError, "mode must be \"r\", \"w\" or \"rw\", not %R",
			     PyTuple_GetItem(args, 1));
		return NULL;
	}
	if (rmempy_enter(co) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rmem_open(co->c, name.s, access, &r);
	Py_END_ALLOW_THREADS
	rmempy_leave(co);
	if (rc < 0)
		return rmempy_error(rc);
	return rmempy_region_new(co, &r, name.obj);
}

PyDoc_STRVAR(unlink_doc,
"unlink(name, revoke=False)\n\nRemoves the name (rmem_unlink2(3)); with revoke, every open handle\n"
"stops working at once.  Raises FileNotFoundError for no such name.");

static PyObject *client_unlink(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { (char *)"name", (char *)"revoke", NULL };
	ClientObject *co = (ClientObject *)self;
	struct rmempy_cstr name;
	int revoke = 0, rc;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|p:unlink", kwlist, rmempy_cstr_conv, &name,
					 &revoke))
		return NULL;
	if (rmempy_enter(co) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rmem_unlink2(co->c, name.s, revoke ? RMEM_UNLINK_REVOKE : 0);
	Py_END_ALLOW_THREADS
	rmempy_leave(co);
	if (rc < 0)
		return rmempy_error(rc);
	Py_RETURN_NONE;
}

#define NAMES_PAGE 64

PyDoc_STRVAR(names_doc,
"names() -> list of dict\n\nEvery named region of every namespace (rmem_names(3)), as dicts with\n"
"id, name, tenant, length, age_ms, handles and unlinked.  Admin only: the\n"
"daemon's Unix socket; elsewhere PermissionError.");

static PyObject *client_names(PyObject *self, PyObject *unused)
{
	ClientObject *co = (ClientObject *)self;
	struct rmem_name_info *v;
	PyObject *list;
	uint64_t after = 0;
	int n, i;

	(void)unused;
	v = PyMem_Calloc(NAMES_PAGE, sizeof *v);
	list = PyList_New(0);
	if (!v || !list)
		goto fail;
	for (;;) {
		if (rmempy_enter(co) < 0)
			goto fail;
		Py_BEGIN_ALLOW_THREADS
		n = rmem_names(co->c, after, v, NAMES_PAGE);
		Py_END_ALLOW_THREADS
		rmempy_leave(co);
		if (n < 0) {
			rmempy_error(n);
			goto fail;
		}
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			PyObject *d = Py_BuildValue(
				"{s:K,s:s,s:s,s:K,s:K,s:I,s:O}", "id", (unsigned long long)v[i].id,
				"name", v[i].name, "tenant", v[i].tenant, "length",
				(unsigned long long)v[i].length, "age_ms",
				(unsigned long long)v[i].age_ms, "handles", (unsigned)v[i].handles,
				"unlinked", (v[i].flags & RMEM_NAME_UNLINKED) ? Py_True : Py_False);
			if (!d || PyList_Append(list, d) < 0) {
				Py_XDECREF(d);
				goto fail;
			}
			Py_DECREF(d);
			after = v[i].id;
		}
	}
	PyMem_Free(v);
	return list;
fail:
	PyMem_Free(v);
	Py_XDECREF(list);
	return NULL;
}

PyDoc_STRVAR(stats_doc,
"stats() -> dict\n\nThe daemon's pool-wide figures (rmem_stats(3)): pool_bytes, used_bytes,\n"
"free_bytes, largest_free, regions, clients, peak_used, allocs, frees,\n"
"key_mode, state_slots_used, state_slots_total; and an etcd:// client's own\n"
"degraded_reads, parity_updates, repaired_bytes (redundant regions).");

static PyObject *client_stats(PyObject *self, PyObject *unused)
{
	ClientObject *co = (ClientObject *)self;
	struct rmem_stats s;
	int rc;

	(void)unused;
	if (rmempy_enter(co) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	rc = rmem_stats(co->c, &s);
	Py_END_ALLOW_THREADS
	rmempy_leave(co);
	if (rc < 0)
		return rmempy_error(rc);
#define U(f) #f, (unsigned long long)s.f
	return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
			     U(pool_bytes), U(used_bytes), U(free_bytes), U(largest_free),
			     U(regions), U(clients), U(peak_used), U(allocs), U(frees),
			     U(key_mode), U(state_slots_used), U(state_slots_total),
			     U(degraded_reads), U(parity_updates), U(repaired_bytes));
#undef U
}

static PyObject *client_transport(PyObject *self, void *closure)
{
	ClientObject *co = (ClientObject *)self;

	(void)closure;
	if (rmempy_enter(co) < 0)
		return NULL;
	rmempy_leave(co);
	return PyUnicode_FromString(rmem_transport(co->c));
}

static PyObject *client_closed(PyObject *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(((ClientObject *)self)->closed);
}

/* ---- asyncio support (used by rmem._aio) ------------------------------------ */

/* What a posted operation keeps alive until its completion: the buffer's
 * export (so the buffer can be neither resized nor freed), the object read
 * into, or the region struct rmem_post_alloc fills. */
struct held {
	Py_buffer view;
	bool has_view;
	struct rmem_region r;
};

static void held_free(PyObject *cap)
{
	struct held *h = PyCapsule_GetPointer(cap, "rmem.held");

	if (!h)
		return;
	if (h->has_view)
		PyBuffer_Release(&h->view);
	PyMem_Free(h);
}

int rmempy_pending_add(ClientObject *co, uint64_t cookie, PyObject *holder);
int rmempy_pending_add(ClientObject *co, uint64_t cookie, PyObject *holder)
{
	PyObject *key;
	int rc;

	if (!co->pending && !(co->pending = PyDict_New()))
		return -1;
	key = PyLong_FromUnsignedLongLong(cookie);
	if (!key)
		return -1;
	rc = PyDict_SetItem(co->pending, key, holder);
	Py_DECREF(key);
	return rc;
}

/* _post(region_or_None, op, off_or_size, buf_or_size) -> cookie
 * op: 0 read into buf, 1 read n bytes into a new bytes, 2 write, 3 alloc. */
PyDoc_STRVAR(post_doc, "_post(region, op, off, obj) -> cookie (for rmem._aio)");

static PyObject *client_post(PyObject *self, PyObject *args)
{
	ClientObject *co = (ClientObject *)self;
	PyObject *reg, *obj, *target = NULL, *cap = NULL, *holder = NULL;
	unsigned long long off;
	int op, rc = 0;
	struct held *h;
	struct rmem_region r;
	uint64_t cookie;

	if (!PyArg_ParseTuple(args, "OiKO:_post", &reg, &op, &off, &obj))
		return NULL;
	h = PyMem_Calloc(1, sizeof *h);
	if (!h)
		return PyErr_NoMemory();
	cap = PyCapsule_New(h, "rmem.held", held_free);
	if (!cap) {
		PyMem_Free(h);
		return NULL;
	}
	if (op != 3) {
		RegionObject *ro = (RegionObject *)reg;

		if (!PyObject_TypeCheck(reg, (PyTypeObject *)rmempy_region_type)) {
			PyErr_SetString(PyExc_TypeError, "a Region is required");
			goto fail;
		}
		if (ro->freed || ro->client != co) {
			PyErr_SetString(PyExc_ValueError, "I/O operation on a freed rmem region");
			goto fail;
		}
		r = ro->r;
	}
	if (op == 1) {
		uint64_t n;

		if (rmempy_u64(obj, &n) < 0)
			goto fail;
		if (n > PY_SSIZE_T_MAX) {
			PyErr_SetString(PyExc_OverflowError, "read too large");
			goto fail;
		}
		target = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
		if (!target || PyObject_GetBuffer(target, &h->view, PyBUF_SIMPLE) < 0)
			goto fail;
		h->has_view = true;
	} else if (op == 0 || op == 2) {
		if (PyObject_GetBuffer(obj, &h->view, op == 0 ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
			goto fail;
		h->has_view = true;
		target = Py_None;
		Py_INCREF(target);
	} else if (op == 3) {
		target = Py_None;
		Py_INCREF(target);
	} else {
		PyErr_SetString(PyExc_ValueError, "bad op");
		goto fail;
	}
	if (rmempy_enter(co) < 0)
		goto fail;
	cookie = co->next_cookie++;
	Py_BEGIN_ALLOW_THREADS
	switch (op) {
	case 0:
	case 1:
		rc = rmem_post_read(co->c, &r, off, h->view.buf, (size_t)h->view.len, cookie);
		break;
	case 2:
		rc = rmem_post_write(co->c, &r, off, h->view.buf, (size_t)h->view.len, cookie);
		break;
	case 3:
		rc = rmem_post_alloc(co->c, off, 0, &h->r, cookie);
		break;
	}
	Py_END_ALLOW_THREADS
	rmempy_leave(co);
	if (rc < 0) {
		rmempy_error(rc);
		goto fail;
	}
	/* From here the library owns the buffer until the completion: the
	 * holder must outlive it, whatever happens to the Python objects. */
	holder = Py_BuildValue("(NN)", cap, target);
	cap = target = NULL;
	if (!holder || rmempy_pending_add(co, cookie, holder) < 0) {
		/* Cannot happen short of no memory; the operation is in flight,
		 * so leak the holder rather than free a buffer in use. */
		return NULL;
	}
	Py_DECREF(holder);
	return PyLong_FromUnsignedLongLong(cookie);
fail:
	Py_XDECREF(cap);
	Py_XDECREF(target);
	return NULL;
}

#define POLL_MAX 64

PyDoc_STRVAR(poll_doc,
"_poll() -> list of (cookie, errno, result)\n\nrmem_poll(3) with timeout 0 until it returns none (for rmem._aio).\n"
"result: the bytes read (a read of n bytes), a Region (an alloc) or None.");

static PyObject *client_poll(PyObject *self, PyObject *unused)
{
	ClientObject *co = (ClientObject *)self;
	struct rmem_completion out[POLL_MAX];
	PyObject *list = PyList_New(0);
	int n, i;

	(void)unused;
	if (!list)
		return NULL;
	for (;;) {
		if (rmempy_enter(co) < 0)
			goto fail;
		Py_BEGIN_ALLOW_THREADS
		n = rmem_poll(co->c, out, POLL_MAX, 0);
		Py_END_ALLOW_THREADS
		rmempy_leave(co);
		if (n < 0) {
			rmempy_error(n);
			goto fail;
		}
		if (n == 0)
			break;
		for (i = 0; i < n; i++) {
			PyObject *key = PyLong_FromUnsignedLongLong(out[i].cookie), *holder, *res,
				 *t;
			if (!key)
				goto fail;
			holder = co->pending ? PyDict_GetItemWithError(co->pending, key) : NULL;
			if (!holder) {
				Py_DECREF(key);
				if (PyErr_Occurred())
					goto fail;
				continue;
			}
			Py_INCREF(holder);
			PyDict_DelItem(co->pending, key);
			res = PyTuple_GetItem(holder, 1);
			if (out[i].status == 0 && res == Py_None) {
				struct held *h = PyCapsule_GetPointer(PyTuple_GetItem(holder, 0),
								      "rmem.held");
				if (h && !h->has_view)  /* an alloc */
					res = rmempy_region_new(co, &h->r, Py_None);
				else
					Py_INCREF(res);
			} else {
				Py_XINCREF(res);
			}
			Py_DECREF(holder);
			if (!res) {
				Py_DECREF(key);
				goto fail;
			}
			t = Py_BuildValue("(NiN)", key, -out[i].status, res);
			if (!t || PyList_Append(list, t) < 0) {
				Py_XDECREF(t);
				goto fail;
			}
			Py_DECREF(t);
		}
	}
	return list;
fail:
	Py_DECREF(list);
	return NULL;
}

PyDoc_STRVAR(fileno_doc,
"fileno() -> int\n\nrmem_fd(3): a descriptor that is readable when completions of posted\n"
"operations may be ready.  The asyncio calls wait on it with add_reader.");

static PyObject *client_fileno(PyObject *self, PyObject *unused)
{
	ClientObject *co = (ClientObject *)self;
	int fd;

	(void)unused;
	if (rmempy_enter(co) < 0)
		return NULL;
	fd = rmem_fd(co->c);
	rmempy_leave(co);
	if (fd < 0)
		return rmempy_error(fd);
	return PyLong_FromLong(fd);
}

PyDoc_STRVAR(aalloc_doc,
"aalloc(size) -> awaitable Region\n\nalloc() for asyncio, on rmem_post_alloc(3).");

static PyObject *client_aalloc(PyObject *self, PyObject *arg)
{
	PyObject *args = Py_BuildValue("(OO)", self, arg), *res;

	if (!args)
		return NULL;
	res = rmempy_aio_call("aalloc", args);
	Py_DECREF(args);
	return res;
}

PyDoc_STRVAR(register_doc,
"register(buffer) -> Registration\n\nPins a writable or read-only buffer for the data path (rmem_register_buf(3)):\n"
"reads and writes from or into it then register nothing.  The buffer stays\n"
"exported (a bytearray cannot be resized, a memoryview cannot be released)\n"
"until the Registration is closed; it is a context manager.");

static PyObject *client_register(PyObject *self, PyObject *arg)
{
	PyObject *args = Py_BuildValue("(OO)", self, arg), *res;

	if (!args)
		return NULL;
	res = PyObject_CallObject(rmempy_registration_type, args);
	Py_DECREF(args);
	return res;
}

static PyMethodDef client_methods[] = {
	{ "close", client_close, METH_NOARGS, close_doc },
	{ "__enter__", client_enter, METH_NOARGS, NULL },
	{ "__exit__", client_exit, METH_VARARGS, NULL },
	{ "alloc", client_alloc, METH_O, alloc_doc },
	{ "create", client_create, METH_VARARGS, create_doc },
	{ "open", client_open, METH_VARARGS, open_doc },
	{ "unlink", (PyCFunction)(void (*)(void))client_unlink, METH_VARARGS | METH_KEYWORDS,
	  unlink_doc },
	{ "names", client_names, METH_NOARGS, names_doc },
	{ "stats", client_stats, METH_NOARGS, stats_doc },
	{ "register", client_register, METH_O, register_doc },
	{ "fileno", client_fileno, METH_NOARGS, fileno_doc },
	{ "aalloc", client_aalloc, METH_O, aalloc_doc },
	{ "_post", client_post, METH_VARARGS, post_doc },
	{ "_poll", client_poll, METH_NOARGS, poll_doc },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef client_getset[] = {
	{ "transport", client_transport, NULL,
	  "\"rdma\", \"tcp\" or \"unix\": the path this client really uses.", NULL },
	{ "closed", client_closed, NULL, "True once close() has run.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyDoc_STRVAR(client_doc,
"A session with rmemd, made by rmem.connect().\n"
"\n"
"Thread safety is the C library's (rmem.h): any number of threads may call\n"
"on one client at once; each call holds the client for its whole run, so\n"
"calls on one client take turns, and one that waits makes the others wait.\n"
"Every call releases the GIL while it waits, so other Python threads run\n"
"meanwhile.  For parallel waits use several clients.  close() waits for\n"
"the calls in progress; after it every call raises ValueError.");

static PyType_Slot client_slots[] = {
	{ Py_tp_doc, (void *)client_doc },
	{ Py_tp_dealloc, (void *)client_dealloc },
	{ Py_tp_new, (void *)client_new },
	{ Py_tp_methods, client_methods },
	{ Py_tp_getset, client_getset },
	{ 0, NULL },
};

static PyType_Spec client_spec = {
	"rmem.Client", sizeof(ClientObject), 0, Py_TPFLAGS_DEFAULT, client_slots,
};

int rmempy_client_init_type(PyObject *m)
{
	return rmempy_add_type(m, &client_spec, "Client", &rmempy_client_type);
}
