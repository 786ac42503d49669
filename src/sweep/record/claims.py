"""Which sweep runs a config: a claim per config hash, taken in the store before any job starts, so that two
sweeps of the same configs at once (two terminals, two machines on the shared server) never both run and record
one: the second skips what the first has claimed and says so.

A claim is held by a sweep's parent run while that run is RUNNING; a sweep that ended (FINISHED, FAILED, KILLED,
or marked KILLED after its launcher was killed: `sweep.record.abandoned`) holds nothing, so its unfinished
configs are free for the next sweep (resume skips the finished ones before claiming).

- An SQLite store written through sqlite3 (the recorder's direct writer): a tag `sweep.claim.<hash>` on the
  claiming parent, looked up against the other RUNNING parents' and written in one write transaction
  (`BEGIN IMMEDIATE`: SQLite lets one writer in at a time), removed when the parent closes.
- Any other store, through MLflow's client (a tracking server, a database): MLflow has no transaction a client can
  span, but it refuses to change a param once logged, in one database transaction per `log_batch`. The claims
  are params of one bookkeeping run per experiment (`CLAIMS_RUN_NAME`, tag `sweep.claims`), key = the hash (then
  `<hash>.1`, `<hash>.2`, ... once an earlier holder has ended), value = the claiming parent's id: of two sweeps
  logging one key, one commits and the other is refused, reads again and sees the winner. Which run holds the
  claims is settled the same way, by a name MLflow keeps unique: an experiment named `.sweep-claims <id>`,
  created with the run's id as a tag and deleted at once (a deleted experiment keeps its name and tags, and shows
  in no list).

A single run claims its config the same way (`hold`): a RUNNING holder run (a parent of no job, `HOLDER_NAME`)
takes the claim before the job starts and goes once the run is recorded, so that two identical single runs at
once record the config once. Both bookkeeping runs carry CLAIMS_TAG: no count of a store's runs, no migrate and
no report takes them for a user's. A holder leaves no row in an SQLite store; a tracking server's client can
only delete it (MLflow's lists show it no more; `mlflow gc` removes it).
"""

from __future__ import annotations

from typing import Any, Iterable

from sweep.record.sqlite.writer import SqliteRunWriter, write_transaction
from sweep.record.tags import CLAIM_TAG, CLAIMS_RUN_TAG, CLAIMS_TAG, PARENT_TAG

CLAIMS_RUN_NAME = "sweep claims (bookkeeping: which sweep runs which config)"
HOLDER_NAME = "single run (bookkeeping: holds its config's claim while it runs)"
POINTER = ".sweep-claims {}"  # the deleted experiment naming an experiment's claims run
PARAMS_PER_BATCH = 100  # MLflow's limit on one log_batch's params
TRIES = 8  # a claim refused because another sweep logged the same key meanwhile: read again, try again


def claim(recorder: Any, parent_id: str, hashes: Iterable[str]) -> dict[str, str]:
    """Claim `hashes` for the sweep whose parent run is `parent_id`; returns those another sweep still running
    holds: hash -> its parent run's id (those this sweep must not run)."""
    wanted = sorted(set(hashes))
    if not wanted:
        return {}
    if recorder.direct is not None:
        return _claim_sqlite(recorder.direct, parent_id, wanted)
    return _claim_client(recorder.client, recorder.experiment_id, parent_id, wanted)


def release(recorder: Any, parent_id: str) -> None:
    """The parent closes: its claims go (on SQLite its tags are removed; elsewhere a closed holder holds nothing)."""
    if recorder.direct is not None:
        with recorder.direct._db() as conn:
            conn.execute("DELETE FROM tags WHERE run_uuid = ? AND key LIKE ?", (parent_id, f"{CLAIM_TAG}%"))


def hold(recorder: Any, config_hash: str) -> tuple[str, str | None]:
    """A single run's claim on its config: (the holder run's id, None) when taken (`drop` the holder once the run
    is recorded), ("", the id of the run holding it) when another sweep or single run running now holds it."""
    holder = recorder.start_parent(HOLDER_NAME, {CLAIMS_TAG: "true"})
    held = claim(recorder, holder, [config_hash])
    if held:
        drop(recorder, holder)
        return "", held[config_hash]
    return holder, None


