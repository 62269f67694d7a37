"""KServe v2's BYTES tensor layout as Triton's clients write it (tritonclient.utils.serialize_byte_tensor /
deserialize_bytes_tensor): per element, its length as a little-endian uint32, then its bytes. Shared by the
Python tests that send or read BYTES over HTTP's binary form or gRPC's raw contents."""

import struct


def serialize_bytes(values):
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


def deserialize_bytes(raw):
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4:at + 4 + n])
        at += 4 + n
    return out
