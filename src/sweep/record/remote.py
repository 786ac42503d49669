"""A tracking server or a database, checked before any job: does it answer, and does a server take this login?

MLflow's client meets a server that does not answer with seven retries and growing back-off (about 250 s), then
a traceback; a server that wants a login answers 401 only at the first write, after the first job ran. One
request with a short timeout (mlflow.connect_timeout_s) tells both apart in seconds, and the answer is one line
naming the URI and the cause (`sweep.record.store.StoreError`). A server that answered is not asked again by
this process. MLflow's own HTTP retries are shortened too (`client_settings`), so that a server lost mid-sweep
sends results to the spool in seconds rather than minutes. A database store (`postgresql://`, `mysql://`,
`mssql://`) that does not answer costs MLflow's SQL store minutes of connection retries too (a port that takes
the connection and never answers: for ever): PostgreSQL is logged in to once, bounded by libpq's connect_timeout
(also set for MLflow's own connections), another database's port is tried once, and then the address's driver
must be importable, all before MLflow opens it.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import math
import os
import re
import socket
import ssl
import sys
import threading
import urllib.error
import urllib.request
from typing import Optional
from urllib.parse import unquote, urlsplit

from sweep.config.schema import MLflowConfig
from sweep.record.store import StoreError, redacted

CREDENTIALS = "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (export them) to a login on this server"
TIMEOUT, RETRIES = "MLFLOW_HTTP_REQUEST_TIMEOUT", "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
# MLflow's HTTP retry settings, unless the user set them: three tries over ~3 s, a request at most 60 s
CLIENT_SETTINGS = {
    RETRIES: "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    TIMEOUT: "60",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # a job's line names its run already: no "View run" lines
}
MAX_TIMEOUT_S = 3600  # a connect timeout longer than an hour is a typo, and past ~1e9 s no clock can wait it
# the database stores MLflow opens, and the port each listens on unless the address names one
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
# what a server is asked: one experiment; and, when it lists none, one that cannot exist (its id is no number)
SEARCH = "api/2.0/mlflow/experiments/search?max_results=1"
MISSING_EXPERIMENT = "api/2.0/mlflow/experiments/get?experiment_id=sweep-preflight-none"
NOT_MLFLOW = "it answers HTTP, but nothing an MLflow tracking server answers: not an MLflow tracking server"
_HALF = {True: "MLFLOW_TRACKING_USERNAME", False: "MLFLOW_TRACKING_PASSWORD"}  # the half of a login that is set
_answered: set[tuple[str, str]] = set()  # (uri, user) that answered and took the login


class NotMLflow(StoreError):
    """The address answers, but not as an MLflow tracking server: bad input (the address names no store)."""


class NotMLflowAnswer(str):
    """`problem`'s line when what answered is no MLflow tracking server (`require` raises NotMLflow for it)."""


