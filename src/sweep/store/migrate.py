"""Copy the runs of one MLflow store into another (a researcher's SQLite file into the group's server).

Written on MLflow's public client rather than with mlflow-export-import, whose newest release (1.2.0) marks every
imported run FINISHED, restarts its clock at the import, and copies everything again on a second import.

Each copy carries `MIGRATED_TAG` ("<source run id> <source store>") from its creation; a source run is known in
the target by its run id (MLflow's are random UUIDs, so a copy of the store file is known too). The copy's
status and end time are written last: a copy still RUNNING is unfinished (the migrate was interrupted or failed)
and the next migrate deletes it and copies the run again. A run still running in the source is left for a later
migrate; its children are copied, and get their parent link once the parent is copied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import urlsplit, urlunsplit

from sweep.config.suggest import expected
from sweep.record import copy as copying
from sweep.record import remote, store
from sweep.record.registry import open_store
from sweep.record.tags import CLAIMS_TAG, MIGRATED_TAG, PARENT_RUN_TAG

TERMINAL = ("FINISHED", "FAILED", "KILLED")
PAGE = 1000  # MLflow's largest page of runs or experiments


class BadInput(ValueError):
    """A value given to the command is wrong: one line naming it and what is allowed (exit 2)."""


@dataclass
class Summary:
    copied: int = 0
    already: int = 0
    unfinished: int = 0  # still running in the source: a later migrate copies them
    failed: list[str] = field(default_factory=list)  # "<source run id>: <cause>"
    stopped: bool = False  # asked to stop (Ctrl-C) before the last run

    def line(self, dry_run: bool) -> str:
        text = f"{self.copied} {'to copy' if dry_run else 'copied'}, {self.already} already there, "
        text += f"{len(self.failed)} failed"
        if self.unfinished:
            text += f", {self.unfinished} still running in the source (a later migrate copies them)"
        return text


@dataclass
class Plan:
    """What one migrate reads before it writes: the source's runs, parents first, and their copies so far."""

    source: Any  # MlflowClient
    target: Any  # MlflowClient, None on a dry run into a store that does not exist yet
    target_uri: str
    identity: str  # the source store, as written in MIGRATED_TAG
    runs: list[tuple[str, Any]]  # (experiment name, source run)
    copies: dict[str, Any]  # source run id -> its copy in the target


def identity_of(uri: str) -> str:
    """The source store as recorded on the copies: an absolute SQLite path, or a URI without its password."""
    uri = store.absolute_uri(uri)
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    return urlunsplit(parts._replace(netloc=f"{parts.username}@{parts.hostname}" + f":{parts.port}" * bool(parts.port)))


def plan(
    source_uri: str,
    target_uri: str,
    experiments: Sequence[str] = (),
    dry_run: bool = False,
    reading: Callable[[], None] = lambda: None,
) -> Plan:
    """Open both stores and list what to copy. The source is only read (read-only where it cannot be written; never
    created); the target is checked for writing and, an SQLite file, made as a sweep makes it (not on a dry run).
    `reading()` once the input is found good, before the runs are read (the slow part)."""
    source_store, target_store = open_store(source_uri), open_store(target_uri)
    if source_store.identity() == target_store.identity():
        raise BadInput(f"--to {target_uri} is the --from store: give another store to copy into")
    try:
        source_store.check(write=False)
    except store.StoreError as e:
        raise BadInput(f"--from {e}") from None
    from mlflow.entities import ViewType  # noqa: PLC0415 - MLflow: seconds to import; bad input is refused first

    source = source_store.client(write=False)
    exps = {e.name: e for e in _pages(source.search_experiments, view_type=ViewType.ACTIVE_ONLY)}
    unknown = [n for n in experiments if n not in exps]
    if unknown:
        raise BadInput(f"--experiment {unknown[0]!r} is not in {source_uri}: {expected(unknown[0], exps)}")
    names = list(dict.fromkeys(experiments)) or list(exps)  # one named twice was copied twice ("104 copied" of 52)

    target = None
    if not dry_run:
        target_store.check(write=True)
        target_store.create()  # an SQLite file made whole or not at all, as a sweep makes it
        target = target_store.client()
    elif target_store.exists():
        target_store.check(write=False)
        target = target_store.client(write=False)

    reading()
    runs: list[tuple[str, Any]] = []
    copies: dict[str, Any] = {}
    for name in names:
        found = _pages(source.search_runs, experiment_ids=[exps[name].experiment_id])
        runs += [(name, r) for r in found if r.data.tags.get(CLAIMS_TAG) != "true"]  # bookkeeping of the source's
        dst = target.get_experiment_by_name(name) if target is not None else None
        if dst is not None:
            found = _pages(target.search_runs, experiment_ids=[dst.experiment_id], filter_string=_MIGRATED_FILTER)
            copies.update({r.data.tags[MIGRATED_TAG].split(" ", 1)[0]: r for r in found})
    return Plan(source, target, target_uri, identity_of(source_uri), _parents_first(runs), copies)


