"""`python -m sweep.compare <preset | parent run id>`: one sweep's results as a table and a plot.

Finds the sweep's parent run (the latest one for a preset name, or the given id), loads its child runs, groups
them by the swept keys (config params that vary across the children; seeds and repeats are aggregated over, not
grouped by), prints mean ± std per group, draws the plot that fits the study (`sweep.plots`) and logs table
(CSV + Markdown) and plot as artifacts of the parent run, under `compare/`.
"""
from __future__ import annotations

import argparse
import csv
import io
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from hydra_plugins.sweep_launcher.commands import command

from sweep.paths import safe_name

# The figures a sweep is compared on, in table order (only those some child logged are shown): the group's own
# columns (seed 001: reads, writes, total floats; dmc, dmd, energy) beside accuracy, time and cost.
METRICS = ("accuracy", "epochs", "wall_clock_s", "warmup_s", "ard", "reads", "writes", "total_floats", "dmc", "dmd",
           "cache_hit_rate", "energy_pj", "cost_usd")
# A study's key metrics (the preset's `compare.metrics`) when its preset names none: the terminal table's columns.
KEY_METRICS = ("accuracy", "epochs", "wall_clock_s")
# Per-epoch curves drawn for studies whose runs log them (gradient methods), one line per arm.
CURVES = ("train_accuracy", "test_accuracy", "train_loss", "test_loss", "hidden_progress")
# How a row is set against its study's baseline arm (the preset's `compare.relative`: metric -> rule).
RELATIVE = {"percent": "vs base", "speedup": "speed-up"}
# Keys that repeat a job rather than define it: aggregated over (mean ± std), never grouped by.
AGGREGATED = re.compile(r"(^|\.)(seed|seeds|repeat|repeats)$")
# Keys that pair runs across arms: the same seed draws the same problem and initial weights in every arm, so an
# arm's change against the baseline is read seed by seed (repeats only re-time one config: not paired).
PAIRED = re.compile(r"(^|\.)(seed|seeds)$")
# How a paired change is read per seed where the preset gives no relative rule: the row's value minus the base's.
DIFFERENCE = "difference"
RUN_ID = re.compile(r"^[0-9a-f]{32}$")
PARENT_TAG = "sweep.parent"
OVERRIDES_TAG = "sweep.overrides"
ARTIFACT_DIR = "compare"


@dataclass
class Stat:
    mean: float
    std: float
    n: int

    def fmt(self, metric: str, short: bool = False) -> str:
        """'mean ± std' in the metric's format; `short`: a std in significant digits keeps two of them (the
        terminal table's width; the artifacts keep every digit)."""
        spec = _FORMATS.get(metric, "{:.4g}")
        s = spec.format(self.mean)
        std = "{:.2g}" if short and spec.endswith("g}") else spec
        return s if self.n < 2 else f"{s} ± {std.format(self.std)}"


_FORMATS = {"accuracy": "{:.3f}", "epochs": "{:.1f}", "wall_clock_s": "{:.4f}", "warmup_s": "{:.4f}",
            "ard": "{:,.0f}", "reads": "{:,.0f}", "writes": "{:,.0f}", "total_floats": "{:,.0f}", "dmc": "{:,.0f}",
            "dmd": "{:,.0f}", "cache_hit_rate": "{:.3f}", "energy_pj": "{:.4g}", "cost_usd": "{:.3g}"}


@dataclass
class Row:
    key: dict[str, str]  # swept key -> value
    finished: int
    total: int
    stats: dict[str, Stat] = field(default_factory=dict)
    failure: str = ""  # the last line of a failed child's error, when no child of the group finished
    relative: dict[str, str] = field(default_factory=dict)  # "<metric> <rule>" -> cell, against the baseline
    run_ids: list[str] = field(default_factory=list)  # the finished runs
    curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # curve -> (mean, std)
    per_seed: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> seed -> value (finished runs)
    paired: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> seed -> change vs the base's seed

    def label(self, keys: Sequence[str], empty: str = "all") -> str:
        """The row by its values of `keys`: 'method=gf2 problem.n_bits=20' (`empty` when keys is empty)."""
        return " ".join(f"{k}={self.key[k]}" for k in keys) or empty