def is_remote(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def database_endpoint(uri: str) -> Optional[tuple[str, int]]:
    """(host, port) of a database store's address; None for any other address, or one without a host (a local
    socket) or with a port that is not one (`sweep.record.address` refuses that)."""
    scheme = uri.partition("://")[0].split("+", 1)[0].lower()
    if scheme not in DATABASE_PORTS:
        return None
    parts = urlsplit(uri)
    try:
        port = parts.port or DATABASE_PORTS[scheme]
    except ValueError:
        return None
    return (parts.hostname, port) if parts.hostname else None


def _scheme(uri: str) -> str:
    return uri.partition("://")[0].split("+", 1)[0].lower()


def _database_problem(uri: str, endpoint: Optional[tuple[str, int]], timeout: float) -> Optional[str]:
    """A database store: PostgreSQL takes one login, another database's port a connection; then its driver must
    be installed (MLflow finds out after the job)."""
    if _scheme(uri) == "postgresql":
        why = _postgres_problem(uri, timeout)
    else:
        assert endpoint is not None
        try:
            socket.create_connection(endpoint, timeout=timeout).close()
            why = None
        except (socket.timeout, TimeoutError):
            why = f"unreachable: no answer within {timeout:g} s (mlflow.connect_timeout_s)"
        except OSError as e:
            why = f"unreachable: {_reason(e, timeout)}"
    return why or _driver_problem(uri)


def _driver_problem(uri: str) -> Optional[str]:
    from sqlalchemy.engine import make_url  # noqa: PLC0415 - SQLAlchemy: only for a database store
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError  # noqa: PLC0415

    try:
        make_url(uri).get_dialect().import_dbapi()
    except (ImportError, NoSuchModuleError, ArgumentError) as e:
        scheme = uri.partition("://")[0]
        other = f"postgresql+psycopg://{uri.partition('://')[2]}" if _scheme(uri) == "postgresql" else None
        instead = f", or name the driver this project installs: {redacted(other)}" if other and other != uri else ""
        return f"no driver for {scheme}:// is installed here ({e}): install it in this environment{instead}"
    return None


def _postgres_problem(uri: str, timeout: float) -> Optional[str]:
    """One login as MLflow's will be (psycopg, libpq's address, PGPASSWORD and ~/.pgpass), bounded by libpq's
    connect_timeout (whole seconds, at least 2: libpq's rule): a port that takes the connection and never answers,
    a wrong password, a missing database or something else at the port (an HTTP server) is the server's own
    words in one line, where MLflow's SQL store retries for minutes or waits for ever."""
    import psycopg  # noqa: PLC0415 - the driver: only for a PostgreSQL store

    seconds = max(2, math.ceil(timeout))
    try:
        psycopg.connect(_libpq_address(uri), connect_timeout=seconds).close()
    except psycopg.errors.ConnectionTimeout:
        return f"unreachable: no answer within {seconds} s (mlflow.connect_timeout_s)"
    except psycopg.Error as e:
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        said = re.sub(r'^connection failed: (connection to server at "[^"]*", port \d+ failed: )?', "", said)
        said = re.sub(r"^(FATAL|ERROR):\s+", "", said)
        if "invalid response to SSL negotiation" in said or "received invalid response" in said:
            return (
                f"not a PostgreSQL server at {':'.join(map(str, database_endpoint(uri) or ('its socket',)))} ({said})"
            )
        prefix = "unreachable: " if "refused" in said or "resolve" in said or "translate host" in said else ""
        return prefix + (said[0].lower() + said[1:] if said.startswith("Connection") else said)
    return None


def _libpq_address(uri: str) -> str:
    """The address as libpq reads it: SQLAlchemy's driver name (postgresql+psycopg://) dropped."""
    scheme, rest = uri.split("://", 1)
    return f"{scheme.split('+', 1)[0]}://{rest}"


def client_settings() -> None:
    for k, v in CLIENT_SETTINGS.items():
        os.environ.setdefault(k, v)
    # urllib3 logs each retry of a lost server's request ('Retrying (Retry(total=1, ...)) after connection broken');
    # a tracking server killed mid-sweep printed 20 such lines before the one line that says what was lost
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)


def unanswered(e: BaseException) -> Optional[str]:
    """Why a tracking server did not answer a request of MLflow's client (a read that timed out, a connection
    refused or cut), or None: it answered, perhaps with an error. The server's client waits out its timeout at
    each try of each request (`client_settings`): a command that met this once does not ask that server again."""
    requests = sys.modules.get("requests")  # MLflow's HTTP client: not imported, no request of it failed
    if requests is None:
        return None
    seen: set[int] = set()
    cause: Optional[BaseException] = e
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
            timeout, retries = (os.environ.get(k, CLIENT_SETTINGS[k]) for k in (TIMEOUT, RETRIES))
            if "timed out" in str(cause).lower():
                return f"unreachable: no answer within {timeout} s a try ({TIMEOUT}; {RETRIES}={retries})"
            return f"unreachable: the connection was refused or cut ({type(cause).__name__})"
        cause = cause.__cause__ or cause.__context__
    return None


