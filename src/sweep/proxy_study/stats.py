"""The statistics of the proxy study, with the configuration as the unit: a configuration's repeats measure the
meter's noise, not another point, so each configuration is one point (its runs' mean) and the bootstrap resamples
configurations.

- Spearman's rho of a proxy with the target, and its bootstrap 95% percentile interval;
- the partial rank correlation given a control (wall-clock): Spearman's rho of the two after the control's ranks
  are regressed out of both (does a proxy say anything the time does not?);
- a model of the target from counts (kernels, bytes per level, FLOPs): non-negative least squares on relative
  errors (a count costs >= 0 J), scored on held-out configurations (leave one configuration out): mean absolute
  percentage error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize, stats

BOOTSTRAP = 2000  # resamples: the interval's ends move by < 0.01 between seeds at this many
LEVEL = 0.95


@dataclass
class Interval:
    value: float
    low: float
    high: float
    n: int  # configurations

    def cell(self) -> str:
        if not math.isfinite(self.value):
            return "-"
        return f"{self.value:+.2f} [{self.low:+.2f}, {self.high:+.2f}]"


def by_config(configs: Sequence[str], *columns: Sequence[float]) -> tuple[list[str], list[np.ndarray]]:
    """The configurations (in order of first appearance) and each column's mean over the configuration's runs
    (runs with a non-finite value in any column are left out first)."""
    cols = [np.asarray(c, dtype=float) for c in columns]
    ok = np.all([np.isfinite(c) for c in cols], axis=0) if cols else np.ones(len(configs), bool)
    names = list(dict.fromkeys(c for c, good in zip(configs, ok) if good))
    index = {n: i for i, n in enumerate(names)}
    who = np.array([index.get(c, -1) for c in configs])
    means = []
    for c in cols:
        sums = np.bincount(who[ok], weights=c[ok], minlength=len(names))
        means.append(sums / np.bincount(who[ok], minlength=len(names)))
    return names, means


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of a with the same row of b (nan where a row is constant)."""
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-12 * np.maximum(1, den.max(initial=0)), (a * b).sum(axis=1) / den, np.nan)


def _residuals_rows(r: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Each row of r less its least-squares line (intercept and slope) on the same row of z."""
    zc = z - z.mean(axis=1, keepdims=True)
    rc = r - r.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = (zc * rc).sum(axis=1, keepdims=True) / (zc * zc).sum(axis=1, keepdims=True)
    return rc - slope * zc


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each row pair (ties get their average rank, as scipy's spearmanr)."""
    return _pearson_rows(stats.rankdata(x, axis=1), stats.rankdata(y, axis=1))


def partial_rows(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The rank correlation of x and y given z, each row: the Pearson correlation of the residuals of rank(x) and
    rank(y), each regressed (with an intercept) on rank(z)."""
    rx, ry, rz = (stats.rankdata(v, axis=1) for v in (x, y, z))
    return _pearson_rows(_residuals_rows(rx, rz), _residuals_rows(ry, rz))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3:
        return math.nan
    return float(spearman_rows(np.asarray(x, float)[None], np.asarray(y, float)[None])[0])


def partial_spearman(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    if len(x) < 4:
        return math.nan
    return float(partial_rows(*(np.asarray(v, float)[None] for v in (x, y, z)))[0])


def bootstrap(
    statistic, columns: Sequence[np.ndarray], n: int = BOOTSTRAP, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """The percentile interval of ``statistic`` (a function of row-stacked columns: one row a resample) over
    ``n`` resamples of the configurations with replacement; resamples where it is undefined (all ties) are dropped,
    and with fewer than half left there is no interval."""
    m = len(columns[0])
    if m < 3:
        return math.nan, math.nan
    draws = np.random.default_rng(seed).integers(0, m, size=(n, m))
    vals = statistic(*(np.asarray(c, float)[draws] for c in columns))
    vals = vals[np.isfinite(vals)]
    if len(vals) < n / 2:
        return math.nan, math.nan
    a = (1 - level) / 2
    return float(np.quantile(vals, a)), float(np.quantile(vals, 1 - a))


def rho_interval(
    configs: Sequence[str], proxy: Sequence[float], target: Sequence[float], n: int = BOOTSTRAP
) -> Interval:
    _, (x, y) = by_config(configs, proxy, target)
    lo, hi = bootstrap(spearman_rows, (x, y), n)
    return Interval(spearman(x, y), lo, hi, len(x))


def partial_interval(
    configs: Sequence[str],
    proxy: Sequence[float],
    target: Sequence[float],
    control: Sequence[float],
    n: int = BOOTSTRAP,
) -> Interval:
    _, (x, y, z) = by_config(configs, proxy, target, control)
    lo, hi = bootstrap(partial_rows, (x, y, z), n)
    return Interval(partial_spearman(x, y, z), lo, hi, len(x))


@dataclass
class CountsModel:
    features: list[str]
    coef: np.ndarray  # target units per count, >= 0
    mape: float  # held-out, leave one configuration out
    worst: tuple[str, float]  # the configuration predicted worst, and its error
    n: int


def nnls_fit(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative coefficients of y ~ X minimising the squared *relative* errors (each row divided by its y: the
    configurations span orders of magnitude, and the score is a percentage); columns scaled to unit norm for the
    solver, the scale undone."""
    A = X / y[:, None]
    scale = np.linalg.norm(A, axis=0)
    scale[scale == 0] = 1.0
    coef, _ = optimize.nnls(A / scale, np.ones(len(y)))
    return coef / scale


def counts_model(configs: Sequence[str], features: dict[str, Sequence[float]], target: Sequence[float]) -> CountsModel:
    """Fit target ~ sum of c_i x feature_i (c_i >= 0) on configuration means; its error on each configuration
    when fitted on the others (|predicted - measured| / measured), averaged."""
    names = list(features)
    cfgs, cols = by_config(configs, *features.values(), target)
    X, y = np.column_stack(cols[:-1]) if names else np.zeros((len(cfgs), 0)), cols[-1]
    if len(y) < len(names) + 2 or np.any(y <= 0):
        return CountsModel(names, np.full(len(names), math.nan), math.nan, ("", math.nan), len(y))
    errors = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        pred = X[i] @ nnls_fit(X[keep], y[keep])
        errors.append(abs(pred - y[i]) / y[i])
    worst = int(np.argmax(errors))
    return CountsModel(names, nnls_fit(X, y), float(np.mean(errors)), (cfgs[worst], errors[worst]), len(y))


def within_groups(
    configs: Sequence[str], groups: Sequence[str], proxy: Sequence[float], target: Sequence[float], n: int = BOOTSTRAP
) -> Interval:
    """Spearman's rho at equal arithmetic: each configuration's log proxy and log target less their means over its
    group (configurations that do the same work in other ways), so that a proxy that only says "bigger" scores ~0.
    Groups of one configuration say nothing and are left out; the interval resamples configurations."""
    names, (x, y) = by_config(configs, proxy, target)
    group_of = dict(zip(configs, groups))
    g = np.array([group_of[c] for c in names])
    keep = (x > 0) & (y > 0) & np.array([np.sum(g == v) > 1 for v in g])
    if keep.sum() < 4:
        return Interval(math.nan, math.nan, math.nan, int(keep.sum()))
    g, lx, ly = g[keep], np.log(x[keep]), np.log(y[keep])
    for v in set(g):
        lx[g == v] -= lx[g == v].mean()
        ly[g == v] -= ly[g == v].mean()
    lo, hi = bootstrap(spearman_rows, (lx, ly), n)
    return Interval(spearman(lx, ly), lo, hi, len(lx))
