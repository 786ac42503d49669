"""A tracking server that stops answering mid-sweep (paused: `kill -STOP`, a VM suspended, a host whose network
went): its port still takes connections and no answer comes. MLflow's client waits out its request timeout at
each try (60 s, 3 tries: about 3 minutes a request), so a sweep whose 8 handed-over runs and parent end each
waited so took a quarter of an hour to say anything (measured: `kill -STOP` of a real `mlflow server` at a
sweep's 8th run, 11 minutes and counting with no line). A command now pays that wait once: the writes after it
are kept in the spool at once, each said in one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from urllib.parse import urlsplit

import pytest
from mlflow.tracking import MlflowClient

from sweep import job
from sweep.record import spool
from sweep.record.recorder import Recorder
from sweep.record.store import StoreError
from tests import forked_sweep
from tests.conftest import compose

TIMEOUT_S = 2  # MLflow's request timeout here (MLFLOW_HTTP_REQUEST_TIMEOUT): the wait the test pays once


class Pausable:
    """A TCP relay to a real server, on a port of its own, that can stop answering as a paused server does:
    connections still taken, what is sent read and dropped, nothing sent back (`asked`: requests since)."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname, parts.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.uri = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.paused = threading.Event()
        self.asked = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            upstream = socket.create_connection(self.target)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, asking: bool) -> None:
        try:
            while data := src.recv(65536):
                if not self.paused.is_set():
                    dst.sendall(data)
                elif asking and data.split(b" ", 1)[0] in (b"GET", b"POST", b"PATCH", b"DELETE"):
                    self.asked += 1
        except OSError:
            pass
        for s in (src, dst):  # one end closed: so is the other, as a server's connection is
            s.close()

    def close(self) -> None:
        self.listener.close()


def test_a_server_that_stops_answering_costs_one_timeout_and_every_result_is_kept(server, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", str(TIMEOUT_S))
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    relay = Pausable(server.uri)
    try:
        rec = Recorder(relay.uri, f"paused-{uuid.uuid4().hex[:8]}")
        parent = rec.start_parent("sweep -m seeds", {"launcher": "basic"})
        results = [job.run(compose("method=gf2", "problem.n_bits=12", f"problem.seed={s}")) for s in range(4)]
        rec.log(results[0], parent_run_id=parent)
        relay.paused.set()
        start = time.monotonic()
        said = []
        for r in results[1:]:
            with pytest.raises(StoreError) as e:
                rec.log(r, parent_run_id=parent)
            said.append(str(e.value))
        with pytest.raises(StoreError) as e:
            rec.end_parent(parent, "FINISHED", results)
        said.append(str(e.value))
        took = time.monotonic() - start
        # one request waited its timeout; the 2 runs and the parent's end after it asked nothing (each waited 2 s)
        assert relay.asked == 1 and took < 2 * TIMEOUT_S, (relay.asked, took)
        assert f"unreachable: no answer within {TIMEOUT_S} s a try" in said[0], said[0]
        assert all("at an earlier write of this command: not asked again" in s for s in said[1:]), said
        assert all("the result is kept in" in s or "the parent run's end is kept in" in s for s in said), said
        # the server back: the spool writes each result in and closes the parent (FAILED: its sweep failed)
        relay.paused.clear()
        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")  # a pooled connection the pause broke: tried again
        assert spool.import_into(Recorder(relay.uri, rec.experiment, import_spool=False)) == 4
        client = MlflowClient(server.uri)
        runs = client.search_runs([rec.experiment_id])
        children = sorted(r.data.params["problem.seed"] for r in runs if r.info.run_id != parent)
        assert children == ["0", "1", "2", "3"] and client.get_run(parent).info.status == "FAILED"
    finally:
        relay.close()


def test_a_migrate_into_a_server_that_stops_answering_stops_at_the_first_run(server, store, monkeypatch):
    """`sweep-store migrate` went on to the next run after one that failed: into a paused server each run waited
    out the client's timeouts (3 minutes a run). It stops at the first, in one line, with what was copied."""
    from sweep.store.migrate import migrate, plan

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", str(TIMEOUT_S))
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    experiment = f"paused-migrate-{uuid.uuid4().hex[:8]}"
    rec = Recorder(store, experiment)
    for s in range(3):
        rec.log(job.run(compose("method=gf2", "problem.n_bits=12", f"problem.seed={s}")))
    relay = Pausable(server.uri)
    try:
        p = plan(store, relay.uri, [experiment])
        relay.paused.set()
        start = time.monotonic()
        with pytest.raises(StoreError) as e:
            migrate(p)
        assert relay.asked == 1 and time.monotonic() - start < 2 * TIMEOUT_S, relay.asked
        assert str(e.value).startswith(f"store {relay.uri}: unreachable: no answer within {TIMEOUT_S} s a try")
        assert str(e.value).endswith("; 0 run(s) copied before: the same command copies the rest (an unfinished "
                                     "copy is replaced)")  # fmt: skip
    finally:
        relay.close()


def test_a_migrate_from_a_server_that_stops_answering_names_that_server(server, store, monkeypatch):
    """The store that did not answer is the one named: a paused source into a local SQLite target was said as
    the target's ("store sqlite:///...: unreachable"), an SQLite address having no host for the cause to name."""
    from sweep.store.migrate import migrate, plan

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", str(TIMEOUT_S))
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    experiment = f"paused-source-{uuid.uuid4().hex[:8]}"
    Recorder(server.uri, experiment).log(job.run(compose("method=gf2", "problem.n_bits=12", "problem.seed=0")))
    relay = Pausable(server.uri)
    try:
        p = plan(relay.uri, store, [experiment])
        relay.paused.set()
        with pytest.raises(StoreError) as e:
            migrate(p)
        assert str(e.value).startswith(f"store {relay.uri}: unreachable: no answer within {TIMEOUT_S} s"), e.value
    finally:
        relay.close()


def test_a_sweep_whose_server_stops_answering_exits_1_and_asks_it_no_more_at_its_end(server, tmp_path):
    """A real sweep into a server paused at its first job's line: its results and the parent's end are kept in the
    spool, and it exits 1. Its last line (`next: ...`) asked the paused server again, and that request's error,
    raised at the sweep's end, took the place of the exit 1: Hydra made it a warning, exit 0."""
    relay = Pausable(server.uri)
    env = {"MLFLOW_TRACKING_URI": relay.uri, "MLFLOW_HTTP_REQUEST_TIMEOUT": "3", "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}
    seeds = "problem.seed=" + ",".join(map(str, range(8)))
    command = [sys.executable, "-m", "sweep", "-m", "method=gf2", "problem.n_bits=12", seeds]
    command += ["mlflow.experiment=paused-sweep", "hydra.launcher.n_workers=1", "hydra.launcher.progress=false"]
    p = subprocess.Popen(
        command, cwd=tmp_path, env=forked_sweep.with_project({**os.environ, **env}), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        said = []
        for line in p.stdout or ():
            said.append(line)
            if line.startswith("[FINISHED]"):
                relay.paused.set()
        out = "".join(said)
        assert p.wait(timeout=120) == 1, out
        assert "not closed" in out and "raised MlflowException" not in out and "\nnext: " not in out, out
    finally:
        p.kill()
        relay.close()