def drop(recorder: Any, holder: str) -> None:
    """The single run is recorded (or ended): its holder and its claim go, out of every list."""
    if recorder.direct is not None:
        with recorder.direct._db() as conn:  # its rows, its claim tag with them, in one transaction
            for table in ("tags", "params", "latest_metrics", "metrics", "runs"):
                conn.execute(f"DELETE FROM {table} WHERE run_uuid = ?", (holder,))  # noqa: S608 - names of ours
        return
    recorder.client.set_terminated(holder, status="FINISHED")
    recorder.client.delete_run(holder)


def _claim_sqlite(writer: SqliteRunWriter, parent_id: str, wanted: list[str]) -> dict[str, str]:
    held: dict[str, str] = {}
    with write_transaction(writer.path) as conn:  # the claims of others read and ours written, no one else writing
        for i in range(0, len(wanted), 500):  # within SQLite's limit on bound parameters
            keys = [f"{CLAIM_TAG}{h}" for h in wanted[i : i + 500]]
            rows = conn.execute(
                "SELECT t.key, t.run_uuid FROM tags t JOIN runs r ON r.run_uuid = t.run_uuid "
                "WHERE r.experiment_id = ? AND r.status = 'RUNNING' AND r.lifecycle_stage = 'active' "
                f"AND t.run_uuid != ? AND t.key IN ({', '.join('?' * len(keys))})",
                (int(writer.experiment_id), parent_id, *keys),
            )
            held.update((key[len(CLAIM_TAG) :], run) for key, run in rows)
        conn.executemany(
            'INSERT OR REPLACE INTO tags ("key", value, run_uuid) VALUES (?, ?, ?)',
            [(f"{CLAIM_TAG}{h}", "true", parent_id) for h in wanted if h not in held],
        )
    return held


def _claim_client(client: Any, experiment_id: str, parent_id: str, wanted: list[str]) -> dict[str, str]:
    from mlflow.entities import Param  # noqa: PLC0415 - MLflow: this path has its client already
    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    run_id = _claims_run(client, experiment_id)
    for _ in range(TRIES):
        params = client.get_run(run_id).data.params
        running = _running_parents(client, experiment_id)
        latest: dict[str, tuple[int, str]] = {}  # hash -> (index, key) of its newest claim
        for key in params:
            h, _, n = key.partition(".")
            index = int(n) if n.isdigit() else 0
            if h not in latest or index > latest[h][0]:
                latest[h] = (index, key)
        held, take = {}, []
        for h in wanted:
            index, key = latest.get(h, (-1, ""))
            holder = params.get(key)
            if holder == parent_id:
                continue
            if holder is not None and holder in running:
                held[h] = holder
                continue
            take.append(Param(h if index < 0 else f"{h}.{index + 1}", parent_id))
        try:
            for i in range(0, len(take), PARAMS_PER_BATCH):
                client.log_batch(run_id, params=take[i : i + PARAMS_PER_BATCH])
        except MlflowException:  # a key another sweep logged meanwhile (or a batch refused): read again
            continue
        return held
    raise RuntimeError(f"the claims of run {run_id} kept changing under this sweep ({TRIES} tries)")


def _running_parents(client: Any, experiment_id: str) -> set[str]:
    runs = client.search_runs(
        [experiment_id],
        max_results=5000,
        filter_string=f"attributes.status = 'RUNNING' and tags.`{PARENT_TAG}` = 'true'",
    )
    return {r.info.run_id for r in runs}


def _claims_run(client: Any, experiment_id: str) -> str:
    """The experiment's claims run, made by the first sweep to ask (of two at once, the one whose pointer
    experiment MLflow created first; the other's run is closed and deleted)."""
    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    name = POINTER.format(experiment_id)
    pointer = client.get_experiment_by_name(name)  # deleted ones too
    if pointer is not None:
        return pointer.tags[CLAIMS_RUN_TAG]
    run = client.create_run(experiment_id, run_name=CLAIMS_RUN_NAME, tags={CLAIMS_TAG: "true"}).info.run_id
    client.set_terminated(run, status="FINISHED")  # bookkeeping, never RUNNING: nothing to repair or wait for
    try:
        pointer_id = client.create_experiment(name, tags={CLAIMS_RUN_TAG: run})
    except MlflowException:  # another sweep made it first: its run holds the claims
        try:
            client.delete_run(run)
        except MlflowException:  # not this login's to delete (it may record, not delete): left, closed
            pass
        return client.get_experiment_by_name(name).tags[CLAIMS_RUN_TAG]
    try:
        client.delete_experiment(pointer_id)  # out of every list; its name and tags stay
    except MlflowException:
        pass
    return run
