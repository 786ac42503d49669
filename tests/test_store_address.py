"""Store addresses, checked before any job by every command that names a store (`sweep.record.address`): real
`python -m sweep` (single runs and sweeps), `sweep.compare`, `sweep.store migrate`, `sweep.spool import` and
`sweep.ui` processes. An address that keeps nothing or names no store is bad input (one line, exit 2); a server
or database that does not answer, or an SQLite journal left without its database, is one line and exit 1 in
seconds; no job runs and nothing is spooled or made."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.test_faults import one_line, sweep

GF2 = ("method=gf2", "problem.n_bits=10", "problem.seed=5")
IN_MEMORY = "an in-memory SQLite store keeps nothing once the command ends"


def closed_port() -> int:
    """A port of 127.0.0.1 nothing listens on: a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bad_addresses(d: Path) -> dict[str, str]:
    """Address -> what its one line says. A directory, a plain path, a dangling symlink are made in `d`."""
    (d / "dir").mkdir()
    (d / "link.db").symlink_to(d / "unmounted" / "mlflow.db")
    (d / "a_file").write_text("")
    return {
        "sqlite://": IN_MEMORY,
        "sqlite:///": IN_MEMORY,
        "sqlite:///:memory:": IN_MEMORY,
        "notascheme://x": "unknown scheme notascheme://: expected sqlite:///PATH",
        f"file:{d / 'dir'}": "a directory or file: address (MLflow's file store, in maintenance mode",
        str(d / "dir"): "a directory or file: address",
        f"sqlite:///{d / 'dir'}": f"{d / 'dir'} is a directory: name the store's file in it",
        "http://127.0.0.1:notaport": "is not a port: expected a number from 1 to 65535",
        f"sqlite:///{d / 'link.db'}": f"is a symlink to {d / 'unmounted' / 'mlflow.db'}, which does not exist",
        # a prober's round: a file in the path ran the job, then spooled it ("Not a directory"); a name too long
        # was "the store could not be checked, the job was not run: OSError ...", exit 1
        f"sqlite:///{d / 'a_file' / 'x.db'}": f"{d / 'a_file'} is a file, so {d / 'a_file' / 'x.db'} cannot be made",
        f"sqlite:///{d / ('y' * 300)}.db": "characters): File name too long: name a file, sqlite:///PATH",
    }


def nothing_made(d: Path, p) -> None:
    """No job ran, nothing was spooled, no store or MLflow directory made where the command ran."""
    assert "[FINISHED]" not in p.stdout, p.stdout
    assert not (d / "spool").exists()
    assert not (d / "mlruns").exists() and not (d / "dir" / "mlflow.db").exists()
    assert (d / "link.db").is_symlink() and not (d / "unmounted").exists()


def test_a_single_run_refuses_an_address_that_keeps_nothing_before_its_job(tmp_path):
    """Cases 1 and 7 of issue 35 (and 9's dangling symlink): an in-memory store ran, said FINISHED and kept
    nothing; `notascheme://x`, `file:` and plain paths, a directory, `http://...:notaport` ran the job, then
    spooled a result that could never be imported."""
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    for uri, said in bad_addresses(tmp_path).items():
        p = sweep(*GF2, f"mlflow.tracking_uri={uri}", env=env, cwd=tmp_path, timeout=120)
        line = one_line(p.stderr)
        assert p.returncode == 2, (uri, p.stderr)
        assert line.startswith(f"sweep: config error: mlflow.tracking_uri={uri} is not allowed: "), line
        assert said in line, (uri, line)
        nothing_made(tmp_path, p)
    p = sweep(*GF2, env={**env, "MLFLOW_TRACKING_URI": "sqlite://"}, cwd=tmp_path)  # the environment's address
    assert p.returncode == 2 and "MLFLOW_TRACKING_URI=sqlite:// is not allowed" in one_line(p.stderr)
    nothing_made(tmp_path, p)


