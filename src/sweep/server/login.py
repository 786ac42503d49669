"""The shared store's login check (the auth app's `authorization_function`): MLflow's basic auth, with a checked
login remembered by a server worker only while its user's stored password hash is unchanged.

MLflow checks a password with a deliberately slow hash (tens of ms), so its app can remember checked logins
(`auth_cache_ttl_seconds`). That cache forgets a login when the password is changed or the user deleted only in the
worker process that handled the change: the server's other workers went on accepting the old password until the
entry expired. Here a remembered login holds only while the user's row still has the hash it had before the login
was checked, read afresh on each request (one indexed read, ~1 ms), so a change or a deletion takes effect at once
in every worker. MLflow asks for the login several times a request; the answer is kept for the request in `g`.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading

from cachetools import TTLCache
from flask import Response, g, request
from mlflow.exceptions import MlflowException
from mlflow.server.auth import authenticate_request_basic_auth, store
from werkzeug.datastructures import Authorization

from sweep.server.config import LOGIN_CACHE_ENV

TTL = int(os.environ.get(LOGIN_CACHE_ENV, "0"))  # seconds a checked login is remembered (auth_cache_s); 0: never
_SIZE = 10_000  # logins remembered at most, per worker
_HMAC_KEY = secrets.token_bytes(32)  # the cache holds no password, nor a digest usable outside this process
_lock = threading.Lock()  # gunicorn's threads share the cache
_known: TTLCache[tuple[str, bytes], str] = TTLCache(maxsize=_SIZE, ttl=max(1, TTL))


def authenticate() -> Authorization | Response:
    if "sweep_login" not in g:
        g.sweep_login = _check()
    return g.sweep_login


def _check() -> Authorization | Response:
    auth = request.authorization
    if TTL <= 0 or auth is None or not auth.username or auth.password is None:
        return authenticate_request_basic_auth()
    key = (auth.username, hmac.new(_HMAC_KEY, auth.password.encode("utf-8"), "sha256").digest())
    stored = _stored_hash(auth.username)  # read before the check: a change during it makes the entry stale at once
    if stored is not None:
        with _lock:
            if _known.get(key) == stored:
                return auth
    result = authenticate_request_basic_auth()  # the slow hash, and MLflow's refusal of a retired admin password
    if isinstance(result, Authorization) and stored is not None:
        with _lock:
            _known[key] = stored
    return result


def _stored_hash(username: str) -> str | None:
    try:
        return store.get_user(username).password_hash
    except MlflowException:  # no such user (deleted): nothing remembered holds
        return None
