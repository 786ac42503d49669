"""A host as a URL or a `host:port` binding writes it: an IPv6 address in brackets. Unbracketed, gunicorn read
`-b ::1:5000` as host '' and port '' (the tracking server ended at start), and `http://::1:5091` was printed as
the UI's address, which no browser opens."""

from __future__ import annotations

import socket


def bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


OWN = "127.0.0.1, 0.0.0.0 (every address) or one of its own"  # what --host may be, as the refusals say


def not_own(host: str) -> str | None:
    """Why a server could not listen on `host`, or None: a name that resolves to nothing, or another machine's
    address (10.1.2.3 was called a taken port: "choose another port"). Bound on a free port, then let go."""
    try:
        family, _, _, _, where = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
        with socket.socket(family) as s:
            s.bind(where)
    except OSError as e:
        return e.strerror or str(e)
    return None
