"""Closed by default (issue 34): a principal that holds no grant is refused EVERY operation of
both contracts - openapi/catalog.yaml and openapi/management.yaml, read from the files, so an
operation added there is covered here without a change - and nothing is written.

Each operation is called once, its path parameters filled with names that exist (namespace ``a``,
table ``a.t``, view ``a.v``, the default warehouse, the bootstrap administrator, a role holding a
grant) and its body, when it takes one, valid (a 400 would say nothing about authorization). The
answer must be 403, or the 404 that hides what the caller cannot see, with the Iceberg error body,
and one audit line of the refusal; never a 2xx. The whole database is compared before and after.

Public by design, and so left out: the token endpoint (getToken: how a caller gets credentials at
all). The probes and the metrics (/healthz, /readyz, /metrics) are no operation of either yaml.
A principal of our own may also rotate its own secret without a grant (app/management/rights.py):
``{principal}`` here names someone else.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

from app.edge.factory import MANAGEMENT_BASE_PATH, load_management_spec, load_spec
from app.edge.resolver import HTTP_METHODS
from app.ground.events import AUDIT_LOGGER
from tests.api.authz_support import PREFIX, WAREHOUSE
from tests.api.tables_support import create_request
from tests.conftest import TEST_CLIENT_ID, UNWATCHED_TABLES

PUBLIC = {"getToken": "the token endpoint: how a caller gets credentials at all"}

OTHER_ROLE = f"other-{uuid.uuid4().hex[:8]}"  # holds read on the warehouse: worth joining
# One plausible value for every path parameter of both yamls (checked below: none is missing).
PATH_VALUES = {
    "prefix": WAREHOUSE,
    "namespace": "a",
    "table": "t",
    "view": "v",
    "function": "f",
    "plan-id": str(uuid.uuid4()),
    "principal": TEST_CLIENT_ID,  # an administrator: rotating or deleting it would be a takeover
    "role": OTHER_ROLE,
    "warehouse": WAREHOUSE,
    "unit": "1",  # a recycle bin unit
    "sink": "hook",
    "run": "1",  # a maintenance run
}
# ... and for every required query parameter.
QUERY_VALUES = {"type": "catalog", "recursive": "true"}
HEADER_VALUES = {"X-Growler-Run-Token": "a-run-token-of-thirty-two-chars"}  # reportMaintenanceRun's

VIEW_SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]}
VIEW_VERSION = {
    "version-id": 1,
    "timestamp-ms": 1_700_000_000_000,
    "schema-id": 0,
    "summary": {"engine-name": "spark"},
    "default-namespace": ["a"],
    "representations": [{"type": "sql", "sql": "SELECT 1 AS x", "dialect": "spark"}],
}
COMMIT = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
GRANT = {"privilege": "read", "securable": {"type": "warehouse", "warehouse": WAREHOUSE}}
# A valid body for every operation that takes one (checked below: none is missing). The
# metadata locations are filled in from the catalog built for the test.
BODIES: dict[str, Any] = {
    "queryEvents": {},
    "createNamespace": {"namespace": ["a", "new"]},
    "updateProperties": {"updates": {"k": "v"}, "removals": []},
    "createTable": create_request("new"),
    "registerTable": {"name": "copy", "metadata-location": "{t}"},
    "updateTable": COMMIT,
    "renameTable": {"source": {"namespace": ["a"], "name": "t"}, "destination": {"namespace": ["a"], "name": "t2"}},
    "commitTransaction": {"table-changes": [{"identifier": {"namespace": ["a"], "name": "t"}, **COMMIT}]},
    "reportMetrics": {
        "report-type": "commit-report",
        "table-name": "a.t",
        "snapshot-id": 1,
        "sequence-number": 1,
        "operation": "append",
        "metrics": {},
    },
    "planTableScan": {},
    "fetchScanTasks": {"plan-task": f"{PATH_VALUES['plan-id']}:1"},
    "signRequest": {"region": "us-east-1", "uri": "http://x/b/k", "method": "GET", "headers": {}},
    "createView": {"name": "new", "schema": VIEW_SCHEMA, "view-version": VIEW_VERSION, "properties": {}},
    "replaceView": COMMIT,
    "renameView": {"source": {"namespace": ["a"], "name": "v"}, "destination": {"namespace": ["a"], "name": "v2"}},
    "registerView": {"name": "copy", "metadata-location": "{v}"},
    "createPrincipal": {"name": "intruder"},
    "createRole": {"name": "intruders"},
    "grantPrivilege": GRANT,
    "revokePrivilege": GRANT,
    "createWarehouse": {"name": "elsewhere", "location": "s3://elsewhere/"},
    "updateWarehouse": {"location": "s3://elsewhere/"},
    "undropBinUnit": {},
    "protectSecurable": {"type": "warehouse"},
    "unprotectSecurable": {"type": "warehouse"},
    "setReadRestriction": {
        "securable": {"type": "warehouse"},
        "grantee": {"type": "principal", "name": "intruder"},
        "row-filter": False,
    },
    "removeReadRestriction": {"securable": {"type": "warehouse"}, "grantee": {"type": "principal", "name": "intruder"}},
    "setPrincipalTrustedEngine": {"trusted-engine": True},
    "setRoleTrustedEngine": {"trusted-engine": True},
    "moveTableHome": {"namespace": ["db"], "name": "t", "target": {"warehouse": "warehouse", "namespace": ["db"]}},
    "undoTableMove": {"namespace": ["db"], "name": "t"},
    "moveNamespaceHome": {"namespace": ["db"], "target": {"warehouse": "warehouse", "namespace": ["db"]}},
    "createEventSink": {"name": "hook", "kind": "webhook", "url": "http://127.0.0.1:9/"},
    "attachMaintenancePolicy": {
        "policy-type": "system.snapshot-expiry",
        "securable": {"type": "table", "warehouse": WAREHOUSE, "namespace": ["a"], "name": "t"},
        "content": {"enable": True, "config": {"max_snapshot_age_days": 0}},
    },
    "detachMaintenancePolicy": {"policy-type": "system.snapshot-expiry", "securable": {"type": "catalog"}},
    "runMaintenance": {"policy-type": "system.orphan-file-removal"},
    "reportMaintenanceRun": {"progress": {"file-groups-done": 1, "file-groups-total": 2}},
}
# Rows background work (housekeeping, scan planning) may delete while the test runs: for these,
# nothing may be added or changed; every other table must be exactly as it was.
BACKGROUND = {
    "pending_object",
    "purge_job",
    "idempotency_key",
    "staged_table",
    "metrics_report",
    "scan_plan",
    "scan_plan_page",
}


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str  # the template, with the API's base path
    parameters: tuple[dict[str, Any], ...]
    takes_body: bool

    def __str__(self) -> str:
        return f"{self.operation_id} ({self.method.upper()} {self.path})"


def spec_operations() -> list[Operation]:
    """Every operation of both yamls, as the app serves them (the management API under its base path)."""
    found = []
    for base, spec in (("", load_spec()), (MANAGEMENT_BASE_PATH, load_management_spec())):
        shared = spec.get("components", {}).get("parameters", {})

        def resolve(parameter: dict[str, Any], shared: dict[str, Any] = shared) -> dict[str, Any]:
            ref = parameter.get("$ref")
            return shared[ref.rsplit("/", 1)[-1]] if ref else parameter

        for path, item in spec["paths"].items():
            common = [resolve(p) for p in item.get("parameters", [])]
            for method, operation in item.items():
                if method not in HTTP_METHODS:
                    continue
                parameters = tuple(common + [resolve(p) for p in operation.get("parameters", [])])
                takes_body = "requestBody" in operation  # optional ones too: connexion may still want one
                found.append(Operation(operation["operationId"], method, base + path, parameters, takes_body))
    return found


OPERATIONS = spec_operations()
CHECKED = [operation for operation in OPERATIONS if operation.operation_id not in PUBLIC]


def request_of(operation: Operation, locations: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The URL and the keyword arguments of the test client's ``request``."""
    url = re.sub(r"\{([^}]+)\}", lambda match: PATH_VALUES[match.group(1)], operation.path)
    query = [
        f"{p['name']}={QUERY_VALUES[p['name']]}"
        for p in operation.parameters
        if p["in"] == "query" and p.get("required")
    ]
    if query:
        url += "?" + "&".join(query)
    kwargs: dict[str, Any] = {}
    headers = {
        p["name"]: HEADER_VALUES[p["name"]] for p in operation.parameters if p["in"] == "header" and p.get("required")
    }
    if headers:
        kwargs["headers"] = headers
    if operation.takes_body:
        body = BODIES[operation.operation_id]
        location = body.get("metadata-location", "")
        if location.startswith("{"):
            body = {**body, "metadata-location": locations[location.strip("{}")]}
        kwargs["json"] = body
    return url, kwargs


