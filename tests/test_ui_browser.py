"""A sweep, resumed, then `python -m sweep.ui <study>` as its last line says, and headless Chromium, as a user: the
address the UI prints shows the sweep's runs (under both parents), named by what they vary, with their accuracy /
ard / energy_pj / wall_clock_s / cost_usd values, no clicks needed; and, in a new browser profile, MLflow's own
home page, where a click on a study lands on its runs table (not MLflow's GenAI overview) with those metric
columns and its runs in numeric order of what they vary (seed 7 < 42 < 100). One store and one server for the
module. Keeps screenshots in the test's tmp dir and in tests/artifacts/ (git-ignored).

Needs Debian's chromium + chromium-driver (.ci/run installs them) and selenium (dev extra). Skipped without
them on a developer machine; under CI (CI set) their absence fails the test instead.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from sweep.report.ui import NAME_COLUMN
from tests.conftest import ROOT, run_sweep

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
METRICS = ("accuracy", "ard", "energy_pj", "wall_clock_s", "cost_usd")
ARTIFACTS = ROOT / "tests" / "artifacts"


def _requirements() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            return f"{exe} missing (apt-get install -y chromium chromium-driver)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow ui exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"mlflow ui not healthy after {timeout:.0f} s")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One fresh SQLite store for the module; MLFLOW_TRACKING_URI points at it for its tests and subprocesses."""
    tmp = tmp_path_factory.mktemp("ui-store")
    with pytest.MonkeyPatch.context() as mp:
        uri = f"sqlite:///{tmp / 'mlruns' / 'mlflow.db'}"
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        mp.setenv("SWEEP_SPOOL_DIR", str(tmp / "spool"))
        yield uri


@pytest.fixture(scope="module")
def ordered(store, tmp_path_factory):
    """A sweep over seeds whose names sort differently as text (100 < 42 < 7); its runs by seed."""
    from mlflow.tracking import MlflowClient

    from sweep.report.queries import find_parent, load_children

    p = run_sweep(
        "-m",
        "method=gf2",
        "problem.seed=100,7,42",
        "problem.n_bits=12",
        "tracker=energy",
        "mlflow.experiment=ui_order",
        cwd=tmp_path_factory.mktemp("ordered"),
    )
    assert p.returncode == 0, p.stderr
    client = MlflowClient(store)
    runs = load_children(client, find_parent(client, "ui_order"))
    return sorted(runs, key=lambda r: int(r.data.params["problem.seed"]))


@pytest.fixture(scope="module")
def swept(store, ordered, tmp_path_factory):
    """A real sweep as a user runs it (gf2/km x seeds 42,43, energy tracker: energy_pj and ard) in a temporary
    store, resumed once (a job whose run FAILED runs again under a new parent); returns the sweep's runs (each
    job's latest), the run the resume replaced, and the `python -m sweep.ui ...` arguments its last line says."""
    from mlflow.tracking import MlflowClient

    from sweep.report.queries import find_parent, load_children, sweep_runs

    tmp_path = tmp_path_factory.mktemp("swept")
    args = (
        "-m",
        "method=gf2,km",
        "problem.seed=42,43",
        "problem.n_bits=12",
        "tracker=energy",
        "mlflow.experiment=ui_demo",
    )
    p = run_sweep(*args, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "[FINISHED] method=km seed=43 accuracy=1.000 " in p.stdout and " energy_pj=" in p.stdout
    client = MlflowClient(store)
    first = load_children(client, find_parent(client, "ui_demo"))
    assert len({c.info.run_name for c in first}) == 4  # each job named by what it varies, once
    client.set_terminated(first[0].info.run_id, "FAILED")
    p = run_sweep(*args, cwd=tmp_path)
    assert p.returncode == 0 and "3 skipped" in p.stdout, p.stderr
    ui_args = re.search(r"sweep-ui (.+?)\s+→", p.stdout.splitlines()[-1])
    assert ui_args, p.stdout
    runs = sweep_runs(client, find_parent(client, "ui_demo"))
    assert len(runs) == 4 and first[0].info.run_id not in {r.info.run_id for r in runs}
    return runs, first[0], shlex.split(ui_args.group(1))


@pytest.fixture(scope="module")
def ui_address(swept, tmp_path_factory):
    """`python -m sweep.ui ui_demo` as the sweep's last line says, on a free port; yields the address it prints."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep.ui", *swept[2], "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path_factory.mktemp("ui"),
        start_new_session=True,
    )
    try:
        first = proc.stdout.readline()
        address = re.search(r"http://\S+", first)
        assert address, first
        _wait_healthy(f"http://127.0.0.1:{port}", proc, timeout=150)
        yield address.group(0)
    finally:
        os.killpg(proc.pid, 15)  # the server and its uvicorn worker: its own session, started here
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        proc.stdout.close()


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}",
        "--window-size=2400,900",
    ):
        opts.add_argument(arg)
    return webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))


def _open_study_from_mlflows_list(driver, wait, study: str, runs) -> None:
    """A click on `study` in MLflow's own experiments list lands on its runs (every one of `runs` a row), not on
    MLflow's GenAI overview."""
    from selenium.webdriver.common.by import By

    experiment = runs[0].info.experiment_id
    link = wait.until(
        lambda d: [
            a
            for a in d.find_elements(By.CSS_SELECTOR, f"a[href*='experiments/{experiment}']")
            if a.text.strip() == study
        ]
    )
    link[0].click()
    wait.until(lambda d: all(d.find_elements(By.CSS_SELECTOR, f"div[row-id='{r.info.run_id}']") for r in runs))
    url = driver.current_url
    assert "/runs" in url and "workflowType=genai" not in url, url


def _needs_browser() -> None:
    missing = _requirements()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"browser test cannot run in CI: {missing}")
        pytest.skip(missing)


