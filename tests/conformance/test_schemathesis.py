"""Schemathesis over every operation Growler implements: no 5xx, every response as the yaml says.

A real gunicorn serves the app (real HTTP, response validation on). The operations are the ones
``/v1/config`` advertises (``app.edge.resolver.implemented_endpoints``, the function behind it), so a
newly implemented operation is tested without touching this file. For each operation and each
generation mode, Hypothesis draws requests from the yaml through schemathesis:

- positive data (requests the yaml allows): no 5xx; status code, content type and body as the
  yaml declares them;
- negative data (requests the yaml forbids): the same, and the answer must be a 4xx.

``{prefix}`` is always the test warehouse (a random prefix only ever reaches 404
NoSuchWarehouse). A seeded namespace, table and view (once views are served) exist before every
operation, and part of the draws are steered at them - ``namespace``/``table``/``view`` path
parameters, and the identifiers and files named in create, register, rename and commit bodies -
so loadTable, updateTable, dropTable, ... run against something that exists. A request that
removed the seed is followed by re-seeding. Failures are collected, not raised (no shrinking):
one report per kind of failure, each with the operation, the failure, a curl command that
reproduces it and, for a 5xx, the server's log record.

``GROWLER_SCHEMATHESIS_EXAMPLES`` sets the number of requests per operation and mode.
"""

from __future__ import annotations

import copy
import os
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.errors import InvalidSchema
from schemathesis.core.failures import FailureGroup
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from app.edge.factory import load_spec
from app.edge.resolver import implemented_endpoints
from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET, auth_env_for_tests
from tests.integration.conftest import Server, start_server, stop_server

EXAMPLES = int(os.environ.get("GROWLER_SCHEMATHESIS_EXAMPLES", "20"))

WAREHOUSE = "test"  # the `settings` fixture's warehouse
SEED_NAMESPACE = "sch"
SEED_TABLE = "tbl"
SEED_VIEW = "vw"
SEED_SCHEMA = {
    "type": "struct",
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "data", "type": "string", "required": False},
    ],
}
SEED_VIEW_VERSION = {
    "version-id": 1,
    "timestamp-ms": 1_700_000_000_000,
    "schema-id": 0,
    "summary": {"engine-name": "spark", "engine-version": "3.5"},
    "default-namespace": [SEED_NAMESPACE],
    "representations": [{"type": "sql", "sql": f"SELECT id, data FROM {SEED_TABLE}", "dialect": "spark"}],
}

POSITIVE_CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
CHECKS = {
    GenerationMode.POSITIVE: POSITIVE_CHECKS,
    GenerationMode.NEGATIVE: [*POSITIVE_CHECKS, negative_data_rejection],
}

# What /v1/config advertises, computed by the same function, at collection time.
ENDPOINTS = implemented_endpoints(load_spec())
VIEWS = "POST /v1/{prefix}/namespaces/{namespace}/views" in ENDPOINTS


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def live(settings, app, tmp_path_factory) -> Iterator[Server]:
    # `app` first: it migrates the database, so the workers start against a ready schema
    running = start_server(settings, tmp_path_factory.mktemp("schemathesis-gunicorn"), auth_env_for_tests())
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def http(live) -> Iterator[requests.Session]:
    """Every request with the test admin's token (the server authenticates)."""
    with requests.Session() as session:
        token = session.post(
            f"{live.url}/v1/oauth/tokens",
            data={"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": TEST_CLIENT_SECRET},
        )
        session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        yield session


@pytest.fixture(scope="module")
def operations() -> dict[str, Any]:
    schema = schemathesis.openapi.from_dict(load_spec())
    schema.config.output.sanitization.update(enabled=False)  # a reproduction needs the real header values
    return {op.label: op for op in (result.ok() for result in schema.get_all_operations())}