def test_every_command_refuses_an_in_memory_store(tmp_path):
    """Case 1 of issue 35, in every command: a sweep (its parent "FINISHED", a `next:` for a store gone), both
    launchers, compare, migrate's two stores, the spool's import, the UI."""
    bad_addresses(tmp_path)
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    real = f"sqlite:///{tmp_path / 'other' / 'mlflow.db'}"
    commands = [
        ("sweep", "-m", "method=gf2,km", "problem.n_bits=10", "mlflow.tracking_uri=sqlite://"),
        ("sweep", "-m", "hydra/launcher=basic", "method=gf2,km", "problem.n_bits=10", "mlflow.tracking_uri=sqlite://"),
        ("sweep.compare", "demo", "--tracking-uri", "sqlite://"),
        ("sweep.store", "migrate", "--from", "sqlite://", "--to", real),
        ("sweep.store", "migrate", "--from", real, "--to", "sqlite:///:memory:"),
        ("sweep.spool", "import", "--tracking-uri", "sqlite://"),
        ("sweep.ui", "--tracking-uri", "sqlite://"),
    ]
    for module, *args in commands:
        p = sweep(*args, env=env, cwd=tmp_path, module=module, timeout=120)
        assert p.returncode == 2, (module, p.stdout, p.stderr)
        assert IN_MEMORY in one_line(p.stderr), (module, p.stderr)
        nothing_made(tmp_path, p)
    assert not (tmp_path / "other").exists()


def test_a_server_or_database_that_does_not_answer_is_one_line_in_seconds(tmp_path):
    """Case 6 of issue 35. Where MLflow retries for minutes (a database: ~200 s; a server under migrate: ~250 s),
    every command asks once: nothing listens on the port, so the connection is refused at once."""
    port = closed_port()
    db, server = f"postgresql://nobody@127.0.0.1:{port}/x", f"http://127.0.0.1:{port}"
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    # a result spooled for the database (as an older version left one): the import keeps it, in seconds
    (tmp_path / "spool").mkdir()
    kept = tmp_path / "spool" / "20260101-000000-0.json"
    kept.write_text(json.dumps({"tracking_uri": db, "experiment": "sweep", "result": {"config": {}}}))
    commands = [
        ("sweep", *GF2, f"mlflow.tracking_uri={db}"),
        ("sweep", "-m", "method=gf2,km", "problem.n_bits=10", f"mlflow.tracking_uri={server}"),
        ("sweep", "-m", "hydra/launcher=basic", "method=gf2,km", "problem.n_bits=10", f"mlflow.tracking_uri={db}"),
        ("sweep.store", "migrate", "--from", server, "--to", f"sqlite:///{tmp_path / 'to' / 'mlflow.db'}"),
        ("sweep.compare", "demo", "--tracking-uri", f"mysql://u@127.0.0.1:{port}/x"),
        ("sweep.ui", "--tracking-uri", db),
        ("sweep.spool", "import"),
    ]
    for module, *args in commands:
        t0 = time.monotonic()
        p = sweep(*args, env=env, cwd=tmp_path, module=module, timeout=120)
        took = time.monotonic() - t0
        assert p.returncode == 1, (module, p.stdout, p.stderr)
        line = [ln for ln in p.stderr.splitlines() if ln.strip()][-1]
        assert f"127.0.0.1:{port}" in line and "unreachable: connection refused" in line, (module, p.stderr)
        assert "Traceback" not in p.stderr and "[FINISHED]" not in p.stdout
        assert took < 30, (module, took)  # a command's start-up on a loaded machine; MLflow's retries take minutes
    assert [f.name for f in (tmp_path / "spool").iterdir()] == [kept.name]  # kept, and nothing spooled
    assert not (tmp_path / "to").exists()


