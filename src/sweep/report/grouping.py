"""Grouping a study's runs: the keys the sweep varied (seeds and repeats are aggregated over, not grouped by),
mean ± std of each metric per group, and each group set against the study's baseline arm."""

from __future__ import annotations

import math
import re
import statistics
from typing import Any, Sequence

from sweep.metrics import KEY, TABLE
from sweep.record.tags import METHOD_PARAM
from sweep.report.table import Comparison, Row, Stat

# How a row is set against its study's baseline arm (the preset's `compare.relative`: metric -> rule).
RELATIVE = {"percent": "vs base", "speedup": "speed-up"}
# Keys that repeat a job rather than define it: aggregated over (mean ± std), never grouped by.
AGGREGATED = re.compile(r"(^|\.)(seed|seeds|repeat|repeats)$")
# Keys that pair runs across arms: the same seed draws the same problem and initial weights in every arm, so an
# arm's change against the baseline is read seed by seed (repeats only re-time one config: not paired).
PAIRED = re.compile(r"(^|\.)(seed|seeds)$")
# How a paired change is read per seed where the preset gives no relative rule: the row's value minus the base's.
DIFFERENCE = "difference"
# What names the one row of a sweep that varies no key but its seeds or repeats.
IDENTITY = METHOD_PARAM


def swept_keys(params: list[dict[str, str]]) -> list[str]:
    """Params that vary across the children, less seeds/repeats and `_target_`s (they follow a group's
    choice). A key of a config group whose choice (`<group>.name`) itself varies counts only if it varies
    among runs with the same choice: method.hidden is not swept just because gf2 has none."""
    keys = sorted({k for p in params for k in p})
    out = []
    for k in keys:
        if AGGREGATED.search(k) or k.endswith("._target_"):
            continue
        if len({p.get(k) for p in params}) < 2:
            continue
        group = k.split(".")[0]
        choice = f"{group}.name"
        if k != choice and choice in keys and len({p.get(choice) for p in params}) > 1:
            by_choice: dict[Any, set] = {}
            for p in params:
                by_choice.setdefault(p.get(choice), set()).add(p.get(k))
            if all(len(v) < 2 for v in by_choice.values()):
                continue
        out.append(k)
    return out


