"""The contract's models are generated (issue 48): the committed app/rules/contract/{catalog,
management,events}.py are what scripts/models.py makes from openapi/*.yaml, byte for byte. A yaml
changed without ``make models``, or a generated file edited by hand, fails here (offline: the
yamls have no remote reference)."""

from __future__ import annotations

import difflib

import pytest

from scripts import models

CONTRACT = models.ROOT / models.CONTRACT


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("contract")
    return {path.name: path.read_text() for path in models.generate(directory)}


@pytest.mark.parametrize("name", sorted(models.TARGETS))
def test_the_committed_models_are_the_generated_ones(name: str, regenerated: dict[str, str]) -> None:
    committed = (CONTRACT / f"{name}.py").read_text()
    generated = regenerated[f"{name}.py"]
    diff = "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True), generated.splitlines(keepends=True), "committed", "regenerated", n=1
        )
    )
    assert committed == generated, f"app/rules/contract/{name}.py differs from `make models`:\n{diff[:4000]}"


def test_every_schema_of_every_yaml_is_generated() -> None:
    """The generator drops nothing: each yaml's object schema is a class of its module (or an
    override, which scripts/models.py names)."""
    import importlib

    import yaml

    for name in models.TARGETS:
        spec = yaml.safe_load((models.ROOT / "openapi" / f"{name}.yaml").read_text())
        module = importlib.import_module(f"app.rules.contract.{name}")
        overridden = {key for key in models.TARGETS[name]["overrides"] if "." not in key}
        missing = [
            schema
            for schema, body in spec["components"]["schemas"].items()
            if body.get("type") == "object" and "properties" in body and schema not in overridden
            if not hasattr(module, schema)
        ]
        assert not missing, f"{name}.yaml: schemas without a model: {missing}"
