"""Scoring recorded runs again with a tracker, from the traces they stored (sweep.trace.stored), without solving.

A run recorded with any tracker keeps its trace (``trace.json``); a tracker defined later (or another setting
of one) computes its figures from that trace exactly as it would have during the run (``TrackerBase.figures``),
and they are logged to the same run through MLflow's client (any store: SQLite, PostgreSQL, a tracking server):
the metrics, the per-epoch curves, the per-buffer table as ``rescore/<tracker>/tracker_buffers.csv``, and last
the tag ``sweep.tracker_version.<tracker>``, so a run that carries the tag has all of its figures.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from sweep.config.check import check_job
from sweep.config.schema import CLASSES, SCHEMAS, register_configs
from sweep.config.suggest import closest
from sweep.errors import ConfigError
from sweep.job import build, job_config, table_csv
from sweep.paths import CONF_DIR
from sweep.preflight.refusal import CONFIG_ERROR, Refusal
from sweep.record import writes
from sweep.record.tags import PARENT_TAG, TRACKER_VERSION_TAG
from sweep.report.queries import RUN_ID, load_children, pages
from sweep.trace import stored
from sweep.trackers.base import TrackerReport

TABLE = "rescore/{tracker}/tracker_buffers.csv"  # a rescored run's per-buffer table (its own is tracker_buffers.csv)
RECORDED = ("tracker.scope", "tracker.source")  # what was traced: fixed by the stored trace


def tracker_config(overrides: Sequence[str]) -> dict[str, Any]:
    """The tracker's resolved config from ``tracker=<name>`` and ``tracker.<key>=<value>`` overrides, checked as a
    job's tracker is (ConfigError, one line naming the field, before any run is read)."""
    given = {}
    for o in overrides:
        key, _, value = o.lstrip("+~").partition("=")
        if key != "tracker" and not key.startswith("tracker."):
            raise ConfigError(f"{o}: sweep-rescore takes tracker=<name> and tracker.<key>=<value> only")
        if key in given and given[key] != value:  # the last would win silently
            raise ConfigError(f"{key} is given twice ({key}={given[key]}, {key}={value}): give it once")
        given[key] = value
    name = given.get("tracker", "")
    if not name:
        raise ConfigError(
            f"name the tracker to score with, tracker=<name>: one of {', '.join(sorted(CLASSES['tracker']))}"
        )
    if name not in CLASSES["tracker"]:
        raise ConfigError(f"tracker={name or '?'} is not allowed: expected one of {_one_of(name, CLASSES['tracker'])}")
    keys = [f.name for f in dataclasses.fields(SCHEMAS["tracker"][name]) if f.name not in ("_target_", "name")]
    for key in given:
        field_name = key.partition(".")[2]
        if key in RECORDED:
            raise ConfigError(f"{key}: a recorded run's trace is what it was run with; scoring it again keeps it")
        if field_name and field_name not in keys:
            raise ConfigError(f"{key} is not a key of tracker={name}: expected one of {_one_of(field_name, keys)}")
    from hydra import compose, initialize_config_dir  # noqa: PLC0415 - Hydra's composition: only where a command asks
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415
    from hydra.errors import HydraException  # noqa: PLC0415
    from hydra.version import VersionBase  # noqa: PLC0415

    from sweep.preflight.command import check_typed_values  # noqa: PLC0415 - the command line's rules, as sweep's
    from sweep.preflight.composition import explain  # noqa: PLC0415

    try:  # tracker.profile=2: OmegaConf's true, as mlflow.force=2 was sweep's
        check_typed_values(list(overrides))
    except Refusal as e:
        raise ConfigError(e.line.removeprefix(CONFIG_ERROR)) from None
    for o in overrides:  # (sweep's line for these would tell a -m this command does not take)
        try:
            swept = OverridesParser.create().parse_override(o).is_sweep_override()
        except HydraException:
            swept = False  # a line Hydra cannot read: explain's, below
        if swept:
            raise ConfigError(f"{o} is a sweep over values: sweep-rescore scores with one value a key, a command each")
    register_configs()
    # initialize_config_dir sets Hydra's process-global version_base: put back what was there, for a Hydra app
    # that calls this in its own process (1.3 changes the default of hydra.job.chdir)
    saved = VersionBase.instance().getbase()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides))
    except HydraException as e:  # a value of the wrong type: sweep's one line for it, naming what is allowed
        said = explain(e)
        if said is not None:
            raise ConfigError(said.line.removeprefix(CONFIG_ERROR)) from None
        cause = str(e.__cause__ or "").strip().splitlines()  # else Hydra's line, and its cause's first
        raise ConfigError(str(e).strip().splitlines()[0] + (f": {cause[0]}" if cause else "")) from None
    finally:
        VersionBase.instance().version_base = saved
    check_job(cfg)  # the tracker's field rules and its own check (an energy hierarchy that must load)
    return job_config(cfg)["tracker"]


