"""The rules of a function metadata document (UDF format version 1). Pure: no I/O.

The shape comes from the contract (``FunctionMetadata`` in openapi/catalog.yaml, checked by
jsonschema); these are the rules a schema cannot say: ids unique, the current version among the
versions, the definition log naming definitions and versions that exist, and a definition id
derived from its parameter types (comma-separated, no spaces).
"""

from __future__ import annotations

from typing import Any

from app.ground.errors import BadRequest

FORMAT_VERSION = 1


def primitive_definition_id(parameters: list[dict[str, Any]]) -> str | None:
    """The definition id of parameters of primitive types (their type strings joined by commas),
    or None when a parameter has a nested type, whose canonical spelling the contract leaves open."""
    types = [parameter["type"] for parameter in parameters]
    return ",".join(types) if all(isinstance(t, str) for t in types) else None


def check_function_metadata(document: dict[str, Any]) -> None:
    """Raise BadRequest (400) naming the first rule ``document`` breaks; it already fits the schema."""
    if document["format-version"] != FORMAT_VERSION:
        raise BadRequest(f"Unsupported function metadata format version: {document['format-version']}")
    definitions: dict[str, set[int]] = {}
    names: set[str] = set()
    for definition in document["definitions"]:
        definition_id = definition["definition-id"]
        if definition_id in definitions:
            raise BadRequest(f"Invalid function metadata: duplicate definition-id {definition_id!r}")
        expected = primitive_definition_id(definition["parameters"])
        if expected is not None and definition_id != expected:
            raise BadRequest(
                f"Invalid function metadata: definition-id {definition_id!r} does not match"
                f" its parameter types {expected!r}"
            )
        specific = definition.get("specific-name")
        if specific is not None:
            if specific in names:
                raise BadRequest(f"Invalid function metadata: duplicate specific-name {specific!r}")
            names.add(specific)
        versions = [version["version-id"] for version in definition["versions"]]
        if len(set(versions)) != len(versions):
            raise BadRequest(f"Invalid function metadata: duplicate version-id in definition {definition_id!r}")
        if definition["current-version-id"] not in versions:
            raise BadRequest(
                f"Invalid function metadata: current-version-id {definition['current-version-id']} of definition "
                f"{definition_id!r} is not one of its versions"
            )
        if definition["function-type"] == "udtf" and not _is_struct(definition["return-type"]):
            raise BadRequest(f"Invalid function metadata: table function {definition_id!r} must return a struct")
        definitions[definition_id] = set(versions)
    for entry in document["definition-log"]:
        for reference in entry["definition-versions"]:
            known = definitions.get(reference.get("definition-id"))
            if known is None or reference.get("version-id") not in known:
                raise BadRequest(
                    f"Invalid function metadata: definition-log names an unknown definition version {reference}"
                )


def _is_struct(data_type: Any) -> bool:
    return isinstance(data_type, dict) and data_type.get("type") == "struct"
