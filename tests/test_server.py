"""The group's shared store (`python -m sweep.server`): a real PostgreSQL cluster and MLflow tracking server with
logins on 127.0.0.1, started once for the session (conftest.shared_server). Every path a researcher takes on
SQLite is taken here against it: single runs, sweeps under each launcher, resume after Ctrl-C, failure isolation,
the spool while the server is away, compare and the UI; logins and permissions; four sweeps at once."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable
from urllib.parse import urlsplit

import pytest
import requests
from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from tests import forked_sweep
from tests.conftest import FAULTY, run_sweep
from tests.forked_sweep import python_m
from tests.test_faults import SLOW_SGD, two_sweeps_at_once
from tests.test_faults_signals import _stat, alive, start_until_two_finished
from tests.test_launcher import runs
from tests.tracking_server import add_user, free_port

LOGIN = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")


def sweep(cwd: Path, *args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_sweep("-m", *args, cwd=cwd, env=env, timeout=timeout)


def ok(p: subprocess.CompletedProcess) -> None:
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


# --- reachability and logins, before any job ----------------------------------------------------------------


def test_an_unreachable_server_is_one_line_in_seconds(tmp_path):
    port = free_port()  # nothing listens there
    uri = f"http://127.0.0.1:{port}"
    for args in (["method=gf2", "problem.n_bits=12"], ["-m", "method=gf2", "problem.n_bits=12", "problem.seed=1,2"]):
        t0 = time.monotonic()
        p = run_sweep(*args, f"mlflow.tracking_uri={uri}", cwd=tmp_path)
        assert time.monotonic() - t0 < 60  # MLflow's own retries took 250 s
        assert p.returncode == 1, p.stderr
        assert p.stderr.strip().splitlines() == [f"sweep: store {uri}: unreachable: connection refused"], p.stderr
        assert "[FINISHED]" not in p.stdout
    p = python_m("sweep.compare", "x", "--tracking-uri", uri, timeout=60)
    said = f"python -m sweep.compare: store {uri}: unreachable: connection refused"
    assert p.returncode == 1 and p.stderr.strip() == said, p.stderr


def test_a_server_that_never_answers_is_refused_after_the_configured_timeout(tmp_path):
    with socket.socket() as listener:  # accepts connections (the kernel does) and never answers a request
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        uri = f"http://127.0.0.1:{listener.getsockname()[1]}"
        t0 = time.monotonic()
        p = run_sweep("method=gf2", f"mlflow.tracking_uri={uri}", "mlflow.connect_timeout_s=1", cwd=tmp_path)
        assert time.monotonic() - t0 < 30
    assert p.returncode == 1
    assert p.stderr.strip() == f"sweep: store {uri}: unreachable: no answer within 1 s (mlflow.connect_timeout_s)"
    # 0 is no timeout; inf and 1e12 were taken, then overflowed the wait (the job ran, its result spooled)
    for value in ("0", "inf", "1e12"):
        p = run_sweep("method=gf2", f"mlflow.connect_timeout_s={value}", f"mlflow.tracking_uri={uri}", cwd=tmp_path)
        line = f"sweep: config error: mlflow.connect_timeout_s={float(value):g} is not allowed: expected a number of "
        assert p.returncode == 2 and p.stderr.startswith(line) and "[FINISHED]" not in p.stdout, p.stderr


def test_no_login_or_a_wrong_password_is_one_line_naming_the_uri_before_any_job(server, tmp_path):
    for env, said in (
        ({k: "" for k in LOGIN}, "the server asks for a login and none is given"),
        ({LOGIN[0]: server.username, LOGIN[1]: "not-the-password"}, "login refused for user 'admin'"),
        # half a login, which MLflow's client sends as none: "login refused for user ''" named no cause
        ({LOGIN[0]: "", LOGIN[1]: server.password}, "the server asks for a login and only MLFLOW_TRACKING_PASSWORD"),
    ):
        for args in (["method=gf2"], ["-m", "method=gf2", "problem.seed=1,2"]):
            p = run_sweep(*args, "mlflow.experiment=logins", cwd=tmp_path, env=env)
            assert p.returncode == 1
            (line,) = p.stderr.strip().splitlines()
            assert line.startswith(f"sweep: store {server.uri}: {said}"), p.stderr
            assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in line
            assert "[FINISHED]" not in p.stdout
    assert MlflowClient(server.uri).get_experiment_by_name("logins") is None  # nothing was recorded


def test_a_database_address_is_one_line_within_the_connect_timeout_whatever_listens(shared_server, tmp_path):
    """PostgreSQL's own client (libpq's connect_timeout, one attempt): a port that takes connections and never
    answers, a wrong password, a tracking server's HTTP port; for a single run, a sweep and migrate --from. The
    cases wait out their timeouts side by side: each migrate is a process of its own, started first."""
    port = urlsplit(shared_server.uri).port
    db = f"127.0.0.1:{shared_server.config.db_port}"
    with socket.socket() as silent:  # the kernel accepts; nothing ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        quiet = f"postgresql://sweep@127.0.0.1:{silent.getsockname()[1]}/mlflow"
        wrong = 'password authentication failed for user "sweep"'
        migrates = {}  # uri -> (its process, when it started, its target store)
        for i, uri in enumerate((f"postgresql+psycopg://sweep@127.0.0.1:{port}/mlflow", quiet)):
            to = tmp_path / f"to{i}.db"
            argv = ["migrate", "--from", uri, "--to", f"sqlite:///{to}"]
            proc = forked_sweep.popen(argv, None, forked_sweep.with_project(dict(os.environ)), module="sweep.store")
            migrates[uri] = (proc, time.monotonic(), to)
        try:
            _each_database_case(migrates, quiet, db, port, wrong, tmp_path)
        finally:
            for proc, _, _ in migrates.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()


def _each_database_case(migrates: dict, quiet: str, db: str, port: int, wrong: str, tmp_path: Path) -> None:
    for uri, args, said in (
        (f"postgresql://sweep:wrong@{db}/mlflow", ["method=gf2"], wrong),
        (quiet, ["-m", "method=gf2", "problem.seed=1,2"], "unreachable: no answer within 2 s"),
        (f"postgresql+psycopg://sweep@127.0.0.1:{port}/mlflow", ["migrate"], ""),  # an HTTP server: see below
        (quiet, ["migrate"], "unreachable: no answer within 5 s (mlflow.connect_timeout_s)"),  # its default
    ):
        if args == ["migrate"]:
            proc, t0, to = migrates[uri]
            out, err = proc.communicate(timeout=120)
            p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
            assert not to.exists()  # nothing half-made
            prog = "python -m sweep.store migrate"
        else:
            t0 = time.monotonic()
            p = run_sweep(*args, f"mlflow.tracking_uri={uri}", "mlflow.connect_timeout_s=1", cwd=tmp_path)
            prog = "sweep"
        assert time.monotonic() - t0 < 30, uri  # MLflow's SQL store: minutes of retries, or for ever
        assert p.returncode == 1, p.stderr
        (line,) = p.stderr.strip().splitlines()
        assert line.startswith(f"{prog}: store {uri.replace(':wrong@', ':***@')}: {said}"), line
        if not said:  # gunicorn waits for a whole HTTP request; another server may answer at once
            assert "no answer within 5 s" in line or "not a PostgreSQL server at" in line, line
        assert "[FINISHED]" not in p.stdout


# --- parity with SQLite ---------------------------------------------------------------------------------------

# a grid with a job that fails inside (method.chunk=13), trackers that log curves and artifacts
GRID = [*FAULTY, "problem.n_bits=12", "method.chunk=7,13", "problem.seed=1,2", "tracker=ard"]
# what differs by nature between two recordings of the same job: times, ids, hosts, the store's own paths
VARYING_METRICS = re.compile(r"(wall_clock|_s$|cpu|cost|time|per_s|energy|joule|rss|mem)")
VARYING_TAGS = {
    "mlflow.parentRunId",
    "sweep.parent_run",
    "mlflow.user",
    "sweep.host",
    "sweep.pid",
    "sweep.proc_start",
    "sweep.sweep_dir",
    "mlflow.source.name",
    "sweep.order",
}


def comparable(name: str, text: str) -> object:
    """An artifact's content less what varies by run: the timings in outcome.json, the store's URI in config.yaml."""
    if name == "outcome.json":
        outcome = json.loads(text)
        outcome["metrics"] = {k: v for k, v in outcome["metrics"].items() if not VARYING_METRICS.search(k)}
        return outcome
    return [line for line in text.splitlines() if "tracking_uri" not in line]


def recorded(uri: str, experiment: str) -> dict[str, dict]:
    """Each child run as comparable data: params, the metrics that do not vary by run, tags, artifacts' text."""
    client = MlflowClient(uri)
    _, children = runs(uri, experiment)
    out = {}
    for r in children:
        files = {}
        for a in client.list_artifacts(r.info.run_id):
            if not a.is_dir:
                path = client.download_artifacts(r.info.run_id, a.path)
                files[a.path] = Path(path).read_text(errors="replace")
        history = {
            k: [(m.step, m.value) for m in client.get_metric_history(r.info.run_id, k)]
            for k in r.data.metrics
            if not VARYING_METRICS.search(k)
        }
        out[r.info.run_name] = {
            "status": r.info.status,
            "params": r.data.params,
            "metrics": history,
            "tags": {k: v for k, v in r.data.tags.items() if k not in VARYING_TAGS and not k.startswith("mlflow.log")},
            "artifacts": {k: comparable(k, v) for k, v in files.items() if k != "traceback.txt"},
            "traceback": "ValueError: method.chunk=13" in files.get("traceback.txt", ""),
        }
    return out


