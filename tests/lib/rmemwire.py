# rmemwire.py - a raw rmem client in Python for tests that restart rmemd
# (tests/func/test_restart.py): every request the restart tests need, one
# call each, over rawcall.call (docs/protocol.md).  Replies come back as
# (status, fields); status is 0 or a positive errno, as on the wire.
import hashlib
import hmac
import os
import socket
import struct

from rawcall import CONST, HDR, HDR_LEN, MAGIC, OP, VERSION, call

# The opcodes and flags of common/proto.h (read by rawcall), by the names
# the tests use.
HELLO, ALLOC, FREE, WRITE, READ, STATS = (OP[n] for n in ("HELLO", "ALLOC", "FREE", "WRITE",
                                                          "READ", "STATS"))
REGIONS, CREATE, OPEN, UNLINK, NAMES, RESUME, REKEY = (
    OP[n] for n in ("REGIONS", "CREATE", "OPEN", "UNLINK", "NAMES", "RESUME", "REKEY"))
PING, AUTH_BEGIN, AUTH = OP["PING"], OP["AUTH_BEGIN"], OP["AUTH"]
F_RESUMABLE = CONST["HELLO_F_RESUMABLE"]
CREATE_F_PIECE, NAME_F_PIECE = CONST["CREATE_F_PIECE"], CONST["NAME_F_PIECE"]


def status(body):
    return struct.unpack_from("<i", body)[0]


class Client:
    def __init__(self, addr):
        if isinstance(addr, str):
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        else:
            self.s = socket.socket()
            self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.s.settimeout(20)
        self.s.connect(addr)
        self.rid = 0

    def close(self):
        self.s.close()

    def req(self, op, payload):
        self.rid += 1
        return call(self.s, op, self.rid, payload)

    def auth(self, tenant, secret):
        """The tenant handshake (AUTH_BEGIN, AUTH); 0 or the status."""
        cn = os.urandom(32)
        t = tenant.encode().ljust(32, b"\0")
        b = self.req(AUTH_BEGIN, t + cn)
        if status(b):
            return status(b)
        sid = struct.unpack_from("<Q", b, 8)[0]
        msg = b"rmem-auth-v1" + b[16:48] + cn + t + struct.pack("<Q", sid)
        return status(self.req(AUTH, hmac.new(secret, msg, hashlib.sha256).digest()))

    def raw(self, op, payload):
        """One request whose reply may be an ERROR frame: (reply opcode, status)."""
        self.rid += 1
        self.s.sendall(struct.pack(HDR, MAGIC, VERSION, op, 0, 0, len(payload), self.rid) +
                       payload)
        hdr = b""
        while len(hdr) < HDR_LEN:
            got = self.s.recv(HDR_LEN - len(hdr))
            if not got:
                return None, None
            hdr += got
        rop, length = struct.unpack_from("<HxxxxI", hdr, 6)
        body = b""
        while len(body) < length:
            body += self.s.recv(length - len(body))
        return rop, status(body)

    def resume_raw(self, sid, token):
        p = struct.pack("<Q16sIIII", sid, token, VERSION, F_RESUMABLE, os.getpid(), 0)
        return self.raw(RESUME, p)

    def _hello_reply(self, b):
        st = status(b)
        if st:
            return st, None
        sid, ver, max_io, attach, port, mode = struct.unpack_from("<QIIQHB", b, 8)
        token = b[CONST["HELLO_REP_LEN"]:] if len(b) == CONST["HELLO_REP_RESUME_LEN"] else None
        return 0, {"id": sid, "token": token, "attach": attach}

    def hello(self, features=F_RESUMABLE):
        return self._hello_reply(self.req(HELLO, struct.pack("<IIII", VERSION, features, os.getpid(), 0)))

    def resume(self, sid, token):
        p = struct.pack("<Q16sIIII", sid, token, VERSION, F_RESUMABLE, os.getpid(), 0)
        return self._hello_reply(self.req(RESUME, p))

    def _region(self, b):
        st = status(b)
        if st:
            return st, None
        rid, addr, length, rkey, flags = struct.unpack_from("<QQQII", b, 8)
        return 0, {"id": rid, "addr": addr, "len": length, "key": rkey, "flags": flags}

    def alloc(self, size):
        return self._region(self.req(ALLOC, struct.pack("<QII", size, 0, 0)))

    def free(self, rid, key):
        return status(self.req(FREE, struct.pack("<QII", rid, key, 0)))

    def write(self, rid, key, off, data):
        return status(self.req(WRITE, struct.pack("<QQII", rid, off, key, 0) + data))

    def read(self, rid, key, off, n):
        b = self.req(READ, struct.pack("<QQII", rid, off, key, n))
        return status(b), b[8:]

    def _name(self, op, name, size=0, flags=0):
        n = name.encode()
        return self.req(op, struct.pack("<QIHH", size, flags, len(n), 0) + n)

    def create(self, name, size, flags=0):
        return self._region(self._name(CREATE, name, size, flags))

    def open(self, name, access=3):
        return self._region(self._name(OPEN, name, 0, access))

    def unlink(self, name):
        return status(self._name(UNLINK, name))

    def ping(self):
        return status(self.req(PING, b""))

    def rekey(self, rid):
        return self._region(self.req(REKEY, struct.pack("<QII", rid, 0, 0)))

    def stats(self):
        b = self.req(STATS, b"")
        count = struct.unpack_from("<I", b, 8)[0]
        v = struct.unpack_from("<%dQ" % count, b, 16)
        keys = ["pool", "used", "free", "largest", "regions", "clients"]
        return dict(zip(keys, v))

    def _list(self, op, reclen):
        after, out = 0, []
        while True:
            b = self.req(op, struct.pack("<QII", after, 1000, 0))
            assert status(b) == 0, "listing refused: %d" % status(b)
            count = struct.unpack_from("<I", b, 8)[0]
            for i in range(count):
                out.append(b[16 + i * reclen:16 + (i + 1) * reclen])
            if count == 0:
                return out
            after = struct.unpack_from("<Q", out[-1])[0]

    def names(self):
        """Admin: {(tenant, name): (id, length, handles, flags)}."""
        res = {}
        for r in self._list(NAMES, 320):
            oid, length, age, handles, flags = struct.unpack_from("<QQQII", r)
            tenant = r[32:64].split(b"\0")[0].decode()
            name = r[64:320].split(b"\0")[0].decode()
            res[(tenant, name)] = (oid, length, handles, flags)
        return res

    def regions(self):
        """Admin: [(id, addr, length, client, pool)]."""
        return [struct.unpack_from("<QQQQI", r) for r in self._list(REGIONS, 40)]
