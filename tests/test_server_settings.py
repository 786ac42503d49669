"""sweep.server's worker settings: refused when out of range before anything starts, and handed to gunicorn."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.server.config import ServerConfig
from sweep.server.tracking import command


def test_the_server_runs_under_gunicorns_threaded_workers(tmp_path):
    cmd = command(ServerConfig(data_dir=tmp_path, workers=3, threads=5))
    assert cmd[cmd.index("--workers") + 1] == "3"
    opts = cmd[cmd.index("--gunicorn-opts") + 1]
    assert opts == "--worker-class gthread --threads 5 --no-control-socket"
    from gunicorn.config import Config  # noqa: PLC0415

    parsed = Config().parser().parse_args(opts.split())  # as gunicorn reads what MLflow hands it
    assert (parsed.worker_class, parsed.threads, parsed.control_socket_disable) == ("gthread", 5, True)
    # and by every gunicorn the project allows: before 25.1 "unrecognized arguments: --no-control-socket", and
    # MLflow's own bound lets gunicorn 23 in
    import tomllib  # noqa: PLC0415
    from packaging.requirements import Requirement  # noqa: PLC0415

    from tests.conftest import ROOT  # noqa: PLC0415

    wanted = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    (gunicorn,) = [r for r in wanted if r.name == "gunicorn"]
    assert not gunicorn.specifier.contains("25.0.3") and gunicorn.specifier.contains("25.1.0"), gunicorn


def test_no_threads_is_refused_before_anything_starts(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "sweep.server", "--data-dir", str(tmp_path / "x"), "--threads", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and p.stderr.startswith("python -m sweep.server: threads=0 is not allowed"), p.stderr
    assert not (tmp_path / "x").exists()


def test_settings_that_cannot_serve_are_refused_before_anything_starts(tmp_path):
    """A prober's round of issue 43: one port for both servers made the cluster and started PostgreSQL, then
    said "the tracking server ended at start (exit 0 ...)" after 20 s; a host that is no address was told to
    "choose another port" (exit 1); a negative login cache was taken. Each is one line, exit 2, nothing made."""
    from sweep.server.stack import BadSetting, check  # noqa: PLC0415

    said = {}
    # ... and a prober's round: a user not there to run PostgreSQL as said "starting ..." and made the data
    # directory, then "run as root: no user ... (set run_as)", exit 1
    nobody = (
        "a user of this machine other than root (PostgreSQL refuses root)"
        if os.geteuid() == 0
        else ("none (only root runs the cluster as another user)")
    )
    for settings in (
        {"port": 5000, "db_port": 5000},
        {"host": "999.1.1.1"},
        {"auth_cache_s": -5},
        {"run_as": "no-such-user-here"},
    ):
        try:
            check(ServerConfig(data_dir=tmp_path / "x", **settings))
        except BadSetting as e:
            said[next(iter(settings))] = str(e)
    assert said == {
        "port": "port=5000 and db_port=5000 are one port: give the two servers two ports",
        "host": said.get("host", "(not refused)"),
        "auth_cache_s": "auth_cache_s=-5 is not allowed: a number of seconds >= 0",
        "run_as": f"run_as=no-such-user-here is not allowed: expected {nobody}",
    }
    assert said["host"].startswith("host=999.1.1.1 is not an address of this machine ("), said
    try:  # another machine's address was "cannot listen on 10.1.2.3:5000 (...): choose another port" (exit 1)
        check(ServerConfig(data_dir=tmp_path / "x", host="10.1.2.3"))
        raise AssertionError("another machine's address was taken")
    except BadSetting as e:
        assert str(e) == (
            "host=10.1.2.3 is not an address of this machine (Cannot assign requested address): 127.0.0.1, "
            "0.0.0.0 (every address) or one of its own"
        )
    p = subprocess.run(
        [sys.executable, "-m", "sweep.server", "--data-dir", str(tmp_path / "x"), "--port", "5433"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SWEEP_SERVER_ADMIN_PASSWORD": "a-long-enough-password"},
    )
    port_said = said["port"].replace("5000", "5433")
    assert p.returncode == 2 and p.stderr == f"python -m sweep.server: {port_said}\n", p.stderr
    assert not (tmp_path / "x").exists()


def test_a_taken_port_names_the_option_that_moves_it(tmp_path):
    """A newcomer's first `sweep-server` on a machine where another PostgreSQL held 5433 was told "cannot listen on
    127.0.0.1:5433 (Address already in use): choose another port", with no word of which option sets it."""
    from sweep.server.stack import ServerError, serving  # noqa: PLC0415

    with socket.socket() as held, socket.socket() as other:
        held.bind(("127.0.0.1", 0))
        held.listen()
        other.bind(("127.0.0.1", 0))  # a port free once this block ends (the check binds it, then lets go)
        taken, free = held.getsockname()[1], other.getsockname()[1]
        other.close()
        for settings, flag in (({"db_port": taken}, "--db-port"), ({"port": taken, "db_port": free}, "--port")):
            with pytest.raises(ServerError) as e, serving(ServerConfig(data_dir=tmp_path / "x", **settings), None):
                pass
            assert str(e.value).startswith(f"cannot listen on 127.0.0.1:{taken} (") and str(e.value).endswith(
                f": choose another port, {flag} N"
            ), e.value
    assert not (tmp_path / "x").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the cluster runs as another user only when root (CI runs as root)")
