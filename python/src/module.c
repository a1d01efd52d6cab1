/*
 * module.c - rmem._rmem: the module, errors, and rmem.connect().
 */
#include "rmempy.h"

#include <errno.h>
#include <string.h>

PyObject *rmempy_error(int err)
{
	PyObject *args;

	if (err > 0)
		err = -err;
	/* OSError(errno, strerror) instantiates the errno's subclass. */
	args = Py_BuildValue("(is)", -err, rmem_strerror(err));
	if (args) {
		PyErr_SetObject(PyExc_OSError, args);
		Py_DECREF(args);
	}
	return NULL;
}

int rmempy_u64(PyObject *o, uint64_t *out)
{
	unsigned long long v;

	if (!PyLong_Check(o)) {
		PyErr_SetString(PyExc_TypeError, "an int is required");
		return -1;
	}
	v = PyLong_AsUnsignedLongLong(o);
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	*out = v;
	return 0;
}

int rmempy_cstr_conv(PyObject *o, void *out)
{
	struct rmempy_cstr *c = out;
	Py_ssize_t n;
	const char *s;

	if (!PyUnicode_Check(o)) {
		PyErr_SetString(PyExc_TypeError, "a str is required");
		return 0;
	}
	s = PyUnicode_AsUTF8AndSize(o, &n);
	if (!s)
		return 0;
	if (strlen(s) != (size_t)n) {
		PyErr_SetString(PyExc_ValueError, "a name or string for librmem has a NUL character");
		return 0;
	}
	c->obj = o;
	c->s = s;
	return 1;
}

void rmempy_type_free(PyObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);
	freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);

	f(self);
	Py_DECREF(tp);
}

int rmempy_add_type(PyObject *m, PyType_Spec *spec, const char *name, PyObject **type)
{
	*type = PyType_FromSpec(spec);
	if (!*type)
		return -1;
	return PyModule_AddObjectRef(m, name, *type);
}

PyObject *rmempy_aio_call(const char *name, PyObject *args)
{
	PyObject *mod, *fn, *res = NULL;

	mod = PyImport_ImportModule("rmem._aio");
	if (!mod)
		return NULL;
	fn = PyObject_GetAttrString(mod, name);
	Py_DECREF(mod);
	if (fn) {
		res = PyObject_CallObject(fn, args);
		Py_DECREF(fn);
	}
	return res;
}

/* An optional str keyword into a C string, or NULL: a str through
 * rmempy_cstr_conv (v outlives the call: it is the caller's argument), or
 * with path a str, bytes or os.PathLike through PyUnicode_FSConverter into
 * *keep (bytes; it refuses a NUL itself). */
static int opt_str(PyObject *v, const char **out, PyObject **keep, bool path)
{
	struct rmempy_cstr c;

	*out = NULL;
	if (!v || v == Py_None)
		return 0;
	if (!path) {
		if (!rmempy_cstr_conv(v, &c))
			return -1;
		*out = c.s;
		return 0;
	}
	if (!PyUnicode_FSConverter(v, keep))
		return -1;
	*out = PyBytes_AsString(*keep);
	return *out ? 0 : -1;
}

static int opt_int(PyObject *v, int *out)
{
	long l;

	if (!v || v == Py_None)
		return 0;
	l = PyLong_AsLong(v);
	if (l == -1 && PyErr_Occurred())
		return -1;
	if (l < INT32_MIN || l > INT32_MAX) {
		PyErr_SetString(PyExc_OverflowError, "out of range for a C int");
		return -1;
	}
	*out = (int)l;
	return 0;
}

PyDoc_STRVAR(connect_doc,
"connect(endpoint, *, transport=None, timeout_ms=None, tenant=None,\n"
"        secret_file=None, resume_ms=None, tcp_congestion=None) -> Client\n"
"\n"
"Connects to rmemd and opens a session (rmem_connect(3)).\n"
"\n"
"endpoint is any endpoint rmem_connect takes: \"HOST:PORT\",\n"
"\"tcp://HOST:PORT\", \"rdma://HOST:PORT\", \"unix:PATH\" or\n"
"\"etcd://HOST:PORT[,HOST:PORT...]/NAME\" for a cluster (\"etcds://...\"\n"
"with ?etcd_ca=PATH&etcd_cert=PATH&etcd_key=PATH: etcd over TLS), or\n"
"\"tls://HOST:PORT?tls_ca=PATH&tls_cert=PATH&tls_key=PATH&tls_name=NAME\"\n"
"for TLS 1.3 to a daemon with listen.tls.\n"
"The keywords are the fields of struct rmem_opts; None keeps the library's\n"
"default.\n"
"secret_file may be a str, bytes or os.PathLike.\n"
"\n"
"Raises OSError (its subclass for the errno: ConnectionRefusedError,\n"
"PermissionError...) with rmem_strerror's text.  The client is a context\n"
"manager that closes it.");