@pytest.mark.slow
def test_printed_address_opens_the_study_runs_with_metric_values(tmp_path, request):
    _needs_browser()
    address = request.getfixturevalue("ui_address")  # the sweep and the UI, once the browser is there
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    children, replaced, _ = request.getfixturevalue("swept")  # the resumed sweep whole, across its two parents
    shot = tmp_path / "mlflow-ui.png"
    driver = _browser()
    try:
        driver.get(address)  # the address as printed: the study's child runs, metric columns shown
        wait = WebDriverWait(driver, 90)
        wait.until(lambda d: all(d.find_elements(By.CSS_SELECTOR, f"div[row-id='{r.info.run_id}']") for r in children))
        time.sleep(2)  # MLflow's assistant opened itself a moment after the table, leaving it one metric column wide
        assert not driver.find_elements(By.CSS_SELECTOR, "[data-component-id='mlflow.assistant.chat_panel.close']")
        for m in (*METRICS, "epochs"):  # the study's key metrics too (the registry's, for a study with no preset)
            wait.until(lambda d, m=m: d.find_elements(By.CSS_SELECTOR, f"div[col-id='metrics.`{m}`']"))
        time.sleep(0.5)  # let the grid finish painting before the screenshot
        driver.save_screenshot(str(shot))
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / shot.name)

        assert not driver.find_elements(By.CSS_SELECTOR, f"div[row-id='{replaced.info.run_id}']")
        headers = {e.text for e in driver.find_elements(By.CSS_SELECTOR, "[role='columnheader']")}
        assert {*METRICS, "epochs"} <= headers, headers
        for r in children:
            row = f"div[row-id='{r.info.run_id}']"
            name = driver.find_element(By.CSS_SELECTOR, f"{row} a[href*='/runs/{r.info.run_id}']")
            assert name.get_attribute("textContent") == r.info.run_name  # e.g. "method=km problem.seed=43"
            cell = driver.find_element(By.CSS_SELECTOR, f"{row} div[col-id='{NAME_COLUMN}']")
            assert driver.execute_script(  # the name is whole: no "…" in its cell
                "return [arguments[0], ...arguments[0].querySelectorAll('*')].every(e => "
                "getComputedStyle(e).textOverflow !== 'ellipsis' || e.scrollWidth <= e.clientWidth + 1)",
                cell,
            ), f"run name cut short: {r.info.run_name}"
            for m in METRICS:  # rounded as the page draws them: 4 significant digits, whole numbers from 1,000
                cell = driver.find_element(By.CSS_SELECTOR, f"{row} div[col-id='metrics.`{m}`']")
                shown = float(cell.get_attribute("textContent").replace(",", ""))
                value = r.data.metrics[m]
                assert shown == pytest.approx(round(value) if abs(value) >= 1000 else float(f"{value:.4g}")), m
    finally:
        if not shot.exists():
            driver.save_screenshot(str(shot))  # what the page showed when it failed
        driver.quit()
    assert shot.stat().st_size > 20_000