@dataclass
class Comparison:
    study: str
    parent_id: str
    experiment: str
    keys: list[str]
    metrics: list[str]
    rows: list[Row]
    relative: list[str] = field(default_factory=list)  # the "<metric> <rule>" columns, after the metrics
    proxies: str = ""  # the proxy ranking (sweep.proxies), as Markdown, when the preset asks for one
    front: "Comparison | None" = None  # a search study's Pareto front (sweep.pareto)
    key_metrics: list[str] = field(default_factory=list)  # the terminal table's metrics (all when empty)
    change: dict[str, str] = field(default_factory=dict)  # metric -> how `Row.paired` reads it (a RELATIVE rule)

    @property
    def paired(self) -> bool:
        """Arms set against a baseline over the same seeds (two or more): the plot shows per-seed changes."""
        return any(len(v) > 1 for r in self.rows for v in r.paired.values())

    # -- renderings -------------------------------------------------------------------------------
    def header(self) -> list[str]:
        return [*self.keys, "runs", *self.metrics, *self.relative]

    def cells(self, row: Row) -> list[str]:
        out = [row.key[k] for k in self.keys] + [f"{row.finished}/{row.total}"]
        out += [row.stats[m].fmt(m) if m in row.stats else "-" for m in self.metrics]
        out += [row.relative.get(c, "-") for c in self.relative]
        return out

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.header()) + " |", "|" + "---|" * len(self.header())]
        lines += ["| " + " | ".join(self.cells(r)) + " |" for r in self.rows]
        notes = [f"- {r.label(self.keys)}: {r.failure}" for r in self.rows if r.failure]
        if notes:
            lines += ["", "Groups with no finished run:", *notes]
        return "\n".join(lines) + "\n"

    def csv(self) -> str:
        """Machine-readable: one column per mean, std and count."""
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow([*self.keys, "finished", "total",
                    *[f"{m}_{s}" for m in self.metrics for s in ("mean", "std", "n")], *self.relative, "failure"])
        for r in self.rows:
            vals: list[Any] = []
            for m in self.metrics:
                st = r.stats.get(m)
                vals += [st.mean, st.std, st.n] if st else ["", "", 0]
            vals += [r.relative.get(c, "") for c in self.relative]
            w.writerow([*(r.key[k] for k in self.keys), r.finished, r.total, *vals, r.failure])
        return buf.getvalue()

    def rich_table(self, wide: bool = False):
        """The terminal table: the study's key metrics, each with its column against the baseline beside it, under
        two-line headers, so that it fits 120 columns; `wide`: every column of the Markdown table."""
        from rich import box
        from rich.table import Table

        if wide:
            t = Table(title=f"{self.study}  (parent run {self.parent_id}, experiment {self.experiment})")
            for h in self.header():
                t.add_column(h, justify="left" if h in self.keys else "right")
            for r in self.rows:
                t.add_row(*self.cells(r), style="red" if r.finished == 0 else None)
            return t
        title = self.study  # not the run's ids, which would set the width of a narrow table (printed apart)
        columns = self.terminal_columns()
        # every group finished all its runs, as many as the others: the count goes to the title
        counts = {(r.finished, r.total) for r in self.rows}
        runs = len(counts) > 1 or any(f != n for f, n in counts)
        if not runs and counts:
            n = counts.pop()[0]
            title += f": mean ± std over {n} runs per row" if n > 1 else ": one run per row"
        body = []
        for r in self.rows:
            cells = [r.key[k] for k in self.keys] + ([f"{r.finished}/{r.total}"] if runs else [])
            cells += [(r.relative.get(c, "-").replace("baseline", "base") if c in self.relative else
                       r.stats[c].fmt(c, short=True) if c in r.stats else "-") for c in columns]
            body.append(cells)
        # a relative column sits right of its metric: its rule names it ("vs base", "speed-up")
        heads = [*self.keys, *(["runs"] if runs else []),
                 *(c.split(" ", 1)[1].replace(" ", "\n") if c in self.relative else c for c in columns)]
        t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        for i, h in enumerate(heads):
            width = max((len(b[i]) for b in body), default=0)
            t.add_column(_header(h, width), justify="left" if i < len(self.keys) else "right", no_wrap=True)
        for r, cells in zip(self.rows, body):
            t.add_row(*cells, style="red" if r.finished == 0 else None)
        return t

    def terminal_columns(self) -> list[str]:
        """The metric and relative columns of the terminal table: each key metric, then its relative column."""
        keep = [m for m in self.key_metrics if m in self.metrics] or self.metrics
        return [c for m in keep for c in (m, *(r for r in self.relative if r.split(" ", 1)[0] == m))]

    def values(self, metric: str, **where: str) -> list[tuple[Row, Stat]]:
        """(row, stat) for rows whose keys match `where` (keys absent from the table are ignored)."""
        out = []
        for r in self.rows:
            if all(r.key.get(k, v) == v for k, v in where.items()) and metric in r.stats:
                out.append((r, r.stats[metric]))
        return out


