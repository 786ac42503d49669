"""The MLflow queries of the reports: a study's parent run, its child runs (a resumed sweep's earlier parents
included), the reason a group failed, per-epoch curves. Read-only: nothing here writes the store."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from hydra_plugins.sweep_launcher.api import command
from sweep.config.suggest import closest
from sweep.paths import SWEEPS_DIR, preset_file
from sweep.record.tags import DONE_RUNS_TAG, HASH_TAG, OVERRIDES_TAG, PARENT_RUN_TAG, PARENT_TAG
from sweep.report.table import Comparison

RUN_ID = re.compile(r"^[0-9a-f]{32}$")
# Per-epoch curves drawn for studies whose runs log them (gradient methods), one line per arm.
# eval_step: the training step of each point, where a run's points are evaluations rather than epochs (problem=chars)
CURVES = ("train_accuracy", "test_accuracy", "train_loss", "test_loss", "hidden_progress", "eval_step")


def find_parent(client: Any, ref: str):
    """The parent run: by id, else the latest parent run of study `ref` (a parent whose overrides say
    `sweeps=ref`, or one without a preset in an experiment named `ref`), else the latest of experiment `ref`
    whatever its study (`sweep -m mlflow.experiment=foo sweeps=tiled_w1`, then `sweep-compare foo`), that has
    runs: its children, or the runs of the jobs it skipped as done (a re-run whose jobs were all done is that
    sweep, whatever ran since)."""
    if RUN_ID.match(ref):
        from mlflow.exceptions import MlflowException  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

        try:
            run = client.get_run(ref)
        except MlflowException:
            raise LookupError(f"no run {ref} in the store") from None
        # a job's or a single run's id was compared as a parent "with no child runs"
        if run.data.tags.get(PARENT_TAG) != "true":
            of = run.data.tags.get(PARENT_RUN_TAG)
            what = f"a job of the sweep whose parent run is {of}" if of else "a single run, of no sweep"
            raise LookupError(f"run {ref} is {what}: expected a sweep's parent run id, a study or an experiment")
        return run
    exps = {e.experiment_id: e.name for e in client.search_experiments()}
    if not exps:
        raise LookupError("the store has no experiments")
    # The name is data: it never enters a filter string (a quote in it would break MLflow's parser), the
    # parents are matched here. A preset run into another experiment (mlflow.experiment=... overridden) still
    # names itself in the parent's overrides tag.
    parents = _search(client, list(exps), f"tags.`{PARENT_TAG}` = 'true'")
    candidates = [r for r in parents if study_of(r, exps.get(r.info.experiment_id, "")) == ref] or [
        r for r in parents if exps.get(r.info.experiment_id) == ref
    ]
    if not candidates:
        raise LookupError(f"no sweep parent run found for {ref!r}: {_studies_instead(ref, parents, exps)}")
    candidates.sort(key=lambda r: r.info.start_time, reverse=True)
    return next((r for r in candidates if has_runs(client, r)), candidates[0])


def _studies_instead(ref: str, parents: list, exps: dict[str, str]) -> str:
    """What to do for a name the store has no sweep of: run it where it is a preset (the command), else what the
    name may be (a study or an experiment of the store, a preset, a parent run id) with the closest names of those
    (a misspelling: `tiled_w`)."""
    studies = sorted({study_of(r, exps.get(r.info.experiment_id, "")) for r in parents} - {""})
    experiments = sorted({exps.get(r.info.experiment_id, "") for r in parents} - {""} - set(studies))
    listed = f"the store's studies: {', '.join(studies)}" if studies else "the store has no sweep yet"
    listed += f"; experiments with a sweep: {', '.join(experiments)}" if experiments else ""
    if preset_file(ref):
        return f"run `{command('sweep', f'sweeps={ref}')}` first ({listed}), or pass a parent run id"
    presets = {f.stem for f in SWEEPS_DIR.glob("*.yaml")}  # a preset not run yet too
    near = closest(ref, {*studies, *experiments, *presets})
    guess = f"did you mean {' or '.join(near)}? " if near else ""
    expected = "expected a study or an experiment of the store, a preset (sweeps/<name>.yaml) or a parent run id"
    return f"{guess}{expected} ({listed})"


def latest_sweeps(client: Any) -> list[tuple[str, Any]]:
    """(experiment name, its latest sweep parent run with child runs), the most recent sweep first."""
    exps = {e.experiment_id: e.name for e in client.search_experiments()}
    parents = _search(client, list(exps), f"tags.`{PARENT_TAG}` = 'true'") if exps else []
    out: dict[str, Any] = {}
    for r in sorted(parents, key=lambda r: r.info.start_time, reverse=True):
        if r.info.experiment_id not in out and has_runs(client, r):
            out[r.info.experiment_id] = r
    return [(exps[e], r) for e, r in out.items()]


def has_children(client: Any, parent: Any) -> bool:
    return bool(client.search_runs([parent.info.experiment_id], children_filter(parent.info.run_id), max_results=1))


def has_runs(client: Any, parent: Any) -> bool:
    """Whether the sweep of `parent` has runs: its children, or the runs of jobs it skipped as done."""
    return bool(done_run_ids(parent)) or has_children(client, parent)


def done_run_ids(parent: Any) -> list[str]:
    """The runs of the jobs a sweep skipped as done (DONE_RUNS_TAG on its parent)."""
    tags = parent.data.tags
    chunks = sorted((k for k in tags if k.startswith(DONE_RUNS_TAG)), key=lambda k: int(k.rpartition(".")[2]))
    return [i for k in chunks for i in tags[k].split(",") if i]


def sweep_parts(client: Any, parent: Any) -> Iterator[Any]:
    """The runs one parent holds for its sweep: its children, then the runs of the jobs it skipped as done."""
    yield from pages(client, [parent.info.experiment_id], children_filter(parent.info.run_id))
    ids = done_run_ids(parent)
    for i in range(0, len(ids), 100):  # a filter of 100 ids: well within a tracking server's request size
        listed = ", ".join(f"'{x}'" for x in ids[i : i + 100])
        yield from pages(client, [parent.info.experiment_id], f"attributes.run_id IN ({listed})")


def children_filter(parent_run_id: str) -> str:
    """MLflow's search for the child runs of a parent run."""
    return f"tags.`{PARENT_RUN_TAG}` = '{parent_run_id}'"


