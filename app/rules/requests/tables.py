"""Request bodies of the table operations: createTable, registerTable, updateTable,
commitTransaction, reportMetrics and signRequest (the scans' are in ``app.rules.requests.scans``).

The shapes are the generated models of ``openapi/catalog.yaml`` (app/rules/contract/catalog.py):
``RegisterTableRequest`` and ``RemoteSignRequest`` as they are, the commit models with the parse
of their own added here. A commit's requirements and updates are PyIceberg's types (the
generator's override, scripts/models.py), parsed by the rules with their own messages
(``Invalid table update #2 (add-spec): ...``); PyIceberg's ``CommitTableRequest`` is not used: its
update union drops what the rules' widened one keeps (a snapshot's ``key-id``, statistics of any
blob type, the encryption keys: ``app.rules.table.models``) and it requires an identifier.

``CreateTableRequest`` stays PyIceberg's (the services read PyIceberg's ``Schema``,
``PartitionSpec`` and ``SortOrder``), parsed part by part so that a refusal names the part.
``ReportMetricsRequest`` keeps the whole report as sent, which the generated union of the two
report shapes would not (Growler interprets nothing but its type).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import Field
from pyiceberg.catalog.rest import CreateTableRequest as PyIcebergCreateTableRequest
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortOrder
from pyiceberg.table.update import AssertCreate
from pyiceberg.typedef import IcebergBaseModel

from app.ground.errors import BadRequest
from app.rules.contract import catalog as contract
from app.rules.contract.catalog import RegisterTableRequest, RemoteSignRequest, TableIdentifier
from app.rules.requests import parse_request
from app.rules.table.creation import parse_part, requested_format_version, string_properties
from app.rules.table.models import FORMAT_VERSION_PROPERTY
from app.rules.table.requests import parse_requirements, parse_updates, spec_with_placeholder_ids

__all__ = [
    "CommitTableRequest",
    "CommitTransactionRequest",
    "CreateTableRequest",
    "RegisterTableRequest",
    "RemoteSignRequest",
    "ReportMetricsRequest",
    "TableChangeRequest",
]

UNSORTED = {"order-id": 0, "fields": []}


class CreateTableRequest(PyIcebergCreateTableRequest):
    """createTable's body. ``location``, ``partition-spec`` and ``write-order`` may be left out
    (PyIceberg requires them to be present, if null); after ``from_body`` the spec and the order
    are always there (unpartitioned, unsorted by default), a spec's fields without a
    ``field-id`` (optional in the spec) holding placeholders until fresh ids are assigned."""

    location: str | None = None
    partition_spec: PartitionSpec | None = Field(alias="partition-spec", default=None)
    write_order: SortOrder | None = Field(alias="write-order", default=None)

    @classmethod
    def from_body(cls, value: Any) -> CreateTableRequest:
        """Each part parsed on its own, so that a refusal names it (``Invalid schema: ...``); a
        bad ``format-version`` property is refused first."""
        if not isinstance(value, dict):
            raise BadRequest("Invalid create table request: expected an object")
        properties = string_properties(value.get("properties"))
        requested_format_version(properties.get(FORMAT_VERSION_PROPERTY))
        schema = parse_part(Schema, value.get("schema"), "schema")
        spec = parse_part(PartitionSpec, spec_with_placeholder_ids(value.get("partition-spec") or {}), "partition-spec")
        order = parse_part(SortOrder, value.get("write-order") or UNSORTED, "write-order")
        return cls.model_construct(
            name=value.get("name"),
            location=value.get("location"),
            table_schema=schema,
            partition_spec=spec,
            write_order=order,
            stage_create=bool(value.get("stage-create")),
            properties=properties,
        )


class CommitTableRequest(contract.CommitTableRequest):
    """updateTable's body, and each table change of a transaction (which names its table).

    ``sent_requirements`` and ``sent_updates`` are the request's own JSON, kept for the change
    feed only: an update-table event records what the client sent (app/events/changes.py), not
    what the models would write back (placeholder ids, defaults filled in)."""

    sent_requirements: list[dict[str, Any]] = Field(default_factory=list, exclude=True, repr=False)
    sent_updates: list[dict[str, Any]] = Field(default_factory=list, exclude=True, repr=False)

    @classmethod
    def from_body(cls, value: Any) -> CommitTableRequest:
        """Requirements and updates with the rules' messages (``Invalid table requirement #0 (...)``)."""
        if not isinstance(value, dict):
            raise BadRequest("Invalid commit: expected an object")
        return cls._parsed(value)

    @classmethod
    def _parsed(cls, value: dict[str, Any]) -> Self:
        identifier = value.get("identifier")
        requirements = value.get("requirements") or []
        updates = value.get("updates") or []
        return cls.model_construct(
            identifier=None if identifier is None else parse_request(TableIdentifier, identifier),
            requirements=parse_requirements(requirements),
            updates=parse_updates(updates),
            sent_requirements=requirements,
            sent_updates=updates,
        )

    @classmethod
    def of(cls, requirements: list[dict[str, Any]], updates: list[dict[str, Any]]) -> CommitTableRequest:
        """A commit the server makes itself (maintenance), parsed as a client's would be."""
        return cls.from_body({"requirements": requirements, "updates": updates})

    @property
    def creates(self) -> bool:
        """Whether the commit creates its table (``assert-create``: a staged create)."""
        return any(isinstance(requirement, AssertCreate) for requirement in self.requirements)


class TableChangeRequest(CommitTableRequest):
    """One table change of a transaction: a CommitTableRequest that names its table."""

    identifier: TableIdentifier  # type: ignore[assignment] - required here

    @classmethod
    def from_body(cls, value: Any) -> TableChangeRequest:
        if not isinstance(value, dict) or not value.get("identifier"):
            raise BadRequest("Every table change of a transaction needs an identifier")
        return cls._parsed(value)


class CommitTransactionRequest(contract.CommitTransactionRequest):
    """commitTransaction's body: table changes (``TableChangeRequest``) that each name their table."""

    @classmethod
    def from_body(cls, value: Any) -> CommitTransactionRequest:
        """Every change must name its table: checked for all of them before any is parsed."""
        changes = value.get("table-changes") if isinstance(value, dict) else None
        if not isinstance(changes, list):
            raise BadRequest("Invalid transaction: table-changes must be an array")
        if not all(isinstance(change, dict) and change.get("identifier") for change in changes):
            raise BadRequest("Every table change of a transaction needs an identifier")
        return cls.model_construct(table_changes=[TableChangeRequest.from_body(change) for change in changes])


class ReportMetricsRequest(IcebergBaseModel):
    """reportMetrics' body: a scan or commit report. Growler reads its type and keeps the whole
    report as sent (``report``, the JSON object) for operators; it interprets nothing else."""

    report_type: str = Field(alias="report-type")
    report: dict[str, Any] = Field(default_factory=dict, exclude=True, repr=False)

    @classmethod
    def from_body(cls, value: Any) -> ReportMetricsRequest:
        if not isinstance(value, dict) or not isinstance(value.get("report-type"), str):
            raise BadRequest("Invalid metrics report: expected an object with a report-type")
        return cls.model_construct(report_type=value["report-type"], report=value)