def test_a_fifo_or_a_device_as_the_store_file_is_one_line_and_a_result_spooled_for_one_imports_elsewhere(tmp_path):
    """Issue 43: a FIFO as the store file hung every command for ever (its readability check opened it);
    `sqlite:////dev/null` ran the job, then was called "half-made ... remove it" (as root, advice to delete
    /dev/null), and its spooled result could not be imported anywhere."""
    fifo = tmp_path / "store.fifo"
    os.mkfifo(fifo)
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    real = f"sqlite:///{tmp_path / 'real' / 'mlflow.db'}"
    fifo_uri, null_uri = f"sqlite:///{fifo}", "sqlite:////dev/null"
    for module, *args in (
        ("sweep", *GF2, f"mlflow.tracking_uri={fifo_uri}"),
        ("sweep.compare", "demo", "--tracking-uri", fifo_uri),
        ("sweep", *GF2, f"mlflow.tracking_uri={null_uri}"),
        ("sweep.store", "migrate", "--from", null_uri, "--to", real),
        # a fresh prober's round: a file of /proc (regular, size 0) was "half-made ... remove it", after the job
        ("sweep.compare", "demo", "--tracking-uri", "sqlite:////proc/self/status"),
    ):
        path, kind = (fifo, "a FIFO") if fifo_uri in " ".join(args) else (Path("/dev/null"), "a character device")
        if "/proc" in " ".join(args):
            path, kind = Path("/proc/self/status"), "a file of the kernel's /proc"
        p = sweep(*args, env=env, cwd=tmp_path, module=module, timeout=60)
        line = one_line(p.stderr)
        assert p.returncode == 2, (module, p.stderr)
        assert f"{path} is {kind}, not a file SQLite can keep a store in: name a file" in line, line
        assert "[FINISHED]" not in p.stdout and not (tmp_path / "spool").exists()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and not (tmp_path / "real").exists()
    # a result an older version spooled for /dev/null: it stays, named so; into another store when one is named
    (tmp_path / "spool").mkdir()
    kept = tmp_path / "spool" / "20260101-000000-0.json"
    result = {"config": {"problem": {"seed": 7}}, "metrics": {"accuracy": 1.0}, "tags": {"method": "gf2"}}
    kept.write_text(json.dumps({"tracking_uri": "sqlite:////dev/null", "experiment": "sweep", "result": result}))
    p = sweep("import", env=env, cwd=tmp_path, module="sweep.spool", timeout=60)
    line = one_line(p.stderr)
    assert p.returncode == 1 and "/dev/null is a character device" in line and "remove" not in line, line
    assert "import --tracking-uri URI FILE" in line and kept.exists()
    p = sweep("import", "--tracking-uri", real, str(kept), env=env, cwd=tmp_path, module="sweep.spool", timeout=120)
    assert p.returncode == 0 and "1 result(s) written into" in p.stdout, p.stdout + p.stderr
    runs = MlflowClient(real).search_runs([MlflowClient(real).get_experiment_by_name("sweep").experiment_id])
    assert [r.data.params["problem.seed"] for r in runs] == ["7"] and not kept.exists()


def test_a_database_whose_driver_is_not_installed_is_one_line_before_the_job(tmp_path):
    """A `mysql://` store (no MySQL driver in this environment) at a port that takes connections: the job ran,
    then its result was spooled for a store no command here could open."""
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        uri = f"mysql://u@127.0.0.1:{silent.getsockname()[1]}/x"
        p = sweep(*GF2, f"mlflow.tracking_uri={uri}", env=env, cwd=tmp_path, timeout=120)
    assert p.returncode == 1 and "no driver for mysql:// is installed here (No module named" in one_line(p.stderr)
    assert "[FINISHED]" not in p.stdout and not (tmp_path / "spool").exists()