def _login(uri: str) -> tuple[str, Optional[str], Optional[str]]:
    """The address without a login in it, and the login: the environment's, else the address's own
    (`http://alice:pw@host:5000`, which MLflow's client sends as requests does; urllib would look the whole
    `alice:pw@host` up as a host name)."""
    parts = urlsplit(uri)
    user, password = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if "@" not in parts.netloc:
        return uri, user, password
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    return bare, user or unquote(parts.username or "") or None, password or unquote(parts.password or "") or None


def _request(uri: str, path: str = SEARCH) -> urllib.request.Request:
    uri, user, password = _login(uri)
    req = urllib.request.Request(f"{uri.rstrip('/')}/{path}")
    token = os.environ.get("MLFLOW_TRACKING_TOKEN")
    if user and password:  # as MLflow's client: a login is sent only whole, else the token, else nothing
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    elif token:
        req.add_header("Authorization", f"Bearer {token}")
    return req


def _tls() -> Optional[ssl.SSLContext]:
    if os.environ.get("MLFLOW_TRACKING_INSECURE_TLS", "").lower() == "true":
        return ssl._create_unverified_context()
    cert = os.environ.get("MLFLOW_TRACKING_SERVER_CERT_PATH")
    return ssl.create_default_context(cafile=cert) if cert else None


def problem(uri: str, timeout_s: Optional[float] = None) -> Optional[str]:
    """Why the tracking server at `uri` cannot be used (one line), or None: it answered and took the login. A
    database: None when PostgreSQL takes the login (another database: its port a connection) and the driver is
    installed. An SQLite file: None, nothing asked."""
    timeout = MLflowConfig.connect_timeout_s if timeout_s is None else timeout_s
    endpoint = database_endpoint(uri)
    if endpoint is not None or _scheme(uri) == "postgresql":  # postgresql:///db: a local socket, logged in too
        if (uri, "") in _answered:
            return None
        why = _database_problem(uri, endpoint, timeout)
        if why is None:
            _answered.add((uri, ""))
        return why
    if not is_remote(uri):
        return None
    _, user, password = _login(uri)
    user = user or ""
    if (uri, user) in _answered:
        return None
    asked = _answer(uri, timeout, SEARCH)
    if asked is None:
        return f"unreachable: no whole answer within {timeout:g} s (mlflow.connect_timeout_s)"
    try:
        if isinstance(asked, Exception):
            raise asked
        body = asked
    except urllib.error.HTTPError as e:
        if e.code == 401:
            if not (user and password):  # MLflow's client sends half a login as none
                given = "none is given" if not (user or password) else f"only {_HALF[bool(user)]} is set"
                return f"the server asks for a login and {given}: {CREDENTIALS}"
            return f"login refused for user {user!r} (wrong username or password): {CREDENTIALS}"
        if e.code == 403:  # logged in; what it may read or write is the server's per-experiment answer
            _answered.add((uri, user))
            return None
        reason = " ".join(str(e.reason).split())  # a redirect loop's reason is three lines
        return f"the server answered HTTP {e.code} {reason} (is this an MLflow tracking server?)"
    except http.client.HTTPException as e:  # not OSError: a status line that is not HTTP's, a cut answer
        return NotMLflowAnswer(
            f"the server's answer is not HTTP ({type(e).__name__}; is this an MLflow tracking server?)"
        )
    except urllib.error.URLError as e:
        if isinstance(e.reason, ssl.SSLError) and e.reason.reason == "WRONG_VERSION_NUMBER":  # plain HTTP answered
            plain = "http" + uri.partition(":")[1] + uri.partition(":")[2]
            return NotMLflowAnswer(
                f"the server answers without TLS (https's handshake got plain HTTP): {redacted(plain)}?"
            )
        return f"unreachable: {_reason(e.reason, timeout)}"
    except (socket.timeout, TimeoutError):
        return f"unreachable: no answer within {timeout:g} s (mlflow.connect_timeout_s)"
    except (OSError, ValueError) as e:
        return f"unreachable: {_reason(e, timeout)}"
    if not _lists_experiments(body) and not _refuses_what_cannot_exist(uri, timeout):
        return NotMLflowAnswer(NOT_MLFLOW)
    _answered.add((uri, user))
    return None


