"""A host as a URL or a `host:port` binding writes it: an IPv6 address in brackets. Unbracketed, gunicorn read
`-b ::1:5000` as host '' and port '' (the tracking server ended at start), and `http://::1:5091` was printed as
the UI's address, which no browser opens."""

from __future__ import annotations


def bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
