"""rmem: remote memory from Python.

The binding of librmem (rmem.h), shipped with it.  A session with rmemd is
a Client; the memory it hands out is a Region::

    import rmem
    with rmem.connect("tcp://10.0.0.7:7470", tenant="ml",
                      secret_file="/etc/rmemd/ml.key") as c:
        c.transport                     # "rdma", "tcp" or "unix"
        with c.alloc(1 << 20) as r:     # freed at the end of the block
            r.write(0, b"hello")        # any bytes-like object, in place
            r.read(0, 5)                # b'hello'
            buf = bytearray(5)
            r.read_into(0, buf)         # any writable buffer, in place
            r.faa(8, 1)                 # the old value
        s = c.create("kv/layer0", 64 << 20)   # a named region
        o = c.open("kv/layer0", "r")          # another handle, read-only
        c.unlink("kv/layer0")

Errors raise OSError with the positive errno, so Python picks the subclass
(FileExistsError, PermissionError, ConnectionAbortedError, ...), and
rmem_strerror(3)'s text.  A call on a freed region or a closed client
raises ValueError.

Every call releases the GIL while it waits.  Thread safety is the C
library's: any thread may call on a client, calls on one client take
turns; use several clients for parallel waits.

asyncio: ``await r.aread(off, n)``, ``await r.aread_into(off, buf)``,
``await r.awrite(off, buf)``, ``await c.aalloc(n)``, on the posted calls
(rmem_post_read(3)); the event loop waits on ``c.fileno()`` (rmem_fd(3))
with add_reader, no thread per request.

Zero-copy: write(), read_into() and their asyncio forms give the library
the caller's buffer itself; over RDMA the NIC moves the bytes in place.
``c.register(buf)`` pins a buffer you reuse (rmem_register_buf(3)) and
keeps it exported, so Python cannot resize or free it meanwhile.

See docs/python.md and the man pages of librmem(7).
"""
from ._rmem import (  # noqa: F401
    Client,
    NAME_MAX,
    READ,
    Region,
    Registration,
    WRITE,
    connect,
    library_version,
    strerror,
)

__all__ = ["connect", "Client", "Region", "Registration", "strerror",
           "library_version", "READ", "WRITE", "NAME_MAX"]
