"""Hydra's `run_job` for one job in a worker, step for step, at a fraction of its cost.

`hydra.core.utils.run_job` spends ~50 ms a job on a 2-core machine before the task starts: it deep-copies the
job config four times (HydraConfig.set_config twice, the task config, the hydra config) and writes the
`.hydra/*.yaml` files with PyYAML's pure-Python emitter. Here the worker makes the job config and the task's
copy each from pickled bytes (`_core.Pickled`, or the job's template: `_fast/template`), ~6x faster than
`copy.deepcopy` of an OmegaConf tree; HydraConfig holds the job config's own hydra node (the worker discards
both after the job), and the YAML goes through libyaml's emitter with OmegaConf's own representers (the same
documents; long strings may wrap at other places). Everything else is Hydra's: output dir, `hydra.job.chdir`,
job logging, env_set, callbacks, the JobReturn. Hydra's launcher test suites run against this path
(tests/test_launcher_hydra_suites.py).
Fast path only: imported when `_fast.fast_paths` says so (the Hydra and OmegaConf versions in
`_fast.TESTED_HYDRA` and `TESTED_OMEGACONF`).
"""

from __future__ import annotations

import copy
import logging
import os
import re
import warnings
from pathlib import Path
from typing import Any, Optional

import yaml
from hydra import version
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobRuntime, JobStatus, _flush_loggers, configure_log, env_override
from hydra.errors import HydraDeprecationError
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write
from omegaconf._utils import get_omega_conf_dumper

_Dumper: Any = None
CHDIR_WARNING = (
    "Future Hydra versions will no longer change working directory at job runtime by default.\n"
    "See https://hydra.cc/docs/1.2/upgrades/1.1_to_1.2/changes_to_job_working_dir/ for more "
    "information."
)


def _deprecation_warning(message: str) -> None:
    """Hydra's deprecation warning (an error with HYDRA_DEPRECATION_WARNINGS_AS_ERRORS set)."""
    if os.environ.get("HYDRA_DEPRECATION_WARNINGS_AS_ERRORS"):
        raise HydraDeprecationError(message)
    warnings.warn(message, stacklevel=3)


def _dumper() -> Any:
    """libyaml's emitter with OmegaConf's representers (quoting of strings that look like numbers, ...);
    OmegaConf's own (pure-Python) dumper where PyYAML was built without libyaml."""
    global _Dumper
    if _Dumper is None:
        omegaconf_dumper = get_omega_conf_dumper()
        base = getattr(yaml, "CDumper", None)
        if base is None:
            _Dumper = omegaconf_dumper
        else:
            _Dumper = type("OmegaConfCDumper", (base,), {})
            _Dumper.yaml_representers = dict(omegaconf_dumper.yaml_representers)
    return _Dumper


def to_yaml(cfg: Any) -> str:
    """OmegaConf.to_yaml(cfg), emitted by libyaml when PyYAML has it."""
    return _dump(OmegaConf.to_container(cfg, resolve=False, enum_to_str=True))


def _dump(container: Any) -> str:
    return yaml.dump(container, default_flow_style=False, allow_unicode=True, sort_keys=False, Dumper=_dumper())


def _save(cfg: Any, filename: str, output_dir: Path) -> None:
    _write(to_yaml(cfg), filename, output_dir)


def _write(text: str, filename: str, output_dir: Path) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / filename).write_text(text, encoding="utf-8")


# Where a job composed from one of the launcher's templates (_compose.FastComposer) differs from the template's
# hydra section: the overrides and dirname the composer sets, the id and num the launcher sets, the output dir
# run_job sets. Every other key of `.hydra/hydra.yaml` is the template's.
PER_JOB_KEYS = ("overrides.task", "job.override_dirname", "job.id", "job.num", "runtime.output_dir")


