"""asyncio on the posted calls: the loop waits on rmem_fd with add_reader,
64 requests in flight, no thread per request."""
import asyncio
import errno
import select
import threading
import time

import pytest

import rmem


def run(coro):
    return asyncio.run(coro)


def test_sixty_four_in_flight(client):
    n, size = 64, 16384
    r = client.alloc(n * size)

    async def main():
        threads = threading.active_count()
        chunks = [bytes([i]) * size for i in range(n)]
        writes = [r.awrite(i * size, chunks[i]) for i in range(n)]
        assert await asyncio.gather(*writes) == [None] * n
        reads = [asyncio.ensure_future(r.aread(i * size, size)) for i in range(n)]
        await asyncio.sleep(0)
        # All 64 posted before any completes is what the loop allows; at
        # least none of them made a thread.
        assert threading.active_count() == threads
        got = await asyncio.gather(*reads)
        assert got == chunks
        bufs = [bytearray(size) for _ in range(n)]
        lens = await asyncio.gather(*[r.aread_into(i * size, bufs[i]) for i in range(n)])
        assert lens == [size] * n and bufs == chunks
        assert threading.active_count() == threads

    run(main())
    r.free()


def test_aalloc(client):
    async def main():
        regions = await asyncio.gather(*[client.aalloc(4096) for _ in range(16)])
        assert len({x.id for x in regions}) == 16
        for i, x in enumerate(regions):
            assert isinstance(x, rmem.Region) and len(x) >= 4096
            await x.awrite(0, b"%d" % i)
        for i, x in enumerate(regions):
            assert await x.aread(0, len(b"%d" % i)) == b"%d" % i
            x.free()

    run(main())


def test_async_errors(client, transport):
    name = "py/async-" + transport

    async def main():
        r = client.alloc(4096)
        # What the library checks itself is raised at the call.
        with pytest.raises(OSError) as e:
            await r.aread(4096, 1)
        assert e.value.errno == errno.ERANGE
        ro_src = client.create(name, 4096)
        ro = client.open(name, "r")
        with pytest.raises(PermissionError):
            await ro.awrite(0, b"x")
        # What the daemon refuses arrives as the completion's status.
        client.unlink(name, revoke=True)
        with pytest.raises(OSError) as e:
            await ro.aread(0, 4)
        assert e.value.errno in (errno.EACCES, errno.ENOENT)
        assert e.value.strerror == rmem.strerror(e.value.errno)
        with pytest.raises(OSError) as e:
            await client.aalloc(1 << 40)
        assert e.value.errno in (errno.ENOMEM, errno.EDQUOT)
        r.free()
        del ro_src

    run(main())


def test_awrite_holds_the_buffer(client):
    """A buffer being written cannot be resized until the write is done."""
    async def main():
        with client.alloc(1 << 20) as r:
            buf = bytearray(1 << 20)
            fut = asyncio.ensure_future(r.awrite(0, buf))
            await asyncio.sleep(0)
            if not fut.done():
                with pytest.raises(BufferError):
                    buf.extend(b"x")
            await fut
            buf.extend(b"x")

    run(main())


def test_after_close(daemon, transport):
    async def main():
        c = daemon.connect(transport)
        r = c.alloc(64)
        c.close()
        with pytest.raises(ValueError):
            await r.aread(0, 8)
        with pytest.raises(ValueError):
            await c.aalloc(64)

    run(main())


def test_fileno_readiness(client):
    """rmem_fd: not readable with nothing in flight; readable once a
    posted read's reply is in; quiet again once it is polled."""
    r = client.alloc(4096)
    fd = client.fileno()
    assert client.fileno() == fd
    assert select.select([fd], [], [], 0)[0] == []
    cookie = client._post(r, 1, 0, 8)
    assert select.select([fd], [], [], 5)[0] == [fd]
    done = []
    for _ in range(100):
        done += client._poll()
        if done:
            break
        select.select([fd], [], [], 1)
    assert [(c, e) for c, e, _ in done] == [(cookie, 0)]
    assert select.select([fd], [], [], 0)[0] == []
    r.free()


def test_fd_wakes_for_completion_another_thread_took(client):
    """A synchronous call on another thread receives the posted read's
    reply (calls take turns on the stream): the descriptor still wakes."""
    r = client.alloc(4096)
    fd = client.fileno()
    client._post(r, 1, 0, 8)
    t = threading.Thread(target=lambda: r.read(0, 8))
    t.start()
    t.join(10)
    assert select.select([fd], [], [], 5)[0] == [fd]
    assert len(client._poll()) == 1
    assert select.select([fd], [], [], 0)[0] == []
    r.free()


def test_fd_wakes_for_completion_the_keepalive_took(client):
    """Nobody calls on the client after a post: the library's keepalive
    thread pings after a third of the lease (10 s here) and takes the
    posted read's reply off the stream on its way.  The socket is quiet
    then, but the descriptor must still be readable: the engine writes its
    eventfd when it queues the completion."""
    r = client.alloc(4096)
    fd = client.fileno()
    # With nothing else in flight the post sends it at once (rmem.h).
    client._post(r, 1, 0, 8)
    time.sleep(4.5)         # > lease / 3: the keepalive thread has pinged
    assert select.select([fd], [], [], 0)[0] == [fd]
    done = client._poll()
    assert len(done) == 1 and done[0][1] == 0
    assert select.select([fd], [], [], 0)[0] == []
    r.free()


def test_close_with_operations_in_flight():
    """close() while asyncio calls wait on a stopped daemon: the awaiters
    get ValueError, nothing hangs."""
    import os
    import signal
    from conftest import Daemon, NET, RDMA
    d = Daemon(pool="16M")
    d.start()
    try:
        c = d.connect(NET)
        r = c.alloc(4096)

        async def main():
            os.kill(d.proc.pid, signal.SIGSTOP)
            # Over RDMA a read is one-sided: alloc waits on the daemon.
            futs = [asyncio.ensure_future(c.aalloc(64) if RDMA else r.aread(0, 8))
                    for _ in range(4)]
            await asyncio.sleep(0.3)
            assert not any(f.done() for f in futs)
            c.close()
            for f in futs:
                with pytest.raises(ValueError):
                    await asyncio.wait_for(f, 10)

        run(main())
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
        d.cleanup()


def test_two_loops_one_client(client):
    r = client.alloc(64)
    r.write(0, b"twoloops")
    assert run(r.aread(0, 8)) == b"twoloops"
    assert run(r.aread(0, 8)) == b"twoloops"   # a new loop takes over when idle
    r.free()
