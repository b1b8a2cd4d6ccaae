"""What the Spark SQL scenarios (tests/integration/spark_sql/) read back: rows and scalars through
Spark, a table's metadata through Growler's REST API, the objects under a location; ``Access``, one way
a Spark catalog reaches storage (the ``access`` fixture)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from app.ground.locations import Location
from storage.objects import S3ObjectStore


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(sql).collect()]


def scalar(spark, sql: str):
    return spark.sql(sql).collect()[0][0]


def ns_path(namespace: str) -> str:
    return quote("\x1f".join(namespace.split(".")), safe="")


def load_table(server, namespace: str, name: str, warehouse: str | None = None) -> dict:
    """Growler's loadTable answer for ``namespace.name`` (404 -> None)."""
    url = f"{server.url}/v1/{warehouse or server.warehouse}/namespaces/{ns_path(namespace)}/tables/{name}"
    response = httpx.get(url, timeout=30)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()


@dataclass(frozen=True)
class Access:
    """A Spark catalog reaching storage one way: ``catalog`` names it, ``warehouse`` is its warehouse.

    ``bulk_deletes``: whether its DeleteObjects requests go through. Through remote signing on
    SeaweedFS they do not: the store does not check a body against its signature, so Growler's
    probe refuses to sign them (app/storage_access/bulk_deletes.py) and Spark's procedures leave the files.
    """

    catalog: str
    warehouse: str
    bulk_deletes: bool = True
    # DROP TABLE ... PURGE left to the catalog (rest-catalog-purge): its purge waits in the bin
    catalog_purges: bool = False


STATIC_WAREHOUSE = "static_keys"


def objects_under(objects: S3ObjectStore, location: str) -> list[str]:
    return sorted(found.uri for found in objects.list(Location.parse(location)))


def wait_until_empty(objects: S3ObjectStore, location: str, timeout_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    remaining = objects_under(objects, location)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.3)
        remaining = objects_under(objects, location)
    return remaining


def snapshot_operations(spark, table: str) -> list[str]:
    return [r[0] for r in rows(spark, f"SELECT operation FROM {table}.snapshots ORDER BY committed_at")]
