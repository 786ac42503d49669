"""A study's own settings (its preset's `compare:` node and a search's objectives) and what they ask the
report for beyond the table: the proxy ranking (sweep.energy.proxies)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from sweep.metrics import KEY
from sweep.paths import preset_file, safe_name
from sweep.record.tags import COMPARE_TAG
from sweep.report import whole
from sweep.report.char_leaderboard import board_class
from sweep.report.table import Comparison


def sweep_settings(parent: Any, study: str) -> dict[str, Any]:
    """The `compare:` settings sweep `parent` ran with (its tag: the preset's node and the command's compare.*
    overrides), a search's objectives from its preset; a parent recorded without the tag: the preset's file."""
    settings = study_settings(study)
    recorded = parent.data.tags.get(COMPARE_TAG)
    if recorded is None:
        return settings
    objectives = {"objectives": settings["objectives"]} if "objectives" in settings else {}
    return {**json.loads(recorded), **objectives}


def study_settings(study: str) -> dict[str, Any]:
    """The preset's `compare:` node (baseline arm, relative metrics) from sweeps/<study>.yaml, plus a search
    preset's `objectives` (its hydra.sweeper.objectives); {} otherwise."""
    path = preset_file(study)
    raw = OmegaConf.load(path) if path else OmegaConf.create()
    node = raw.get("compare")
    out: dict[str, Any] = OmegaConf.to_container(node, resolve=True) if node else {}  # type: ignore[assignment]
    objectives = OmegaConf.select(raw, "hydra.sweeper.objectives")
    if objectives:
        out["objectives"] = OmegaConf.to_container(objectives)
    return out


def proxy_ranking(cmp: Comparison, runs: list, spec: dict[str, Any], out_dir: Path, plot: bool = True) -> list[Path]:
    """The preset's `compare.proxies`: each proxy's rank correlation with the target(s) (sweep.energy.proxies), kept on
    `cmp.proxies` (Markdown) and written as proxies.md (+ the scatter grid <study>-proxies.png)."""
    from sweep.energy import proxies as px  # noqa: PLC0415 - scipy: only for a study that ranks proxies (the UI's view reads this module)
    from sweep.report.plots import plot_proxies  # noqa: PLC0415 - matplotlib: only for a study that ranks proxies

    targets = spec.get("target", ["energy_pj"])
    targets = [targets] if isinstance(targets, str) else list(targets)
    by, metrics = spec.get("by", ""), list(spec.get("metrics", []))
    rankings = px.rank_proxies(runs, targets, by, metrics, keys=cmp.keys)
    cmp.proxies = px.markdown(rankings, metrics, by) if rankings else ""
    files = [out_dir / "proxies.md"]
    whole.text(
        files[0],
        f"# {cmp.study}: rank correlation of each proxy with {', '.join(targets)}\n\n"
        f"One point per finished run, per {by}.\n\n{cmp.proxies}",
    )
    if plot and rankings:
        files.append(
            plot_proxies(
                rankings,
                metrics,
                out_dir / f"{safe_name(cmp.study)}-proxies.png",
                f"{cmp.study}: proxies vs energy, one point per run (log-log)",
            )
        )
    return files


def key_metrics(settings: dict[str, Any]) -> list[str]:
    """The metrics a study compares: the preset's `compare.metrics`, else those it sets against a baseline or
    searches on, or a challenge's leaderboard judges and ranks by, else the registry's key metrics."""
    rules = settings.get("leaderboard")
    named = settings.get("metrics") or [*settings.get("relative", {}), *settings.get("objectives", {})]
    named = named or (list(board_class(rules).key_metrics) if rules else [])
    return list(dict.fromkeys([named] if isinstance(named, str) else named)) or list(KEY)
