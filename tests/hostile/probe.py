"""A hostile module for tests/test_sandbox.py: each function tries one way out of its sandbox."""

import os
import signal
import socket
import sys


def peek(secret_file, port):
    """What the process can see: its environment, its folder, a file beside the store, the parent's socket."""
    try:
        with open(secret_file) as f:
            secret = f.read()
    except OSError as e:
        secret = type(e).__name__
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        net = "connected"
    except OSError as e:
        net = type(e).__name__
    return {"env": dict(os.environ), "cwd": os.getcwd(), "files": os.listdir("."), "secret": secret, "net": net}


def outlive(token):
    """A grandchild in a session of its own that ignores SIGTERM and sleeps: it must die with the sandbox."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.execv("/bin/sleep", ["sleep", token])
        os._exit(0)
    os.wait()
    return "forked"


def spill():
    """MiB written, a MiB a file, into its temporary folder and its working directory until a write fails."""
    import tempfile

    out = {}
    for i, where in enumerate((tempfile.gettempdir(), os.getcwd())):
        n = 0
        try:
            while n < 64:
                with open(os.path.join(where, f"spill-{i}-{n}"), "wb") as f:
                    f.write(bytes(1 << 20))
                n += 1
        except OSError:
            pass
        out[where] = out.get(where, 0) + n
    return out


def leave():
    sys.exit(0)


def vanish():
    os._exit(0)


def hog():
    return len(bytearray(64 << 30))


def hang():
    while True:
        pass


def crash():
    os.kill(os.getpid(), signal.SIGSEGV)


def garbage():
    return object()


class Counter:
    def __init__(self, start):
        self.n = start

    def observe(self, c):
        self.n += len(c)

    def predict(self):
        return {"n": float(self.n)}


def build(start):
    return Counter(start)
