"""Makes the project's sweep presets (`<project>/sweeps/*.yaml`) the config group `sweeps`.

The presets live at the project root, next to `conf/`, not inside it. A plain `file://<project>` search-path
entry would expose every directory of the project as a config group (and make `--help` walk .venv, outputs/,
...), so the entry uses its own scheme, `sweeps://<project>`, whose source answers for the `sweeps/` subtree
only. The entry is added only for an app whose primary config directory has a sibling `sweeps/` directory.
Both halves are Hydra's public plugin interfaces (`SearchPathPlugin`, `ConfigSource`); the source reads YAML
files as Hydra's file source does, header (`# @package ...`) included.
"""

from __future__ import annotations

import os
from typing import List, Optional

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

GROUP = "sweeps"


def _in_group(config_path: str) -> bool:
    top = config_path.strip("/").split("/")[0]
    return top == GROUP or top.startswith(GROUP + ".")  # "sweeps" group, "sweeps.yaml" never exists


class SweepsConfigSource(ConfigSource):
    """A file source rooted at the project, restricted to its `sweeps/` directory."""

    @staticmethod
    def scheme() -> str:
        return "sweeps"

    def _file(self, config_path: str) -> str:
        return os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))

    def _dir(self, config_path: str) -> str:
        return os.path.realpath(os.path.join(self.path, config_path))

    def load_config(self, config_path: str) -> ConfigResult:
        full_path = self._file(config_path)
        if not _in_group(config_path) or not os.path.isfile(full_path):
            raise ConfigLoadError(f"Config not found : {config_path}")
        with open(full_path, encoding="utf-8") as f:
            header = self._get_header_dict(f.read(512))
            f.seek(0)
            return ConfigResult(config=OmegaConf.load(f), path=self.full_path(), provider=self.provider, header=header)

    def available(self) -> bool:
        return os.path.isdir(self._dir(GROUP))

    def is_group(self, config_path: str) -> bool:
        return (config_path == "" or _in_group(config_path)) and os.path.isdir(self._dir(config_path))

    def is_config(self, config_path: str) -> bool:
        return _in_group(config_path) and os.path.isfile(self._file(config_path))

    def list(self, config_path: str, results_filter: Optional[ObjectType]) -> List[str]:
        if config_path == "":
            return [GROUP] if results_filter in (None, ObjectType.GROUP) and self.available() else []
        if not _in_group(config_path):
            return []
        files: List[str] = []
        for name in os.listdir(self._dir(config_path)):
            self._list_add_result(
                files=files, file_path=os.path.join(config_path, name), file_name=name, results_filter=results_filter
            )
        return sorted(set(files))


class SweepsSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for entry in search_path.get_path():
            # the primary config dir: a plain path or file://path (pkg:// apps have no project root)
            if entry.provider == "main" and entry.path and "://" not in entry.path.replace("file://", "", 1):
                root = os.path.dirname(os.path.realpath(entry.path.replace("file://", "", 1)))
                if os.path.isdir(os.path.join(root, GROUP)):
                    search_path.append(provider="sweep-presets", path=f"sweeps://{root}")
                return