def test_the_operations_come_from_both_yamls_and_every_one_can_be_called():
    """The walk found both contracts; every path parameter, required query parameter and body has a value."""
    ids = {operation.operation_id for operation in OPERATIONS}
    assert {"loadTable", "commitTransaction", "createPrincipal", "deleteWarehouse"} <= ids
    assert set(PUBLIC) <= ids  # what is left out exists (and says why)
    assert len(ids) == len(OPERATIONS)  # one operation each
    path_names = {name for operation in OPERATIONS for name in re.findall(r"\{([^}]+)\}", operation.path)}
    assert path_names <= set(PATH_VALUES), f"give these path parameters a value: {path_names - set(PATH_VALUES)}"
    required = {
        (p["in"], p["name"]) for operation in CHECKED for p in operation.parameters if p.get("required") is True
    }
    known = {("path", name) for name in PATH_VALUES} | {("query", name) for name in QUERY_VALUES}
    known |= {("header", name) for name in HEADER_VALUES}
    unknown = required - known
    assert unknown == set(), f"give these required parameters a value: {unknown}"
    with_body = {operation.operation_id for operation in CHECKED if operation.takes_body}
    assert with_body <= set(BODIES), f"give these operations a body: {with_body - set(BODIES)}"


@pytest.fixture
def audit_lines() -> Iterator[list[dict[str, Any]]]:
    """The audit lines (app/ground/events.py) logged while the test runs."""
    lines: list[dict[str, Any]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(dict(getattr(record, "fields", {})))

    handler = Collect()
    logger = logging.getLogger(AUDIT_LOGGER)
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def database_snapshot(db: psycopg.Connection) -> dict[str, list[str]]:
    """Every row of every table of the catalog's schema, as text (heartbeats aside)."""
    tables = [row[0] for row in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
    tables = [table for table in tables if table not in UNWATCHED_TABLES]  # heartbeats, the audit trail
    assert {"namespace", "catalog_entry", "principal", "role_grant", "warehouse"} <= set(tables)
    query = "SELECT t::text FROM {} t"
    return {
        table: sorted(row[0] for row in db.execute(sql.SQL(query).format(sql.Identifier(table))))
        for table in sorted(tables)
    }


def written(before: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    """The tables whose rows changed (for BACKGROUND: rows that were not there before)."""
    changed = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, []), after.get(table, [])
        if table in BACKGROUND:
            if set(new) - set(old):
                changed.append(table)
        elif old != new:
            changed.append(table)
    return changed


def build_catalog(admin: Any, principals: Any) -> dict[str, str]:
    """Namespace a, table a.t, view a.v; a role holding read on the warehouse. Metadata locations by name."""
    assert admin.post(f"{PREFIX}/namespaces", json={"namespace": ["a"]}).status_code == 200
    table = admin.post(f"{PREFIX}/namespaces/a/tables", json=create_request("t"))
    assert table.status_code == 200, table.text
    view = admin.post(f"{PREFIX}/namespaces/a/views", json={**BODIES["createView"], "name": "v"})
    assert view.status_code == 200, view.text
    principals.create_role(OTHER_ROLE)
    principals.grant_role(OTHER_ROLE, "read", "warehouse", WAREHOUSE)
    return {"t": table.json()["metadata-location"], "v": view.json()["metadata-location"]}


def refusal(response: Any, method: str) -> str | None:
    """What is wrong with the answer, None when it is a refusal with the Iceberg error body."""
    if response.status_code not in (403, 404):
        return f"got {response.status_code} {response.text[:300]}"
    if method == "head":
        return None if not response.content else "a HEAD answer with a body"
    error = response.json().get("error")
    if not isinstance(error, dict) or set(error) < {"message", "type", "code"}:
        return f"not the Iceberg error body: {response.text[:300]}"
    if error["code"] != response.status_code or not isinstance(error["message"], str):
        return f"an error body that disagrees with its status: {response.text[:300]}"
    expected = "ForbiddenException" if response.status_code == 403 else "NoSuch"
    if not error["type"].startswith(expected):  # a 404 of a route that does not exist is no refusal
        return f"not a refusal: {response.text[:300]}"
    return None


def test_a_principal_without_any_grant_is_refused_every_operation_and_nothing_is_written(
    app, principals, db, clean_catalog, audit_lines
):
    admin = app.test_client()
    locations = build_catalog(admin, principals)
    caller = principals.new("nothing")  # a member of its own role, which holds nothing
    principals.settle()
    failures = []
    for operation in CHECKED:
        url, kwargs = request_of(operation, locations)
        before = database_snapshot(db)
        seen = len(audit_lines)
        response = caller.client.request(operation.method.upper(), url, **kwargs)
        problem = refusal(response, operation.method)
        if problem:
            failures.append(f"{operation}: {problem}")
        changed = written(before, database_snapshot(db))
        if changed:
            failures.append(f"{operation}: refused, yet wrote to {changed}")
        refusals = [
            line
            for line in audit_lines[seen:]
            if line.get("principal") == caller.name and line.get("outcome") in ("forbidden", "hidden")
        ]
        if [line.get("status") for line in refusals] != [response.status_code]:
            failures.append(f"{operation}: not one audit line of the refusal: {refusals}")
    assert failures == [], "\n".join(failures)
    assert len(CHECKED) == len(OPERATIONS) - len(PUBLIC)  # every operation but the public one was called


def deciders(services) -> dict:
    """The authorizer each service (or the part of it that decides) was built with."""
    return {
        "namespaces": services.namespaces.authorizer,
        "tables.entries": services.tables.entries.authorizer,
        "tables.access": services.tables.access.authorizer,
        "views.entries": services.views.entries.authorizer,
        "functions": services.functions.authorizer,
        "management.rights": services.management.rights.authorizer,
        "maintenance.rights": services.maintenance.rights.authorizer,
        "recycle_bin.rights": services.recycle_bin.rights.authorizer,
        "protection.rights": services.protection.rights.authorizer,
        "event_sinks.rights": services.event_sinks.rights.authorizer,
        "signer": services.signer.tables.authorizer,
    }


def test_every_service_of_the_app_decides_with_the_apps_authorizer(app):
    """The services were handed the one authorizer the handlers use, and it enforces (it has grants to read)."""
    from app.composition.services import services_of

    services = services_of(app.app)
    authorizer = services.authorizer
    assert authorizer.repository is not None
    for key, decides in deciders(services).items():
        assert decides is authorizer, key


def test_without_authentication_allowing_everything_is_the_factorys_explicit_choice(settings, clean_catalog):
    """GROWLER_AUTH=none (loopback only): the services get ``Authorizer.allow_all()`` - no grants
    read - and a caller without a token is served."""
    from app.composition.services import services_of
    from app.edge.auth.config import AuthSettings
    from app.edge.factory import create_app

    open_app = create_app(settings, AuthSettings(mode="none"))
    services = services_of(open_app.app)
    authorizer = services.authorizer
    assert authorizer.repository is None
    assert all(decides is authorizer for decides in deciders(services).values())
    client = open_app.test_client()
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["open"]}).status_code == 200
    assert client.get(f"{PREFIX}/namespaces").json()["namespaces"] == [["open"]]
