"""A gRPC client that never grants HTTP/2 flow-control window, for the tests of the server's write
deadline (tests/process/grpc_test.py). Standard library only: HTTP/2 frames (RFC 9113) and HPACK literals
(RFC 7541) written by hand, as much as such a client needs.

It announces SETTINGS_INITIAL_WINDOW_SIZE = 0, so the server may send no DATA on any stream: every
reply stays in the server, as with a client that stopped reading. It answers SETTINGS and PING (a
silent peer would be dropped for that instead) and reads and records what the server sends: which
streams got their response HEADERS and which were reset (RST_STREAM) or ended (trailers)."""

import socket
import struct
import threading

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING = 0, 1, 3, 4, 6
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_length(n):
    """An HPACK integer with a 7-bit prefix (no Huffman coding)."""
    if n < 127:
        return bytes([n])
    out, n = bytearray([127]), n - 127
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + bytearray([n]))


def literal(name, value):
    """A header field as a literal without indexing, with a new name."""
    return b"\x00" + hpack_length(len(name)) + name + hpack_length(len(value)) + value


class StalledClient:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.lock = threading.Lock()
        self.headers, self.ended, self.reset = set(), set(), set()
        self.data_bytes = 0
        self.changed = threading.Condition()
        self.send(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0)))  # INITIAL_WINDOW_SIZE = 0
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def send(self, data):
        with self.lock:
            self.sock.sendall(data)

    def call(self, stream, method, message):
        """Starts one unary call on `stream` (odd, increasing) with a serialized request `message`."""
        headers = (literal(b":method", b"POST") + literal(b":scheme", b"http") + literal(b":path", method) +
                   literal(b":authority", b"127.0.0.1") + literal(b"content-type", b"application/grpc") +
                   literal(b"te", b"trailers"))
        body = b"\x00" + struct.pack(">I", len(message)) + message
        self.send(frame(HEADERS, END_HEADERS, stream, headers) + frame(DATA, END_STREAM, stream, body))

    def read(self):
        buffer = b""
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return
                buffer += chunk
                while len(buffer) >= 9:
                    length = int.from_bytes(buffer[:3], "big")
                    if len(buffer) < 9 + length:
                        break
                    kind, flags = buffer[3], buffer[4]
                    stream = int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF
                    payload, buffer = buffer[9:9 + length], buffer[9 + length:]
                    self.on_frame(kind, flags, stream, payload)
        except OSError:
            return

    def on_frame(self, kind, flags, stream, payload):
        if kind == SETTINGS and not flags & ACK:
            self.send(frame(SETTINGS, ACK, 0))
        elif kind == PING and not flags & ACK:
            self.send(frame(PING, ACK, 0, payload))
        with self.changed:
            if kind == HEADERS:
                (self.ended if flags & END_STREAM or stream in self.headers else self.headers).add(stream)
            elif kind == RST_STREAM:
                self.reset.add(stream)
            elif kind == DATA:
                self.data_bytes += len(payload)
            self.changed.notify_all()

    def wait(self, condition, timeout):
        """Waits until condition(self) holds; returns whether it did."""
        with self.changed:
            return self.changed.wait_for(lambda: condition(self), timeout)

    def close(self):
        self.sock.close()
