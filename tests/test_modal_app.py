"""The Modal side as Modal builds it (no network): one real `modal.Function` per GPU type, each wrapping the
launcher's own `execute`, retried by Modal's `modal.Retries`; offline, the same Function's `.local()` runs a job.
The network hop itself (`Function.map` inside `app.run()`) needs a Modal account and is not run here."""

from __future__ import annotations

import modal

from hydra_plugins.sweep_launcher._modal import _app as _modal_app


def test_one_function_per_gpu_type_retried_by_modal():
    app, fns = _modal_app.build_app({"retries": 2, "app_name": "t"}, ["L4", None, "L4", "a100-80gb:2"])
    assert set(fns) == {"L4", None, "a100-80gb:2"}
    for gpu, fn in fns.items():
        assert isinstance(fn, modal.Function) and fn._spec_.gpus == gpu
    assert _modal_app.function_name("a100-80gb:2") == "sweep_job_a100_80gb_2"
    assert _modal_app.function_name(None) == "sweep_job_cpu"
    policy = _modal_app.retries(3)
    assert isinstance(policy, modal.Retries) and policy.max_retries == 3 and policy.backoff_coefficient == 2.0
    assert _modal_app.retries(0) == 0  # no retries: Modal's own default


def test_offline_runs_the_modal_function_locally_and_never_raises():
    # a payload that cannot be a job: the Function (run through .local()) still answers, with a FAILED reply
    import cloudpickle

    from hydra_plugins.sweep_launcher._core import Reply

    for payload in (cloudpickle.dumps({"session": None, "cfg_bytes": b"not a config"}), b"not a pickle"):
        reply = cloudpickle.loads(_modal_app.run_offline(7, payload, {"gpu": None}))
        assert isinstance(reply, Reply) and reply.idx == 7 and reply.job_return is None
        assert reply.reason and reply.error and "Traceback" in reply.error


def test_a_batch_session_travels_as_the_bytes_made_once_and_loads_once_per_process():
    # the session (~85 KB for the project's app) is pickled once per batch, not into every job's payload again;
    # where the jobs run, every job of the batch gets the same loaded session
    import pickle

    import cloudpickle

    from hydra_plugins.sweep_launcher import _core

    session_bytes = cloudpickle.dumps(_core.Session(hydra_context=None, task_function=len, singleton_state={}))
    payloads = [_core.make_payload(session_bytes, cfg) for cfg in (b"job 1", b"job 2")]
    assert [pickle.loads(p)["session"] for p in payloads] == [session_bytes, session_bytes]
    first = _core.load_session(pickle.loads(payloads[0])["session"])
    assert _core.load_session(pickle.loads(payloads[1])["session"]) is first and first.task_function is len


def test_modal_options_default_to_the_launcher_config_written_once():
    from dataclasses import asdict

    from hydra_plugins.sweep_launcher.config import ModalConf

    # compared as values: Hydra's plugin scan may have re-imported the config module, making a second class
    assert asdict(_modal_app.settings({})) == asdict(ModalConf())
    # what the launcher passes (hydra.launcher.modal less `offline`) overrides them; unknown keys are not options
    opts = {"timeout": 60, "app_name": "mine", "gpu": "L4"}
    assert asdict(_modal_app.settings(opts)) == asdict(ModalConf(timeout=60, app_name="mine"))
    assert _modal_app.build_app({}, [None])[0].name == ModalConf().app_name


def test_the_image_carries_this_plugin_and_the_apps_project_and_pins_what_is_installed_here(tmp_path):
    from importlib import metadata
    from pathlib import Path

    from tests.conftest import ROOT

    def pin(dist: str) -> str:
        return f"{dist}=={metadata.version(dist).split('+')[0]}"

    # a project without a pyproject.toml: the plugin's own distributions only (no numpy, no torch)
    root = tmp_path.resolve()
    assert _modal_app.requirements(root) == [pin(d) for d in ("hydra-core", "omegaconf", "cloudpickle", "modal")]
    # its dependencies: pinned where installed here, as written where not; one for another platform left out
    (root / "pyproject.toml").write_text(
        '[project]\nname = "app"\ndependencies = ["numpy>=1", "no-such-dist-x>=2", '
        '"OmegaConf", "pywin32; sys_platform == \'win32\'"]\n'
    )
    reqs = _modal_app.requirements(root)
    assert reqs[4:] == [pin("numpy"), "no-such-dist-x>=2"] and len(reqs) == 6
    # the plugin outside the project: its own package goes along, on the container's path
    (root / "src").mkdir()
    copies, path = _modal_app.layout(root)
    plugin = Path(_modal_app.__file__).resolve().parents[1]
    assert copies == [(root, "/project"), (plugin, "/plugin/hydra_plugins/sweep_launcher")]
    assert path == ["/project/src", "/plugin", "/project"]
    # the plugin inside the project (this repository): the project alone, the plugin's directory on the path
    copies, path = _modal_app.layout(ROOT)
    assert copies == [(ROOT.resolve(), "/project")] and "/project/launchers" in path and path[-1] == "/project"
