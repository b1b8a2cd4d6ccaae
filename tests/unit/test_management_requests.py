"""The management API's request models (app/rules/requests/management.py) against the yaml they are
written from: every property of a request schema is a field of its model (by its yaml name), the
required ones are required, and the enums are the yaml's. A handler's annotation names the model."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from app.edge.operations import body_model_of
from app.rules.privileges import Privilege
from app.rules.requests import management as requests
from app.rules.requests.management import SecurableType
from handlers import management as handlers

SPEC = yaml.safe_load((Path(__file__).resolve().parents[2] / "openapi" / "management.yaml").read_text())
SCHEMAS = SPEC["components"]["schemas"]

MODELS: dict[str, type[BaseModel]] = {
    "CreatePrincipalRequest": requests.CreatePrincipalRequest,
    "CreateRoleRequest": requests.CreateRoleRequest,
    "GrantRequest": requests.GrantRequest,
    "Securable": requests.SecurableRef,
    "ProtectionMark": requests.SecurableRef,
    "StorageSettings": requests.StorageSettings,
    "DeletionPolicy": requests.DeletionPolicySettings,
    "CreateWarehouseRequest": requests.CreateWarehouseRequest,
    "UpdateWarehouseRequest": requests.UpdateWarehouseRequest,
    "UndropRequest": requests.UndropRequest,
    "CreateEventSinkRequest": requests.CreateEventSinkRequest,
    "KafkaSinkSettings": requests.KafkaSinkSettings,
    "EventSinkFilters": requests.EventSinkFilters,
    "AttachPolicyRequest": requests.AttachPolicyRequest,
    "DetachPolicyRequest": requests.DetachPolicyRequest,
    "RunRequest": requests.RunRequest,
}


def _fields(model: type[BaseModel]) -> dict[str, typing.Any]:
    return {field.alias or name: field for name, field in model.model_fields.items()}


@pytest.mark.parametrize("schema", sorted(MODELS))
def test_each_model_has_the_schemas_fields(schema: str) -> None:
    declared, fields = SCHEMAS[schema], _fields(MODELS[schema])
    assert set(declared["properties"]) <= set(fields), schema
    if schema != "ProtectionMark":  # the shared SecurableRef: a mark's warehouse is the path's
        assert set(fields) == set(declared["properties"]), schema
    for name in declared.get("required", []):
        assert fields[name].is_required(), (schema, name)


def _literal_values(model: type[BaseModel], field: str) -> set[str]:
    """The values of a field's ``Literal`` (of ``Literal[...] | None`` too)."""

    def values(annotation: typing.Any) -> set[str]:
        if typing.get_origin(annotation) is typing.Literal:
            return set(typing.get_args(annotation))
        return {value for arg in typing.get_args(annotation) for value in values(arg)}

    return values(_fields(model)[field].annotation)


def test_the_enums_are_the_yamls() -> None:
    assert [kind.value for kind in SecurableType] == SCHEMAS["SecurableType"]["enum"]
    assert [privilege.value for privilege in Privilege] == SCHEMAS["Privilege"]["enum"]
    assert _fields(requests.GrantRequest)["privilege"].annotation is Privilege
    kafka = SCHEMAS["KafkaSinkSettings"]["properties"]
    assert _literal_values(requests.KafkaSinkSettings, "security-protocol") == set(kafka["security-protocol"]["enum"])
    assert _literal_values(requests.KafkaSinkSettings, "sasl-mechanism") == set(kafka["sasl-mechanism"]["enum"])
    kinds = SCHEMAS["CreateEventSinkRequest"]["properties"]["kind"]["enum"]
    assert _literal_values(requests.CreateEventSinkRequest, "kind") == set(kinds)
    modes = SCHEMAS["DeletionPolicy"]["properties"]["mode"]["enum"]
    assert _literal_values(requests.DeletionPolicySettings, "mode") == set(modes)


def test_every_management_operation_with_a_body_takes_a_model() -> None:
    """The handler of each operation with a request body annotates it, so the dispatcher parses
    it once into that model (app/edge/operations.py ``body_model_of``)."""
    for path in SPEC["paths"].values():
        for operation in path.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                handler = getattr(handlers, _snake(operation["operationId"]))
                assert body_model_of(handler) is not None, operation["operationId"]


def _snake(operation_id: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation_id)


def test_secrets_never_show_in_a_model_or_its_dump() -> None:
    body = {
        "name": "k",
        "kind": "kafka",
        "url": "kafka://h:9092",
        "kafka": {"topic": "t", "security-protocol": "sasl_ssl", "sasl-password": "hunter2-hunter2"},
    }
    sink = requests.CreateEventSinkRequest.model_validate(body)
    assert "hunter2" not in repr(sink) and "hunter2" not in sink.model_dump_json()
    storage = requests.StorageSettings.model_validate({"access-key-id": "AKIA1", "secret-access-key": "s3cr3t"})
    assert "s3cr3t" not in repr(storage) and "s3cr3t" not in storage.model_dump_json()