KILLED_WRITER = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("UPDATE experiments SET last_update_time = last_update_time + 1")
conn.commit()
os._exit(0)  # no close, so no checkpoint: the -wal stays beside the file
"""


def test_a_journal_left_without_its_database_is_refused_and_no_store_is_made_under_it(store, tmp_path):
    """Case 2 of issue 35. `rm mlflow.db` with its -wal left beside it (a sweep killed by kill -9 leaves one; one
    that ends folds it in): SQLite would replay it onto a new store made under the same name, which then fails
    every command. Every command refuses it, in one line saying what to do."""
    db = Path(store[len("sqlite:///") :])
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    p = sweep("-m", "method=gf2,km", "problem.n_bits=10", env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # a writer of the store that dies without closing it, as a sweep killed by kill -9 does: its -wal stays
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db)], check=True)
    assert Path(f"{db}-wal").stat().st_size > 0
    db.unlink()
    for module, *args in [
        ("sweep", "-m", "method=gf2,km", "problem.n_bits=10"),
        ("sweep", *GF2),
        ("sweep.compare", "x"),
    ]:
        p = sweep(*args, env=env, cwd=tmp_path, module=module)
        assert p.returncode == 1, (module, p.stdout, p.stderr)
        line = one_line(p.stderr)
        assert f"store {store}: mlflow.db-wal" in line and "without the database mlflow.db" in line, line
        assert "move mlflow.db-wal" in line and "aside" in line
        assert "[FINISHED]" not in p.stdout and not db.exists() and not (tmp_path / "spool").exists()
    for journal in db.parent.glob("mlflow.db-*"):  # as the line says: moved aside, the store is made anew
        journal.rename(tmp_path / journal.name)
    p = sweep("-m", "method=gf2,km", "problem.n_bits=10", env=env, cwd=tmp_path)
    assert p.returncode == 0 and "2 job(s) finished" in p.stdout, p.stderr


@pytest.mark.new_store
def test_a_store_that_is_a_symlink_to_nothing_is_not_replaced_by_a_file(store, tmp_path):
    """Case 9 of issue 35 (a store path that is a dangling symlink was replaced by a file). Refused by the address
    check; and made by the recorder (as the store of a job already checked), the link
    stays a link: the store file is not made in its place."""
    from sweep.record.recorder import Recorder
    from sweep.record.store import StoreError

    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "gone" / "mlflow.db")
    with pytest.raises(StoreError, match="is a symlink to .* which does not exist"):
        Recorder(f"sqlite:///{link}", "sweep")
    assert link.is_symlink() and not (tmp_path / "gone").exists()


def serve(answer) -> int:
    """A port of 127.0.0.1 where each connection gets `answer(conn)` after its request: what a server that is
    not MLflow's (or is broken) sends."""
    listener = socket.create_server(("127.0.0.1", 0))

    def loop() -> None:
        while True:
            conn, _ = listener.accept()
            conn.recv(65536)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return listener.getsockname()[1]


def drip(conn) -> None:  # the head at once, then a byte a second of a body that never ends
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    with contextlib.suppress(OSError):
        while True:
            conn.sendall(b" ")
            time.sleep(1)


