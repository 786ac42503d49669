"""The sweep launcher end to end: real `python -m sweep` subprocesses, a real MLflow store in a temp dir.

One SQLite store serves the whole module (creating one costs seconds); each test writes its own experiment.
Covers failure isolation across batches, resume/force, Ctrl-C, worker death, parallelism, determinism across
launchers, routing (cuda -> Modal, offline), no Modal token, credential hygiene, and FastComposer == Hydra.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.conftest import FAULTY, fast_composer, run_sweep

FAKE_ID, FAKE_SECRET = "ak-FAKETOKENID4711", "as-FAKETOKENSECRET0815"
SOLVE_METRICS = ("accuracy", "train_accuracy", "epochs", "secret_correct")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """A real SQLite store for this module, created (schema and all) before any sweep touches it."""
    from sweep.record.recorder import Recorder

    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    Recorder(uri, "warmup")
    return uri


def sweep(
    store: str, cwd: Path, *args: str, env: dict | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    return run_sweep("-m", *args, cwd=cwd, env={"MLFLOW_TRACKING_URI": store, **(env or {})}, timeout=timeout)


def runs(store: str, experiment: str) -> tuple[list, list]:
    """(parents, children) of an experiment, oldest first (not the claims' bookkeeping run: sweep.record.claims)."""
    c = MlflowClient(store)
    exp = c.get_experiment_by_name(experiment)
    rs = c.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]) if exp else []
    rs = [r for r in rs if r.data.tags.get("sweep.claims") != "true"]
    return (
        [r for r in rs if r.data.tags.get("sweep.parent") == "true"],
        [r for r in rs if r.data.tags.get("sweep.parent") != "true"],
    )


