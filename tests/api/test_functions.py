"""Functions: registered from an existing metadata file, then listed and loaded through the REST API."""

from __future__ import annotations

import copy
import gzip
import json
import uuid

import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from scripts import functions as functions_cli
from tests.api.tables_support import PREFIX
from tests.conftest import TEST_BUCKET

FUNCTION: dict = {
    "function-uuid": "42fd3f91-bc10-41c1-8a52-92b57dd0a9b2",
    "format-version": 1,
    "definitions": [
        {
            "definition-id": "int,int",
            "parameters": [{"name": "x", "type": "int"}, {"name": "y", "type": "int"}],
            "return-type": "int",
            "function-type": "udf",
            "current-version-id": 2,
            "versions": [
                {
                    "version-id": 1,
                    "timestamp-ms": 1,
                    "representations": [{"type": "sql", "dialect": "spark", "sql": "x + y"}],
                },
                {
                    "version-id": 2,
                    "timestamp-ms": 2,
                    "deterministic": True,
                    "representations": [{"type": "sql", "dialect": "spark", "sql": "x + y + 0"}],
                },
            ],
        },
        {
            "definition-id": "list<int>",
            "parameters": [{"name": "xs", "type": {"type": "list", "element": "int"}}],
            "return-type": {"type": "struct", "fields": [{"name": "n", "type": "int"}]},
            "function-type": "udtf",
            "current-version-id": 1,
            "versions": [
                {
                    "version-id": 1,
                    "timestamp-ms": 1,
                    "representations": [{"type": "sql", "dialect": "spark", "sql": "SELECT size(xs) AS n"}],
                }
            ],
        },
    ],
    "definition-log": [
        {
            "timestamp-ms": 2,
            "definition-versions": [
                {"definition-id": "int,int", "version-id": 2},
                {"definition-id": "list<int>", "version-id": 1},
            ],
        },
    ],
    "properties": {"owner": "analytics"},
    "doc": "adds",
}


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["udfs"]}).status_code == 200
    return ("udfs",)


@pytest.fixture
def service(app):
    return services_of(app.app).functions


@pytest.fixture
def objects(app):
    return services_of(app.app).namespaces.objects


def put_file(objects, document, name: str | None = None, gz: bool = False) -> str:
    name = name or f"{uuid.uuid4()}.{'gz.' if gz else ''}metadata.json"
    uri = f"s3://{TEST_BUCKET}/functions/{name}"
    data = json.dumps(document).encode()
    objects.write_new(Location.parse(uri), gzip.compress(data) if gz else data)
    return uri


def functions_url(namespace: str = "udfs") -> str:
    return f"{PREFIX}/namespaces/{namespace}/functions"


def test_config_advertises_list_and_load(client):
    endpoints = client.get("/v1/config").json()["endpoints"]
    assert "GET /v1/{prefix}/namespaces/{namespace}/functions" in endpoints
    assert "GET /v1/{prefix}/namespaces/{namespace}/functions/{function}" in endpoints


def test_registered_function_loads_as_written(client, ns, service, objects):
    uri = put_file(objects, FUNCTION, gz=True)
    service.register("test", ns, "add", uri)
    response = client.get(f"{functions_url()}/add")
    assert response.status_code == 200, response.text
    assert response.json() == {"metadata-location": uri, "metadata": FUNCTION}
    assert client.get(functions_url()).json() == {"identifiers": [["udfs", "add"]]}


def test_cli_registers_and_drops(client, ns, settings, objects, capsys):
    uri = put_file(objects, FUNCTION)
    assert functions_cli.main(["register", "test", "udfs", "f", uri], settings=settings) == 0
    assert "registered udfs.f" in capsys.readouterr().out
    assert client.get(f"{functions_url()}/f").status_code == 200
    assert functions_cli.main(["register", "test", "udfs", "f", uri], settings=settings) == 1
    assert "AlreadyExistsException" in capsys.readouterr().err
    assert functions_cli.main(["drop", "test", "udfs", "f"], settings=settings) == 0
    missing = client.get(f"{functions_url()}/f")
    assert (missing.status_code, missing.json()["error"]["type"]) == (404, "NoSuchFunctionException")
    assert objects.exists(Location.parse(uri))  # the file is the platform team's, never deleted


