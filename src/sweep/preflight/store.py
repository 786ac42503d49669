"""The store a command's runs go to, checked before any job: a name MLflow would refuse, a timeout that is not
one, or an address no run can be kept at (`sweep.record.address`: in-memory SQLite, `file:`, a directory, an
unknown scheme, a bad port) is bad input (exit 2); a server or database that does not answer, a server that
refuses the login, an SQLite journal without its database, or a store that cannot be written, is not there to
use (exit 1). The other commands that name a store (compare, migrate, the spool's import, the UI) check its
address with the same `sweep.record.address.check`."""

from __future__ import annotations

from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError

from sweep.config.view import unresolved
from sweep.paths import default_tracking_uri
from sweep.preflight.refusal import UNUSABLE, Refusal
from sweep.record import address, remote
from sweep.record.registry import open_store
from sweep.record.store import NoStore, StoreError, experiment_name_problem, redacted, sqlite_experiment_deleted


def tracking_uri(config: DictConfig) -> str:
    """The store's address: mlflow.tracking_uri, else $MLFLOW_TRACKING_URI, else the project's SQLite store."""
    return str(config.mlflow.tracking_uri or default_tracking_uri())


def check_settings(config: DictConfig) -> None:
    """Bad input among the recording's settings: the experiment's name, the server's timeout, the store's address."""
    problem = (
        experiment_name_problem(config.mlflow.experiment)
        or remote.timeout_problem(config.mlflow)
        or address.setting_problem(config.mlflow.tracking_uri)
    )
    if problem:
        raise Refusal.config_error(problem)


def check_server(config: DictConfig) -> None:
    """A tracking server or database that does not answer within mlflow.connect_timeout_s, a server that refuses
    the login, an SQLite journal left without its database; an HTTP server that is no MLflow's (bad input)."""
    try:
        address.check(tracking_uri(config), config.mlflow.connect_timeout_s)
    except address.BadAddress as e:  # an HTTP server that is not MLflow's
        raise Refusal.config_error(address.setting_refused(config.mlflow.tracking_uri, str(e))) from None
    except StoreError as e:
        raise Refusal(str(e), UNUSABLE) from None


def check_experiment(config: DictConfig) -> None:
    """An experiment of that name deleted in MLflow's UI, in an SQLite store: before a single run's job, whose
    result its recording would refuse (a sweep's start refuses it, on any store: sweep.record.recorder)."""
    deleted = sqlite_experiment_deleted(tracking_uri(config), str(config.mlflow.experiment))
    if deleted:
        raise Refusal(f"store {redacted(tracking_uri(config))}: {deleted}", UNUSABLE)


def check_usable(config: DictConfig, write: bool) -> None:
    """A store file that cannot be written (`write`: read-only, full, locked) or used at all (damaged, half-made,
    another schema, not MLflow's): found in milliseconds. A single run checks only the second kind: a store that
    takes no writes now may take them later (its result is spooled), one of a newer MLflow's schema never will,
    so its job is not run for nothing."""
    try:
        open_store(tracking_uri(config)).check(write=write)
    except NoStore:  # a single run's new store: made at its first write
        pass
    except StoreError as e:
        if write or not e.passing:
            raise Refusal(str(e), UNUSABLE) from None


def check_store(config: DictConfig, write: bool) -> None:
    """Everything about the store a command records into, before any job (nothing when recording is off).
    `write`: the store must take writes now (a sweep; a single run keeps a refused result in the spool)."""
    try:
        if not config.mlflow.enabled:
            return
        check_settings(config)
        check_server(config)
        check_experiment(config)
        check_usable(config, write)
    except InterpolationResolutionError as e:  # mlflow.tracking_uri=http://host/${oops}: as any key's, one line
        raise Refusal.config_error(unresolved(config, e)) from None