@dataclass
class Seed:
    """The namespace, table (and view, once views are served) that steered requests point at."""

    base_url: str
    http: requests.Session
    metadata_location: str = ""
    view_metadata_location: str = ""

    def ensure(self) -> None:
        """(Re-)create them if a request dropped or moved them."""
        base = f"{self.base_url}/v1/{WAREHOUSE}/namespaces"
        ns = self.http.post(base, json={"namespace": [SEED_NAMESPACE], "properties": {"owner": "schemathesis"}})
        assert ns.status_code in (200, 409), ns.text
        self.metadata_location = self._entry("tables", {"name": SEED_TABLE, "schema": SEED_SCHEMA})
        if VIEWS:
            view = {"name": SEED_VIEW, "schema": SEED_SCHEMA, "view-version": SEED_VIEW_VERSION, "properties": {}}
            self.view_metadata_location = self._entry("views", view)

    def _entry(self, kind: str, create: dict) -> str:
        url = f"{self.base_url}/v1/{WAREHOUSE}/namespaces/{SEED_NAMESPACE}/{kind}"
        found = self.http.get(f"{url}/{create['name']}")
        if found.status_code == 404:
            found = self.http.post(url, json=create)
        assert found.status_code == 200, found.text
        return found.json()["metadata-location"]


@pytest.fixture
def seed(live, http) -> Seed:
    seeded = Seed(live.url, http)
    seeded.ensure()
    return seeded


# --------------------------------------------------------------------------- steering
#
# Each request draws a `choice`: 0 sends what schemathesis generated, 1 and 2 point it more and
# more at the seed (and give it a fresh Idempotency-Key). In negative mode the negated part of a
# request is never touched (replacing it could make the request valid).


def _steer_path(case: Case, choice: int) -> None:
    params = case.path_parameters
    if choice >= 1 and "namespace" in params:
        params["namespace"] = SEED_NAMESPACE
    if choice >= 2 and "table" in params:
        params["table"] = SEED_TABLE
    if choice >= 2 and "view" in params:
        params["view"] = SEED_VIEW


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _usable_name(body: dict) -> None:
    body["name"] = _CONTROL.sub("", body["name"]) if isinstance(body.get("name"), str) else ""
    body["name"] = body["name"] or "created"


def _steer_create_table(body: dict, choice: int, seed: Seed) -> None:
    body["schema"] = copy.deepcopy(SEED_SCHEMA)
    if choice >= 2:  # random names, specs, orders and locations are nearly always refused: create something
        _usable_name(body)
        for key in ("location", "partition-spec", "write-order"):
            body.pop(key, None)


def _steer_create_view(body: dict, choice: int, seed: Seed) -> None:
    body["schema"] = copy.deepcopy(SEED_SCHEMA)
    if choice >= 2:
        _usable_name(body)
        body["view-version"] = copy.deepcopy(SEED_VIEW_VERSION)
        body.pop("location", None)


def _steer_register(metadata_location: Callable[[Seed], str]) -> Callable[[dict, int, Seed], None]:
    def steer_register(body: dict, choice: int, seed: Seed) -> None:
        body["metadata-location"] = metadata_location(seed)

    return steer_register


def _steer_rename(source: str) -> Callable[[dict, int, Seed], None]:
    def steer_rename(body: dict, choice: int, seed: Seed) -> None:
        body["source"] = {"namespace": [SEED_NAMESPACE], "name": source}
        if choice >= 2 and isinstance(body.get("destination"), dict):
            body["destination"]["namespace"] = [SEED_NAMESPACE]

    return steer_rename


def _steer_commit(body: dict, choice: int, seed: Seed) -> None:
    if choice >= 2:  # generated requirements nearly always fail: let the generated updates be applied
        body["requirements"] = []


def _steer_transaction(body: dict, choice: int, seed: Seed) -> None:
    changes = body.get("table-changes")
    if choice >= 2 and changes == []:  # the most common draw; a transaction needs a change
        changes.append({"requirements": [], "updates": []})
    for change in changes if isinstance(changes, list) else []:
        if isinstance(change, dict):
            change["identifier"] = {"namespace": [SEED_NAMESPACE], "name": SEED_TABLE}
            _steer_commit(change, choice, seed)