def test_a_sweep_records_the_same_runs_into_the_server_as_into_sqlite(server, tmp_path):
    sqlite = f"sqlite:///{tmp_path / 'local' / 'mlflow.db'}"
    p = sweep(tmp_path, *GRID, "mlflow.experiment=parity", env={"MLFLOW_TRACKING_URI": sqlite})
    assert p.returncode == 1 and "2 failed" in p.stdout + p.stderr, p.stderr  # the faulty jobs fail alone
    p = sweep(tmp_path, *GRID, "mlflow.experiment=parity")
    assert p.returncode == 1 and "2 failed" in p.stdout + p.stderr, p.stderr
    local, shared = recorded(sqlite, "parity"), recorded(server.uri, "parity")
    assert len(local) == 4 and sorted(r["status"] for r in local.values()) == [
        "FAILED",
        "FAILED",
        "FINISHED",
        "FINISHED",
    ]
    assert all(r["traceback"] for r in local.values() if r["status"] == "FAILED")
    assert any(r["artifacts"] for r in local.values())  # the comparison covers files, not only numbers
    assert shared == local


# --- every launcher, resume, single runs ---------------------------------------------------------------------


@pytest.mark.parametrize("launcher", ["basic", "submitit_local"])
def test_hydras_launchers_record_into_the_server_and_resume(server, tmp_path, launcher):
    exp = f"launcher_{launcher}"
    args = [
        "method=gf2",
        "problem.n_bits=12",
        "problem.seed=1,2",
        f"hydra/launcher={launcher}",
        f"mlflow.experiment={exp}",
    ]
    ok(sweep(tmp_path, *args))
    (parent,), children = runs(server.uri, exp)
    assert parent.info.status == "FINISHED" and sorted(c.info.status for c in children) == ["FINISHED"] * 2
    assert parent.data.metrics["jobs_finished"] == 2
    ok(sweep(tmp_path, *args[:2], "problem.seed=1,2,3", *args[3:]))  # 1 and 2 are done: only 3 runs
    parents, children = runs(server.uri, exp)
    assert len(parents) == 2 and len(children) == 3


