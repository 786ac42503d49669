"""Which proxy predicts energy? Rank correlations of proxies with a target metric, over a sweep's runs.

Per value of a swept key (`by`, e.g. tracker.hierarchy) and per target (modelled energy_pj, measured
energy_measured_j where runs have it), Spearman's rho and Kendall's tau (scipy.stats) of each proxy with the
target across the finished runs, one point per run; the runs the best-ranked proxy places furthest from where
the target does (the disagreements); and a log-log scatter grid, one panel per proxy. Set in a preset's
`compare.proxies` node ({target, by, metrics}); `python -m sweep.compare` prints and logs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy import stats


@dataclass
class Point:
    run_id: str
    label: str  # the run's swept keys, e.g. "sweeps/energy_proxies_arm=gf2 problem.seed=42"
    target: float
    proxies: dict[str, float]


@dataclass
class Ranking:
    group: str  # the value of `by`
    target: str
    points: list[Point]
    spearman: dict[str, float] = field(default_factory=dict)
    kendall: dict[str, float] = field(default_factory=dict)
    disagreements: dict[str, list[tuple[Point, int, int]]] = field(default_factory=dict)  # proxy -> (pt, r_t, r_p)

    def best(self) -> str | None:
        scored = [p for p in self.spearman if math.isfinite(self.spearman[p])]
        return max(scored, key=lambda p: self.spearman[p]) if scored else None


def finite(v: Any) -> bool:
    return isinstance(v, float) and math.isfinite(v)


def _label(params: dict[str, str], keys: Sequence[str]) -> str:
    """A run by its swept keys, short: "sgd hidden=100 tiled tile_size=25 seed=42" (a choice's name bare)."""
    parts = []
    for k in keys:
        v = params.get(k)
        if v not in (None, "-", "0") or (v == "0" and not k.endswith("tile_size")):
            short = k.split(".")[-1]
            parts.append(v if short == "name" else f"{short}={v}")
    return " ".join(parts) or "run"


def rank_proxies(
    runs: Sequence[Any],
    targets: Sequence[str],
    by: str,
    proxies: Sequence[str],
    keys: Sequence[str] = (),
    worst: int = 3,
) -> list[Ranking]:
    """One Ranking per (value of `by`, target) that has at least three runs with the target."""
    out = []
    groups: dict[str, list] = {}
    for r in runs:
        if r.info.status == "FINISHED":
            groups.setdefault(r.data.params.get(by, "-"), []).append(r)
    label_keys = [k for k in (*keys, "problem.seed") if k != by]
    for group in sorted(groups):
        for target in targets:
            pts = [
                Point(
                    r.info.run_id,
                    _label(r.data.params, label_keys),
                    r.data.metrics[target],
                    {p: r.data.metrics.get(p, math.nan) for p in proxies},
                )
                for r in groups[group]
                if finite(r.data.metrics.get(target))
            ]
            if len(pts) < 3:
                continue
            rk = Ranking(group, target, pts)
            for p in proxies:
                both = [(pt.target, pt.proxies[p]) for pt in pts if finite(pt.proxies[p])]
                if len(both) < 3 or len({b for _, b in both}) < 2:
                    rk.spearman[p] = rk.kendall[p] = math.nan
                    continue
                t, v = np.array(both).T
                rk.spearman[p] = float(stats.spearmanr(t, v).statistic)
                rk.kendall[p] = float(stats.kendalltau(t, v).statistic)
                # where the proxy's rank is furthest from the target's: the runs it misjudges, one per arm
                # (the seeds of one arm usually sit together)
                rt, rp = stats.rankdata(t).astype(int), stats.rankdata(v).astype(int)
                usable = [pt for pt in pts if finite(pt.proxies[p])]
                seen: set[str] = set()
                rk.disagreements[p] = []
                for i in np.argsort(-np.abs(rt - rp), kind="stable"):
                    if rt[i] == rp[i]:  # the rest agree: a run ranked alike is no gap (listed as one before)
                        break
                    arm = usable[i].label.rsplit(" seed=", 1)[0]
                    if arm not in seen and len(seen) < worst:
                        seen.add(arm)
                        rk.disagreements[p].append((usable[i], int(rt[i]), int(rp[i])))
            out.append(rk)
    return out


def markdown(rankings: Sequence[Ranking], proxies: Sequence[str], by: str) -> str:
    """The correlation table (rows: group x target x statistic) and each ranking's disagreements."""
    lines = [f"| {by} | target | runs | statistic | " + " | ".join(proxies) + " |", "|" + "---|" * (4 + len(proxies))]
    for rk in rankings:
        for name, vals in (("Spearman", rk.spearman), ("Kendall", rk.kendall)):
            cells = [f"{vals[p]:+.3f}" if math.isfinite(vals.get(p, math.nan)) else "-" for p in proxies]
            lines.append(f"| {rk.group} | {rk.target} | {len(rk.points)} | {name} | " + " | ".join(cells) + " |")
    for rk in rankings:
        best = rk.best()
        for p in dict.fromkeys([x for x in (best, "ard", "dmc") if x in rk.disagreements]):
            gaps = rk.disagreements[p]
            worst = "; ".join(f"{pt.label} (rank {rt} by {rk.target}, {rp} by {p})" for pt, rt, rp in gaps)
            said = f"largest rank gaps: {worst}" if gaps else f"no rank gaps: every run has its rank by {rk.target}"
            lines.append(f"\n{by}={rk.group}, {p} vs {rk.target}: {said}")
    return "\n".join(lines) + "\n"
