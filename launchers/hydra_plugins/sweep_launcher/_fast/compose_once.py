"""A command's config composed once, where Hydra composes it twice.

`@hydra.main` first composes the config only to read `hydra.mode` (`Hydra.get_mode`: run mode MULTIRUN, sweep
overrides not validated), then composes it again to run it (`Hydra.run` or `Hydra.multirun`): two full
compositions for every command, ~0.15 s each for the project's config on a 2-core machine. `ComposeOnce` stands
in for Hydra's config loader and keeps the first composition for the second request when the two give the same
config: the same config name, overrides and shell, the second's overrides at most adding the `hydra.mode=...`
Hydra appends when the config sets no mode, and, for a run, no group left missing (a multirun composition skips
a `???` default that a run refuses). Sweep overrides are validated for the second request as Hydra validates
them. Anything else composes as Hydra does. The kept config is handed out once.

Installed by wrapping `GlobalHydra.initialize` (public `hydra.core`), where `@hydra.main` registers the Hydra
object it made: the only moment between the loader's creation and its first composition. Parity:
tests/test_compose_once.py.
"""

from __future__ import annotations

from typing import Any, List, Optional

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

MODE_OVERRIDES = {"hydra.mode=RUN": RunMode.RUN, "hydra.mode=MULTIRUN": RunMode.MULTIRUN}


class ComposeOnce:
    """Hydra's config loader, but for a command's second composition of the same config."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.kept: Optional[tuple[Optional[str], tuple[str, ...], bool, DictConfig]] = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def __reduce__(self) -> Any:  # what travels (to workers, with Hydra's context) is Hydra's own loader
        return (_plain, (self.loader,))

    def load_configuration(
        self,
        config_name: Optional[str],
        overrides: List[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        kept, self.kept = self.kept, None
        if kept is not None:
            cfg = self._reuse(kept, config_name, overrides, run_mode, from_shell, validate_sweep_overrides)
            if cfg is not None:
                return cfg
        cfg = self.loader.load_configuration(
            config_name=config_name,
            overrides=overrides,
            run_mode=run_mode,
            from_shell=from_shell,
            validate_sweep_overrides=validate_sweep_overrides,
        )
        if run_mode == RunMode.MULTIRUN and not validate_sweep_overrides:  # get_mode's: the command's first
            self.kept = (config_name, tuple(overrides), from_shell, cfg)
        return cfg

    def _reuse(
        self,
        kept: tuple[Optional[str], tuple[str, ...], bool, DictConfig],
        config_name: Optional[str],
        overrides: List[str],
        run_mode: RunMode,
        from_shell: bool,
        validate: bool,
    ) -> Optional[DictConfig]:
        name, first, shell, cfg = kept
        extra = list(overrides[len(first) :])
        if name != config_name or shell != from_shell or tuple(overrides[: len(first)]) != first or len(extra) > 1:
            return None
        if extra and (extra[0] not in MODE_OVERRIDES or cfg.hydra.mode is not None):
            return None
        if run_mode == RunMode.RUN and "???" in OmegaConf.to_container(cfg.hydra.runtime.choices).values():
            return None  # a group left missing: the run's composition refuses it, in Hydra's words
        if validate:  # Hydra's own check of the sweep overrides, for this run mode
            parsed = OverridesParser.create().parse_overrides(overrides=list(overrides))
            self.loader.validate_sweep_overrides_legal(overrides=parsed, run_mode=run_mode, from_shell=from_shell)
        if extra:
            cfg.hydra.mode = MODE_OVERRIDES[extra[0]]
            cfg.hydra.overrides.hydra.append(extra[0])
        return cfg


def _plain(loader: Any) -> Any:
    return loader


def install() -> None:
    """From now on, the Hydra object `@hydra.main` registers composes through `ComposeOnce` (idempotent)."""
    original: Any = GlobalHydra.initialize
    if getattr(original, "compose_once", False):
        return

    def initialize(self: GlobalHydra, hydra: Any) -> None:
        original(self, hydra)
        if not isinstance(hydra.config_loader, ComposeOnce):
            hydra.config_loader = ComposeOnce(hydra.config_loader)

    initialize.compose_once = True  # type: ignore[attr-defined]
    GlobalHydra.initialize = initialize  # type: ignore[method-assign]