_MIGRATED_FILTER = f"tags.`{MIGRATED_TAG}` LIKE '%'"


def migrate(
    p: Plan,
    dry_run: bool = False,
    done: Callable[[str], None] = lambda _: None,
    stop: Callable[[], bool] = lambda: False,
) -> Summary:
    """Copy each run of `p` not yet in the target; `done(run name)` after each; before each, end if `stop()`.
    A run that cannot be copied is counted failed and its partial copy deleted, as on a KeyboardInterrupt (a
    copy left by a harder stop is replaced by the next migrate)."""
    summary = Summary()
    experiment_ids: dict[str, str] = {}
    for name, run in p.runs:
        if stop():
            summary.stopped = True
            break
        src_id = run.info.run_id
        copy = p.copies.get(src_id)
        parent = p.copies.get(run.data.tags.get(PARENT_RUN_TAG, ""))
        if run.info.status not in TERMINAL:
            summary.unfinished += 1
        elif copy is not None and copy.info.status in TERMINAL:
            summary.already += 1
            if not dry_run and parent is not None and copy.data.tags.get(PARENT_RUN_TAG) != parent.info.run_id:
                copying.link_parent(p.target, copy.info.run_id, parent.info.run_id)  # the parent came later
        elif dry_run:
            summary.copied += 1
        else:
            try:
                if copy is not None:  # a copy a failed or interrupted migrate left unfinished
                    copying.drop(p.target, copy.info.run_id)
                    del p.copies[src_id]  # no child is linked to it
                if name not in experiment_ids:
                    experiment_ids[name] = _experiment(p, name, run.info.experiment_id)
                parent_id = parent.info.run_id if parent is not None else None
                p.copies[src_id] = copying.copy_run(
                    p.source, p.target, run, experiment_ids[name], parent_id, p.identity
                )
                summary.copied += 1
            except Exception as e:  # noqa: BLE001 - whatever MLflow raises for one run: counted, the rest go on
                if why := remote.unanswered(e):  # each run would wait out the client's timeouts again (3 min each)
                    raise store.StoreError(
                        _unanswering(p, str(e)),
                        f"{why}; {summary.copied} run(s) copied before: the same command copies the rest (an "
                        "unfinished copy is replaced)",
                    ) from None
                cause = " ".join(str(e).split())  # MLflow's causes can be on its message's later lines
                summary.failed.append(f"{src_id}: {cause if len(cause) <= 300 else cause[:297] + '...'}")
        done(run.info.run_name or run.info.run_id)
    return summary


def _unanswering(p: Plan, error: str) -> str:
    """The store whose server the error names: the target's host in it, else the source (an SQLite target has
    no host, and the empty one is in every error: a paused source was said as the target)."""
    host = urlsplit(p.target_uri).netloc.rpartition("@")[2]
    return p.target_uri if host and host in error else p.identity


def _experiment(p: Plan, name: str, source_id: str) -> str:
    """The target's experiment of this name, created like the source's (its tags) if missing."""
    found = p.target.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    tags = p.source.get_experiment(source_id).tags
    return copying.create_experiment(p.target, name, open_store(p.target_uri).artifact_location(), tags)


def _parents_first(runs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """`runs` ordered so that a parent comes before its children (its copy's id is known when they are copied)."""
    parent_of = {r.info.run_id: r.data.tags.get(PARENT_RUN_TAG) for _, r in runs}

    def depth(run_id: str | None, seen: int = 0) -> int:
        return seen if run_id not in parent_of or seen > len(parent_of) else depth(parent_of[run_id], seen + 1)

    return sorted(runs, key=lambda nr: (depth(nr[1].info.run_id), nr[1].info.start_time or 0))


def _pages(search: Callable[..., Any], **kwargs: Any) -> Iterator[Any]:
    """Every item of a paged MLflow search."""
    token = None
    while True:
        page = search(max_results=PAGE, page_token=token, **kwargs)
        yield from page
        token = page.token
        if not token:
            return
