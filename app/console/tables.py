"""A table's page (schema, history, snapshots, charts, compare, preview, snippets) and a view's page."""

from __future__ import annotations

import json
from dataclasses import dataclass

from flask import Blueprint, render_template, request, url_for
from pyiceberg.expressions import AlwaysTrue

from app.console import federated
from app.console import table_model as model
from app.console.common import name_arg, ns_arg, ns_param, tables, views
from app.console.extras import TableAt, table_sections
from app.edge.context import services
from app.ground.errors import BadRequest
from app.ground.lru import LruCache
from app.previews.service import PreviewService
from app.rules.privileges import Kind, Securable
from app.rules.restrictions.policies import HIDE, read_plan
from app.rules.scan.filter import filter_json
from storage.rows import EntryRow


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/w/<warehouse>/table", "table", table, methods=["GET"])
    bp.add_url_rule("/w/<warehouse>/table/preview", "preview", preview, methods=["GET"])
    bp.add_url_rule("/w/<warehouse>/view", "view", view, methods=["GET"])


def _table_row(warehouse: str, levels: tuple[str, ...], name: str) -> EntryRow:
    """The table's row, under loadTable's rule (READ), without loadTable's storage gate: the page
    shows metadata and hands out no storage access, so a caller with read restrictions - trusted
    engine or not - sees it, its restrictions marked (``_restricted``)."""
    service = tables()
    service.authorizer.authorize("loadTable", {"prefix": warehouse, "namespace": ns_param(levels), "table": name})
    return service.entries.require_entry(service.warehouses.get(warehouse), levels, name)


@dataclass(frozen=True)
class Restricted:
    """The caller's read restrictions as the table page shows them: each restricted column of the
    current schema marked with its rule (``hide`` or the spec's action), and the rows it may read."""

    marks: dict[int, str]
    row_filter: str | None  # the filter as JSON; None: every row


def _restricted(warehouse: str, levels: tuple[str, ...], name: str, row: EntryRow) -> Restricted | None:
    """Marked, not left out: a column's name and type are the table's shape, which an engine with
    the same restrictions is given too; its values are what the restrictions keep from the caller."""
    service = tables()
    restrictions = service.authorizer.grants().restrictions_on(Securable.of_entry(Kind.TABLE, warehouse, levels, name))
    if restrictions is None:
        return None
    schema = service.parsed.parse(row.metadata_location, row.metadata).schema()
    plan = read_plan(restrictions, schema)
    marks = {**plan.actions, **dict.fromkeys(plan.hidden, HIDE)}
    shown = None if isinstance(plan.row_filter, AlwaysTrue) else json.dumps(filter_json(plan.row_filter, schema))
    return Restricted(marks, shown)


def _snapshot_arg(name: str) -> int | None:
    raw = request.args.get(name)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"Invalid snapshot id {raw[:30]!r}") from None


# Parsed pages by metadata location: a metadata file never changes, so neither does its page
# (a table with 1,000 snapshots costs its parse and model once per worker, not per view).
PAGES: LruCache[str, model.TablePage] = LruCache(32)


def table(warehouse: str) -> str:
    levels, name = ns_arg(), name_arg()
    remote = federated.federation(warehouse)
    if remote is not None:  # its remote's answer: no row of Growler's, no preview or sections
        loaded = federated.load(remote, warehouse, levels, "table", name)
        location, document = loaded["metadata-location"], json.dumps(loaded["metadata"])
        restricted, sections, preview_url = None, [], None
    else:
        row = _table_row(warehouse, levels, name)
        location, document = row.metadata_location, row.metadata
        restricted = _restricted(warehouse, levels, name, row)
        preview_url = url_for("console.preview", warehouse=warehouse, ns=ns_param(levels), name=name)
        sections = None
    # cached by location for Growler's own rows only: a remote's answer may name any location
    cached = remote is None and bool(location)
    page = PAGES.get(location) if cached else None
    if page is None:
        page = model.TablePage.of(json.loads(document))
        if cached:
            PAGES.put(location, page)
    if sections is None:
        sections = table_sections(TableAt(warehouse, levels, name, page.metadata.get("table-uuid")))
    first, second = _snapshot_arg("a"), _snapshot_arg("b")
    compared = model.compare(page.metadata, first, second) if first is not None and second is not None else None
    return render_template(
        "console/table.html",
        warehouse=warehouse,
        levels=levels,
        name=name,
        location=location,
        metadata=page.metadata,
        page=page,
        restricted=restricted,
        snapshots=page.snapshots,
        refs=sorted((page.metadata.get("refs") or {}).items()),
        charted=model.CHARTED,
        compared=compared,
        compare_missing=(first is not None and second is not None and compared is None),
        when=model.when,
        preview_url=preview_url,
        snippets=_snippets(warehouse, levels, name),
        sections=sections,
    )


def preview(warehouse: str) -> str:
    levels, name = ns_arg(), name_arg()
    snapshot = _snapshot_arg("snapshot")
    previews: PreviewService = services().previews
    rows = previews.preview(warehouse, levels, name, snapshot)
    return render_template(
        "console/preview.html", warehouse=warehouse, levels=levels, name=name, snapshot=snapshot, rows=rows
    )


def view(warehouse: str) -> str:
    levels, name = ns_arg(), name_arg()
    remote = federated.federation(warehouse)
    if remote is not None:
        answer = federated.load(remote, warehouse, levels, "view", name)
        location, metadata = answer["metadata-location"], answer["metadata"]
    else:
        service = views()
        params = {"prefix": warehouse, "namespace": ns_param(levels), "view": name}
        service.entries.authorizer.authorize("loadView", params)
        loaded = service.load_view(warehouse, levels, name)
        location, metadata = loaded.metadata_location, json.loads(loaded.metadata)
    return render_template(
        "console/view.html",
        warehouse=warehouse,
        levels=levels,
        name=name,
        location=location,
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
