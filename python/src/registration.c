/*
 * registration.c - rmem.Registration: a buffer pinned for the data path
 * with rmem_register_buf(3), made by Client.register(buffer).
 *
 * The registration holds the buffer's export for as long as it lives, so
 * Python cannot resize or free the memory the NIC may write into: the
 * unsafety of handing a raw address to a registration call goes away.
 */
#include "rmempy.h"

PyObject *rmempy_registration_type;

typedef struct {
	PyObject_HEAD
	ClientObject *client;
	Py_buffer view;
	bool live;
} RegObject;

/* Unregisters (if the client is still open: rmem_close released it) and
 * lets the buffer go.  0 or a negative errno (the registration stays). */
static int reg_release(RegObject *g)
{
	ClientObject *co = g->client;
	void *buf = g->view.buf;
	int rc = 0;

	if (!g->live)
		return 0;
	if (co && !co->closed && co->c) {
		co->busy++;
		Py_BEGIN_ALLOW_THREADS
		rc = rmem_unregister_buf(co->c, buf);
		Py_END_ALLOW_THREADS
		co->busy--;
		if (rc < 0)
			return rc;
	}
	g->live = false;
	PyBuffer_Release(&g->view);
	return 0;
}

static PyObject *reg_new(PyTypeObject *t, PyObject *args, PyObject *kw)
{
	PyObject *client, *obj;
	RegObject *g;
	ClientObject *co;
	int rc;

	if (kw && PyDict_Size(kw) > 0) {
		PyErr_SetString(PyExc_TypeError, "Registration takes no keywords");
		return NULL;
	}
	if (!PyArg_ParseTuple(args, "OO:Registration", &client, &obj))
		return NULL;
	if (!PyObject_TypeCheck(client, (PyTypeObject *)rmempy_client_type)) {
		PyErr_SetString(PyExc_TypeError, "use Client.register()");
		return NULL;
	}
	co = (ClientObject *)client;
	g = (RegObject *)PyType_GenericAlloc(t, 0);
	if (!g)
		return NULL;
	/* Writable if it can be (reads land there), read-only otherwise. */
	if (PyObject_GetBuffer(obj, &g->view, PyBUF_WRITABLE) < 0) {
		PyErr_Clear();
		if (PyObject_GetBuffer(obj, &g->view, PyBUF_SIMPLE) < 0) {
			Py_DECREF(g);
			return NULL;
		}
	}
	g->live = true;
	Py_INCREF((PyObject *)co);
	g->client = co;
	if (rmempy_enter(co) < 0) {
		Py_DECREF(g);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	rc = rmem_register_buf(co->c, g->view.buf, (size_t)g->view.len);
	Py_END_ALLOW_THREADS
	rmempy_leave(co);
	if (rc < 0) {
		g->live = false;
		PyBuffer_Release(&g->view);
		Py_DECREF(g);
		return rmempy_error(rc);
	}
	return (PyObject *)g;
}

static void reg_dealloc(PyObject *self)
{
	RegObject *g = (RegObject *)self;

	if (reg_release(g) < 0 && g->live) {
		/* Transfers still use it (-EBUSY): the memory must stay. */
		g->live = false;
	}
	Py_CLEAR(g->client);
	rmempy_type_free(self);
}

static PyObject *reg_close(PyObject *self, PyObject *unused)
{
	int rc;

	(void)unused;
	rc = reg_release((RegObject *)self);
	if (rc < 0)
		return rmempy_error(rc);
	Py_RETURN_NONE;
}

static PyObject *reg_enter(PyObject *self, PyObject *unused)
{
	(void)unused;
	Py_INCREF(self);
	return self;
}

static PyObject *reg_exit(PyObject *self, PyObject *args)
{
	int rc = reg_release((RegObject *)self);

	(void)args;
	if (rc < 0)
		return rmempy_error(rc);
	Py_RETURN_FALSE;
}

static PyMethodDef reg_methods[] = {
	{ "close", reg_close, METH_NOARGS,
	  "close()\n\nrmem_unregister_buf(3), then lets the buffer go.  OSError(EBUSY) while\n"
	  "posted transfers use it." },
	{ "__enter__", reg_enter, METH_NOARGS, NULL },
	{ "__exit__", reg_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyType_Slot reg_slots[] = {
	{ Py_tp_doc, (void *)"A buffer registered for the data path: see Client.register()." },
	{ Py_tp_new, (void *)reg_new },
	{ Py_tp_dealloc, (void *)reg_dealloc },
	{ Py_tp_methods, reg_methods },
	{ 0, NULL },
};

static PyType_Spec reg_spec = {
	"rmem.Registration", sizeof(RegObject), 0, Py_TPFLAGS_DEFAULT, reg_slots,
};

int rmempy_registration_init_type(PyObject *m)
{
	return rmempy_add_type(m, &reg_spec, "Registration", &rmempy_registration_type);
}