def _header(name: str, width: int) -> str:
    """A column name on lines no wider than its cells where it can: 'method.hidden' -> 'method' / 'hidden' (a
    config group above its key), and a part wider than the cells broken once at its most even '_'
    ('cache_' / 'hit_rate')."""
    lines = []
    for part in name.split("."):
        cuts = [i + 1 for i, ch in enumerate(part[:-1]) if ch == "_"]
        if len(part) > width and cuts:
            cut = min(cuts, key=lambda i: max(i, len(part) - i))
            lines += [part[:cut], part[cut:]]
        else:
            lines.append(part)
    return "\n".join(lines)


# -- finding the sweep ---------------------------------------------------------------------------
def find_parent(client: Any, ref: str):
    """The parent run: by id, else the latest parent run of study `ref` (an experiment named `ref`, or a
    parent whose overrides say `sweeps=ref`) that has child runs: a re-run whose jobs were all done already
    (skipped) leaves an empty parent, and the study is still the earlier sweep's."""
    if RUN_ID.match(ref):
        from mlflow.exceptions import MlflowException

        try:
            return client.get_run(ref)
        except MlflowException:
            raise LookupError(f"no run {ref} in the store") from None
    exps = {e.experiment_id: e.name for e in client.search_experiments()}
    if not exps:
        raise LookupError("the store has no experiments")
    # The name is data: it never enters a filter string (a quote in it would break MLflow's parser), the
    # parents are matched here. A preset run into another experiment (mlflow.experiment=... overridden) still
    # names itself in the parent's overrides tag.
    parents = _search(client, list(exps), f"tags.`{PARENT_TAG}` = 'true'")
    candidates = [r for r in parents
                  if study_of(r) == ref or (exps.get(r.info.experiment_id) == ref and study_of(r, ref) == ref)]
    if not candidates:
        raise LookupError(f"no sweep parent run found for {ref!r}: run `{command('sweep', f'sweeps={ref}')}` "
                          "first, or pass a parent run id")
    candidates.sort(key=lambda r: r.info.start_time, reverse=True)
    return next((r for r in candidates if has_children(client, r)), candidates[0])


def latest_sweeps(client: Any) -> list[tuple[str, Any]]:
    """(experiment name, its latest sweep parent run with child runs), the most recent sweep first."""
    exps = {e.experiment_id: e.name for e in client.search_experiments()}
    parents = _search(client, list(exps), f"tags.`{PARENT_TAG}` = 'true'") if exps else []
    out: dict[str, Any] = {}
    for r in sorted(parents, key=lambda r: r.info.start_time, reverse=True):
        if r.info.experiment_id not in out and has_children(client, r):
            out[r.info.experiment_id] = r
    return [(exps[e], r) for e, r in out.items()]


def has_children(client: Any, parent: Any) -> bool:
    return bool(client.search_runs([parent.info.experiment_id], children_filter(parent.info.run_id),
                                   max_results=1))


def children_filter(parent_run_id: str) -> str:
    """MLflow's search for the child runs of a parent run."""
    return f"tags.`mlflow.parentRunId` = '{parent_run_id}'"


def _search(client: Any, exp_ids: list[str], filt: str) -> list:
    out, token = [], None
    while True:
        page = client.search_runs(exp_ids, filter_string=filt, max_results=1000, page_token=token)
        out += list(page)
        token = page.token
        if not token:
            return out


def study_of(parent: Any, default: str = "") -> str:
    """The study a parent run belongs to: the preset named in its overrides, else its experiment's name."""
    m = re.search(r"(?:^|\s)\+?sweeps=(\S+)", parent.data.tags.get(OVERRIDES_TAG, ""))
    return m.group(1) if m else default


