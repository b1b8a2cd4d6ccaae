"""The view tests' requests, URLs and checks: a view in the nested namespace ``db.nested``, and
``Unchanged``, which proves that a refused request wrote nothing."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.api.tables_support import PREFIX, bucket_objects
from tests.conftest import TEST_BUCKET

NS = ("db", "nested")
NS_PATH = "db%1Fnested"
METADATA_FILE = re.compile(r"/metadata/(\d{5})-[0-9a-f-]{36}\.metadata\.json$")
OTHER_UUID = "11111111-2222-4333-8444-555555555555"

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "data", "type": "string", "required": False},
    ],
}
TOTALS_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 1,
    "fields": [{"id": 1, "name": "total", "type": "double", "required": False}],
}


def sql(text: str, dialect: str = "spark") -> dict[str, str]:
    return {"type": "sql", "sql": text, "dialect": dialect}


def view_version(*representations: dict, schema_id: int = 0, version_id: int = 1) -> dict[str, Any]:
    return {
        "version-id": version_id,
        "timestamp-ms": 1_700_000_000_000,
        "schema-id": schema_id,
        "summary": {"engine-name": "spark", "engine-version": "3.5"},
        "default-namespace": list(NS),
        "representations": list(representations) or [sql("SELECT id, data FROM db.nested.events")],
    }


def view_request(name: str, **extra: Any) -> dict[str, Any]:
    body = {"name": name, "schema": copy.deepcopy(SCHEMA), "view-version": view_version(), "properties": {}}
    body.update(extra)
    return body


def views_url(namespace: str = NS_PATH) -> str:
    return f"{PREFIX}/namespaces/{namespace}/views"


def view_url(name: str, namespace: str = NS_PATH) -> str:
    return f"{views_url(namespace)}/{name}"


def replace_updates(query: str, schema: dict | None = None, dialect: str = "spark") -> list[dict[str, Any]]:
    """A new schema, a version using it, made current: what a Java client sends for a replace."""
    return [
        {"action": "add-schema", "schema": schema or TOTALS_SCHEMA},
        {"action": "add-view-version", "view-version": view_version(sql(query, dialect), schema_id=-1)},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]


def catalog_state(db) -> list[tuple]:
    return db.execute("SELECT name, kind, metadata_location, metadata FROM catalog_entry ORDER BY name").fetchall()


def pending(db, under: str = f"s3://{TEST_BUCKET}/") -> set[str]:
    """Objects recorded as written-but-not-committed (other tests may leave their own behind)."""
    rows = db.execute("SELECT location FROM pending_object WHERE starts_with(location, %s)", (under,))
    return {row[0] for row in rows}


def create(client, name: str, **extra: Any) -> dict[str, Any]:
    response = client.post(views_url(), json=view_request(name, **extra))
    assert response.status_code == 200, response.text
    return response.json()


class Unchanged:
    """Asserts that a request wrote nothing: no row changed, no object appeared, nothing pending."""

    def __init__(self, db, s3) -> None:
        self.db, self.s3 = db, s3
        self.rows, self.objects, self.pending = catalog_state(db), bucket_objects(s3), pending(db)

    def check(self) -> None:
        assert catalog_state(self.db) == self.rows
        assert bucket_objects(self.s3) == self.objects
        assert pending(self.db) == self.pending