@pytest.mark.slow
def test_a_click_in_mlflows_own_list_lands_on_the_runs_in_numeric_order(tmp_path, request):
    _needs_browser()
    address = request.getfixturevalue("ui_address")
    runs = request.getfixturevalue("ordered")  # by seed: 7, 42, 100
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    home = address.split("#")[0]  # MLflow's home page on the server sweep.ui started
    shot = tmp_path / "mlflow-ui-from-home.png"
    driver = _browser()  # a new profile: nothing chosen in MLflow's UI yet
    try:
        driver.get(home)
        wait = WebDriverWait(driver, 60)
        _open_study_from_mlflows_list(driver, wait, "ui_order", runs)
        for m in METRICS:  # the metrics the study compares, as columns
            wait.until(lambda d, m=m: d.find_elements(By.CSS_SELECTOR, f"div[col-id='metrics.`{m}`']"))
        time.sleep(0.5)  # let the grid finish painting before the screenshot
        driver.save_screenshot(str(shot))
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / shot.name)

        headers = {e.text for e in driver.find_elements(By.CSS_SELECTOR, "[role='columnheader']")}
        assert set(METRICS) <= headers, headers
        shown = sorted(
            runs,
            key=lambda r: int(
                driver.find_element(By.CSS_SELECTOR, f"div[row-id='{r.info.run_id}']").get_attribute("row-index")
            ),
        )
        assert [r.info.run_name for r in shown] == [r.info.run_name for r in runs]  # seed 7, 42, 100
        for r in runs:  # each name is still what its job varies
            assert r.info.run_name.endswith(f"seed={r.data.params['problem.seed']}"), r.info.run_name
        # the chart view: the study's key metrics first (the registry's for a study with no preset), not the
        # metrics sorted by name
        driver.get(driver.current_url + "&compareRunsMode=CHART")
        cards = "[data-testid='experiment-view-compare-runs-card-drag-handle']"
        handles = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, cards))
        titles = [h.find_element(By.XPATH, "following::*[normalize-space(text())][1]").text for h in handles]
        assert titles[:3] == ["accuracy", "epochs", "wall_clock_s"], titles
    finally:
        if not shot.exists():
            driver.save_screenshot(str(shot))  # what the page showed when it failed
            ARTIFACTS.mkdir(exist_ok=True)
            shutil.copy(shot, ARTIFACTS / shot.name)
        driver.quit()


@pytest.mark.slow
def test_a_click_in_the_groups_server_list_lands_on_the_runs(server, tmp_path):
    """`sweep-server` (MLflow's logins) serves the same landing as `sweep.ui`: logged in, in a new browser
    profile, a click on a study in MLflow's own list opens its runs, not MLflow's GenAI overview."""
    _needs_browser()
    import base64

    from mlflow.tracking import MlflowClient
    from selenium.webdriver.support.ui import WebDriverWait

    p = run_sweep(
        "-m", "method=gf2", "problem.seed=100,7", "problem.n_bits=12", "mlflow.experiment=on_server", cwd=tmp_path
    )
    assert p.returncode == 0, p.stderr[-2000:]
    client = MlflowClient(server.uri)
    experiment = client.get_experiment_by_name("on_server").experiment_id
    runs = [r for r in client.search_runs([experiment]) if "mlflow.parentRunId" in r.data.tags]  # the sweep's runs
    assert len(runs) == 2
    shot = tmp_path / "mlflow-server-from-home.png"
    driver = _browser()  # a new profile: nothing chosen in MLflow's UI yet
    try:
        login = base64.b64encode(f"{server.username}:{server.password}".encode()).decode()
        driver.execute_cdp_cmd("Network.enable", {})  # the login on every request, as a browser sends it once asked
        driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {login}"}})
        driver.get(server.uri + "/")
        _open_study_from_mlflows_list(driver, WebDriverWait(driver, 90), "on_server", runs)
        driver.save_screenshot(str(shot))
    finally:
        if not shot.exists():
            driver.save_screenshot(str(shot))
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(shot, ARTIFACTS / shot.name)
        driver.quit()