@pytest.mark.parametrize(
    "args",
    [
        ["method=km"],  # a single run
        ["-m", "method=km", "problem.seed=2"],  # the project's launcher
        ["-m", "hydra/launcher=local", "hydra.launcher.batch=2", "method=km", "problem.seed=3,4"],  # batched
        ["-m", "hydra/launcher=basic", "method=km", "problem.seed=5"],  # Hydra's own launcher
    ],
    ids=["single", "sweep", "batched", "basic"],
)
def test_cost_usd_prices_the_solve_and_task_cost_usd_the_task_under_every_launcher(store, tmp_path, args):
    """One definition each, whatever ran the job: cost_usd = wall_clock_s x the device's price (the solve), and
    task_cost_usd = the task's billed seconds (cpu_s here) x the same price."""
    env = {"MLFLOW_TRACKING_URI": store}
    p = run_sweep(*args, "mlflow.experiment=cost", f"hydra.sweep.dir={tmp_path / 'm'}", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    children = [
        r
        for r in MlflowClient(store).search_runs([MlflowClient(store).get_experiment_by_name("cost").experiment_id])
        if "device.name" in r.data.params
    ]
    assert children
    for c in children:
        m = c.data.metrics
        assert m["cost_usd"] == pytest.approx(m["wall_clock_s"] * 0.08925 / 3600)
        assert m["task_cost_usd"] == pytest.approx(m["cpu_s"] * 0.08925 / 3600) and m["cpu_s"] > 0


def test_failure_isolation_across_batches_then_resume_and_force(store, tmp_path):
    # chunk=13 raises inside the job (tests/faulty.py); batches of 2 put a failure in each batch
    args = [
        "hydra/launcher=local",
        *FAULTY,
        "tracker=none",
        "problem.seed=1,2",
        "method.chunk=2048,13",
        "hydra.sweeper.max_batch_size=2",
        "mlflow.experiment=isolation",
    ]
    p = sweep(store, tmp_path, *args)
    assert p.returncode == 1, p.stderr
    assert "2 failed" in p.stderr and "failed jobs:" in p.stderr
    # every job is named by what varies (seed, chunk): in the failure list, the per-job lines, the run names
    failed_lines = p.stderr.split("failed jobs:\n")[1].splitlines()
    assert sorted(ln.split(":")[0] for ln in failed_lines) == [
        "  seed=1 chunk=13",
        "  seed=2 chunk=13",
    ]
    assert all("ValueError" in ln for ln in failed_lines)
    assert "[FINISHED] seed=2 chunk=2048 accuracy=" in p.stdout
    (parent,), children = runs(store, "isolation")
    assert sorted(c.info.run_name for c in children) == sorted(
        f"seed={s} chunk={d}" for s in (1, 2) for d in ("2048", "13")
    )
    assert parent.info.status == "FAILED" and parent.data.tags["launcher"] == "local"
    assert "problem.seed=1,2" in parent.data.tags["sweep.overrides"]
    by_status = {s: [c for c in children if c.info.status == s] for s in ("FINISHED", "FAILED")}
    assert len(by_status["FINISHED"]) == 2 and len(by_status["FAILED"]) == 2  # the 2nd batch ran too
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    client = MlflowClient(store)
    tb = client.download_artifacts(by_status["FAILED"][0].info.run_id, "traceback.txt", str(tmp_path))
    assert "ValueError" in Path(tb).read_text()
    # cost: the solve's seconds x device.price_per_hour, the task's CPU seconds x the same; the parent sums them
    fin = by_status["FINISHED"]
    for c in fin:
        assert c.data.metrics["cost_usd"] == pytest.approx(c.data.metrics["wall_clock_s"] * 0.08925 / 3600)
        assert c.data.metrics["task_cost_usd"] == pytest.approx(c.data.metrics["cpu_s"] * 0.08925 / 3600)
    for m in ("cost_usd", "task_cost_usd"):
        assert parent.data.metrics[m] == pytest.approx(sum(c.data.metrics[m] for c in fin))
    assert parent.data.metrics["wall_clock_s"] == pytest.approx(sum(c.data.metrics["wall_clock_s"] for c in fin))
    assert parent.data.metrics["jobs_failed"] == 2

    # resume: the same sweep again skips the 2 FINISHED jobs and re-runs only the failed ones
    p = sweep(store, tmp_path, *args)
    assert p.returncode == 1  # one finished job per batch; the setting that re-runs them named by the launcher
    assert "skipping 1 job(s) already done (hydra.launcher.force=true re-runs them: " in p.stdout
    assert "2 skipped (already done; hydra.launcher.force=true re-runs them: " in p.stderr
    parents, children = runs(store, "isolation")
    assert len(parents) == 2 and len(children) == 6
    assert sorted(c.info.status for c in children[4:]) == ["FAILED", "FAILED"]
    # force re-runs a job that has a FINISHED run
    p = sweep(store, tmp_path, *args[:3], "problem.seed=1", "mlflow.experiment=isolation", "hydra.launcher.force=true")
    assert p.returncode == 0, p.stderr
    assert [c.info.status for c in runs(store, "isolation")[1][6:]] == ["FINISHED"]
    # and so does the app's switch, the one every launcher reads
    p = sweep(store, tmp_path, *args[:3], "problem.seed=1", "mlflow.experiment=isolation", "mlflow.force=true")
    assert p.returncode == 0, p.stderr
    assert [c.info.status for c in runs(store, "isolation")[1][6:]] == ["FINISHED", "FINISHED"]


APP = textwrap.dedent("""
    import os, sys, time
    import hydra

    @hydra.main(version_base=None, config_path=None)
    def main(cfg):
        out = os.path.join(os.environ["MARKS"], str(cfg.job))
        t0 = time.time()
        if cfg.mode == "exit":
            os._exit(3)  # the worker dies with its job
        if cfg.mode == "raise":
            raise ValueError("job said no")
        time.sleep(1.0)
        with open(out, "w") as f:
            f.write(f"{os.getpid()} {t0} {time.time()}")
        return cfg.job

    if __name__ == "__main__":
        main()
""")


def test_worker_death_raise_and_parallel_jobs_in_a_plain_hydra_app(tmp_path):
    """An app without the sweep structure: nothing is recorded, failures are still isolated and reported."""
    (tmp_path / "app.py").write_text(APP)
    marks = tmp_path / "marks"
    marks.mkdir()
    p = subprocess.run(
        [
            sys.executable,
            "app.py",
            "-m",
            "hydra/launcher=local",
            "hydra.launcher.n_workers=2",
            "+job=0,1,2,3",
            "+mode=sleep",
            "hydra.sweep.dir=out",
        ],
        cwd=tmp_path,
        env={**os.environ, "MARKS": str(marks)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    spans = [tuple(map(float, (marks / str(j)).read_text().split())) for j in range(4)]
    assert len({s[0] for s in spans}) == 2  # two worker processes ...
    assert sum(a[1] < b[2] and b[1] < a[2] for a in spans for b in spans if a is not b) >= 2  # ... overlapping
    assert (tmp_path / "out" / "3" / ".hydra" / "config.yaml").exists() and (
        tmp_path / "out" / "0" / "app.log"
    ).exists()

    p = subprocess.run(
        [
            sys.executable,
            "app.py",
            "-m",
            "hydra/launcher=local",
            "+job=10,11,12",
            "+mode=exit,raise,sleep",
            "hydra.sweep.dir=out2",
        ],
        cwd=tmp_path,
        env={**os.environ, "MARKS": str(marks)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1
    assert "worker process" in p.stderr and "died (exit code 3)" in p.stderr
    assert "ValueError: job said no" in p.stderr
    assert len(list(marks.glob("1[012]"))) == 3  # every job=..,mode=sleep finished despite the others


def _solve_metrics(children, client=None) -> dict:
    """Per (method, seed): the solve's metrics, ARD, and (with `client`) sgd's per-epoch curves."""
    out = {}
    for c in children:
        m = {k: c.data.metrics.get(k) for k in (*SOLVE_METRICS, "ard")}
        if client is not None and c.data.tags["method"] == "sgd":
            for curve in ("train_accuracy", "test_accuracy", "train_loss"):
                m[curve] = [
                    (h.step, h.value)
                    for h in sorted(client.get_metric_history(c.info.run_id, curve), key=lambda h: h.step)
                ]
        out[(c.data.tags["method"], c.data.params["problem.seed"])] = m
    return out


def test_same_seed_same_metrics_under_local_basic_and_modal_offline_without_leaking_tokens(store, tmp_path):
    # sgd's epochs, ARD and curves differ from seed to seed (gf2/km reach 1.0 whatever): they can catch a launcher
    # that changes a job's seed, data or config
    common = ["method=gf2,km,sgd", "problem.seed=5,6", "problem.n_bits=12", "tracker=ard"]
    p_local = sweep(store, tmp_path, "hydra/launcher=local", *common, "mlflow.experiment=det_local")
    p_basic = sweep(store, tmp_path, "hydra/launcher=basic", *common, "mlflow.experiment=det_basic")
    # a Modal token in the environment must not reach logs, params, tags or artifacts
    p_modal = sweep(
        store,
        tmp_path,
        "hydra/launcher=modal",
        "hydra.launcher.modal.offline=true",
        *common,
        "mlflow.experiment=det_modal",
        env={"MODAL_TOKEN_ID": FAKE_ID, "MODAL_TOKEN_SECRET": FAKE_SECRET},
    )
    for p in (p_local, p_basic, p_modal):
        assert p.returncode == 0, p.stderr
    client = MlflowClient(store)
    metrics = [_solve_metrics(runs(store, f"det_{name}")[1], client) for name in ("local", "basic", "modal")]
    assert len(metrics[0]) == 6 and metrics[0] == metrics[1] == metrics[2]
    sgd5, sgd6 = metrics[0][("sgd", "5")], metrics[0][("sgd", "6")]
    assert sgd5["ard"] != sgd6["ard"] or sgd5["epochs"] != sgd6["epochs"]  # the seeds do make a difference
    assert sgd5["train_loss"] != sgd6["train_loss"] and len(sgd5["train_loss"]) > 1
    children = runs(store, "det_modal")[1]
    assert {c.data.tags["sweep.route"] for c in children} == {"modal"}
    for c in children:  # a CPU container on Modal: billed seconds x the CPU row of the price table
        assert c.data.metrics["task_cost_usd"] == pytest.approx(c.data.metrics["billed_s"] * 0.04716 / 3600)
        assert c.data.metrics["cost_usd"] == pytest.approx(c.data.metrics["wall_clock_s"] * 0.08925 / 3600)

    texts = [p_modal.stdout, p_modal.stderr]
    for c in children + runs(store, "det_modal")[0]:
        texts += [str(c.data.params), str(c.data.tags), str(c.data.metrics)]
        for a in client.list_artifacts(c.info.run_id):
            texts.append(Path(client.download_artifacts(c.info.run_id, a.path, str(tmp_path))).read_text())
    texts += [f.read_text() for f in (tmp_path / "multirun").rglob("*") if f.is_file()]
    assert not [t for t in texts if FAKE_ID in t or FAKE_SECRET in t]


def test_routing_cuda_jobs_go_to_modal_offline_and_cpu_jobs_stay_local(store, tmp_path):
    p = sweep(
        store,
        tmp_path,
        "method=gf2",
        "device=cpu,cuda",
        "tracker=none",
        "hydra.launcher.modal.offline=true",
        "mlflow.experiment=routing",
    )
    import torch

    if not torch.cuda.is_available():  # offline, the cuda job would run here, where there is no GPU: refused
        assert p.returncode == 2 and "needs a CUDA GPU" in p.stderr and "[FAILED]" not in p.stdout + p.stderr
        assert runs(store, "routing") == ([], [])
        return
    (parent,), children = runs(store, "routing")
    assert parent.data.tags["launcher"] == "sweep"
    route = {c.data.tags["device"]: c for c in children}
    assert route["cpu"].data.tags["sweep.route"] == "local" and route["cpu"].info.status == "FINISHED"
    cuda = route["cuda"]
    assert cuda.data.tags["sweep.route"] == "modal" and cuda.data.tags["modal.gpu"] == "L4"
    assert cuda.data.tags["modal.offline"] == "true"
    assert cuda.info.status == "FINISHED" and p.returncode == 0  # a GPU machine runs the offline cuda job for real
    assert cuda.data.metrics["task_cost_usd"] == pytest.approx(cuda.data.metrics["billed_s"] * 0.7992 / 3600)
    assert cuda.data.metrics["cost_usd"] == pytest.approx(cuda.data.metrics["wall_clock_s"] * 0.7992 / 3600)


def test_modal_without_token_is_refused_at_once_with_setup_help(store, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODAL_")}
    env.update(HOME=str(tmp_path), MLFLOW_TRACKING_URI=store)  # no ~/.modal.toml, no token variables
    t0 = time.monotonic()
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweep",
            "-m",
            "method=gf2",
            "device=cuda",
            "problem.seed=1,2",
            "tracker=none",
            "mlflow.experiment=notoken",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2 and time.monotonic() - t0 < 60
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("sweep:")]  # once, not once per job
    assert "modal token new" in line and "modal token set" in line
    assert runs(store, "notoken") == ([], [])  # before any job: no parent, no child


@pytest.mark.parametrize("n_workers", ["-3", "0"])
def test_fewer_than_one_worker_is_refused_before_any_job(store, tmp_path, n_workers):
    # -3 once left the sweep waiting forever on no worker: the timeout turns that hang into a failure
    args = ["method=gf2", "problem.seed=1,2", "tracker=none", f"hydra.launcher.n_workers={n_workers}"]
    p = sweep(store, tmp_path, *args, f"mlflow.experiment=workers{n_workers}", timeout=120)
    assert p.returncode == 2, p.stderr[-2000:]
    (line,) = [ln for ln in p.stderr.splitlines() if ln.startswith("sweep:")]
    assert f"hydra.launcher.n_workers={n_workers} is not allowed: expected an integer >= 1" in line
    assert "null" in line and "Traceback" not in p.stderr
    assert runs(store, f"workers{n_workers}") == ([], [])  # no parent, no child


def test_modal_settings_out_of_range_are_refused_before_any_job(store, tmp_path):
    """hydra.launcher.modal.retries=-1 was taken as no retry, max_containers=0 and timeout=-1 as they were, found
    (if ever) only on Modal, after the sweep's local jobs had run: one line naming the key, exit 2, nothing run."""
    from hydra_plugins.sweep_launcher._launch import modal_settings
    from hydra_plugins.sweep_launcher.hooks import Refused

    said = {}
    for name, value in (("timeout", -1), ("timeout", 86401), ("retries", -1), ("max_containers", 0)):
        with pytest.raises(Refused) as e:
            modal_settings({name: value})
        said[name, value] = str(e.value)
    assert (
        said["timeout", 86401]
        == "sweep: hydra.launcher.modal.timeout=86401 is not allowed: expected an integer from 1 to 86400"
    )
    assert said["retries", -1] == "sweep: hydra.launcher.modal.retries=-1 is not allowed: expected an integer >= 0"
    modal_settings({"timeout": 3600, "retries": 0, "max_containers": 8, "offline": True})
    args = ["method=gf2", "problem.seed=1,2", "hydra.launcher.modal.max_containers=0", "mlflow.experiment=mc0"]
    p = sweep(store, tmp_path, *args, timeout=120)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "sweep: hydra.launcher.modal.max_containers=0 is not allowed: expected an integer >= 1"
    ], p.stderr[-2000:]
    assert runs(store, "mc0") == ([], [])


def test_placement_and_prices():
    from omegaconf import OmegaConf

    from sweep.config.placement import placement
    from sweep.config.prices import gpu_price_per_hour

    def dev(**kw):
        return OmegaConf.create({"device": {"backend": "numpy", "torch_device": "cpu", "local_gpu": False, **kw}})

    assert placement(dev()) == ("local", None)
    assert placement(dev(backend="torch")) == ("local", None)
    assert placement(dev(backend="torch", torch_device="cuda", gpu="L4")) == ("modal", "L4")
    assert placement(dev(backend="torch", torch_device="cuda:0", local_gpu=True))[0] == "local"
    assert placement(OmegaConf.create({"x": 1})) == ("local", None)  # not a sweep job: local
    assert gpu_price_per_hour("H100") == pytest.approx(3.9492)
    assert gpu_price_per_hour("a100-80gb:2") == pytest.approx(2 * 2.4984)
    assert gpu_price_per_hour(None) == pytest.approx(0.04716)
    with pytest.raises(KeyError, match="no Modal price"):
        gpu_price_per_hour("Z9000")


@pytest.mark.usefixtures("hydra_restore_singletons")  # initialize_config_dir sets Hydra's global version base
def test_fast_composer_equals_hydra_composition():
    import yaml
    from omegaconf import OmegaConf, open_dict

    from hydra_plugins.sweep_launcher._fast.run_job import HydraYaml

    with fast_composer("method=gf2,km", "problem.seed=1,2") as (loader, master, fast):
        for num, overrides in enumerate(
            (
                ["method=gf2", "problem.seed=1"],
                ["method=km", "problem.seed=2", "device.dtype=float32"],
                ["problem.seed=3", "method=sgd", "method.lr=0.5"],
                ["+extra.note=x", "problem.seed=4"],
                ["method=gf2", "problem.seed=5", "problem.n_bits=30"],
                ["method=km"],
                # a long value with YAML's special characters: quoted and unfolded in hydra.yaml
                ["method=gf2", "problem.seed=6", "run_name='a: b, #c \\'q\\' " + "x" * 90 + "'"],
            )
        ):
            want = loader.load_sweep_config(master, overrides)
            # the check pass's composition, its hydra section shared with the next job of the template
            turn, _ = fast.take_in_turn(master, overrides)
            assert OmegaConf.to_container(turn) == OmegaConf.to_container(want), overrides
            # the sweeper's validation: the job's values applied to the template's task part
            task = fast.load_sweep_config(master, overrides)
            assert OmegaConf.select(task, "problem.seed") == want.problem.seed
            got, template = fast.take(master, overrides)
            assert OmegaConf.to_container(got) == OmegaConf.to_container(want), overrides
            assert got.hydra.job.override_dirname == want.hydra.job.override_dirname
            assert (template is None) == (overrides == ["method=km"])  # no value override: Hydra's own path
            if template is not None:
                # .hydra/hydra.yaml from the template's section + the job's own keys == the job's whole section
                for c in (got, want):  # what the launcher and run_job set per job
                    with open_dict(c.hydra.job), open_dict(c.hydra.runtime):
                        c.hydra.job.id, c.hydra.job.num = f"t_{num}", num
                        c.hydra.runtime.output_dir = f"/out/{num}"
                text = HydraYaml(fast.hydra_doc(template)).render(got)
                assert yaml.safe_load(text) == yaml.safe_load(OmegaConf.to_yaml(OmegaConf.masked_copy(want, "hydra")))
        # a job that does not compose is refused by the sweeper's validation with Hydra's error, as by Hydra's
        from hydra.errors import ConfigCompositionException

        for bad in (["method=gf2", "problem.nope=1"], ["method=gf2", "problem.seed=abc"]):
            with pytest.raises(ConfigCompositionException) as hydra_error:
                loader.load_sweep_config(master, bad)
            with pytest.raises(ConfigCompositionException) as fast_error:
                fast.load_sweep_config(master, bad)
            assert str(fast_error.value) == str(hydra_error.value)
        # one template per group selection (gf2, km, sgd) + one for the `+key` override, which is never a value
        assert len(fast.templates) == 4