class HydraYaml:
    """`.hydra/hydra.yaml` of the jobs made from one template: the template's section (plain data, converted once
    per sweep in the launcher) is emitted once, with a placeholder for each of PER_JOB_KEYS; a job's file is
    that text with the job's values put in, instead of converting and emitting ~300 config nodes per job."""

    _HOLE = re.compile(r"^( *)([^ :]+): SWEEPJOBKEY(\d+)$", re.MULTILINE)

    def __init__(self, template_doc: dict[str, Any]) -> None:
        doc = copy.deepcopy(template_doc)
        for i, path in enumerate(PER_JOB_KEYS):
            *parents, leaf = path.split(".")
            node = doc["hydra"]
            for p in parents:
                node = node[p]
            node[leaf] = f"SWEEPJOBKEY{i}"
        self.text = _dump(doc)
        assert len(self._HOLE.findall(self.text)) == len(PER_JOB_KEYS), "a placeholder did not come out as one line"

    def render(self, config: DictConfig) -> str:
        values = []
        for path in PER_JOB_KEYS:
            *parents, leaf = path.split(".")
            src = config.hydra
            for p in parents:
                src = src._get_node(p)
            node = src._get_node(leaf)
            values.append(OmegaConf.to_container(node) if OmegaConf.is_config(node) else node._value())

        def fill(m: re.Match) -> str:
            indent, key, i = m.group(1), m.group(2), int(m.group(3))
            # emitted as the value of a one-key mapping, unfolded, then indented like the placeholder's line
            body = yaml.dump(
                {key: values[i]}, default_flow_style=False, allow_unicode=True, width=1 << 30, Dumper=_dumper()
            ).rstrip("\n")
            return "\n".join(indent + line for line in body.split("\n"))

        return self._HOLE.sub(fill, self.text)


_job_log: Optional[dict[str, Any]] = None  # the job log config (plain data) this process last set up
_job_log_state: Any = None  # logging's state as that set-up left it (`_logging_state`)
_job_log_raw: Optional[tuple[Any, dict[str, Any], list[tuple[Any, ...]]]] = None  # see `_resolved`


def _without_files(conf: dict[str, Any]) -> dict[str, Any]:
    handlers = {name: {k: v for k, v in h.items() if k != "filename"} for name, h in conf.get("handlers", {}).items()}
    return {**conf, "handlers": handlers}


def _logging_state(conf: dict[str, Any]) -> tuple:
    """What dictConfig set up and a task could change: the root's and the configured loggers' levels, handlers
    (their levels, formatters, filters), filters, propagation; where dictConfig disables the loggers it does not
    configure, how many loggers there are."""
    state: list[Any] = []
    for name in [None, *conf.get("loggers", {})]:
        lg = logging.getLogger(name)
        handlers = tuple((id(h), h.level, id(h.formatter), tuple(map(id, h.filters))) for h in lg.handlers)
        state.append((name, lg.level, lg.propagate, lg.disabled, handlers, tuple(map(id, lg.filters))))
    if conf.get("disable_existing_loggers", True):
        state.append(len(logging.root.manager.loggerDict))
    return tuple(state)


def configure_job_log(log_config: DictConfig, verbose: Any) -> None:
    """Hydra's `configure_log` (logging.config.dictConfig of the job's `hydra.job_logging`) at a fraction of its
    cost. The jobs a worker runs one after the other share one log config but for their log files' names: where
    this job's differs from the last job's only there, and logging is as that set-up left it (the task changed
    no level, handler or logger), the handlers stay and each file handler is pointed at this job's file
    (created, as dictConfig would). Anything else: Hydra's whole set-up."""
    global _job_log, _job_log_state
    conf = _resolved(log_config) if log_config is not None else None
    if (
        isinstance(conf, dict)
        and _job_log is not None
        and _logging_state(_job_log) == _job_log_state
        and _repoint(_job_log, conf)
    ):
        if verbose is True:
            logging.getLogger().setLevel(logging.DEBUG)
        elif verbose:
            for name in [verbose] if isinstance(verbose, str) else verbose:
                logging.getLogger(name).setLevel(logging.DEBUG)
    else:
        configure_log(log_config, verbose)
    _job_log = conf if isinstance(conf, dict) and conf.get("root") is not None else None
    _job_log_state = _logging_state(_job_log) if _job_log is not None else None


def _resolved(log_config: DictConfig) -> Any:
    """`OmegaConf.to_container(log_config, resolve=True)`. Jobs made from one template (`_fast/template`) share its
    hydra section, so the same node comes job after job: its unresolved data is kept, and only the values that
    interpolate (a file name: `${hydra.runtime.output_dir}/...`) are resolved again."""
    global _job_log_raw
    if _job_log_raw is None or _job_log_raw[0] is not log_config:
        raw = OmegaConf.to_container(log_config, resolve=False)
        _job_log_raw = (log_config, raw, list(_interpolations(raw)))
    _, raw, paths = _job_log_raw
    if not paths:
        return raw
    conf = copy.deepcopy(raw)
    for path in paths:
        node, into = log_config, conf
        for key in path[:-1]:
            node, into = node[key], into[key]
        value = node[path[-1]]
        into[path[-1]] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    return conf