def test_a_server_that_drips_garbles_loops_or_takes_a_login_in_its_address_is_one_true_line_in_time(tmp_path):
    """A prober's round of issue 43: a server that answers a byte a second held a sweep past any timeout (each
    read's timeout, never the whole answer's); a status line that is not HTTP's let the job run and spooled its
    result (http.client's BadStatusLine is no OSError); a redirect loop's cause was three lines; a login in the
    address (`http://alice:pw@host`, which MLflow's client sends) was called a host name that does not resolve."""
    dripping = serve(drip)
    p = sweep(
        *GF2,
        f"mlflow.tracking_uri=http://127.0.0.1:{dripping}",
        "mlflow.connect_timeout_s=2",
        env={"SWEEP_SPOOL_DIR": str(tmp_path / "spool")},
        cwd=tmp_path,
        timeout=30,
    )
    assert p.returncode == 1 and "[FINISHED]" not in p.stdout and not (tmp_path / "spool").exists(), p.stdout
    assert "unreachable: no whole answer within 2 s (mlflow.connect_timeout_s)" in one_line(p.stderr)

    from sweep.record import remote  # noqa: PLC0415 - the same check, in this process, for the other answers

    garbage = serve(lambda c: (c.sendall(b"\x00garbage\r\n\r\n"), c.close()))
    looping = serve(lambda c: (c.sendall(b"HTTP/1.1 302 Found\r\nLocation: /\r\nContent-Length: 0\r\n\r\n"), c.close()))
    login = serve(lambda c: (c.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"), c.close()))
    said = {
        port: remote.problem(uri, 2)
        for port, uri in [
            (garbage, f"http://127.0.0.1:{garbage}"),
            (looping, f"http://127.0.0.1:{looping}"),
            (login, f"http://al%40ice:pw@127.0.0.1:{login}"),
        ]
    }
    assert said[garbage] == "the server's answer is not HTTP (BadStatusLine; is this an MLflow tracking server?)"
    assert said[looping].startswith("the server answered HTTP 302") and "\n" not in said[looping], said[looping]
    assert said[login].startswith("login refused for user 'al@ice' (wrong username or password)"), said[login]


class EmptyAnswers(http.server.BaseHTTPRequestHandler):
    """An HTTP server that answers `{}` (200, JSON) to every request, as many a stub or a proxy's default does."""

    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = answer

    def log_message(self, *args) -> None:
        pass


def test_a_server_that_answers_an_empty_object_to_everything_is_refused_before_the_job(tmp_path):
    """A prober's round of issue 43: a server answering `{}` to every request passed the store check (`{}` is also
    what MLflow answers a search when it lists no experiment), the job ran, and its result was spooled after it.
    A real server that lists none refuses a request for an experiment that cannot exist; this one says 200."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EmptyAnswers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    said = "it answers HTTP, but nothing an MLflow tracking server answers: not an MLflow tracking server"
    try:
        for module, *args, start in (
            (
                "sweep",
                *GF2,
                f"mlflow.tracking_uri={uri}",
                f"sweep: config error: mlflow.tracking_uri={uri} is not allowed",
            ),
            ("sweep", "-m", "method=gf2,km", "problem.n_bits=10", f"mlflow.tracking_uri={uri}", "sweep: config error"),
            ("sweep.compare", "demo", "--tracking-uri", uri, f"python -m sweep.compare: store {uri}"),
        ):
            p = sweep(*args, env=env, cwd=tmp_path, module=module, timeout=60)
            line = one_line(p.stderr)
            assert p.returncode == 2 and line.startswith(start) and line.endswith(said), (module, p.stdout, line)
            assert "[FINISHED]" not in p.stdout and not (tmp_path / "spool").exists(), p.stdout
        # the same plain HTTP server as https:// (a prober's: "unreachable: [SSL: WRONG_VERSION_NUMBER] ...", exit 1)
        from sweep.record import remote  # noqa: PLC0415 - the same check, in this process

        said = remote.problem(f"https://127.0.0.1:{server.server_address[1]}", 2)
        assert said == f"the server answers without TLS (https's handshake got plain HTTP): {uri}?", said
        assert isinstance(said, remote.NotMLflowAnswer)  # bad input: exit 2
    finally:
        server.shutdown()


def test_an_import_into_a_store_no_result_waits_for_names_those_that_wait(tmp_path, monkeypatch, capsys):
    """A prober's round of issue 43: `sweep-spool import --tracking-uri URI` said "no result waits in <spool>"
    while `list` showed results waiting there for other stores; nothing is written, no store is made."""
    from sweep.spool import main  # noqa: PLC0415

    monkeypatch.setenv("SWEEP_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the last resort: this test's own (none)
    (tmp_path / "spool").mkdir()
    kept = tmp_path / "spool" / "20260101-000000-0.json"
    meant = f"sqlite:///{tmp_path / 'meant.db'}"
    kept.write_text(json.dumps({"tracking_uri": meant, "experiment": "sweep", "result": {"config": {}}}))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    assert main(["import", "--tracking-uri", other]) == 0
    out = capsys.readouterr().out
    assert out == (
        f"sweep-spool: nothing to import: no result waits in {tmp_path / 'spool'} for {other}; 1 wait for other "
        "stores (`list` names them; `import --tracking-uri URI FILE` writes one into URI)\n"
    ), out
    assert kept.exists() and not (tmp_path / "other.db").exists() and not (tmp_path / "meant.db").exists()
    # a file in the spool that holds no result (damaged; `{}`): `list` said "0 result(s)" of a damaged one and was a
    # KeyError traceback for `{}`; each is named, left there, and the command fails
    # (issue 43, seventh round: a result that is no run's was a TypeError traceback of both, and every later run
    # into its store failed to record, "RunResult.__init__() missing ...", and was spooled too)
    shaped = {"tracking_uri": other, "experiment": "sweep"}
    damaged = {
        "20260101-000001-0.json": "not JSON",
        "20260101-000002-0.json": "{}",
        "20260101-000003-0.json": json.dumps({**shaped, "result": {}}),
        "20260101-000004-0.json": json.dumps({**shaped, "result": {"config": {}, "metrics": {"a": "x"}}}),
    }
    for name, text in damaged.items():
        (tmp_path / "spool" / name).write_text(text)
    for argv in (["list"], ["import", "--tracking-uri", other]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err.splitlines()
        assert [line.split(": ", 2)[1] for line in err] == [str(tmp_path / "spool" / n) for n in damaged], err
        assert "(JSONDecodeError: Expecting value: line 1 column 1 (char 0)); left there" in err[0], err
        assert err[1].endswith(": not a result this command can read (no store or experiment named in it); left there")
        assert err[2].endswith("(its result is not a run's (RunResult.__init__() missing 1 required positional "
                               "argument: 'config')); left there"), err[2]  # fmt: skip
        assert err[3].endswith("(its result is not a run's (metrics: expected numbers)); left there"), err[3]
    assert all((tmp_path / "spool" / n).exists() for n in damaged) and kept.exists()
    # a prober's round: a FILE named that is no result went on "nothing to import: no result waits in <spool>"
    named = str(tmp_path / "spool" / "20260101-000002-0.json")
    assert main(["import", named]) == 1
    out, err = capsys.readouterr()
    assert not out and err.count("\n") == 1 and "not a result this command can read" in err, (out, err)
    # a FILE named that is no file (a fresh prober's round): a FIFO's read waited for ever; a directory or a
    # misspelt name was "not a result this command can read ... left there", exit 1
    os.mkfifo(tmp_path / "fifo")
    for name, kind in (("fifo", "a FIFO"), ("spool", "a directory"), ("nope.json", "not there")):
        assert main(["import", str(tmp_path / name), "--tracking-uri", other]) == 2, name
        assert capsys.readouterr().err == (
            f"sweep-spool: FILE {tmp_path / name} is {kind}: expected a result's file (`list` names the spool's)\n"
        )
    # a FILE named that is a file but no result: its one line, not a second one about the spool's directory
    (tmp_path / "notes.txt").write_text("not a result")
    assert main(["import", str(tmp_path / "notes.txt")]) == 1
    said = capsys.readouterr()
    assert said.out == ""  # it said "nothing to import: no result waits in <the spool>" too
    assert said.err.splitlines() == [
        f"sweep-spool: {tmp_path / 'notes.txt'}: not a result this command can read (JSONDecodeError: Expecting "
        "value: line 1 column 1 (char 0)); left there"
    ]
    assert not (tmp_path / "other.db").exists()


def test_a_recording_setting_that_cannot_be_resolved_is_one_line_before_the_job(tmp_path):
    """A prober's round of issue 43: `mlflow.tracking_uri=http://host/${oops}` or `mlflow.experiment=${oops}` raised
    in the store check, which Hydra only warns of: the single run's job ran, then its result was spooled."""
    env = {"SWEEP_SPOOL_DIR": str(tmp_path / "spool")}
    for args, key in (
        ((*GF2, "mlflow.tracking_uri=http://127.0.0.1:1/${oops}"), "mlflow.tracking_uri=http://127.0.0.1:1/${oops}"),
        (("-m", "method=gf2,km", "problem.n_bits=10", "mlflow.experiment=${oops}"), "mlflow.experiment=${oops}"),
    ):
        p = sweep(*args, env=env, cwd=tmp_path, timeout=60)
        said = f"sweep: config error: {key} cannot be resolved: Interpolation key 'oops' not found"
        assert p.returncode == 2 and one_line(p.stderr) == said, p.stderr
        assert "[FINISHED]" not in p.stdout and not (tmp_path / "spool").exists(), p.stdout


def test_an_address_urllib_cannot_read_is_one_line_naming_the_setting_and_no_password(tmp_path):
    """A ninth prober's round: an IPv6 host's bracket left open (`http://[::1`) was "the store could not be
    checked, the job was not run: ValueError: Invalid IPv6 URL", exit 1, and sweep-compare's a 30-line traceback
    (the password's redaction raised on it too)."""
    from sweep.record.store import redacted

    p = sweep(*GF2, "mlflow.tracking_uri='http://u:secret@[::1'", env={}, cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and one_line(p.stderr).startswith(
        "sweep: config error: mlflow.tracking_uri=http://u:***@[::1 is not allowed: not an address (Invalid IPv6 URL)"
    ), p.stderr
    assert "secret" not in p.stderr and "[FINISHED]" not in p.stdout
    assert redacted("postgresql://u:pw@[::1/db") == "postgresql://u:***@[::1/db"
    c = sweep("x", "--tracking-uri", "http://[::1", env={}, cwd=tmp_path, timeout=60, module="sweep.compare")
    assert c.returncode == 2 and one_line(c.stderr).endswith(
        "sweep.compare: store http://[::1: not an address (Invalid IPv6 URL): expected sqlite:///PATH (e.g. "
        "sqlite:///mlruns/mlflow.db), http(s)://HOST:PORT (a tracking server) or a database, postgresql://... "
        "mysql://... mssql://..."
    )


def test_mlflows_databricks_names_are_called_so_not_a_directory():
    """`databricks` (MLflow's name for a Databricks workspace) was called "a directory or file: address"."""
    from sweep.record.address import problem

    for uri in ("databricks", "databricks://profile", "databricks-uc", "uc:"):
        said = problem(uri)
        assert said is not None and said.startswith(f"{uri} is MLflow's address of a Databricks workspace"), said
        assert "sqlite:///PATH" in said
    assert problem("databricks_runs").startswith("a directory or file: address")  # a path that only starts so


def test_a_server_lost_mid_command_retries_without_a_line_a_try():
    # a tracking server killed mid-sweep: urllib3 logged each retry of each request ('Retrying (Retry(total=1,
    # ...)) after connection broken', 20 lines before the one line saying what was kept); a real client, a port
    # with nothing behind it, logging set up as Hydra's is (WARNING and above on stderr)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = (
        "import logging\nlogging.basicConfig(level=logging.INFO)\nfrom sweep.record import remote\n"
        "remote.client_settings()\nfrom mlflow.tracking import MlflowClient\n"
        f"try:\n    MlflowClient('http://127.0.0.1:{port}').get_experiment('0')\n"
        "except Exception as e:\n    print('raised', type(e).__name__)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout == "raised MlflowException\n", p.stdout + p.stderr
    assert "Retrying" not in p.stderr, p.stderr


def test_a_single_runs_last_line_hides_the_stores_password(monkeypatch):
    """Task fault11 of issue 43: a single run into PostgreSQL (MLFLOW_TRACKING_URI) ended `recorded in experiment
    'sweep' of postgresql://sweep:<the password>@127.0.0.1:5499/mlflow; see it: ...`, the password in the clear
    (every other line names the store with `***`)."""
    from sweep.report.ui import recorded_line

    for uri in ("postgresql://sweep:s3cret-pw@127.0.0.1:5499/mlflow", "http://alice:s3cret-pw@mlflow-host:5000"):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        said = recorded_line(uri, "sweep", "1", "0" * 32)
        assert "s3cret-pw" not in said and ":***@" in said, said
