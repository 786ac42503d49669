"""A host as a URL or a `host:port` binding writes it: an IPv6 address in brackets. Unbracketed, gunicorn read
`-b ::1:5000` as host '' and port '' (the tracking server ended at start), and `http://::1:5091` was printed as
the UI's address, which no browser opens.

Whether a server can listen on a host (and port) is here too: `sweep-ui` and `sweep-server` ask it before they start."""

from __future__ import annotations

import socket


def bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


OWN = "127.0.0.1, 0.0.0.0 (every address) or one of its own"  # what --host may be, as the refusals say


def port_taken(host: str, port: int) -> str | None:
    """Why a server could not listen on `host`:`port`, or None (bound as uvicorn binds it, then let go)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except OSError as e:
        return e.strerror or str(e)
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.strerror or str(e)
    return None


def not_own(host: str) -> str | None:
    """Why a server could not listen on `host` at all, or None: a name that resolves to nothing, or another machine's
    address (10.1.2.3 was called a taken port: "choose another port"). Any free port (0) bound, then let go."""
    return port_taken(host, 0)