BODY_STEERING: dict[str, Callable[[dict, int, Seed], None]] = {
    "createTable": _steer_create_table,
    "registerTable": _steer_register(lambda seed: seed.metadata_location),
    "renameTable": _steer_rename(SEED_TABLE),
    "updateTable": _steer_commit,
    "commitTransaction": _steer_transaction,
    "createView": _steer_create_view,
    "registerView": _steer_register(lambda seed: seed.view_metadata_location),
    "renameView": _steer_rename(SEED_VIEW),
    "replaceView": _steer_commit,
}


def _may_steer(case: Case, location: ParameterLocation) -> bool:
    meta = case.meta
    info = meta.components.get(location) if meta is not None else None
    return info is None or info.mode.is_positive


def steer(case: Case, choice: int, seed: Seed) -> None:
    if choice == 0:
        return
    if _may_steer(case, ParameterLocation.PATH):
        _steer_path(case, choice)
    if "Idempotency-Key" in case.headers and _may_steer(case, ParameterLocation.HEADER):
        # generated keys repeat (often the yaml's example), and reusing a key for another request is
        # refused before the operation runs; a fresh key per request, as clients send
        case.headers["Idempotency-Key"] = str(uuid.uuid4())
    steer_body = BODY_STEERING.get(case.operation.schema.get_operation_id(case.operation) or "")
    if steer_body and isinstance(case.body, dict) and _may_steer(case, ParameterLocation.BODY):
        steer_body(case.body, choice, seed)


# --------------------------------------------------------------------------- the run

_REQUEST_ID = re.compile(r"request id ([0-9A-Za-z._:-]+)")


def server_log_excerpt(server: Server, response: schemathesis.Response) -> str:
    """The server's log record of a 5xx (found by its request id): our frames and the exception."""
    found = _REQUEST_ID.search(response.text_lossy())
    echoed = {name.lower(): values for name, values in response.headers.items()}.get("x-request-id") or [None]
    request_id = found.group(1) if found else echoed[0]
    lines = server.log().splitlines() if request_id else []
    start = next((i for i, line in enumerate(lines) if f"request {request_id}" in line), None)
    if start is None:
        return ""
    end = start + 1
    while end < len(lines) and (lines[end].startswith((" ", "Traceback")) or not lines[end][:1].isalnum()):
        end += 1
    record = lines[start : end + 1]  # through the exception line
    calls = [i for i, line in enumerate(record) if line.lstrip().startswith('File "')]
    ours = [i for i in calls if "site-packages" not in record[i] and "/lib/python" not in record[i]]
    shown = sorted({*ours[-4:], *calls[-1:]})  # our innermost frames and where it was raised
    frames = [line for i in shown for line in record[i : min(i + 2, len(record) - 1)] if "^^^" not in line]
    return "\n\nServer log:\n    " + "\n    ".join([record[0], *frames, record[-1]])


@dataclass
class Findings:
    label: str
    mode: GenerationMode
    failures: dict[tuple, str] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)
    not_generated: dict[str, int] = field(default_factory=dict)

    def add(self, key: tuple, message: str) -> None:
        self.failures.setdefault(key, message)

    def summary(self) -> str:
        statuses = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        lost = f"; draws schemathesis could not build: {self.not_generated}" if self.not_generated else ""
        return f"{self.label} ({self.mode.value}): {sum(self.statuses.values())} requests {{{statuses}}}{lost}"

    def report(self) -> str:
        return f"{len(self.failures)} kind(s) of failure; {self.summary()}\n\n" + "\n\n".join(self.failures.values())