def _search(client: Any, exp_ids: list[str], filt: str) -> list:
    return list(pages(client, exp_ids, filt))


def pages(client: Any, exp_ids: list[str], filt: str) -> Iterator[Any]:
    """The runs found, a page at a time: a caller that keeps little of each holds one page, not every run."""
    token = None
    while True:
        page = client.search_runs(exp_ids, filter_string=filt, max_results=1000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


def study_of(parent: Any, default: str = "") -> str:
    """The study a parent run belongs to: the preset named in its overrides, else its experiment's name."""
    m = re.search(r"(?:^|\s)\+?sweeps=(\S+)", parent.data.tags.get(OVERRIDES_TAG, ""))
    return m.group(1) if m else default


def deleted_children(client: Any, parent: Any) -> int:
    """How many of the parent's child runs are deleted (MLflow's searches leave them out without a word)."""
    from mlflow.entities import ViewType  # noqa: PLC0415 - MLflow: seconds to import; an existing SQLite store is written without it

    found = client.search_runs(
        [parent.info.experiment_id], children_filter(parent.info.run_id), run_view_type=ViewType.DELETED_ONLY
    )
    return len(found)


def load_children(client: Any, parent: Any) -> list:
    return _search(client, [parent.info.experiment_id], children_filter(parent.info.run_id))


def sweep_runs(client: Any, parent: Any, keep: Callable[[Any], Any] = lambda r: r) -> list:
    """The runs of a sweep, its resumes included. A command re-run after Ctrl-C, a crash or a failed job skips
    the jobs already FINISHED and records the rest under a new parent run, so the sweep is the child runs of
    every parent with the same command line (overrides tag) up to this one: the latest run of each job, in the
    order of each job's first run. `keep(run)`: what is kept of each (a 50,000-job sweep's whole runs are
    hundreds of MB), read a page of runs at a time."""
    overrides = parent.data.tags.get(OVERRIDES_TAG)
    parents = [parent]
    if overrides is not None:
        parents = [
            p
            for p in _search(client, [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = 'true'")
            if p.data.tags.get(OVERRIDES_TAG) == overrides and p.info.start_time <= parent.info.start_time
        ]
    # job -> (its first run's start and place, its latest run's start, what is kept of that run)
    latest: dict[str, tuple[tuple[int, int], int, Any]] = {}
    seen = 0
    for p in parents or [parent]:
        for r in sweep_parts(client, p):
            job, start, seen = r.data.tags.get(HASH_TAG) or r.info.run_id, r.info.start_time, seen + 1
            first, last, _ = latest.get(job, ((start, seen), start, None))
            if job not in latest or start >= last:
                latest[job] = (min(first, (start, seen)), start, keep(r))
            else:
                latest[job] = (min(first, (start, seen)), last, latest[job][2])
    return [kept for _, _, kept in sorted(latest.values(), key=lambda v: v[0])]


def study_runs(client: Any, parent: Any, study: str) -> list:
    """The child runs of every sweep of `study` in the parent's experiment: a search study resumed over
    several commands is one study."""
    experiment = client.get_experiment(parent.info.experiment_id).name
    parents = [
        p
        for p in _search(client, [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = 'true'")
        if study_of(p, experiment) == study
    ]
    return [r for p in parents or [parent] for r in load_children(client, p)]


def rounds(client: Any, parent: Any, study: str) -> list[tuple[Any, list]]:
    """Every sweep of `study` in the parent's experiment up to `parent`, with its child runs, the latest first: a
    challenge's rounds (sweep.report.leaderboard)."""
    experiment = client.get_experiment(parent.info.experiment_id).name
    parents = [
        p
        for p in _search(client, [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = 'true'")
        if study_of(p, experiment) == study and p.info.start_time <= parent.info.start_time
    ]
    parents.sort(key=lambda p: (p.info.run_id != parent.info.run_id, -p.info.start_time))
    return [(p, kids) for p in parents or [parent] if (kids := load_children(client, p))]


def last_line(client: Any, run: Any) -> str:
    """The last line of a failed run's traceback artifact (its status where it has none)."""
    try:
        lines = Path(client.download_artifacts(run.info.run_id, "traceback.txt")).read_text().strip().splitlines()
    except Exception:  # noqa: BLE001 - no traceback artifact: the status says what is known
        lines = []
    return lines[-1] if lines else run.info.status


def failure_reasons(client: Any, cmp: Comparison, runs: list) -> None:
    """For groups with no finished run, the last line of a child's traceback artifact: the reason, in the
    table's notes (e.g. 'no CUDA GPU on this machine')."""
    for row in cmp.rows:
        if row.finished or not row.failure.startswith("status"):
            continue
        for r in runs:
            if all(r.data.params.get(k) == (None if v == "-" else v) for k, v in row.key.items()):
                try:
                    text = client.download_artifacts(r.info.run_id, "traceback.txt")
                    lines = Path(text).read_text().strip().splitlines()
                    if lines:
                        row.failure = f"{r.info.status}: {lines[-1]}"
                        break
                except Exception:  # no traceback artifact: keep the status line
                    continue


def load_curves(client: Any, cmp: Comparison, curves: Sequence[str] = CURVES) -> None:
    """Each row's per-epoch curves (MLflow steps >= 1), mean ± std over its finished runs. A run that stopped
    early (it reached the target) keeps its last value for the later epochs: a solved net stays solved."""
    for row in cmp.rows:
        for name in curves:
            series = []
            for rid in row.run_ids:
                hist = sorted((m.step, m.value) for m in client.get_metric_history(rid, name) if m.step >= 1)
                if hist:
                    series.append([v for _, v in hist])
            if not series:
                continue
            width = max(len(v) for v in series)
            padded = [v + [v[-1]] * (width - len(v)) for v in series]
            cols = list(zip(*padded))
            row.curves[name] = (
                [statistics.fmean(c) for c in cols],
                [statistics.pstdev(c) if len(c) > 1 else 0.0 for c in cols],
            )