def _sort_key(v: str | None, first_seen: dict) -> tuple:
    """Numbers in numeric order; names in the order the sweep ran them (standard, fused, perlayer)."""
    try:
        return (0, float(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return (1, first_seen.get(v, 0))


def summarize(
    runs: list,
    study: str = "",
    parent_id: str = "",
    experiment: str = "",
    metrics: Sequence[str] = TABLE,
    baseline: dict[str, Any] | None = None,
    relative: dict[str, str] | None = None,
    key_metrics: Sequence[str] = KEY,
) -> Comparison:
    """Group `runs` (MLflow Run objects) by their swept keys; mean ± std of each metric over FINISHED runs;
    with a `baseline` arm (swept key -> value), each `relative` metric against it (see `set_against`).
    `key_metrics`: the study's metrics for the terminal table (the others with --wide and in the artifacts)."""
    # the sweep's own order: Hydra's job number where the launcher tags it (parallel jobs start out of order)
    runs = sorted(runs, key=lambda r: (int(r.data.tags.get("hydra.job.num", -1)), r.info.start_time or 0))
    params = [dict(r.data.params) for r in runs]
    # a sweep of seeds or repeats alone still names its row: by its method (its table's row and its plots' label
    # were "all", gpu_vs_cpu's "wall-clock per method" a bar called "all" for gf2)
    keys = swept_keys(params) or ([IDENTITY] if any(IDENTITY in p for p in params) else [])
    groups: dict[tuple, list] = {}
    for r, p in zip(runs, params):
        groups.setdefault(tuple(p.get(k) for k in keys), []).append(r)
    present = [m for m in metrics if any(m in r.data.metrics for r in runs)]
    rows = []
    first_seen: dict = {}
    for p in params:
        for k in keys:
            first_seen.setdefault(p.get(k), len(first_seen))
    for gkey in sorted(groups, key=lambda t: tuple(_sort_key(v, first_seen) for v in t)):
        members = groups[gkey]
        done = [r for r in members if r.info.status == "FINISHED"]
        row = Row(
            key={k: "-" if v is None else str(v) for k, v in zip(keys, gkey)},
            finished=len(done),
            total=len(members),
            run_ids=[r.info.run_id for r in done],
            batched=sum(BATCH_SHARE in r.data.metrics for r in done),
            reached=reached(done),
        )
        for m in present:
            vals = [r.data.metrics[m] for r in done if m in r.data.metrics and math.isfinite(r.data.metrics[m])]
            if vals:
                row.stats[m] = Stat(statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0, len(vals))
            by_seed: dict[str, list[float]] = {}
            for r in done:
                if m in r.data.metrics and math.isfinite(r.data.metrics[m]) and (seed := seed_of(r)):
                    by_seed.setdefault(seed, []).append(r.data.metrics[m])
            if by_seed:
                row.per_seed[m] = {seed: statistics.fmean(v) for seed, v in by_seed.items()}
        if not done:
            row.failure = _failure_line(members)
        rows.append(row)
    cmp = Comparison(
        study=study,
        parent_id=parent_id,
        experiment=experiment,
        keys=keys,
        metrics=present,
        rows=rows,
        key_metrics=list(key_metrics),
        common=shared_choices(params, keys),
    )
    if baseline and relative:
        set_against(cmp, {k: str(v) for k, v in baseline.items()}, relative)
    return cmp


def shared_choices(params: list[dict[str, str]], keys: Sequence[str]) -> dict[str, str]:
    """Each group's choice (`device.name`, ...) that every run shares, so that a plot names a key it was not
    swept by as it was (gpu_vs_cpu's `device=torch_cpu` bars were labelled "cpu")."""
    names = {k for p in params for k in p if k.endswith(".name") and k not in keys}
    values = {k: {p.get(k) for p in params} for k in names}
    return {k: str(next(iter(v))) for k, v in sorted(values.items()) if len(v) == 1 and None not in v}


BATCH_SHARE = "batch_wall_s"  # logged by a run solved in a batch (sweep.batch.run): its wall-clock is a share


def reached(runs: list) -> int | None:
    """How many of `runs` reached their method's target accuracy (None where a run names no target: the exact
    methods): a time-to-solution ratio means nothing for a run that stopped at its epoch cap instead."""
    count = 0
    for r in runs:
        target, accuracy = r.data.params.get("method.target_accuracy"), r.data.metrics.get("accuracy")
        if target is None or accuracy is None:
            return None
        count += accuracy >= float(target)
    return count


def seed_of(run: Any) -> str:
    """The seed(s) a run drew its problem and weights with ('problem.seed=42'); '' when it names none."""
    return " ".join(f"{k}={v}" for k, v in sorted(run.data.params.items()) if PAIRED.search(k))


def set_against(cmp: Comparison, baseline: dict[str, str], relative: dict[str, str]) -> None:
    """Fill each row's relative cells from its baseline row: the baseline arm's row with the same values of the
    keys the baseline arm itself is swept over (the same n, width, k, ...; an arm's own settings such as
    device.compile are not matched). `percent` = (row - base) / base as a signed %, `speedup` = base / row as
    "N.NNx" (seed 002's 14.6x). The baseline's keys must be swept; a row whose baseline did not finish, or a
    metric it lacks, stays "-".
    Each row's `paired` changes are read seed by seed against the base row's run of the same seed: the rule of
    `relative`, else the difference (row - base), for every metric."""
    if not set(baseline) <= set(cmp.keys):
        return
    for metric, rule in relative.items():
        if rule not in RELATIVE:
            raise ValueError(f"compare.relative.{metric}: {rule!r} is not one of {', '.join(RELATIVE)}")
        if metric in cmp.metrics:
            cmp.relative.append(f"{metric} {RELATIVE[rule]}")
    base_rows = [r for r in cmp.rows if all(r.key[k] == v for k, v in baseline.items())]
    others = [k for k in cmp.keys if len({r.key[k] for r in base_rows}) > 1]
    bases = {tuple(r.key[k] for k in others): r for r in base_rows}
    for row in cmp.rows:
        base = bases.get(tuple(row.key[k] for k in others))
        if base is None:
            continue
        for metric, rule in relative.items():
            col = f"{metric} {RELATIVE.get(rule, rule)}"
            if row is base:
                row.relative[col] = "baseline"
            elif metric in row.stats and metric in base.stats and base.stats[metric].mean:
                b, v = base.stats[metric].mean, row.stats[metric].mean
                row.relative[col] = f"{(v - b) / b * 100:+.1f}%" if rule == "percent" else speedup_cell(b, v, row, base)
        for metric in cmp.metrics:
            rule = cmp.change.setdefault(metric, relative.get(metric, DIFFERENCE))
            mine, theirs = row.per_seed.get(metric, {}), base.per_seed.get(metric, {})
            changes = {seed: change(mine[seed], theirs[seed], rule) for seed in mine if seed in theirs}
            row.paired[metric] = {seed: c for seed, c in changes.items() if c is not None}


def speedup_cell(b: float, v: float, row: Row, base: Row) -> str:
    """base / row as "N.NNx"; where one side stopped at its epoch cap short of its target, its time is not its
    time to a solution: a row that did not converge is marked, and against a base that did not, the ratio is a
    lower bound (>=). Rows none of whose runs reached a target (a fixed-work study) are compared as they are; a
    row short of its target against a base with any run that reached it is marked (lr_width's lr 0.5, at chance,
    was "0.56x" against lr 0.1's one seed of two that reached it)."""
    if not v:
        return "-"
    if row.converged is False and not (row.reached == 0 and base.reached == 0):
        return f"not converged ({row.reached}/{row.finished})"
    if base.converged is False and row.converged:
        return f">= {b / v:.3g}x"
    return f"{b / v:.3g}x"


def change(value: float, base: float, rule: str) -> float | None:
    """One seed's change against the base's same seed: percent (+12.6), speedup (base / value) or difference."""
    if rule == "percent":
        return (value - base) / base * 100 if base else None
    if rule == "speedup":
        return base / value if value else None
    return value - base


def _failure_line(members: list) -> str:
    statuses = sorted({r.info.status for r in members})
    return "status " + "/".join(statuses)
