# rawcall.py - the control protocol by hand, for the shell tests' Python
# helpers (docs/protocol.md): one request out, its reply's payload back.
# The C tests' raw client is tests/lib/raw.c; this is its small cousin.
import struct

MAGIC = 0x4d454d52
HDR = "<IHHHHIQ"  # magic, version, opcode, flags, reserved, length, request id


def call(s, op, rid, payload):
    """Sends request op with payload on socket s; returns the reply's payload."""
    s.sendall(struct.pack(HDR, MAGIC, 1, op, 0, 0, len(payload), rid) + payload)
    hdr = b""
    while len(hdr) < 24:
        hdr += s.recv(24 - len(hdr))
    magic, ver, rop, flags, _, length, rrid = struct.unpack(HDR, hdr)
    body = b""
    while len(body) < length:
        body += s.recv(length - len(body))
    assert magic == MAGIC and rop == op and rrid == rid, "bad reply"
    return body