def test_a_single_run_is_recorded_once_and_shown_on_the_servers_ui(server, tmp_path):
    args = ["method=gf2", "problem.n_bits=12", "problem.seed=9", "mlflow.experiment=single"]
    p = run_sweep(*args, cwd=tmp_path)
    ok(p)
    assert "View run" not in p.stdout  # MLflow's own lines would double the job's
    p = run_sweep(*args, cwd=tmp_path)
    ok(p)
    assert "already recorded" in p.stdout and f"see it: {server.uri}/#/experiments/" in p.stdout, p.stdout
    assert len(runs(server.uri, "single")[1]) == 1


def test_ctrl_c_then_resume_loses_nothing_on_the_server(server, tmp_path):
    proc = start_until_two_finished(server.uri, tmp_path, "interrupted")
    try:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    (parent,), children = runs(server.uri, "interrupted")
    assert parent.info.status == "KILLED"
    assert sorted(c.info.status for c in children) == ["FINISHED", "FINISHED", "KILLED", "KILLED"]
    from tests.test_faults_signals import SHORT

    p = sweep(tmp_path, *SHORT, "method.max_epochs=1", "mlflow.experiment=interrupted")
    assert p.returncode == 0 and "skipping 2 job(s)" in p.stdout, p.stderr


# --- the spool while the server is away -----------------------------------------------------------------------


