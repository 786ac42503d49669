"""The registry (sweep.config.schema.CLASSES) and the config groups agree: every option file of conf/<group>/ names
a registered class that keeps its group's contract (CONTRACTS), and every registered class has its option file.
A `_target_` outside its group's contract is refused before any job, in one line."""

from __future__ import annotations

import inspect

import pytest
import yaml
from hydra.utils import get_class

from sweep.config.schema import CLASSES, CONTRACTS, SCHEMAS, UNBUILT
from sweep.errors import ConfigError
from tests.conftest import ROOT, compose

# what each contract leaves to its classes: a class that keeps the contract implements it
MUST = {"method": "solve", "problem": "generate", "variant": "step", "tracker": "summarize"}


def _schema_of(path) -> str:
    """The option a conf/<group>/<option>.yaml starts from (`/schema/<group>@_here_: <option>`)."""
    doc = yaml.safe_load(path.read_text()) or {}
    return next(v for e in doc.get("defaults", []) if isinstance(e, dict) for k, v in e.items() if "/schema/" in k)


@pytest.mark.parametrize("group", sorted(CONTRACTS))
def test_every_option_file_names_a_registered_class_that_keeps_its_contract_and_back(group):
    contract = get_class(CONTRACTS[group])
    registered = {**CLASSES[group], **UNBUILT.get(group, {})}
    files = {p.stem: p for p in sorted((ROOT / "conf" / group).glob("*.yaml"))}
    assert files and set(files) == set(registered), f"conf/{group}/ and CLASSES[{group!r}] name other options"
    for option, path in files.items():
        assert _schema_of(path) == option, f"{path.name} starts from another option's schema"
        target = (yaml.safe_load(path.read_text()) or {}).get("_target_") or registered[option]
        cls = get_class(target)
        assert issubclass(cls, contract), f"{group}={option}: {target} is not a {CONTRACTS[group]}"
        assert cls.name == option, f"{group}={option}: its class's name is {cls.name!r}"
        assert SCHEMAS[group][option].source_class == registered[option]
        if option not in UNBUILT.get(group, {}):
            own = getattr(cls, MUST[group])
            assert own is not getattr(contract, MUST[group], None), f"{target} has no {MUST[group]} of its own"
            assert not inspect.isabstract(cls)


@pytest.mark.parametrize(
    "override, group",
    [
        ("method._target_=sweep.problems.sparse_parity.SparseParity", "method"),
        ("tracker._target_=sweep.methods.gf2.GF2", "tracker"),
    ],
)
def test_a_target_outside_its_groups_contract_is_one_line_naming_the_field(override, group):
    from sweep.config.check import check_job

    with pytest.raises(ConfigError) as e:
        check_job(compose("method=gf2", override))
    key, value = override.split("=")
    assert (
        str(e.value)
        == f"{key}={value!r} is not a {group}: expected a subclass of {CONTRACTS[group]} (docs/extending.md)"
    )
