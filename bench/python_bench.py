#!/usr/bin/env python3
"""python_bench.py - the Python binding's side of make bench-python.

    python_bench.py ENDPOINT bw read|write SIZE DEPTH SECONDS
    python_bench.py ENDPOINT lat read SIZE ITERS

bw: asyncio, DEPTH operations of SIZE bytes kept in flight (aread_into /
awrite on one preallocated buffer each) for SECONDS; lat: synchronous
r.read_into of SIZE bytes, one at a time.  Prints one JSON object shaped
like rmem-perf --json's (mb_per_s is 10^6 bytes/s; lat_us p50/p99).
"""
import asyncio
import json
import sys
import time

import rmem


def bw(c, op, size, depth, seconds):
    r = c.alloc(size * depth)
    bufs = [bytearray(size) for _ in range(depth)]

    async def main():
        done = 0
        end = time.monotonic() + seconds

        async def lane(i):
            nonlocal done
            off = i * size
            while time.monotonic() < end:
                if op == "read":
                    await r.aread_into(off, bufs[i])
                else:
                    await r.awrite(off, bufs[i])
                done += 1

        t0 = time.monotonic()
        await asyncio.gather(*[lane(i) for i in range(depth)])
        return done, time.monotonic() - t0

    done, secs = asyncio.run(main())
    r.free()
    return {"tool": "python", "op": op, "mode": "bw", "transport": c.transport, "size": size,
            "depth": depth, "iters": done, "seconds": secs,
            "mb_per_s": done * size / secs / 1e6, "msg_per_s": done / secs}


def lat(c, op, size, iters):
    r = c.alloc(max(size, 64))
    buf = bytearray(size)
    for _ in range(min(1000, iters)):       # warm up
        r.read_into(0, buf)
    samples = []
    clock = time.perf_counter_ns
    for _ in range(iters):
        t = clock()
        r.read_into(0, buf)
        samples.append(clock() - t)
    samples.sort()
    r.free()
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] / 1000.0
    return {"tool": "python", "op": op, "mode": "lat", "transport": c.transport, "size": size,
            "iters": iters, "lat_us": {"p50": pick(0.5), "p99": pick(0.99),
                                       "max": samples[-1] / 1000.0}}


def main(argv):
    ep, mode, op, size = argv[1], argv[2], argv[3], int(argv[4])
    with rmem.connect(ep) as c:
        if mode == "bw":
            res = bw(c, op, size, int(argv[5]), float(argv[6]))
        else:
            res = lat(c, op, size, int(argv[5]))
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main(sys.argv)