class Relay:
    """A TCP relay to the server that can be cut and restored: the server seen from a laptop whose network drops."""

    def __init__(self, port: int, target: int) -> None:
        self.port, self.target = port, target
        self.listener: socket.socket | None = None
        self.open: list[socket.socket] = []

    def up(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def down(self) -> None:
        """No new connection, and the open ones (a client's kept-alive pool) cut."""
        if self.listener is not None:
            try:
                self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (close alone does not)
            except OSError:
                pass
            self.listener.close()
            self.listener = None
        for s in self.open:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                a, _ = listener.accept()
            except OSError:
                return
            b = socket.create_connection(("127.0.0.1", self.target))
            self.open += [a, b]
            self._carry(a, b)

    def _carry(self, client: socket.socket, server: socket.socket) -> None:
        for x, y in ((client, server), (server, client)):
            threading.Thread(target=self._pipe, args=(x, y), daemon=True).start()

    @staticmethod
    def _pipe(x: socket.socket, y: socket.socket, seen: Callable[[bytes], None] | None = None) -> None:
        try:
            while data := x.recv(65536):
                if seen is not None:
                    seen(data)
                y.sendall(data)
        except OSError:
            pass
        finally:
            for s in (x, y):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def test_results_are_spooled_while_the_server_is_away_and_imported_when_it_is_back(server, tmp_path):
    from sweep.record import spool
    from sweep.record.recorder import Recorder
    from sweep.record.store import StoreError
    from sweep.result import RunResult

    relay = Relay(free_port(), int(server.uri.rsplit(":", 1)[1]))
    relay.up()
    uri = f"http://127.0.0.1:{relay.port}"
    recorder = Recorder(uri, "spooled")
    relay.down()  # the network drops mid-sweep
    result = RunResult(config={"problem": {"seed": 1}}, metrics={"accuracy": 1.0}, tags={"method": "gf2"})
    t0 = time.monotonic()
    with pytest.raises(StoreError, match="the result is kept in"):
        recorder.log(result, run_name="while-away")
    assert time.monotonic() - t0 < 60  # MLflow's client gives up in seconds, not minutes
    assert len(spool.entries(uri)) == 1
    relay.up()
    p = python_m("sweep.spool", "import", "--tracking-uri", uri, timeout=120)
    assert p.returncode == 0, p.stderr
    assert spool.entries(uri) == []
    (run,) = runs(server.uri, "spooled")[1]
    assert run.info.run_name == "while-away" and run.data.metrics["accuracy"] == 1.0
    relay.down()


class Slow(Relay):
    """The relay with `delay_s` of latency on each request (a server far away, or busy), noting what it carries:
    each request's path, and the most runs being created at once (requests sent and not yet answered)."""

    REQUEST = re.compile(rb"(GET|POST|PUT|PATCH|DELETE) (/[^ ?]*)")

    def __init__(self, port: int, target: int, delay_s: float) -> None:
        super().__init__(port, target)
        self.delay_s = delay_s
        self.paths: list[str] = []
        self.creating = self.most_creating = 0
        self.lock = threading.Lock()

    def _carry(self, client: socket.socket, server: socket.socket) -> None:
        creating = threading.Event()  # this connection's request creates a run and is not answered yet

        def request(data: bytes) -> None:
            m = self.REQUEST.match(data)
            if m is None:  # a request's body
                return
            with self.lock:
                self.paths.append(m.group(2).decode())
                if m.group(2).endswith(b"/runs/create"):
                    creating.set()
                    self.creating += 1
                    self.most_creating = max(self.most_creating, self.creating)
            time.sleep(self.delay_s)

        def answer(data: bytes) -> None:
            if data.startswith(b"HTTP/") and creating.is_set():
                creating.clear()
                with self.lock:
                    self.creating -= 1

        threading.Thread(target=self._pipe, args=(client, server, request), daemon=True).start()
        threading.Thread(target=self._pipe, args=(server, client, answer), daemon=True).start()


def slow_relay(server, delay_s: float) -> tuple[Slow, str]:
    relay = Slow(free_port(), int(server.uri.rsplit(":", 1)[1]), delay_s)
    relay.up()
    return relay, f"http://127.0.0.1:{relay.port}"


GF2 = ["method=gf2", "problem.n_bits=12", "tracker=none"]


def test_runs_are_written_while_the_next_jobs_run_and_each_file_costs_one_request(server, tmp_path):
    relay, uri = slow_relay(server, delay_s=0.15)
    try:
        p = sweep(
            tmp_path, *GF2, "problem.seed=range(0,12)", "mlflow.experiment=overlap", env={"MLFLOW_TRACKING_URI": uri}
        )
    finally:
        relay.down()
    ok(p)
    (parent,), children = runs(server.uri, "overlap")
    assert parent.info.status == "FINISHED" and [c.info.status for c in children] == ["FINISHED"] * 12
    assert all(
        {"config.yaml", "outcome.json"} <= {a.path for a in MlflowClient(server.uri).list_artifacts(c.info.run_id)}
        for c in children
    )
    # the parent, its 12 runs, and the experiment's claims run (sweep.record.claims: made by its first sweep)
    assert relay.paths.count("/api/2.0/mlflow/runs/create") == 14
    # a run's files go where its creation said: no look-up of the run per file (the last line's look at the parent)
    # (and the claims run's params, read once before the jobs: sweep.record.claims)
    assert relay.paths.count("/api/2.0/mlflow/runs/get") <= 2, relay.paths
    assert relay.most_creating >= 2  # runs are written at once, while the launcher hands out the next jobs
    # issue 43: no estimate up front. Resume reads a grid of over 16 jobs' experiment: its earlier runs give one,
    # at no request more (the estimate's own look-up of the parent was one runs/get more a sweep)
    relay, uri = slow_relay(server, delay_s=0.0)
    try:
        args = (*GF2, "problem.seed=range(0,20)", "mlflow.experiment=overlap")
        p = sweep(tmp_path, *args, env={"MLFLOW_TRACKING_URI": uri})
    finally:
        relay.down()
    ok(p)
    assert re.search(r"^overlap: estimate \d+s for 8 job\(s\) on ", p.stderr, re.M), p.stderr
    assert relay.paths.count("/api/2.0/mlflow/runs/get") <= 2, relay.paths


def test_a_background_writer_writes_every_result_handed_over_then_its_threads_end(server):
    from sweep import job
    from sweep.record.background import BackgroundWriter
    from sweep.record.recorder import Recorder
    from tests.conftest import compose

    rec = Recorder(server.uri, "handed_over")
    parent = rec.start_parent("sweep handed over", {})
    writer = BackgroundWriter(rec, writers=2, pending=3)
    for seed in range(6):
        result = job.run(compose("method=gf2", "problem.n_bits=12", "tracker=none", f"problem.seed={seed}"))
        writer.submit(result, parent, f"seed={seed}", None)
        result.recorded()  # the launcher drops the config, curves and files as soon as the result is handed over
    assert writer.close() == []
    assert not [t.name for t in threading.enumerate() if t.name.startswith("sweep-record")]
    children = rec.children(parent)
    assert sorted(c.info.run_name for c in children) == [f"seed={s}" for s in range(6)]
    assert {c.data.params["problem.seed"] for c in children} == {str(s) for s in range(6)}
    assert all(c.info.status == "FINISHED" and c.data.tags["method"] == "gf2" for c in children)
    client = MlflowClient(server.uri)
    assert all(
        {"config.yaml", "outcome.json"} <= {a.path for a in client.list_artifacts(c.info.run_id)} for c in children
    )


def test_a_signal_while_held_acts_once_the_block_is_done():
    from sweep.record.background import signals_held

    seen: list[str] = []
    previous = signal.signal(signal.SIGHUP, lambda *_: seen.append("handled"))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.1)
            seen.append("block done")
        assert seen == ["block done", "handled"]
        assert signal.getsignal(signal.SIGHUP) is not signal.SIG_DFL  # the handler before the block is back
    finally:
        signal.signal(signal.SIGHUP, previous)