def test_a_data_directory_postgres_cannot_enter_names_the_options_that_move_it(tmp_path):
    """As root, a data directory under a 700 folder (a mktemp -d) was refused with "... or another user (run_as)":
    the line names the options, --data-dir and --run-as."""
    from sweep.server.stack import ServerError, serving  # noqa: PLC0415

    (tmp_path / "locked").mkdir(mode=0o700)
    with socket.socket() as a, socket.socket() as b:  # two ports no other server holds (free once let go)
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        ports = a.getsockname()[1], b.getsockname()[1]
    cfg = ServerConfig(data_dir=tmp_path / "locked" / "x", port=ports[0], db_port=ports[1])
    with pytest.raises(ServerError) as e, serving(cfg, None):
        pass
    assert "cannot enter" in str(e.value) and "(--data-dir;" in str(e.value) and str(e.value).endswith("(--run-as)")


def test_names_and_addresses_that_could_not_serve_are_refused_or_written_as_gunicorn_reads_them(tmp_path):
    """A fresh prober's round of issue 43: --workers 100000 was started; --db-user 'a b' was psycopg's traceback
    after the start began, '' was initdb's "removing contents of data directory"; --admin-username '' made the
    cluster, then "the tracking server ended at start (exit 0 ...)"; --host ::1 ended at start too (gunicorn read
    `-b ::1:5000` as host '' and port ''). Each setting: one line, exit 2, nothing made; an IPv6 host: bracketed
    where gunicorn and URLs read it."""
    from gunicorn.util import parse_address  # noqa: PLC0415
    from mlflow.server import _build_gunicorn_command  # noqa: PLC0415

    from sweep.server.stack import BadSetting, check  # noqa: PLC0415

    for settings, said in (
        ({"db_user": "a b"}, "db_user='a b' is not allowed: a PostgreSQL role name"),
        ({"db_user": ""}, "db_user='' is not allowed: a PostgreSQL role name"),
        ({"admin_username": ""}, "admin_username='' is not allowed: a name of visible characters but ':'"),
        ({"admin_username": "a:b"}, "admin_username='a:b' is not allowed"),
        # a size: 100000 workers were started (each ~270 MB once it serves)
        ({"workers": 100000}, "workers=100000 is not allowed: each worker holds MLflow's app (~300 MB), 30,000.0 GB"),
    ):
        try:
            check(ServerConfig(data_dir=tmp_path / "x", **settings))
            raise AssertionError(f"{settings} was not refused")
        except BadSetting as e:
            assert str(e).startswith(said), str(e)
    check(ServerConfig(data_dir=tmp_path / "x", admin_username="é"))  # any visible name MLflow takes
    cfg = ServerConfig(data_dir=tmp_path / "x", host="::1", port=5011)
    cmd = command(cfg)
    host, port = cmd[cmd.index("--host") + 1], int(cmd[cmd.index("--port") + 1])
    bind = _build_gunicorn_command("", host, port, 1, "app")  # as MLflow hands the address to gunicorn
    assert parse_address(bind[bind.index("-b") + 1]) == ("::1", 5011)
    assert cfg.uri == "http://[::1]:5011" and ServerConfig(host="::").uri == "http://[::1]:5000"
    assert not (tmp_path / "x").exists()


def test_a_db_user_the_cluster_was_not_made_with_is_one_line_at_once(shared_server):
    """--db-user postgres on a data directory made with the default role waited START_TIMEOUT_S (180 s) for a
    login no wait can make: said at the first refusal."""
    import time  # noqa: PLC0415

    from sweep.server.postgres import ServerError, wait_ready  # noqa: PLC0415

    cfg = shared_server.config
    alive = subprocess.Popen(["sleep", "60"])  # PostgreSQL's process, as wait_ready watches it: not ended
    try:
        t0 = time.monotonic()
        try:
            wait_ready(alive, "postgres", "any", cfg.db_port, cfg.data_dir / "postgres.log", timeout_s=60)
            raise AssertionError("the login was taken")
        except ServerError as e:
            assert str(e) == (
                f"PostgreSQL in {cfg.data_dir} refused the login of role 'postgres': the cluster was made with "
                "another db_user (give the one of its first start)"
            )
        assert time.monotonic() - t0 < 10
    finally:
        alive.kill()
        alive.wait()


def test_help_says_what_an_unset_setting_means(capsys):
    """`--allowed-hosts ... (default: none)` read as "no Host is accepted" and `--run-as ... (default: none)` as
    no user, where docs/store.md says this machine's own names are accepted and postgres (else nobody) runs it."""
    from sweep.server.__main__ import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "besides loopback, private addresses and this machine's own names" in text, text
    assert "(none: postgres where that user exists, else nobody)" in text, text


def test_a_second_server_on_a_data_directory_in_use_is_one_line_naming_it(shared_server, tmp_path):
    """A second `sweep-server` on the data directory of one that serves: PostgreSQL's log line ("HINT: Is another
    postmaster (PID 596) running in data directory ...?") after its start; now said before anything starts."""
    import dataclasses  # noqa: PLC0415

    from sweep.server.stack import ServerError, serving  # noqa: PLC0415
    from tests.tracking_server import free_port  # noqa: PLC0415

    # the same command again (its ports too: the data directory was said only once other ports were given, after
    # "cannot listen on 127.0.0.1:5433 ...: choose another port"), and with ports of its own
    for cfg in (shared_server.config, dataclasses.replace(shared_server.config, port=free_port(), db_port=free_port())):
        with pytest.raises(ServerError) as e, serving(cfg, None):
            pass
        said = str(e.value)
        assert said.startswith(f"data_dir={cfg.data_dir} is in use: another sweep-server's PostgreSQL (pid "), said
        assert said.endswith("stop that one, or give another --data-dir"), said
        pid = int(said.split("(pid ")[1].split(")")[0])
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "postgres"  # the session server's, still serving