def _one_of(given: str, allowed: Sequence[str]) -> str:
    """The allowed values, and the closest to a misspelt one."""
    close = closest(given, allowed, n=1)  # (the project's one rule: tracker=DMD is dmd)
    return ", ".join(sorted(allowed)) + (f" (did you mean {close[0]}?)" if close else "")


def select(client: Any, refs: Sequence[str]) -> list[Any]:
    """The runs named: a run id (a sweep's parent run: its child runs), or an experiment's name (its FINISHED
    runs, parents left out); each run once, in the order named. LookupError names what is not in the store."""
    from mlflow.exceptions import MlflowException  # noqa: PLC0415 - MLflow: seconds to import

    out: dict[str, Any] = {}
    for ref in refs:
        if RUN_ID.match(ref):
            try:
                run = client.get_run(ref)
            except MlflowException:
                raise LookupError(f"no run {ref} in the store") from None
            found = load_children(client, run) if run.data.tags.get(PARENT_TAG) == "true" else [run]
        else:
            exp = client.get_experiment_by_name(ref)
            if exp is None:
                names = [e.name for e in client.search_experiments()]
                raise LookupError(f"no experiment or run {ref!r} in the store: experiments {_one_of(ref, names)}")
            runs = pages(client, [exp.experiment_id], "attributes.status = 'FINISHED'")
            found = [r for r in runs if r.data.tags.get(PARENT_TAG) != "true"]
        for r in found:
            out.setdefault(r.info.run_id, r)
    return list(out.values())


@dataclass
class Scored:
    """A run's figures from its stored trace, or why there are none (``missing``)."""

    run: Any
    report: TrackerReport = field(default_factory=TrackerReport)
    curves: dict[str, list[float]] = field(default_factory=dict)
    missing: str = ""


def score(client: Any, run: Any, tracker_node: dict[str, Any]) -> Scored:
    """The tracker's figures for ``run`` from its stored trace (a fresh tracker, as a job builds its own)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = client.download_artifacts(run.info.run_id, stored.ARTIFACT, tmp)
        except Exception:  # noqa: BLE001 - MLflow's error for a missing file differs by store: ask what is there
            if stored.ARTIFACT in {f.path for f in client.list_artifacts(run.info.run_id)}:
                raise
            return Scored(run, missing=f"no {stored.ARTIFACT} (recorded with tracker=none, or before runs kept traces)")
        trace, pieces, steps = stored.loads(Path(path).read_text())
    report, curves = build(tracker_node).figures(trace, list(pieces.values()), steps)
    return Scored(run, report, curves)


def _metrics(
    scored: Scored, now: int, history: Callable[[str], dict[int, float]]
) -> Iterator[tuple[str, float, int, int]]:
    """The figures the run does not carry yet: one the run already has at the same value (the figures trackers
    share, `ard` and `reads` under tracker=dmd) was logged again, a second point in its history with nothing new
    in it. A curve the run has is read whole (`history`: step -> latest value): a rescore killed between two of
    its batches left its first steps, and judged by its last value the re-run logged them all again, or, the
    values being equal (a per-epoch cost is the same each epoch), none of the steps it lacked."""
    has = scored.run.data.metrics  # the latest value of each

    def same(old: float | None, v: float) -> bool:  # (NaN, a diverged run's figure, is its own again)
        return old is not None and (float(old) == v or math.isnan(old) and math.isnan(v))

    for k, v in scored.report.metrics.items():
        if not same(has.get(k), float(v)):
            yield (k, float(v), now, 0)
    for k, values in scored.curves.items():  # per epoch, at the steps a run logs its curves (1, 2, ...)
        held = history(k) if k in has else {}
        for i, v in enumerate(values):
            if not same(held.get(i + 1), float(v)):
                yield (k, float(v), now, i + 1)


def log(client: Any, scored: Scored, tracker: str, version: str) -> None:
    """The figures on the run; the version tag last, so a run that has it has them all."""
    table = {TABLE.format(tracker=tracker): table_csv(scored.report.table)} if scored.report.table else {}
    run_id = scored.run.info.run_id

    def history(key: str) -> dict[int, float]:
        points = sorted(client.get_metric_history(run_id, key), key=lambda m: m.timestamp)
        return {m.step: m.value for m in points}

    metrics = _metrics(scored, int(time.time() * 1000), history)
    writes.add_figures(client, scored.run.info.run_id, metrics, table, (TRACKER_VERSION_TAG + tracker, version))