def _lists_experiments(body: bytes) -> bool:
    """The search's answer as MLflow gives it: an object whose `experiments` is a list. A server that lists none
    (every experiment deleted, or none this login may read) answers `{}`, as anything that answers `{}` does."""
    try:
        answer = json.loads(body or b"null")
    except ValueError:
        return False
    return isinstance(answer, dict) and isinstance(answer.get("experiments"), list)


def _refuses_what_cannot_exist(uri: str, timeout: float) -> bool:
    """Asked only when the search listed nothing: MLflow answers a request for an experiment that cannot exist
    with an error of its own (`{"error_code": ...}`, HTTP 4xx); a server that answers `{}` to everything says 200."""
    error = _answer(uri, timeout, MISSING_EXPERIMENT)
    if not isinstance(error, urllib.error.HTTPError) or not 400 <= error.code < 500:
        return False
    try:
        return "error_code" in json.loads(error.read(1 << 16) or b"null")
    except (ValueError, TypeError, OSError):
        return False


def _answer(uri: str, timeout: float, path: str) -> object:
    """The answer's first 64 KiB, what went wrong (an exception), or None when no whole answer came in time.
    Asked in a thread and waited on for the timeout (and a moment for its own words), no longer: a socket's
    timeout bounds each read, so a server that drips its answer a byte a second would be waited on for ever."""
    asked: list = []
    thread = threading.Thread(target=_ask, args=(uri, timeout, asked, path), daemon=True)
    thread.start()
    thread.join(timeout + 0.25)
    return asked[0] if asked else None


def _ask(uri: str, timeout: float, asked: list, path: str) -> None:
    """The answer's first 64 KiB, or what went wrong, appended to `asked`."""
    try:
        with urllib.request.urlopen(_request(uri, path), timeout=timeout, context=_tls()) as r:
            asked.append(r.read(1 << 16))
    except Exception as e:  # noqa: BLE001 - handed to the caller's thread, which words it
        asked.append(e)


def _reason(e: object, timeout: float) -> str:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g} s (mlflow.connect_timeout_s)"
    if isinstance(e, socket.gaierror):
        return f"the host name does not resolve ({e.strerror})"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror.lower() if e.strerror.startswith("Connection") else e.strerror
    return str(e)


def timeout_problem(mlflow: object) -> Optional[str]:
    """Bad input: a timeout that is not a number of seconds > 0 and at most MAX_TIMEOUT_S (`inf` or 1e12 were
    taken, then overflowed the wait's clock: the check raised, a single run's job ran and its result was spooled)."""
    value = getattr(mlflow, "connect_timeout_s", None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= MAX_TIMEOUT_S:
        return None
    shown = f"{value:g}" if isinstance(value, (int, float)) else value
    return f"mlflow.connect_timeout_s={shown} is not allowed: expected a number of seconds > 0, at most {MAX_TIMEOUT_S}"


def require(uri: str, timeout_s: Optional[float] = None) -> None:
    """Raise StoreError (one line: the URI and the cause) when the tracking server or database at `uri` cannot be
    used; set MLflow's client to give up on a lost server in seconds."""
    if is_remote(uri):
        client_settings()
    if _scheme(uri) == "postgresql":  # MLflow's own connections (libpq's rule)
        timeout = MLflowConfig.connect_timeout_s if timeout_s is None else timeout_s
        os.environ.setdefault("PGCONNECT_TIMEOUT", str(max(2, math.ceil(timeout))))
    why = problem(uri, timeout_s)
    if why:
        raise (NotMLflow if isinstance(why, NotMLflowAnswer) else StoreError)(uri, why)
