"""W12: server-side scan planning of a filter on a table with thousands of data files.

The table is real: PyIceberg, through the target's own REST API, commits ``w12_commits`` fast
appends that together list ``w12_files`` data files (partitioned by ``category``, each with id
bounds), so the planner reads real manifest lists and manifests from the target's object store.
The data files themselves are not written: planning reads manifests only, never data files, and
writing thousands of Parquet files would make seeding the longest part of the run for nothing.

A plan is what a client does to get the files of a scan: planTableScan with the filter, then
(the table is over ``GROWLER_PLAN_ASYNC_MIN_FILES``, so the answer is ``submitted``) fetchPlanningResult
every ``POLL_S`` until ``completed``, then fetchScanTasks for each plan task. Its latency is that
whole exchange; CPU per plan is the server's over every plan the generator ran (warm-up included).
"""

from __future__ import annotations

from typing import Any

from bench.targets import WAREHOUSE, Target

NAMESPACE = "ns099"
TABLE = "planned"
PLAN_ENDPOINT = "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan"
CATEGORIES = "abc"
POLL_S = 0.005


def plan_filter(files: int) -> dict[str, Any]:
    """``category = 'a' AND id < <the first half's ids>``: about a sixth of the files match."""
    return {
        "type": "and",
        "left": {"type": "eq", "term": "category", "value": "a"},
        "right": {"type": "lt", "term": "id", "value": files // 2 * 10},
    }


def expected_tasks(files: int) -> int:
    """The files ``plan_filter`` keeps: category a (every third file) among the first half."""
    return len([i for i in range(files // 2) if CATEGORIES[i % len(CATEGORIES)] == "a"])


def supports_planning(target: Target) -> bool:
    return PLAN_ENDPOINT in (getattr(target, "config", {}) or {}).get("endpoints", [])


def seed_table(target: Target, files: int, commits: int) -> dict[str, Any]:
    """Create the table and commit its manifests with PyIceberg; what the workload needs."""
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.typedef import Record
    from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType, TimestampType

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "category", StringType(), required=False),
        NestedField(3, "ts", TimestampType(), required=False),
        NestedField(4, "qty", IntegerType(), required=False),
        NestedField(5, "price", DoubleType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"))
    # The bearer token as PyIceberg's ``token``: a ``header.Authorization`` property does not reach
    # the server as given (Growler answered 401 "malformed" to every request of this setup).
    bearer = target.headers.get("Authorization", "")
    options = {"token": bearer.removeprefix("Bearer ")} if bearer.startswith("Bearer ") else {}
    options.update({f"header.{name}": value for name, value in target.headers.items() if name != "Authorization"})
    catalog = RestCatalog(
        "bench",
        uri=target.base_url,
        warehouse=WAREHOUSE,
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials", **options},
    )
    table = catalog.create_table((NAMESPACE, TABLE), schema=schema, partition_spec=spec)
    per_commit = -(-files // commits)
    for start in range(0, files, per_commit):
        with table.transaction() as transaction, transaction.update_snapshot().fast_append() as append:
            for i in range(start, min(start + per_commit, files)):
                append.append_data_file(
                    DataFile.from_args(
                        content=DataFileContent.DATA,
                        file_path=f"{table.location()}/data/category={CATEGORIES[i % 3]}/f-{i:06d}.parquet",
                        file_format=FileFormat.PARQUET,
                        partition=Record(CATEGORIES[i % 3]),
                        record_count=1000,
                        file_size_in_bytes=64_000,
                        lower_bounds={1: to_bytes(LongType(), i * 10)},
                        upper_bounds={1: to_bytes(LongType(), i * 10 + 9)},
                        spec_id=0,
                    )
                )
    snapshot = catalog.load_table((NAMESPACE, TABLE)).current_snapshot()
    summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else {}
    return {"data_files": int(summary.get("total-data-files", 0)), "commits": commits}


def generator_spec(plan: Any) -> dict[str, Any]:
    return {
        "mode": "plan",
        "namespace": NAMESPACE,
        "table": TABLE,
        "filter": plan_filter(plan.w12_files),
        "expected_tasks": expected_tasks(plan.w12_files),
        "concurrency": plan.w12_concurrency,
        "count": plan.w12_count,
        "warmup": plan.w12_warmup,
        "poll_s": POLL_S,
    }