def finished_names(proc: subprocess.Popen, until: int) -> list[str]:
    """The names of the jobs `proc` says FINISHED, read until `until` of them (or its end)."""
    names: list[str] = []
    while len(names) < until:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        if line.startswith("[FINISHED]"):
            names.append(line.split()[1])
    return names


def start(tmp_path: Path, *args: str, uri: str | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sweep", "-m", *args],
        cwd=tmp_path,
        env={**os.environ, **({"MLFLOW_TRACKING_URI": uri} if uri else {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_runs_the_server_refuses_mid_sweep_are_kept_in_the_spool_and_the_sweep_fails(server, tmp_path):
    from sweep.record import spool

    proc = start(tmp_path, *GF2, "problem.seed=range(0,300)", "mlflow.experiment=refused")
    try:
        said = finished_names(proc, until=3)
        exp_id = MlflowClient(server.uri).get_experiment_by_name("refused").experiment_id
        answer = requests.post(  # the experiment deleted under the sweep: the server refuses its next runs
            f"{server.uri}/api/2.0/mlflow/experiments/delete",
            json={"experiment_id": exp_id},
            auth=(server.username, server.password),
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    said += [ln.split()[1] for ln in out.splitlines() if ln.startswith("[FINISHED]")]
    assert proc.returncode == 1, err
    assert "the result is kept in" in err and "Traceback" not in err, err
    stored = {
        r.info.run_name
        for r in MlflowClient(server.uri).search_runs([exp_id], run_view_type=ViewType.ALL, max_results=1000)
        if r.info.status == "FINISHED" and r.data.tags.get("sweep.parent") != "true"
    }
    spooled = [e.run_name for e in spool.entries(server.uri)]
    assert spooled and not stored & set(spooled) and len(set(spooled)) == len(spooled)
    assert set(said) <= stored | set(spooled)  # every result the sweep reported is in the store or the spool


def test_sigterm_while_runs_are_being_written_records_them_all_then_resume_completes(server, tmp_path):
    relay, uri = slow_relay(server, delay_s=0.1)  # the runs are written slower than the jobs run: some wait
    args = [*GF2, "problem.seed=range(0,40)", "mlflow.experiment=term_written"]
    try:
        proc = start(tmp_path, *args, uri=uri)
        try:
            said = finished_names(proc, until=4)
            os.killpg(proc.pid, signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    finally:
        relay.down()
    said += [ln.split()[1] for ln in out.splitlines() if ln.startswith("[FINISHED]")]
    assert proc.returncode == 143, err
    (parent,), children = runs(server.uri, "term_written")
    assert parent.info.status == "KILLED"
    assert "RUNNING" not in {c.info.status for c in children}
    finished = {c.info.run_name for c in children if c.info.status == "FINISHED"}
    assert set(said) <= finished and len(finished) < 40
    p = sweep(tmp_path, *args)
    assert p.returncode == 0 and f"skipping {len(finished)} job(s)" in p.stdout, p.stdout + p.stderr
    _, children = runs(server.uri, "term_written")
    names = [c.info.run_name for c in children if c.info.status == "FINISHED"]
    assert len(names) == 40 == len(set(names))  # nothing lost, nothing twice


# --- compare and the UI ---------------------------------------------------------------------------------------


def test_compare_and_the_ui_read_the_server(server, tmp_path):
    ok(sweep(tmp_path, "method=gf2", "problem.n_bits=12", "problem.seed=1,2,3", "mlflow.experiment=cmp"))
    p = python_m("sweep.compare", "cmp", "--out", str(tmp_path / "cmp"))
    ok(p)
    (parent,), _ = runs(server.uri, "cmp")
    logged = {a.path for a in MlflowClient(server.uri).list_artifacts(parent.info.run_id, "compare")}
    assert "compare/table.csv" in logged
    p = python_m("sweep.ui", "cmp", timeout=120)
    ok(p)
    url = f"{server.uri}/#/experiments/{parent.info.experiment_id}/runs?workflowType=machine_learning"
    assert url in p.stdout, p.stdout
    tags = MlflowClient(server.uri).get_experiment(parent.info.experiment_id).tags
    assert "mlflow.sharedViewState.sweep" in tags  # the study's view, written on the server
    assert requests.get(f"{server.uri}/", timeout=30).status_code == 401  # its UI wants a login too


# --- logins and permissions -----------------------------------------------------------------------------------


def test_a_reader_compares_but_does_not_record_and_no_user_deletes_anothers_experiment(server, tmp_path):
    ok(sweep(tmp_path, "method=gf2", "problem.n_bits=12", "problem.seed=1,2", "mlflow.experiment=owned"))
    add_user(server, "reader", "reader-password-1")
    reader = {LOGIN[0]: "reader", LOGIN[1]: "reader-password-1"}
    p = python_m("sweep.compare", "owned", "--out", str(tmp_path / "c"), env=reader)
    assert p.returncode == 0, p.stderr
    assert "not logged" in p.stderr and "permission" in p.stderr.lower(), p.stderr
    p = sweep(tmp_path, "method=gf2", "problem.n_bits=12", "problem.seed=3,4", "mlflow.experiment=owned", env=reader)
    assert p.returncode == 1
    assert f"sweep: store {server.uri}:" in p.stderr and "permission" in p.stderr.lower(), p.stderr
    assert "Traceback" not in p.stderr and "[FINISHED]" not in p.stdout
    assert len(runs(server.uri, "owned")[1]) == 2
    exp_id = MlflowClient(server.uri).get_experiment_by_name("owned").experiment_id
    answer = requests.post(
        f"{server.uri}/api/2.0/mlflow/experiments/delete",
        json={"experiment_id": exp_id},
        auth=("reader", "reader-password-1"),
        timeout=30,
    )
    assert answer.status_code == 403
    assert MlflowClient(server.uri).get_experiment(exp_id).lifecycle_stage == "active"


def test_a_changed_password_or_a_deleted_user_is_refused_by_every_worker_within_the_login_cache(server):
    """Each worker of the server remembers a checked login for auth_cache_s (MLflow's cache: its password hash
    takes ~66 ms to check). A new password or a deleted user is forgotten at once by the worker that made the
    change only; once auth_cache_s has passed, every worker refuses the old login."""
    ttl = server.config.auth_cache_s  # the session's server's (tests.tracking_server), as the command was given it
    add_user(server, "carol", "carol-password-1")
    url = f"{server.uri}/api/2.0/mlflow/experiments/search"

    def answers(password: str) -> set[int]:  # a new connection each: the server's workers take them as they come
        return {
            requests.get(url, params={"max_results": 1}, auth=("carol", password), timeout=30).status_code
            for _ in range(12)
        }

    def refused_after_the_cache(password: str, changed: float) -> None:
        # before, a worker that remembers the login may still let it through (to 200, or to 404 once the user is
        # gone); a round may meet one worker only, so the bound is checked once every entry has expired
        time.sleep(max(0.0, changed + ttl + 1 - time.monotonic()))
        assert answers(password) == answers(password) == {401}

    assert answers("carol-password-1") == {200}  # now remembered by the workers that answered
    admin = (server.username, server.password)
    r = requests.patch(
        f"{server.uri}/api/2.0/mlflow/users/update-password",
        json={"username": "carol", "password": "carol-password-2"},
        auth=admin,
        timeout=30,
    )
    assert r.status_code == 200, r.text
    refused_after_the_cache("carol-password-1", time.monotonic())
    assert answers("carol-password-2") == {200}
    r = requests.delete(f"{server.uri}/api/2.0/mlflow/users/delete", json={"username": "carol"}, auth=admin, timeout=30)
    assert r.status_code == 200, r.text
    refused_after_the_cache("carol-password-2", time.monotonic())


# --- four machines at once ------------------------------------------------------------------------------------


def test_four_sweeps_at_once_lose_and_duplicate_nothing_and_resume_only_the_same_config(server, tmp_path):
    common = ["method=gf2", "problem.n_bits=10", "tracker=none", "mlflow.experiment=four", "hydra.launcher.n_workers=1"]
    env = forked_sweep.with_project(dict(os.environ))
    procs = [
        forked_sweep.popen(["-m", *common, f"problem.seed=range({30 * i},{30 * i + 30})"], tmp_path, env)
        for i in range(4)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    said = [[ln for ln in (o[0] + o[1]).splitlines() if not ln.startswith(("four ", "[FINISHED]"))] for o in outs]
    assert [p.returncode for p in procs] == [0] * 4, said
    parents, children = runs(server.uri, "four")
    assert len(parents) == 4 and len(children) == 120
    seeds = sorted(int(c.data.params["problem.seed"]) for c in children)
    assert seeds == list(range(120))  # none lost, none twice
    # another machine: the same configs are done (skipped); another n_bits is another config (runs)
    p = sweep(tmp_path, *common, "problem.seed=range(40,60)")
    assert p.returncode == 0 and "skipping 20 job(s)" in p.stdout, p.stdout + p.stderr
    p = sweep(tmp_path, *common, "problem.n_bits=11", "problem.seed=range(40,45)")
    assert p.returncode == 0 and "5 job(s) finished" in p.stdout + p.stderr, p.stdout + p.stderr


def test_two_identical_sweeps_at_once_on_the_server_record_each_config_once(server, tmp_path):
    """Case 5 of issue 35 on the shared server (PostgreSQL behind `mlflow server`). The claims on the server: params
    of one bookkeeping run, which MLflow refuses to change once logged."""
    outs = two_sweeps_at_once(server.uri, tmp_path, *SLOW_SGD)
    assert any("another sweep is running them" in out + err for out, err in outs)  # they did overlap
    c = MlflowClient(server.uri)
    exp_id = c.get_experiment_by_name("twice").experiment_id
    pointer = c.get_experiment_by_name(f".sweep-claims {exp_id}")  # deleted: in no list, its tag kept
    assert pointer.lifecycle_stage == "deleted"
    claims = c.get_run(pointer.tags["sweep.claims_run"])
    assert claims.info.status == "FINISHED" and len(claims.data.params) == 40


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (its children are in sessions of their own: not found by session)."""
    parents = {int(p): int(s[1]) for p in os.listdir("/proc") if p.isdigit() and (s := _stat(int(p)))}
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids = [c for c, pp in parents.items() if pp == parent]
        out += kids
        todo += kids
    return out


def cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# --- the command -----------------------------------------------------------------------------------------------


def own_address() -> str:
    """An address of this machine other than loopback where it has one (the one its default route leaves by)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.255", 9))  # no packet is sent: the kernel picks the source address
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def test_a_short_admin_password_is_one_line_before_anything_is_made(tmp_path):
    short = tmp_path / "pw"
    short.write_text("elevenchars")
    too_short = "the admin's password is not allowed: Password must be at least 12 characters."
    latin1, file = tmp_path / "latin1", tmp_path / "file"
    latin1.write_bytes(b"\xe9t\xe9-password-1234")
    file.write_text("")
    fifo, big = tmp_path / "fifo", tmp_path / "big"
    os.mkfifo(fifo)
    big.write_text("p" * 5000)
    for args, env, said in (
        ([], {"SWEEP_SERVER_ADMIN_PASSWORD": "short"}, f"$SWEEP_SERVER_ADMIN_PASSWORD: {too_short}"),
        (["--admin-password-file", str(short)], {}, f"--admin-password-file {short}: {too_short}"),
        # a fresh prober's round: a file not UTF-8 and a data_dir that is a file were tracebacks (exit 1), a
        # directory for the password's file exit 1
        (["--admin-password-file", str(latin1)], {}, f"--admin-password-file {latin1}: not UTF-8 text (invalid"),
        (["--admin-password-file", str(tmp_path)], {}, f"--admin-password-file {tmp_path}: Is a directory: a file "),
        (["--data-dir", str(file)], {}, f"data_dir={file} is not allowed: it is a file: a directory (made on first"),
        # a ninth prober's round: /dev/zero was read until the machine's memory ran out (killed), a FIFO waited for
        # a writer for ever
        (["--admin-password-file", "/dev/zero"], {}, "--admin-password-file /dev/zero is a character device: "),
        (["--admin-password-file", str(fifo)], {}, f"--admin-password-file {fifo} is a FIFO: expected a file "),
        (["--admin-password-file", str(big)], {}, f"--admin-password-file {big} holds more than 4,096 bytes: "),
    ):
        data = [] if "--data-dir" in args else ["--data-dir", str(tmp_path / "store")]
        p = python_m("sweep.server", *data, *args, env=env, timeout=60)
        assert p.returncode == 2, p.stderr
        (line,) = p.stderr.splitlines()
        assert line.startswith(f"python -m sweep.server: {said}") and not line.endswith(" "), line
        assert not (tmp_path / "store").exists()
    # a pipe is read, not refused as a FIFO: `--admin-password-file <(pass show mlflow-admin)` gives a secret so
    read, write = os.pipe()
    os.write(write, b"elevenchars\n")
    os.close(write)
    data = ["--data-dir", str(tmp_path / "store")]
    with os.fdopen(read):
        p = subprocess.run([sys.executable, "-m", "sweep.server", *data, "--admin-password-file", f"/dev/fd/{read}"],
                           pass_fds=(read,), capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (p.returncode, p.stderr) == (
        2,
        f"python -m sweep.server: --admin-password-file /dev/fd/{read}: {too_short}\n",
    )
    assert not (tmp_path / "store").exists()


def test_the_server_command_serves_and_a_sigterm_stops_everything_it_started(tmp_path):
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"sweep-server-cmd-{os.getpid()}"
    work.mkdir(mode=0o755)
    password = "admin-password-never-shown"
    port = free_port()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweep.server", "--data-dir", str(work / "store"), "--port", str(port)]
            + ["--db-port", str(free_port()), "--workers", "1", "--host", "0.0.0.0"]
            + ["--allowed-hosts", "proxy.example:5000"],  # the README's form: MLflow's flag refused it with gunicorn
            env={**os.environ, "SWEEP_SERVER_ADMIN_PASSWORD": password},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            line, said = "", []
            while "serving" not in line:
                line = proc.stdout.readline()
                said.append(line)
                assert line or proc.poll() is None, proc.stderr.read()
            # a first start says each step as it begins (it was one line, then ~40 s of silence)
            assert [ln.split(": ", 1)[1].split(" (")[0].split(" in /")[0] for ln in said[:3]] == [
                "starting PostgreSQL and MLflow's tracking server",
                "making the PostgreSQL cluster",
                "PostgreSQL is up; starting MLflow's tracking server",
            ], said
            assert f"serving http://127.0.0.1:{port}, to other machines http://{socket.gethostname()}:{port} (" in line
            assert "logins: the admin 'admin' makes each member's" in proc.stdout.readline()
            while "record into it" not in line:
                line = proc.stdout.readline()
                assert line or proc.poll() is None, proc.stderr.read()
            program = line.split("; ")[1].split()[0]  # the command to record into it, as it prints it
            assert "python" not in program and shutil.which(program), line  # runs outside the venv too
            assert requests.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
            answer = requests.get(
                f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=1",
                auth=("admin", password),
                timeout=30,
            )
            assert answer.status_code == 200
            # another machine's request: sent to an address of this machine, naming it by its name or address
            here = own_address()
            for host, status in (
                (f"{socket.gethostname()}:{port}", 200),
                (f"{here}:{port}", 200),
                ("proxy.example:5000", 200),  # --allowed-hosts
                (f"rebinding.example:{port}", 403),  # MLflow's guard still stands
            ):
                r = requests.get(
                    f"http://{here}:{port}/api/2.0/mlflow/experiments/search?max_results=1",
                    headers={"Host": host},
                    auth=("admin", password),
                    timeout=30,
                )
                assert r.status_code == status, (host, r.status_code, r.text[:200])
            started = descendants(proc.pid)
            assert len(started) >= 4  # PostgreSQL and its workers, the tracking server and its workers
            for pid in started:  # the password is on no command line
                assert password not in cmdline(str(pid))
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 143, err
        assert "stopped (SIGTERM)" in err
        deadline = time.monotonic() + 20
        while [p for p in started if alive(p)] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p for p in started if alive(p)] == []
        assert not [p for p in os.listdir("/proc") if p.isdigit() and str(work) in cmdline(p)]  # PostgreSQL too
        for log in (work / "store").glob("*.log"):
            assert password not in log.read_text(errors="replace")
        # a bad setting: one line, exit 2, nothing started
        p = python_m("sweep.server", "--data-dir", str(work / "x"), "--default-permission", "ALL", timeout=60)
        said = "python -m sweep.server: default_permission=ALL is not allowed"
        assert p.returncode == 2 and p.stderr.startswith(said), p.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)
