"""asyncio on librmem's posted calls (rmem_post_read(3), rmem_poll(3)).

One waiter per client and event loop: the loop watches the client's
rmem_fd(3) descriptor with add_reader and, when it is readable, takes every
completion with rmem_poll(c, .., 0) and settles the futures by cookie.  No
thread per request: the posts and polls never wait (timeout 0).  Posts on
the TCP path are queued by the library and sent together on the next poll,
so a post schedules one poll on the loop's next turn ("flush"): the posts of
one turn go out as one batch.
"""
import asyncio

_waiters = {}


class _Waiter:
    __slots__ = ("client", "loop", "fd", "futures", "flush_due", "__weakref__")

    def __init__(self, client, loop):
        self.client = client
        self.loop = loop
        self.fd = client.fileno()
        self.futures = {}
        self.flush_due = False
        loop.add_reader(self.fd, self.on_ready)

    def close(self):
        try:
            self.loop.remove_reader(self.fd)
        except (ValueError, RuntimeError, OSError):
            pass
        if _waiters.get(id(self.client)) is self:
            del _waiters[id(self.client)]

    def fail_all(self, exc):
        futures, self.futures = self.futures, {}
        for fut in futures.values():
            if not fut.done():
                fut.set_exception(exc)
        self.close()

    def on_ready(self):
        self.flush_due = False
        try:
            done = self.client._poll()
        except (OSError, ValueError) as e:
            self.fail_all(e)
            return
        for cookie, err, result in done:
            fut = self.futures.pop(cookie, None)
            if fut is None or fut.done():
                continue
            if err:
                fut.set_exception(OSError(err, _strerror(err)))
            else:
                fut.set_result(result)
        if not self.futures:
            # Nothing in flight: stop watching until the next post, so a
            # closed client leaves no reader behind.
            self.close()

    def post(self, region, op, off, obj):
        cookie = self.client._post(region, op, off, obj)
        fut = self.loop.create_future()
        self.futures[cookie] = fut
        if not self.flush_due:
            self.flush_due = True
            self.loop.call_soon(self.on_ready)
        return fut


def _strerror(err):
    from ._rmem import strerror
    return strerror(err)


def _waiter(client):
    loop = asyncio.get_running_loop()
    w = _waiters.get(id(client))
    if w is not None and w.client is client:
        if w.loop is loop:
            return w
        if w.futures:
            # rmem_poll hands out every completion of the client: a second
            # loop would take the first one's.
            raise RuntimeError("this rmem client has asyncio operations in flight "
                               "on another event loop")
        w.close()
    w = _Waiter(client, loop)
    _waiters[id(client)] = w
    return w


def _on_close(client):
    """Client.close() calls this before rmem_close(): operations in flight
    are dropped, so their awaiters get ValueError (in their loop's thread)
    and the reader goes before the descriptor does."""
    w = _waiters.get(id(client))
    if w is None or w.client is not client:
        return
    exc = ValueError("rmem client closed with the operation in flight")
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is w.loop:
        w.fail_all(exc)
    else:
        w.close()
        futures, w.futures = w.futures, {}
        for fut in futures.values():
            w.loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_exception(exc))


async def aread(region, off, n):
    """r.aread(off, n): n bytes at off, read straight into a new bytes."""
    return await _waiter(region.client).post(region, 1, off, n)


async def aread_into(region, off, buf):
    """r.aread_into(off, buf): fills buf in place; returns its length in bytes."""
    await _waiter(region.client).post(region, 0, off, buf)
    return memoryview(buf).nbytes


async def awrite(region, off, buf):
    """r.awrite(off, buf): writes buf from its own memory."""
    await _waiter(region.client).post(region, 2, off, buf)


async def aalloc(client, size):
    """c.aalloc(size): a Region, on rmem_post_alloc(3)."""
    return await _waiter(client).post(None, 3, size, None)