def test_pagination(client, ns, service, objects):
    uri = put_file(objects, FUNCTION)
    names = [f"f{i:02d}" for i in range(7)]
    for name in reversed(names):
        service.register("test", ns, name, uri)
    seen, token = [], ""
    while True:
        page = client.get(functions_url(), params={"pageToken": token, "pageSize": 3}).json()
        seen += [identifier[-1] for identifier in page["identifiers"]]
        token = page.get("next-page-token")
        if not token:
            break
    assert seen == names
    assert client.get(functions_url(), params={"pageToken": "%%%"}).status_code == 400


def test_missing_namespace_and_function_are_404(client, ns):
    missing_ns = client.get(functions_url("nope"))
    assert (missing_ns.status_code, missing_ns.json()["error"]["type"]) == (404, "NoSuchNamespaceException")
    missing_ns_load = client.get(f"{functions_url('nope')}/f")
    assert missing_ns_load.json()["error"]["type"] == "NoSuchNamespaceException"
    missing = client.get(f"{functions_url()}/f")
    assert (missing.status_code, missing.json()["error"]["type"]) == (404, "NoSuchFunctionException")
    assert missing.json()["error"]["message"] == "Function does not exist: udfs.f"


def test_a_namespace_holding_functions_is_not_dropped(client, ns, service, objects):
    service.register("test", ns, "f", put_file(objects, FUNCTION))
    assert client.delete(f"{PREFIX}/namespaces/udfs").status_code == 409
    service.drop("test", ns, "f")
    assert client.delete(f"{PREFIX}/namespaces/udfs").status_code == 204


def broken(**changes):
    document = copy.deepcopy(FUNCTION)
    for path, value in changes.items():
        target = document
        *parents, last = path.split(".")
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return document


@pytest.mark.parametrize(
    "document, message",
    [
        (broken(**{"format-version": 2}), "format-version"),
        (broken(**{"definitions": None}), "'definitions' is a required property"),
        (broken(**{"definitions.0.function-type": "udaf"}), "function-type"),
        (broken(**{"definitions.0.definition-id": "int"}), "does not match its parameter types"),
        (broken(**{"definitions.0.current-version-id": 9}), "is not one of its versions"),
        (broken(**{"definitions.1.return-type": "int"}), "must return a struct"),
        (
            broken(
                **{
                    "definitions.1.definition-id": "int,int",
                    "definitions.1.parameters": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}],
                }
            ),
            "duplicate definition-id",
        ),
        (
            broken(**{"definition-log.0.definition-versions": [{"definition-id": "int,int", "version-id": 7}]}),
            "unknown definition version",
        ),
        ([1, 2], "Invalid function metadata"),
    ],
)
def test_invalid_metadata_is_refused(client, ns, service, objects, document, message):
    from app.ground.errors import BadRequest

    with pytest.raises(BadRequest) as refused:
        service.register("test", ns, "bad", put_file(objects, document))
    assert message in refused.value.message
    assert client.get(functions_url()).json()["identifiers"] == []


@pytest.mark.parametrize(
    "location, message",
    [
        ("s3://other-bucket/f.metadata.json", "outside the warehouse"),
        (f"s3://{TEST_BUCKET}/functions/missing.metadata.json", "does not exist"),
        (f"s3://{TEST_BUCKET}/functions/x?.metadata.json", "not allowed in a location"),
    ],
)
def test_bad_locations_are_refused(client, ns, service, location, message):
    from app.ground.errors import BadRequest

    with pytest.raises(BadRequest) as refused:
        service.register("test", ns, "bad", location)
    assert message in refused.value.message