def _interpolations(data: Any, path: tuple[Any, ...] = ()) -> Any:
    """The paths of the string values of plain data that OmegaConf would resolve."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _interpolations(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _interpolations(v, (*path, i))
    elif isinstance(data, str) and "${" in data:
        yield path


def _repoint(last: dict[str, Any], conf: dict[str, Any]) -> bool:
    """Point the live file handlers of `last`'s set-up at `conf`'s files; False (nothing changed) where the two
    differ in anything else or a handler is no longer the one dictConfig made."""
    if _without_files(last) != _without_files(conf):
        return False
    live = {h.name: h for name in [None, *conf.get("loggers", {})] for h in logging.getLogger(name).handlers}
    moves = []
    for name, h in conf.get("handlers", {}).items():
        if "filename" not in h:
            continue
        handler = live.get(name)
        if not isinstance(handler, logging.FileHandler):
            return False
        moves.append((handler, os.path.abspath(os.fspath(h["filename"]))))
    for handler, path in moves:
        if handler.baseFilename == path:
            continue
        handler.acquire()
        try:
            if handler.stream is not None:
                handler.stream.close()
                handler.stream = None  # type: ignore[assignment]
            handler.baseFilename = path
            if not handler.delay:
                handler.stream = handler._open()
        finally:
            handler.release()
    return True


def run_job(
    hydra_context: HydraContext,
    task_function: TaskFunction,
    source: Any,
    job_dir_key: str,
    job_subdir_key: Optional[str],
    hydra_template: Optional[HydraYaml] = None,
    task_cfg: Optional[DictConfig] = None,
) -> JobReturn:
    """`hydra.core.utils.run_job(task_function, source.config(), ...)` with cheap copies (`source`: a
    `_core.Pickled` or `_fast/template.Made` config); `hydra_template`: the hydra.yaml of the template the job was
    composed from. `task_cfg`: the task's own copy where the caller already made it (`source.task()`: a batch's
    jobs, solved before they come here)."""
    callbacks = hydra_context.callbacks
    old_cwd = os.getcwd()
    orig_hydra_cfg = HydraConfig.instance().cfg

    config: DictConfig = source.config()
    # HydraConfig.set_config without its copy: a {hydra: ...} config holding the job config's own hydra node,
    # which still sees the job config as its parent (interpolations from hydra into the job config resolve)
    OmegaConf.set_readonly(config.hydra, True)
    hydra_cfg = DictConfig({}, flags={"no_deepcopy_set_nodes": True})
    with open_dict(hydra_cfg):
        hydra_cfg["hydra"] = config._get_node("hydra")
    config.hydra._set_parent(config)
    HydraConfig.instance().cfg = hydra_cfg  # type: ignore[assignment]

    output_dir = str(OmegaConf.select(config, job_dir_key))
    if job_subdir_key is not None:
        output_dir = os.path.join(output_dir, str(OmegaConf.select(config, job_subdir_key)))
    with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
        config.hydra.runtime.output_dir = os.path.abspath(output_dir)

    _chdir = None
    try:
        ret = JobReturn()
        if task_cfg is None:
            task_cfg = source.task()
        ret.cfg = task_cfg
        ret.hydra_cfg = hydra_cfg
        overrides = OmegaConf.to_container(config.hydra.overrides.task)
        assert isinstance(overrides, list)
        ret.overrides = overrides
        Path(output_dir).mkdir(parents=True, exist_ok=True)

        _chdir = hydra_cfg.hydra.job.chdir
        if _chdir is None:  # Hydra's default and warning
            _chdir = not version.base_at_least("1.2")
            if _chdir:
                _deprecation_warning(CHDIR_WARNING)
        if _chdir:
            os.chdir(output_dir)
            ret.working_dir = output_dir
        else:
            ret.working_dir = os.getcwd()

        configure_job_log(config.hydra.job_logging, config.hydra.verbose)

        if config.hydra.output_subdir is not None:
            hydra_output = Path(config.hydra.runtime.output_dir) / Path(config.hydra.output_subdir)
            _save(task_cfg, "config.yaml", hydra_output)
            if hydra_template is not None:
                _write(hydra_template.render(config), "hydra.yaml", hydra_output)
            else:
                _save(hydra_cfg, "hydra.yaml", hydra_output)
            _save(config.hydra.overrides.task, "overrides.yaml", hydra_output)

        with env_override(hydra_cfg.hydra.job.env_set):
            callbacks.on_job_start(config=config, task_function=task_function)
            try:
                ret.return_value = task_function(task_cfg)
                ret.status = JobStatus.COMPLETED
            except Exception as e:
                ret.return_value = e
                ret.status = JobStatus.FAILED

        ret.task_name = JobRuntime.instance().get("name")
        _flush_loggers()
        callbacks.on_job_end(config=config, job_return=ret)
        return ret
    finally:
        HydraConfig.instance().cfg = orig_hydra_cfg
        if _chdir:
            os.chdir(old_cwd)