def _buildable(cases: st.SearchStrategy, findings: Findings) -> st.SearchStrategy:
    """Skip the draws schemathesis cannot build: some negative mutations of our schemas are unsatisfiable
    ("Cannot generate an array with 1 demanded elements"). They are counted in the summary."""

    @st.composite
    def draw_case(draw: st.DrawFn) -> Case:
        try:
            return draw(cases)
        except InvalidSchema as exc:
            reason = str(exc).splitlines()[0]
            findings.not_generated[reason] = findings.not_generated.get(reason, 0) + 1
            hypothesis.reject()

    return draw_case()


def run_operation(operation, mode: GenerationMode, seed: Seed, server: Server, http: requests.Session) -> Findings:
    findings = Findings(operation.label, mode)
    cases = operation.as_strategy(generation_mode=mode, path_parameters={"prefix": WAREHOUSE})

    @hypothesis.settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @hypothesis.given(case=_buildable(cases, findings), choice=st.integers(0, 2))
    def one_request(case: Case, choice: int) -> None:
        steer(case, choice, seed)
        try:
            response = case.call(base_url=server.url, session=http, timeout=30)
        except requests.RequestException as exc:
            findings.add(("network", type(exc).__name__), f"[{operation.label}, {mode.value} data] {exc!r}")
            return
        findings.statuses[response.status_code] = findings.statuses.get(response.status_code, 0) + 1
        try:
            case.validate_response(response, checks=CHECKS[mode])
        except FailureGroup as group:
            excerpt = server_log_excerpt(server, response) if response.status_code >= 500 else ""
            cause = excerpt.rsplit("\n", 1)[-1].strip().split(":")[0]  # e.g. psycopg.DataError: one report per cause
            key = (*sorted((type(f).__name__, response.status_code) for f in group.exceptions), cause)
            findings.add(key, f"[{operation.label}, {mode.value} data] {group.message.rstrip()}{excerpt}")
        if case.method not in ("GET", "HEAD") and response.status_code < 300:
            seed.ensure()

    one_request()
    return findings


# getToken is advertised (Growler issues tokens) and served in front of connexion, with RFC 6749
# bodies rather than Iceberg's: tests/api/test_auth_tokens.py covers it, schemathesis the rest.
TOKEN_ENDPOINT = "POST /v1/oauth/tokens"


def test_covers_every_advertised_operation(live, http, operations):
    advertised = http.get(f"{live.url}/v1/config", params={"warehouse": WAREHOUSE}).json()["endpoints"]
    assert TOKEN_ENDPOINT in advertised
    assert sorted(set(advertised) - {TOKEN_ENDPOINT}) == sorted(ENDPOINTS), (
        "test_operation_conforms must run over what /v1/config lists"
    )
    assert set(ENDPOINTS) <= set(operations), "advertised operations missing from the yaml"


def test_without_a_token_every_operation_is_401(live, http):
    advertised = http.get(f"{live.url}/v1/config", params={"warehouse": WAREHOUSE}).json()["endpoints"]
    values = {"prefix": WAREHOUSE, "namespace": SEED_NAMESPACE, "table": SEED_TABLE, "view": SEED_VIEW}
    for endpoint in advertised:
        method, path = endpoint.split(" ", 1)
        url = live.url + re.sub(r"\{([^}]+)\}", lambda m: values.get(m.group(1), "x"), path)
        response = requests.request(method, url, json={} if method in ("POST", "PUT") else None, timeout=30)
        if endpoint == TOKEN_ENDPOINT:  # where a token is got: an OAuth error, no Bearer challenge
            assert response.status_code in (400, 401), response.text
            assert response.json()["error"] in ("invalid_request", "invalid_client", "unsupported_grant_type")
            continue
        assert response.status_code == 401, (endpoint, response.status_code)
        assert response.headers["www-authenticate"].startswith("Bearer"), endpoint


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_operation_conforms(live, http, operations, seed, endpoint: str, mode: GenerationMode):
    findings = run_operation(operations[endpoint], mode, seed, live, http)
    print(findings.summary())
    if findings.failures:
        pytest.fail(findings.report(), pytrace=False)
    assert findings.statuses, f"nothing was sent: {findings.summary()}"
