/*
 * rmempy.h - what the parts of the rmem Python extension (rmem._rmem) share.
 *
 * The extension is built on the Limited API of Python 3.11 (abi3), so one
 * binary serves every later CPython; it sees librmem only through rmem.h,
 * like any application (docs/architecture.md, "Layers").
 *
 * Every call that can wait on the daemon or the network runs with the GIL
 * released.  Python objects are only touched with it held: the C library
 * gets plain values (a copy of the region, the buffer's pointer and length),
 * and the caller's buffer stays exported (PyObject_GetBuffer) for the whole
 * call, so it can be neither resized nor freed meanwhile.
 */
#ifndef RMEMPY_H
#define RMEMPY_H

#define Py_LIMITED_API 0x030B0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>

#include <rmem.h>

/*
 * A client: one rmem_client.  The C library lets any number of threads call
 * on it at once but rmem_close() must race with none of them, so every call
 * counts itself in busy (with the GIL held) before it lets the GIL go, and
 * close() marks the client closed (no call starts any more) and then waits
 * for busy to drop to 0 before it calls rmem_close().
 */
typedef struct {
	PyObject_HEAD
	rmem_client *c;
	bool closed;
	long busy;
	PyObject *pending;  /* asyncio: cookie -> (future, holder), or NULL */
	uint64_t next_cookie;
} ClientObject;

/* A region or a handle of a named region: a struct rmem_region of client. */
typedef struct {
	PyObject_HEAD
	ClientObject *client;  /* strong */
	struct rmem_region r;
	bool freed;
	PyObject *name;        /* str, or None for an anonymous region */
} RegionObject;

extern PyObject *rmempy_client_type;
extern PyObject *rmempy_region_type;
extern PyObject *rmempy_registration_type;

/* Raises OSError(-err, rmem_strerror(err)): Python picks the subclass
 * (FileExistsError for EEXIST...).  Returns NULL. */
PyObject *rmempy_error(int err);

/* With the GIL held: ValueError when the client is closed, else counts a
 * call in; pair with rmempy_leave().  0 or -1 (exception set). */
int rmempy_enter(ClientObject *co);
void rmempy_leave(ClientObject *co);

/* A uint64 from a Python int, with OverflowError/TypeError.  0 or -1. */
int rmempy_u64(PyObject *o, uint64_t *out);

/*
 * Every str that reaches librmem as a C string (a region's name, the
 * endpoint, connect's tenant, transport and tcp_congestion) comes through
 * this one converter, for PyArg_Parse's "O&": a str only (TypeError
 * otherwise; bytes are not taken), its UTF-8 with no NUL in it (ValueError:
 * C would see "kv\0x" as "kv", another name than the one asked for).  out
 * is a struct rmempy_cstr; s points into obj's UTF-8 cache and lives as
 * long as obj (borrowed: the caller's argument).  1 or 0 (exception set).
 */
struct rmempy_cstr {
	PyObject *obj;
	const char *s;
};
int rmempy_cstr_conv(PyObject *o, void *out);

/* A new Region of client co for r; name: str or None (borrowed). */
PyObject *rmempy_region_new(ClientObject *co, const struct rmem_region *r, PyObject *name);

/* The tail of every tp_dealloc: frees self with its type's tp_free and
 * drops self's reference to its (heap) type. */
void rmempy_type_free(PyObject *self);

/* Makes the type of spec into *type and adds it to m as name.  0 or -1. */
int rmempy_add_type(PyObject *m, PyType_Spec *spec, const char *name, PyObject **type);

/* The type specs' initialisers (client.c, region.c, registration.c). */
int rmempy_client_init_type(PyObject *m);
int rmempy_region_init_type(PyObject *m);
int rmempy_registration_init_type(PyObject *m);

/* Calls rmem._aio.NAME(*args) (asyncio glue, in Python). */
PyObject *rmempy_aio_call(const char *name, PyObject *args);

#endif /* RMEMPY_H */