static PyObject *py_connect(PyObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { (char *)"endpoint", (char *)"transport", (char *)"timeout_ms", (char *)"tenant", (char *)"secret_file",
				  (char *)"resume_ms", (char *)"tcp_congestion", NULL };
	struct rmempy_cstr endpoint;
	PyObject *transport = NULL, *timeout = NULL, *tenant = NULL, *secret = NULL,
		 *resume = NULL, *cc = NULL;
	PyObject *k_tr = NULL, *k_te = NULL, *k_se = NULL, *k_cc = NULL, *ret = NULL;
	struct rmem_opts o;
	rmem_client *c = NULL;
	ClientObject *co;
	int rc;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|$OOOOOO:connect", kwlist,
					 rmempy_cstr_conv, &endpoint,
					 &transport, &timeout, &tenant, &secret, &resume, &cc))
		return NULL;
	rmem_opts_init(&o, sizeof o);
	if (opt_str(transport, &o.transport, &k_tr, false) < 0 ||
	    opt_str(tenant, &o.tenant, &k_te, false) < 0 ||
	    opt_str(secret, &o.secret_file, &k_se, true) < 0 ||
	    opt_str(cc, &o.tcp_congestion, &k_cc, false) < 0 ||
	    opt_int(timeout, &o.timeout_ms) < 0 || opt_int(resume, &o.resume_ms) < 0)
		goto out;

	Py_BEGIN_ALLOW_THREADS
	rc = rmem_connect(endpoint.s, &o, &c);
	Py_END_ALLOW_THREADS
	if (rc < 0) {
		rmempy_error(rc);
		goto out;
	}
	co = (ClientObject *)PyType_GenericAlloc((PyTypeObject *)rmempy_client_type, 0);
	if (!co) {
		Py_BEGIN_ALLOW_THREADS
		rmem_close(c);
		Py_END_ALLOW_THREADS
		goto out;
	}
	co->c = c;
	co->next_cookie = 1;
	ret = (PyObject *)co;
out:
	Py_XDECREF(k_tr);
	Py_XDECREF(k_te);
	Py_XDECREF(k_se);
	Py_XDECREF(k_cc);
	return ret;
}

PyDoc_STRVAR(strerror_doc,
"strerror(errno) -> str\n\nrmem_strerror(3): the text for an errno (either sign).");

static PyObject *py_strerror(PyObject *self, PyObject *arg)
{
	long e = PyLong_AsLong(arg);

	(void)self;
	if (e == -1 && PyErr_Occurred())
		return NULL;
	if (e < INT32_MIN || e > INT32_MAX)
		e = INT32_MAX;
	return PyUnicode_FromString(rmem_strerror((int)e));
}

PyDoc_STRVAR(version_doc,
"library_version() -> (major, minor, patch)\n\nThe librmem that runs (rmem_version(3)).");

static PyObject *py_version(PyObject *self, PyObject *unused)
{
	uint32_t v = rmem_version();

	(void)self;
	(void)unused;
	return Py_BuildValue("(III)", (unsigned)(v >> 16), (unsigned)((v >> 8) & 0xff),
			     (unsigned)(v & 0xff));
}

static PyMethodDef methods[] = {
	{ "connect", (PyCFunction)(void (*)(void))py_connect, METH_VARARGS | METH_KEYWORDS,
	  connect_doc },
	{ "strerror", py_strerror, METH_O, strerror_doc },
	{ "library_version", py_version, METH_NOARGS, version_doc },
	{ NULL, NULL, 0, NULL },
};

PyDoc_STRVAR(module_doc,
"The C part of the rmem binding; use the rmem package, which re-exports it.");

static struct PyModuleDef moddef = {
	PyModuleDef_HEAD_INIT, "rmem._rmem", module_doc, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__rmem(void);
PyMODINIT_FUNC PyInit__rmem(void)
{
	PyObject *m = PyModule_Create(&moddef);

	if (!m)
		return NULL;
	if (rmempy_client_init_type(m) < 0 || rmempy_region_init_type(m) < 0 ||
	    rmempy_registration_init_type(m) < 0 ||
	    PyModule_AddIntConstant(m, "READ", RMEM_READ) < 0 ||
	    PyModule_AddIntConstant(m, "WRITE", RMEM_WRITE) < 0 ||
	    PyModule_AddIntConstant(m, "NAME_MAX", RMEM_NAME_MAX) < 0 ||
	    PyModule_AddStringConstant(m, "HEADER_VERSION", "1.2") < 0) {
		Py_DECREF(m);
		return NULL;
	}
	return m;
}
