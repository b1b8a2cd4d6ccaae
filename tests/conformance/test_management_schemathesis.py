"""Schemathesis over the management API (openapi/management.yaml) with an admin token: no 5xx,
every response as the yaml says, every request the yaml forbids a 4xx.

The same run as tests/conformance/test_schemathesis.py (a real gunicorn, the checks, failures
collected and reported with a reproduction), over every operation of the management yaml. What the
draws create (principals, roles, warehouses) is removed afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import hypothesis
import psycopg
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from hypothesis import strategies as st
from schemathesis import Case, GenerationMode
from schemathesis.core.failures import FailureGroup
from schemathesis.core.parameters import ParameterLocation

from app.edge.factory import MANAGEMENT_BASE_PATH, load_management_spec
from tests.conformance.test_schemathesis import (
    CHECKS,
    EXAMPLES,
    Findings,
    _buildable,
    server_log_excerpt,
)
from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET, auth_env_for_tests
from tests.integration.conftest import Server, start_server, stop_server

SPEC = load_management_spec()
OPERATIONS = sorted(
    f"{method.upper()} {path}"
    for path, item in SPEC["paths"].items()
    for method in item
    if method in ("get", "put", "post", "delete", "head", "patch")
)


@pytest.fixture(scope="module")
def live(settings, app, tmp_path_factory) -> Iterator[Server]:
    running = start_server(settings, tmp_path_factory.mktemp("management-gunicorn"), auth_env_for_tests())
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def http(live) -> Iterator[requests.Session]:
    with requests.Session() as session:
        token = session.post(
            f"{live.url}/v1/oauth/tokens",
            data={"grant_type": "client_credentials", "client_id": TEST_CLIENT_ID, "client_secret": TEST_CLIENT_SECRET},
        )
        session.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
        yield session


@pytest.fixture(scope="module")
def operations(app, services) -> Iterator[dict[str, Any]]:  # `app`: migrated
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        warehouses = {row[0] for row in conn.execute("SELECT name FROM warehouse")}
        principals = {row[0] for row in conn.execute("SELECT client_id FROM principal")}
        roles = {row[0] for row in conn.execute("SELECT name FROM role")}
    schema = schemathesis.openapi.from_dict(SPEC)
    schema.config.output.sanitization.update(enabled=False)
    yield {op.label: op for op in (result.ok() for result in schema.get_all_operations())}
    with psycopg.connect(services.database_url, autocommit=True) as conn:  # what the draws made
        conn.execute("DELETE FROM role WHERE NOT (name = ANY(%s))", (list(roles),))
        conn.execute("DELETE FROM principal WHERE NOT (client_id = ANY(%s))", (list(principals),))
        conn.execute(
            "DELETE FROM warehouse w WHERE NOT (name = ANY(%s))"
            " AND NOT EXISTS (SELECT 1 FROM namespace n WHERE n.warehouse_id = w.id)",
            (list(warehouses),),
        )
        conn.execute("UPDATE auth_state SET version = version + 1")
        # a drawn policy must not go on expiring the history of later tests' tables in the background
        conn.execute("DELETE FROM maintenance_policy")


SEED_ROLE = "schemathesis-role"
SEED_PRINCIPAL = "schemathesis-principal"


def _may_steer(case: Case, location: ParameterLocation) -> bool:
    info = case.meta.components.get(location) if case.meta is not None else None
    return info is None or info.mode.is_positive


def steer(case: Case, choice: int, http: requests.Session, base_url: str) -> None:
    """Part of the draws point at a role and principal that exist, and create warehouses with a
    usable name and location (random ones are nearly always refused)."""
    if choice == 0:
        return
    if _may_steer(case, ParameterLocation.PATH):
        params = case.path_parameters or {}
        if "role" in params:
            params["role"] = SEED_ROLE
        if "principal" in params and choice == 2:
            params["principal"] = SEED_PRINCIPAL
    operation_id = case.operation.schema.get_operation_id(case.operation)
    if operation_id == "listGrantsOnSecurable" and choice == 2 and _may_steer(case, ParameterLocation.QUERY):
        case.query = {"type": "warehouse", "warehouse": "test"}
    if operation_id == "createWarehouse" and isinstance(case.body, dict) and _may_steer(case, ParameterLocation.BODY):
        name = "sch" + uuid.uuid4().hex[:10]
        case.body["name"] = name
        case.body["location"] = f"s3://schemathesis-{name}/"
        case.body["allowed-locations"] = [f"s3://schemathesis-{name}-extra/"] if choice == 2 else []
        if isinstance(case.body.get("storage"), dict):
            case.body["storage"].pop("endpoint", None)


def seed(http: requests.Session, base_url: str) -> None:
    http.post(f"{base_url}/roles", json={"name": SEED_ROLE})
    http.post(f"{base_url}/principals", json={"name": SEED_PRINCIPAL})


def run_operation(operation, mode: GenerationMode, server: Server, http: requests.Session) -> Findings:
    findings = Findings(operation.label, mode)
    seed(http, server.url + MANAGEMENT_BASE_PATH)
    cases = operation.as_strategy(generation_mode=mode)

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
        steer(case, choice, http, server.url + MANAGEMENT_BASE_PATH)
        try:
            response = case.call(base_url=server.url + MANAGEMENT_BASE_PATH, session=http, timeout=30)
        except requests.RequestException as exc:
            findings.add(("network", type(exc).__name__), f"[{operation.label}, {mode.value} data] {exc!r}")
            return
        findings.statuses[response.status_code] = findings.statuses.get(response.status_code, 0) + 1
        try:
            case.validate_response(response, checks=CHECKS[mode])
        except FailureGroup as group:
            excerpt = server_log_excerpt(server, response) if response.status_code >= 500 else ""
            cause = excerpt.rsplit("\n", 1)[-1].strip().split(":")[0]
            key = (*sorted((type(f).__name__, response.status_code) for f in group.exceptions), cause)
            findings.add(key, f"[{operation.label}, {mode.value} data] {group.message.rstrip()}{excerpt}")
        if case.method == "DELETE" and response.status_code < 300:
            seed(http, server.url + MANAGEMENT_BASE_PATH)  # it may have removed the seed

    one_request()
    return findings


def test_covers_every_operation(operations):
    assert set(OPERATIONS) == set(operations)
    assert (
        len(OPERATIONS) == 53
    )  # 21, the recycle bin's and protection's 7, the change feed's 5, maintenance's 10, the audit trail's 1,
    # read restrictions' 3, trusted engines' 2 (principals, roles) and table moves' 4


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
@pytest.mark.parametrize("endpoint", OPERATIONS)
def test_management_operation_conforms(live, http, operations, endpoint: str, mode: GenerationMode):
    findings = run_operation(operations[endpoint], mode, live, http)
    print(findings.summary())
    if findings.failures:
        pytest.fail(findings.report(), pytrace=False)
    assert findings.statuses, f"nothing was sent: {findings.summary()}"
