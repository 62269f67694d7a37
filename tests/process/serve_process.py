"""`ebb serve` as a child process on free loopback ports, for the Python tests that talk to it over
sockets (grpc_test, kserve_form_test, modelmesh_test)."""

import re
import subprocess
import threading


class ServeProcess:
    """Starts `<binary> serve --port 0 --grpc-port -1 --device cpu [--release R] <args>` and reads the ports it
    prints. Its later stdout lines go to `lines` (a thread drains them, so the server never blocks
    on a full pipe), each passed to `on_line` as well when given."""

    def __init__(self, binary, *args, env=None, on_line=None, release="operation_end"):
        # Tests read per-request releases right after each reply: --release operation_end unless
        # they choose (release=None: the server's own default, idle, tested in sequence_test.py).
        chosen = "--release" in args or release is None
        cmd = [binary, "serve", "--port", "0", "--grpc-port", "-1", "--device", "cpu",
               *([] if chosen else ["--release", release]), *args]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        self.http_port = self.grpc_port = None
        for line in self.proc.stdout:
            if m := re.search(r"http://127\.0\.0\.1:(\d+)", line):
                self.http_port = int(m.group(1))
            if m := re.search(r"grpc 127\.0\.0\.1:(\d+)", line):
                self.grpc_port = int(m.group(1))
                break
        assert self.http_port and self.grpc_port, "ebb serve did not print its ports"
        self.lines = []

        def drain():
            for line in self.proc.stdout:
                self.lines.append(line)
                if on_line:
                    on_line(line)
        self.drain = threading.Thread(target=drain, daemon=True)
        self.drain.start()
