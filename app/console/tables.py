"""A table's page (schema, history, snapshots, charts, compare, preview, snippets) and a view's page."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, current_app, render_template, request

from app.console import table_model as model
from app.console.common import name_arg, ns_arg, ns_param, tables, views
from app.edge.context import PREVIEWS
from app.ground.errors import BadRequest
from app.previews import PreviewService
from app.tables import LoadedTable, LoadTableRequest


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/w/<warehouse>/table", "table", table, methods=["GET"])
    bp.add_url_rule("/w/<warehouse>/table/preview", "preview", preview, methods=["GET"])
    bp.add_url_rule("/w/<warehouse>/view", "view", view, methods=["GET"])


def _load_table(warehouse: str, levels: tuple[str, ...], name: str) -> tuple[LoadedTable, dict[str, Any]]:
    service = tables()
    service.authorizer.authorize("loadTable", {"prefix": warehouse, "namespace": ns_param(levels), "table": name})
    loaded = service.load(LoadTableRequest(warehouse, levels, name))
    assert isinstance(loaded, LoadedTable)  # no If-None-Match: never NotModified
    return loaded, json.loads(loaded.metadata)


def _snapshot_arg(name: str) -> int | None:
    raw = request.args.get(name)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"Invalid snapshot id {raw[:30]!r}") from None


def table(warehouse: str) -> str:
    levels, name = ns_arg(), name_arg()
    loaded, metadata = _load_table(warehouse, levels, name)
    names = model.field_names(metadata)
    first, second = _snapshot_arg("a"), _snapshot_arg("b")
    compared = model.compare(metadata, first, second) if first is not None and second is not None else None
    snapshots = model.snapshots(metadata)
    return render_template(
        "console/table.html",
        warehouse=warehouse,
        levels=levels,
        name=name,
        location=loaded.metadata_location,
        metadata=metadata,
        schema=model.schema_rows(model.current_schema(metadata)),
        history=model.schema_history(metadata),
        specs=model.partition_specs(metadata, names),
        orders=model.sort_orders(metadata, names),
        snapshots=snapshots,
        refs=sorted((metadata.get("refs") or {}).items()),
        chart=model.chart_series(metadata),
        charted=model.CHARTED,
        compared=compared,
        compare_missing=(first is not None and second is not None and compared is None),
        metadata_log=model.metadata_log(metadata),
        when=model.when,
        snippets=_snippets(warehouse, levels, name),
    )


def preview(warehouse: str) -> str:
    levels, name = ns_arg(), name_arg()
    snapshot = _snapshot_arg("snapshot")
    previews: PreviewService = current_app.extensions[PREVIEWS]
    rows = previews.preview(warehouse, levels, name, snapshot)
    return render_template(
        "console/preview.html", warehouse=warehouse, levels=levels, name=name, snapshot=snapshot, rows=rows
    )


def view(warehouse: str) -> str:
    levels, name = ns_arg(), name_arg()
    service = views()
    service.authorizer.authorize("loadView", {"prefix": warehouse, "namespace": ns_param(levels), "view": name})
    loaded = service.load_view(warehouse, levels, name)
    metadata = json.loads(loaded.metadata)
    return render_template(
        "console/view.html",
        warehouse=warehouse,
        levels=levels,
        name=name,
        location=loaded.metadata_location,
        metadata=metadata,
        versions=model.view_versions(metadata),
        schema=model.view_schema(metadata),
    )


def _snippets(warehouse: str, levels: tuple[str, ...], name: str) -> list[tuple[str, str]]:
    """How to read the table from Spark, PyIceberg and SQL (the catalog named ``growler``)."""
    uri = request.host_url.rstrip("/")
    dotted = ".".join(f"`{level}`" if not level.isidentifier() else level for level in (*levels, name))
    spark = (
        "spark = (SparkSession.builder\n"
        '    .config("spark.sql.catalog.growler", "org.apache.iceberg.spark.SparkCatalog")\n'
        '    .config("spark.sql.catalog.growler.type", "rest")\n'
        f'    .config("spark.sql.catalog.growler.uri", "{uri}")\n'
        f'    .config("spark.sql.catalog.growler.warehouse", "{warehouse}")\n'
        '    .config("spark.sql.catalog.growler.credential", "<client-id>:<client-secret>")\n'
        "    .getOrCreate())\n"
        f'spark.table("growler.{dotted}").show()'
    )
    pyiceberg = (
        "from pyiceberg.catalog import load_catalog\n\n"
        f'catalog = load_catalog("growler", type="rest", uri="{uri}", warehouse="{warehouse}",\n'
        '                       credential="<client-id>:<client-secret>")\n'
        f"table = catalog.load_table({(*levels, name)!r})\n"
        "print(table.scan(limit=10).to_arrow())"
    )
    sql = f"SELECT * FROM growler.{dotted} LIMIT 10;"
    return [("Spark (PySpark)", spark), ("PyIceberg", pyiceberg), ("SQL", sql)]
