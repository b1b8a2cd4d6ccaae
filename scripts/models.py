"""Generate the contract's models (app/rules/contract/) from the OpenAPI yamls: ``make models``.

The request and response shapes of ``openapi/catalog.yaml``, ``management.yaml`` and
``events.yaml`` are written by datamodel-code-generator (pinned in requirements-test.txt), never
by hand: a yaml change is followed by ``make models`` and the diff is committed with it.
tests/unit/test_contract_models.py regenerates them into a temporary directory and fails on any
difference, so the committed files cannot drift from the yamls or from this configuration.

Every option is here, in one place, so that a regeneration reproduces the files byte for byte:
the generator runs offline (the yamls have no remote ``$ref``), without a timestamp, and formats
with the project's ruff only (pinned, its configuration in
pyproject.toml; the generated modules may exceed the line length only: the yaml's descriptions).
The overrides map the yamls' awkward schemas to types the rules own:

- ``Namespace`` (an array of levels) is a tuple: the services compare and hash namespaces.
- Lists a request model's services read as tuples, empty when absent (see ``TARGETS``).
- A scan's filter is JSON (bound by the rules); a commit's requirements and updates are
  PyIceberg's (the anyOf unions, as the rules parse them with the reference catalog's wording).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = Path("app") / "rules" / "contract"
TYPES = "app.rules.contract.shapes"

# The contract's documents: the module each yaml becomes, with its type overrides (a schema's, or
# one field's as ``Model.python_name``) and the defaults (``Model.yaml-name``) the hand-written models gave (an absent
# list is empty: ``[]`` becomes the overriding tuple).
NAMESPACE = {"Namespace": f"{TYPES}.NamespaceLevels"}
TARGETS: dict[str, dict[str, dict[str, Any]]] = {
    "catalog": {
        "overrides": {
            **NAMESPACE,
            "UpdateNamespacePropertiesRequest.removals": f"{TYPES}.Strings",
            # The filter stays JSON: the rules bind it to the scanned schema (app/rules/scan/).
            "PlanTableScanRequest.filter": f"{TYPES}.Json",
            # A commit's changes are PyIceberg's (the rules' widened update union).
            "CommitTableRequest.requirements": f"{TYPES}.TableRequirements",
            "CommitTableRequest.updates": f"{TYPES}.TableUpdates",
            # Plain values, not root models, where the services read them.
            "FetchScanTasksRequest.plan_task": f"{TYPES}.Text",
            "RemoteSignRequest.headers": f"{TYPES}.Headers",
            "FieldName": f"{TYPES}.Text",
        },
        "defaults": {
            "UpdateNamespacePropertiesRequest.removals": [],
            "UpdateNamespacePropertiesRequest.updates": {},
            "CreateNamespaceRequest.properties": {},
        },
    },
    "management": {
        "overrides": {
            **NAMESPACE,
            # The privileges and securable types are listed once, in app/rules/privileges.py
            # (tests/unit/test_layers.py); the console compares types by identity.
            "Privilege": "app.rules.privileges.Privilege",
            "SecurableType": "app.rules.privileges.SecurableType",
            "Securable.namespace": f"{TYPES}.NamespaceLevels",
            "UndropRequest.namespace": f"{TYPES}.NamespaceLevels",
            "TableMoveSource.namespace": f"{TYPES}.NamespaceLevels",
            "TableMoveTarget.namespace": f"{TYPES}.NamespaceLevels",
            "MoveTableRequest.namespace": f"{TYPES}.NamespaceLevels",
            "MoveNamespaceRequest.namespace": f"{TYPES}.NamespaceLevels",
            "NamespaceMoveTarget.namespace": f"{TYPES}.NamespaceLevels",
            "CreateWarehouseRequest.allowed_locations": f"{TYPES}.Strings",
            "UpdateWarehouseRequest.allowed_locations": f"{TYPES}.Strings",
            "EventSinkFilters.warehouses": f"{TYPES}.Strings",
            "EventSinkFilters.operation_types": f"{TYPES}.Strings",
            "EventSinkFilters.catalog_objects_by_name": f"{TYPES}.NamespacePaths",
            # Secrets never in a repr or a dump.
            "StorageSettings.access_key_id": "pydantic.SecretStr",
            "StorageSettings.secret_access_key": "pydantic.SecretStr",
            "CreateEventSinkRequest.secret": "pydantic.SecretStr",
            "KafkaSinkSettings.sasl_password": "pydantic.SecretStr",
            "FederationAuth.token": "pydantic.SecretStr",
            "FederationAuth.client_secret": "pydantic.SecretStr",
            # A policy's content is open (Polaris's config map): app/rules/maintenance.py checks it.
            "AttachPolicyRequest.content": f"{TYPES}.JsonObject",
            # Policy types are listed once, by app/rules/maintenance.py (POLICY_TYPES).
            "PolicyType": f"{TYPES}.Text",
            # A row filter is the catalog's Expression JSON, bound by the rules (app/rules/restrictions/).
            "ReadRestrictionPolicy.row_filter": f"{TYPES}.Json",
        },
        "defaults": {},
        # Behaviour the services call on the shapes: a securable's view, an update's given fields.
        "bases": {
            "Securable": f"{TYPES}.SecurableShape",
            "UpdateWarehouseRequest": f"{TYPES}.UpdateShape",
            "CreateWarehouseRequest": f"{TYPES}.UpdateShape",
        },
    },
    "events": {
        "overrides": {
            "CatalogObjectIdentifier": f"{TYPES}.NamespaceLevels",
            "QueryEventsRequest.operation_types": f"{TYPES}.Strings",
            "QueryEventsRequest.object_types": f"{TYPES}.Strings",
            "QueryEventsRequest.catalog_objects_by_uuid": f"{TYPES}.Strings",
            "QueryEventsRequest.catalog_objects_by_name": f"{TYPES}.NamespacePaths",
        },
        "defaults": {
            "QueryEventsRequest.operation-types": [],
            "QueryEventsRequest.object-types": [],
            "QueryEventsRequest.catalog-objects-by-uuid": [],
            "QueryEventsRequest.catalog-objects-by-name": [],
            "QueryEventsRequest.custom-filters": {},
        },
    },
}

OPTIONS = [
    "--input-file-type=openapi",
    "--output-model-type=pydantic_v2.BaseModel",
    f"--base-class={TYPES}.ContractModel",
    "--strict-nullable",
    "--target-python-version=3.11",
    "--snake-case-field",
    "--use-annotated",
    "--use-standard-collections",
    "--use-union-operator",
    "--use-double-quotes",
    "--disable-timestamp",
    "--no-formatters",
    "--no-use-field-description",
    "--enum-field-as-literal=all",
]


def header(name: str) -> str:
    return (
        f"# Generated from openapi/{name}.yaml by scripts/models.py (`make models`): do not edit.\n"
        "# tests/unit/test_contract_models.py fails when this file differs from a regeneration."
    )


def command(name: str, output: Path) -> list[str]:
    """The generator's command line for one yaml, writing ``output``."""
    return [
        sys.executable,
        "-m",
        "datamodel_code_generator",
        f"--input={ROOT / 'openapi' / f'{name}.yaml'}",
        f"--output={output}",
        f"--type-overrides={json.dumps(TARGETS[name]['overrides'], sort_keys=True)}",
        f"--default-values={json.dumps(TARGETS[name]['defaults'], sort_keys=True)}",
        f"--base-class-map={json.dumps(TARGETS[name].get('bases', {}), sort_keys=True)}",
        f"--custom-file-header={header(name)}",
        *OPTIONS,
    ]


def generate(directory: Path) -> list[Path]:
    """Every contract module written into ``directory``; the paths written. Formatted by ruff as
    the committed file is (its path given, so that pyproject.toml's settings apply wherever the
    output goes)."""
    written = []
    for name in TARGETS:
        output = directory / f"{name}.py"
        subprocess.run(command(name, output), cwd=ROOT, check=True, capture_output=True, text=True)
        output.write_text(formatted(output.read_text(), CONTRACT / f"{name}.py"))
        written.append(output)
    return written


def formatted(source: str, path: Path) -> str:
    """``source`` through ``ruff check --fix`` and ``ruff format`` as the file at ``path``."""
    for step in (["check", "--fix", "--exit-zero", "--quiet"], ["format", "--quiet"]):
        ruff = [sys.executable, "-m", "ruff", *step, "--stdin-filename", str(path), "-"]
        source = subprocess.run(ruff, cwd=ROOT, input=source, check=True, capture_output=True, text=True).stdout
    return source


if __name__ == "__main__":
    for path in generate(ROOT / CONTRACT):
        print(path.relative_to(ROOT))