def load_children(client: Any, parent: Any) -> list:
    return _search(client, [parent.info.experiment_id], children_filter(parent.info.run_id))


def sweep_runs(client: Any, parent: Any) -> list:
    """The runs of a sweep, its resumes included. A command re-run after Ctrl-C, a crash or a failed job skips
    the jobs already FINISHED and records the rest under a new parent run, so the sweep is the child runs of
    every parent with the same command line (overrides tag) up to this one: the latest run of each job."""
    from sweep.recorder import HASH_TAG

    overrides = parent.data.tags.get(OVERRIDES_TAG)
    parents = [parent]
    if overrides is not None:
        parents = [p for p in _search(client, [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = 'true'")
                   if p.data.tags.get(OVERRIDES_TAG) == overrides and p.info.start_time <= parent.info.start_time]
    latest: dict[str, Any] = {}
    runs = (r for p in parents or [parent] for r in load_children(client, p))
    for r in sorted(runs, key=lambda r: r.info.start_time):
        latest[r.data.tags.get(HASH_TAG) or r.info.run_id] = r
    return list(latest.values())


# -- grouping ------------------------------------------------------------------------------------
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


def summarize(runs: list, study: str = "", parent_id: str = "", experiment: str = "",
              metrics: Sequence[str] = METRICS, baseline: dict[str, Any] | None = None,
              relative: dict[str, str] | None = None, key_metrics: Sequence[str] = KEY_METRICS) -> Comparison:
    """Group `runs` (MLflow Run objects) by their swept keys; mean ± std of each metric over FINISHED runs;
    with a `baseline` arm (swept key -> value), each `relative` metric against it (see `set_against`).
    `key_metrics`: the study's metrics for the terminal table (the others with --wide and in the artifacts)."""
    # the sweep's own order: Hydra's job number where the launcher tags it (parallel jobs start out of order)
    runs = sorted(runs, key=lambda r: (int(r.data.tags.get("hydra.job.num", -1)), r.info.start_time or 0))
    params = [dict(r.data.params) for r in runs]
    keys = swept_keys(params)
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
        row = Row(key={k: "-" if v is None else str(v) for k, v in zip(keys, gkey)},
                  finished=len(done), total=len(members), run_ids=[r.info.run_id for r in done])
        for m in present:
            vals = [r.data.metrics[m] for r in done if m in r.data.metrics and math.isfinite(r.data.metrics[m])]
            if vals:
                row.stats[m] = Stat(statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0,
                                    len(vals))
            by_seed: dict[str, list[float]] = {}
            for r in done:
                if m in r.data.metrics and math.isfinite(r.data.metrics[m]) and (seed := seed_of(r)):
                    by_seed.setdefault(seed, []).append(r.data.metrics[m])
            if by_seed:
                row.per_seed[m] = {seed: statistics.fmean(v) for seed, v in by_seed.items()}
        if not done:
            row.failure = _failure_line(members)
        rows.append(row)
    cmp = Comparison(study=study, parent_id=parent_id, experiment=experiment, keys=keys, metrics=present,
                     rows=rows, key_metrics=list(key_metrics))
    if baseline and relative:
        set_against(cmp, {k: str(v) for k, v in baseline.items()}, relative)
    return cmp


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
                row.relative[col] = f"{(v - b) / b * 100:+.1f}%" if rule == "percent" else \
                    (f"{b / v:.3g}x" if v else "-")
        for metric in cmp.metrics:
            rule = cmp.change.setdefault(metric, relative.get(metric, DIFFERENCE))
            mine, theirs = row.per_seed.get(metric, {}), base.per_seed.get(metric, {})
            changes = {seed: change(mine[seed], theirs[seed], rule) for seed in mine if seed in theirs}
            row.paired[metric] = {seed: c for seed, c in changes.items() if c is not None}


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


def _failure_reasons(client: Any, cmp: Comparison, runs: list) -> None:
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
            row.curves[name] = ([statistics.fmean(c) for c in cols],
                                [statistics.pstdev(c) if len(c) > 1 else 0.0 for c in cols])


def study_settings(study: str) -> dict[str, Any]:
    """The preset's `compare:` node (baseline arm, relative metrics) from sweeps/<study>.yaml, plus a search
    preset's `objectives` (its hydra.sweeper.objectives); {} otherwise."""
    from omegaconf import OmegaConf

    from sweep.paths import SWEEPS_DIR

    path = SWEEPS_DIR / f"{study}.yaml"
    raw = OmegaConf.load(path) if path.is_file() and path.parent == SWEEPS_DIR else OmegaConf.create()
    node = raw.get("compare")
    out: dict[str, Any] = OmegaConf.to_container(node, resolve=True) if node else {}  # type: ignore[assignment]
    objectives = OmegaConf.select(raw, "hydra.sweeper.objectives")
    if objectives:
        out["objectives"] = OmegaConf.to_container(objectives)
    return out


def key_metrics(settings: dict[str, Any]) -> list[str]:
    """The metrics a study compares: the preset's `compare.metrics`, else those it sets against a baseline or
    searches on, else KEY_METRICS."""
    named = settings.get("metrics") or [*settings.get("relative", {}), *settings.get("objectives", {})]
    return list(dict.fromkeys([named] if isinstance(named, str) else named)) or list(KEY_METRICS)


def study_runs(client: Any, parent: Any, study: str) -> list:
    """The child runs of every sweep of `study` in the parent's experiment: a search study resumed over
    several commands is one study."""
    experiment = client.get_experiment(parent.info.experiment_id).name
    parents = [p for p in _search(client, [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = 'true'")
               if study_of(p, experiment) == study]
    return [r for p in parents or [parent] for r in load_children(client, p)]


def proxy_ranking(cmp: Comparison, runs: list, spec: dict[str, Any], out_dir: Path, plot: bool = True) -> list[Path]:
    """The preset's `compare.proxies`: each proxy's rank correlation with the target(s) (sweep.proxies), kept on
    `cmp.proxies` (Markdown) and written as proxies.md (+ the scatter grid <study>-proxies.png)."""
    from sweep import proxies as px

    targets = spec.get("target", ["energy_pj"])
    targets = [targets] if isinstance(targets, str) else list(targets)
    by, metrics = spec.get("by", ""), list(spec.get("metrics", []))
    rankings = px.rank_proxies(runs, targets, by, metrics, keys=cmp.keys)
    cmp.proxies = px.markdown(rankings, metrics, by) if rankings else ""
    files = [out_dir / "proxies.md"]
    files[0].write_text(f"# {cmp.study}: rank correlation of each proxy with {', '.join(targets)}\n\n"
                        f"One point per finished run, per {by}.\n\n{cmp.proxies}")
    if plot and rankings:
        files.append(px.plot(rankings, metrics, out_dir / f"{safe_name(cmp.study)}-proxies.png",
                             f"{cmp.study}: proxies vs energy, one point per run (log-log)"))
    return files


# -- the command ---------------------------------------------------------------------------------
def compare(ref: str, tracking_uri: str | None = None, out_dir: Path | None = None, log: bool = True,
            plot: bool = True, settings: dict[str, Any] | None = None) -> tuple[Comparison, list[Path]]:
    """Build the comparison for sweep `ref`, write table and plot(s) to `out_dir`, log them on the parent run.
    `settings` (baseline, relative) default to the preset's `compare:` node."""
    from sweep import store
    from sweep.paths import PROJECT_ROOT, default_tracking_uri
    from sweep.plots import plot_comparison, plot_curves

    uri = tracking_uri or default_tracking_uri()
    store.check(uri, write=False)  # a missing store is not created; a corrupt one is one line
    if log:
        try:
            store.check(uri, write=True)
        except store.StoreError as e:  # a read-only store is read: the table and plot stay on disk
            print(f"sweep.compare: {e}: table and plot not logged to the parent run", file=sys.stderr)
            log = False
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    parent = find_parent(client, ref)
    experiment = client.get_experiment(parent.info.experiment_id).name
    study = ref if not RUN_ID.match(ref) else study_of(parent, experiment)
    settings = study_settings(study) if settings is None else settings
    objectives = settings.get("objectives")
    runs = study_runs(client, parent, study) if objectives else sweep_runs(client, parent)
    if not runs:
        raise LookupError(f"parent run {parent.info.run_id} has no child runs")
    cmp = summarize(runs, study=study, parent_id=parent.info.run_id, experiment=experiment,
                    baseline=settings.get("baseline"), relative=settings.get("relative"),
                    key_metrics=key_metrics(settings))
    _failure_reasons(client, cmp, runs)
    load_curves(client, cmp)

    # the study name is data: a safe file name (`../x` stays inside outputs/compare/)
    out_dir = out_dir or PROJECT_ROOT / "outputs" / "compare" / f"{safe_name(study)}-{parent.info.run_id[:8]}"
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [out_dir / "table.csv", out_dir / "table.md"]
    files[0].write_text(cmp.csv())
    files[1].write_text(f"# {study}\n\nParent run `{cmp.parent_id}` (experiment `{experiment}`), mean ± std "
                        f"over seeds/repeats.\n\n" + cmp.markdown())
    if objectives:
        from sweep.pareto import front, plot_front

        cmp.front = front(cmp, objectives)
        files.append(out_dir / "front.md")
        files[-1].write_text(f"# {cmp.front.study}\n\n" + cmp.front.markdown())
    if plot:
        png = out_dir / f"{safe_name(study)}.png"
        files.append(plot_front(cmp, cmp.front, objectives, png) if cmp.front is not None
                     else plot_comparison(cmp, png))
        if any(r.curves for r in cmp.rows):
            files.append(plot_curves(cmp, out_dir / f"{safe_name(study)}-curves.png"))
    if settings.get("proxies"):
        files += proxy_ranking(cmp, runs, settings["proxies"], out_dir, plot)
    if log:
        for f in files:
            client.log_artifact(cmp.parent_id, str(f), artifact_path=ARTIFACT_DIR)
    return cmp, files


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=command("sweep.compare"), description=__doc__.splitlines()[0])
    ap.add_argument("ref", help="preset name (e.g. tiled_w1; its latest sweep) or a parent run id")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (for a findings note)")
    ap.add_argument("--out", type=Path, default=None, help="where to write table and plot "
                    "(default outputs/compare/<study>-<run>)")
    ap.add_argument("--tracking-uri", default=None, help="MLflow store (default: the project's, or "
                    "$MLFLOW_TRACKING_URI)")
    ap.add_argument("--no-log", action="store_true", help="do not log the artifacts on the parent run")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--wide", action="store_true", help="every column on the terminal, not only the study's key "
                    "metrics (table.md and table.csv always hold every column)")
    a = ap.parse_args(argv)
    from sweep.store import StoreError

    try:
        cmp, files = compare(a.ref, a.tracking_uri, a.out, log=not a.no_log, plot=not a.no_plot)
    except LookupError as e:
        print(f"sweep.compare: {e}", file=sys.stderr)
        return 1
    except StoreError as e:
        print(f"sweep.compare: {e}", file=sys.stderr)
        return 1
    if a.markdown:
        print(cmp.markdown(), end="")
        if cmp.proxies:
            print("\n" + cmp.proxies, end="")
        if cmp.front is not None:
            print(f"\n{cmp.front.study}:\n\n{cmp.front.markdown()}", end="")
    else:
        from rich.console import Console

        console = Console()
        tables = [c.rich_table(wide=a.wide) for c in (cmp, cmp.front) if c is not None]
        # tables wider than the console keep their natural width (the terminal wraps them, a pipe or
        # `less -S` shows them whole) rather than every number cut down to "1…"
        need = max(console.measure(t, options=console.options.update_width(10_000)).maximum for t in tables)
        if need > console.width:
            console = Console(width=need)
        if not a.wide:
            console.print(f"{cmp.study}: parent run {cmp.parent_id}, experiment {cmp.experiment}")
        for table in tables:
            console.print(table)
        for r in cmp.rows:
            if r.failure:
                console.print(f"[red]{r.label(cmp.keys)}[/red]: {r.failure}")
        if cmp.proxies:
            console.print(cmp.proxies, markup=False)
        hidden = len(cmp.metrics) + len(cmp.relative) - len(cmp.terminal_columns())
        if hidden and not a.wide:
            console.print(f"{hidden} more column{'s' * (hidden > 1)} with --wide, and in table.md / table.csv")
        console.print("wrote " + ", ".join(str(f) for f in files)
                      + ("" if a.no_log else f" (logged to run {cmp.parent_id} under {ARTIFACT_DIR}/)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
