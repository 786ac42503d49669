"""Makes the project's sweep presets (`<project>/sweeps/*.yaml`) the config group `sweeps`.

The presets live at the project root, next to `conf/`, not inside it. A plain `file://<project>` search-path
entry would expose every directory of the project as a config group (and make `--help` walk .venv, outputs/,
...), so the entry uses its own scheme, `sweeps://<project>`, whose source answers for the `sweeps/` subtree only.
The entry is added only for an app whose primary config directory has a sibling `sweeps/` directory.
"""
from __future__ import annotations

import os
from typing import List, Optional

from hydra._internal.core_plugins.file_config_source import FileConfigSource
from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult
from hydra.plugins.search_path_plugin import SearchPathPlugin

GROUP = "sweeps"


def _in_group(config_path: str) -> bool:
    top = config_path.strip("/").split("/")[0]
    return top == GROUP or top.startswith(GROUP + ".")  # "sweeps" group, "sweeps.yaml" never exists


class SweepsConfigSource(FileConfigSource):
    """A file source rooted at the project, restricted to its `sweeps/` directory."""

    @staticmethod
    def scheme() -> str:
        return "sweeps"

    def load_config(self, config_path: str) -> ConfigResult:
        if not _in_group(config_path):
            raise ConfigLoadError(f"Config not found : {config_path}")
        return super().load_config(config_path)

    def is_group(self, config_path: str) -> bool:
        return (config_path == "" or _in_group(config_path)) and super().is_group(config_path)

    def is_config(self, config_path: str) -> bool:
        return _in_group(config_path) and super().is_config(config_path)

    def list(self, config_path: str, results_filter: Optional[ObjectType]) -> List[str]:
        if config_path == "":
            return [GROUP] if results_filter in (None, ObjectType.GROUP) and super().is_group(GROUP) else []
        return super().list(config_path, results_filter) if _in_group(config_path) else []


class SweepsSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for entry in search_path.get_path():
            # the primary config dir: a plain path or file://path (pkg:// apps have no project root)
            if entry.provider == "main" and entry.path and "://" not in entry.path.replace("file://", "", 1):
                root = os.path.dirname(os.path.realpath(entry.path.replace("file://", "", 1)))
                if os.path.isdir(os.path.join(root, GROUP)):
                    search_path.append(provider="sweep-presets", path=f"sweeps://{root}")
                return
