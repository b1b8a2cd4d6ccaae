# Generated from openapi/catalog.yaml by scripts/models.py (`make models`): do not edit.
# tests/unit/test_contract_models.py fails when this file differs from a regeneration.

from __future__ import annotations

from datetime import date, timedelta
from typing import Annotated, Literal
from uuid import UUID

from pydantic import Base64Str, ConfigDict, Field, RootModel

from app.rules.contract.shapes import (
    ContractModel,
    Headers,
    Json,
    NamespaceLevels,
    Strings,
    TableRequirements,
    TableUpdates,
    Text,
)


class ErrorModel(ContractModel):
    message: Annotated[str, Field(description="Human-readable message.")]
    type: Annotated[str, Field(description="Error type name.", examples=["NoSuchNamespaceException"])]
    code: Annotated[int, Field(description="HTTP status code.", examples=[404], ge=400, le=600)]
    stack: list[str] | None = None


class CatalogConfig(ContractModel):
    overrides: Annotated[dict[str, str], Field(description="Settings applied after the client's own configuration.")]
    defaults: Annotated[dict[str, str], Field(description="Settings applied before the client's own configuration.")]
    endpoints: Annotated[
        list[str] | None, Field(description="Endpoints the server implements, each as `<METHOD> <path>`.")
    ] = None
    idempotency_key_lifetime: Annotated[
        timedelta | None,
        Field(
            alias="idempotency-key-lifetime",
            description="ISO-8601 duration during which a client may retry with the same Idempotency-Key. Present only if the server supports idempotency keys.",
            examples=["PT30M"],
        ),
    ] = None


class UpdateNamespacePropertiesRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    removals: Annotated[Strings, Field(examples=[["retention", "comment"]])] = []
    updates: Annotated[dict[str, str], Field(examples=[{"owner": "data-eng"}])] = {}


class PageToken(RootModel[str | None]):
    root: Annotated[
        str | None,
        Field(
            description="Opaque paging token. A paging server returns `next-page-token` while more results remain and null on the last page (or on every answer when the request had no `pageToken`); a server that does not page omits it. Clients treat null or missing as the end."
        ),
    ] = None


class TableIdentifier(ContractModel):
    namespace: NamespaceLevels
    name: str


class CatalogObjectIdentifier(RootModel[list[str]]):
    root: Annotated[
        list[str],
        Field(
            description="Path of a catalog object (table, view, namespace, function); the kind of object follows from context.",
            examples=[["sales", "eu", "orders"]],
        ),
    ]


class PrimitiveType(RootModel[str]):
    root: Annotated[str, Field(description="Name of a primitive Iceberg type.", examples=["long"])]


class VariantType(RootModel[Literal["variant"]]):
    root: Annotated[Literal["variant"], Field(description="The variant type.")]


class ExpressionType(RootModel[str]):
    root: Annotated[str, Field(description="Operator name of an expression node.", examples=["eq"])]


class TrueExpression(ContractModel):
    type: ExpressionType


class FalseExpression(ContractModel):
    type: ExpressionType


class IdReference(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["reference"]
    id: int


class NamedReference(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["reference"]
    name: str


class Function(RootModel[str]):
    root: Annotated[str, Field(min_length=1)]


class Function1(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    catalog: str | None = None
    identifier: CatalogObjectIdentifier


class TermReference(RootModel[str]):
    root: Annotated[
        str,
        Field(
            deprecated=True,
            description="Deprecated field reference by name as a plain string; use Reference.",
            examples=["column-name"],
        ),
    ]


class Transform(RootModel[str]):
    root: Annotated[str, Field(description="Partition or sort transform name.", examples=["identity"])]


class PartitionField(ContractModel):
    field_id: Annotated[int | None, Field(alias="field-id")] = None
    source_id: Annotated[int, Field(alias="source-id")]
    name: str
    transform: Transform


class PartitionSpec(ContractModel):
    spec_id: Annotated[int | None, Field(alias="spec-id")] = None
    fields: list[PartitionField]


class SortDirection(RootModel[Literal["asc", "desc"]]):
    root: Annotated[Literal["asc", "desc"], Field(description="Sort direction.")]


class NullOrder(RootModel[Literal["nulls-first", "nulls-last"]]):
    root: Annotated[Literal["nulls-first", "nulls-last"], Field(description="Where nulls sort.")]


class SortField(ContractModel):
    source_id: Annotated[int, Field(alias="source-id")]
    transform: Transform
    direction: SortDirection
    null_order: Annotated[NullOrder, Field(alias="null-order")]


class SortOrder(ContractModel):
    order_id: Annotated[int, Field(alias="order-id")]
    fields: list[SortField]


class EncryptedKey(ContractModel):
    key_id: Annotated[str, Field(alias="key-id")]
    encrypted_key_metadata: Annotated[Base64Str, Field(alias="encrypted-key-metadata")]
    encrypted_by_id: Annotated[str | None, Field(alias="encrypted-by-id")] = None
    properties: dict[str, str] | None = None


class Summary(ContractModel):
    model_config = ConfigDict(
        extra="allow",
    )
    __annotations__ = {
        "__pydantic_extra__": dict[str, str],
    }
    operation: Literal["append", "replace", "overwrite", "delete"]


class Snapshot(ContractModel):
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    parent_snapshot_id: Annotated[int | None, Field(alias="parent-snapshot-id")] = None
    sequence_number: Annotated[int | None, Field(alias="sequence-number")] = None
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms")]
    manifest_list: Annotated[str, Field(alias="manifest-list", description="Location of the manifest list.")]
    first_row_id: Annotated[
        int | None, Field(alias="first-row-id", description="Row ID of the first row added by this snapshot.")
    ] = None
    added_rows: Annotated[
        int | None, Field(alias="added-rows", description="Upper bound of rows given row IDs by this snapshot.")
    ] = None
    summary: Summary
    schema_id: Annotated[int | None, Field(alias="schema-id")] = None


class SnapshotReference(ContractModel):
    type: Literal["tag", "branch"]
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    max_ref_age_ms: Annotated[int | None, Field(alias="max-ref-age-ms")] = None
    max_snapshot_age_ms: Annotated[int | None, Field(alias="max-snapshot-age-ms")] = None
    min_snapshots_to_keep: Annotated[int | None, Field(alias="min-snapshots-to-keep")] = None


class SnapshotReferences(RootModel[dict[str, SnapshotReference]]):
    root: dict[str, SnapshotReference]


class SnapshotLogItem(ContractModel):
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms")]


class SnapshotLog(RootModel[list[SnapshotLogItem]]):
    root: Annotated[list[SnapshotLogItem], Field(description="History of the current snapshot.")]


class MetadataLogItem(ContractModel):
    metadata_file: Annotated[str, Field(alias="metadata-file")]
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms")]


class MetadataLog(RootModel[list[MetadataLogItem]]):
    root: Annotated[list[MetadataLogItem], Field(description="History of earlier metadata files.")]


class SQLViewRepresentation(ContractModel):
    type: str
    sql: str
    dialect: str


class ViewRepresentation(RootModel[SQLViewRepresentation]):
    root: Annotated[SQLViewRepresentation, Field(description="A representation of a view.")]


class ViewHistoryEntry(ContractModel):
    version_id: Annotated[int, Field(alias="version-id")]
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms")]


class ViewVersion(ContractModel):
    version_id: Annotated[int, Field(alias="version-id")]
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms")]
    schema_id: Annotated[
        int, Field(alias="schema-id", description="Schema of this version; -1 means the last added schema.")
    ]
    summary: dict[str, str]
    representations: list[ViewRepresentation]
    default_catalog: Annotated[str | None, Field(alias="default-catalog")] = None
    default_namespace: Annotated[NamespaceLevels, Field(alias="default-namespace")]


class BaseUpdate(ContractModel):
    action: str


class AssignUUIDUpdate(BaseUpdate):
    action: Literal["assign-uuid"]
    uuid: str


class UpgradeFormatVersionUpdate(BaseUpdate):
    action: Literal["upgrade-format-version"]
    format_version: Annotated[int, Field(alias="format-version")]


class SetCurrentSchemaUpdate(BaseUpdate):
    action: Literal["set-current-schema"]
    schema_id: Annotated[int, Field(alias="schema-id", description="Schema ID, or -1 for the last added schema.")]


class AddPartitionSpecUpdate(BaseUpdate):
    action: Literal["add-spec"]
    spec: PartitionSpec


class SetDefaultSpecUpdate(BaseUpdate):
    action: Literal["set-default-spec"]
    spec_id: Annotated[int, Field(alias="spec-id", description="Partition spec ID, or -1 for the last added spec.")]


class AddSortOrderUpdate(BaseUpdate):
    action: Literal["add-sort-order"]
    sort_order: Annotated[SortOrder, Field(alias="sort-order")]


class SetDefaultSortOrderUpdate(BaseUpdate):
    action: Literal["set-default-sort-order"]
    sort_order_id: Annotated[
        int, Field(alias="sort-order-id", description="Sort order ID, or -1 for the last added sort order.")
    ]


class AddSnapshotUpdate(BaseUpdate):
    action: Literal["add-snapshot"]
    snapshot: Snapshot


class SetSnapshotRefUpdate(BaseUpdate, SnapshotReference):
    action: Literal["set-snapshot-ref"]
    ref_name: Annotated[str, Field(alias="ref-name")]


class RemoveSnapshotsUpdate(BaseUpdate):
    action: Literal["remove-snapshots"]
    snapshot_ids: Annotated[list[int], Field(alias="snapshot-ids")]


class RemoveSnapshotRefUpdate(BaseUpdate):
    action: Literal["remove-snapshot-ref"]
    ref_name: Annotated[str, Field(alias="ref-name")]


class SetLocationUpdate(BaseUpdate):
    action: Literal["set-location"]
    location: str


class SetPropertiesUpdate(BaseUpdate):
    action: Literal["set-properties"]
    updates: dict[str, str]


class RemovePropertiesUpdate(BaseUpdate):
    action: Literal["remove-properties"]
    removals: list[str]


class AddViewVersionUpdate(BaseUpdate):
    action: Literal["add-view-version"]
    view_version: Annotated[ViewVersion, Field(alias="view-version")]


class SetCurrentViewVersionUpdate(BaseUpdate):
    action: Literal["set-current-view-version"]
    view_version_id: Annotated[
        int, Field(alias="view-version-id", description="View version ID, or -1 for the last added version.")
    ]


class RemoveStatisticsUpdate(BaseUpdate):
    action: Literal["remove-statistics"]
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]


class RemovePartitionStatisticsUpdate(BaseUpdate):
    action: Literal["remove-partition-statistics"]
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]


class RemovePartitionSpecsUpdate(BaseUpdate):
    action: Literal["remove-partition-specs"]
    spec_ids: Annotated[list[int], Field(alias="spec-ids")]


class RemoveSchemasUpdate(BaseUpdate):
    action: Literal["remove-schemas"]
    schema_ids: Annotated[list[int], Field(alias="schema-ids")]


class AddEncryptionKeyUpdate(BaseUpdate):
    action: Literal["add-encryption-key"]
    encryption_key: Annotated[EncryptedKey, Field(alias="encryption-key")]


class RemoveEncryptionKeyUpdate(BaseUpdate):
    action: Literal["remove-encryption-key"]
    key_id: Annotated[str, Field(alias="key-id")]


class TableRequirement(ContractModel):
    type: str


class AssertCreate(TableRequirement):
    type: Literal["assert-create"]


class AssertTableUUID(TableRequirement):
    type: Literal["assert-table-uuid"]
    uuid: str


class AssertRefSnapshotId(TableRequirement):
    type: Literal["assert-ref-snapshot-id"]
    ref: str
    snapshot_id: Annotated[int | None, Field(alias="snapshot-id")]


class AssertLastAssignedFieldId(TableRequirement):
    type: Literal["assert-last-assigned-field-id"]
    last_assigned_field_id: Annotated[int, Field(alias="last-assigned-field-id")]


class AssertCurrentSchemaId(TableRequirement):
    type: Literal["assert-current-schema-id"]
    current_schema_id: Annotated[int, Field(alias="current-schema-id")]


class AssertLastAssignedPartitionId(TableRequirement):
    type: Literal["assert-last-assigned-partition-id"]
    last_assigned_partition_id: Annotated[int, Field(alias="last-assigned-partition-id")]


class AssertDefaultSpecId(TableRequirement):
    type: Literal["assert-default-spec-id"]
    default_spec_id: Annotated[int, Field(alias="default-spec-id")]


class AssertDefaultSortOrderId(TableRequirement):
    type: Literal["assert-default-sort-order-id"]
    default_sort_order_id: Annotated[int, Field(alias="default-sort-order-id")]


class AssertViewUUID(ContractModel):
    type: Literal["assert-view-uuid"]
    uuid: str


class StorageCredential(ContractModel):
    prefix: Annotated[
        str,
        Field(
            description="Storage location prefix the credential applies to; with several matches clients pick the longest."
        ),
    ]
    config: dict[str, str]


class LoadCredentialsResponse(ContractModel):
    storage_credentials: Annotated[list[StorageCredential], Field(alias="storage-credentials")]


class PlanStatus(RootModel[Literal["completed", "submitted", "cancelled", "failed"]]):
    root: Annotated[
        Literal["completed", "submitted", "cancelled", "failed"], Field(description="State of a scan planning request.")
    ]


class RegisterTableRequest(ContractModel):
    name: str
    metadata_location: Annotated[str, Field(alias="metadata-location")]
    overwrite: Annotated[bool, Field(description="Replace the metadata of an existing table with this name.")] = False


class RegisterViewRequest(ContractModel):
    name: str
    metadata_location: Annotated[str, Field(alias="metadata-location")]


class TokenType(
    RootModel[
        Literal[
            "urn:ietf:params:oauth:token-type:access_token",
            "urn:ietf:params:oauth:token-type:refresh_token",
            "urn:ietf:params:oauth:token-type:id_token",
            "urn:ietf:params:oauth:token-type:saml1",
            "urn:ietf:params:oauth:token-type:saml2",
            "urn:ietf:params:oauth:token-type:jwt",
        ]
    ]
):
    root: Annotated[
        Literal[
            "urn:ietf:params:oauth:token-type:access_token",
            "urn:ietf:params:oauth:token-type:refresh_token",
            "urn:ietf:params:oauth:token-type:id_token",
            "urn:ietf:params:oauth:token-type:saml1",
            "urn:ietf:params:oauth:token-type:saml2",
            "urn:ietf:params:oauth:token-type:jwt",
        ],
        Field(description="Token type URN from RFC 8693 section 3."),
    ]


class OAuthClientCredentialsRequest(ContractModel):
    grant_type: Literal["client_credentials"]
    scope: str | None = None
    client_id: Annotated[str, Field(description="Client ID; OAuth2 prefers sending it in a Basic auth header.")]
    client_secret: Annotated[str, Field(description="Client secret; OAuth2 prefers sending it in a Basic auth header.")]


class OAuthTokenExchangeRequest(ContractModel):
    grant_type: Literal["urn:ietf:params:oauth:grant-type:token-exchange"]
    scope: str | None = None
    requested_token_type: TokenType | None = None
    subject_token: Annotated[str, Field(description="Token being exchanged.")]
    subject_token_type: TokenType
    actor_token: Annotated[str | None, Field(description="Token of the party acting for the subject.")] = None
    actor_token_type: TokenType | None = None


class OAuthTokenRequest(RootModel[OAuthClientCredentialsRequest | OAuthTokenExchangeRequest]):
    root: Annotated[
        OAuthClientCredentialsRequest | OAuthTokenExchangeRequest,
        Field(deprecated=True, description="Deprecated body of the token endpoint."),
    ]


class CounterResult(ContractModel):
    unit: str
    value: int


class TimerResult(ContractModel):
    time_unit: Annotated[str, Field(alias="time-unit")]
    count: int
    total_duration: Annotated[int, Field(alias="total-duration")]


class MetricResult(RootModel[CounterResult | TimerResult]):
    root: Annotated[CounterResult | TimerResult, Field(description="A single metric value.")]


class Metrics(RootModel[dict[str, MetricResult]]):
    root: dict[str, MetricResult]


class CommitReport(ContractModel):
    table_name: Annotated[str, Field(alias="table-name")]
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    sequence_number: Annotated[int, Field(alias="sequence-number")]
    operation: str
    metrics: Metrics
    metadata: dict[str, str] | None = None


class OAuthError(ContractModel):
    error: Literal[
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
    ]
    error_description: str | None = None
    error_uri: str | None = None


class OAuthTokenResponse(ContractModel):
    access_token: Annotated[str, Field(description="Issued access token.")]
    token_type: Annotated[Literal["bearer", "mac", "N_A"], Field(description="Token type (RFC 6749 section 7.1).")]
    expires_in: Annotated[int | None, Field(description="Token lifetime in seconds.")] = None
    issued_token_type: TokenType | None = None
    refresh_token: Annotated[str | None, Field(description="Refresh token.")] = None
    scope: Annotated[str | None, Field(description="Granted scope.")] = None


class IcebergErrorResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    error: ErrorModel


class CreateNamespaceResponse(ContractModel):
    namespace: NamespaceLevels
    properties: Annotated[
        dict[str, str],
        Field(description="Stored properties, if the server supports them.", examples=[{"owner": "data-eng"}]),
    ] = {}


class GetNamespaceResponse(ContractModel):
    namespace: NamespaceLevels
    properties: Annotated[
        dict[str, str] | None,
        Field(
            description="Stored properties; null when the server has no property support, empty when none are set.",
            examples=[{"owner": "data-eng"}],
        ),
    ] = {}


class ListTablesResponse(ContractModel):
    next_page_token: Annotated[PageToken | None, Field(alias="next-page-token")] = None
    identifiers: list[TableIdentifier] | None = None


class ListFunctionsResponse(ContractModel):
    next_page_token: Annotated[PageToken | None, Field(alias="next-page-token")] = None
    identifiers: list[CatalogObjectIdentifier] | None = None


class ListNamespacesResponse(ContractModel):
    next_page_token: Annotated[PageToken | None, Field(alias="next-page-token")] = None
    namespaces: list[NamespaceLevels] | None = None


class FunctionSQLRepresentation(ContractModel):
    type: Literal["sql"]
    dialect: Annotated[str, Field(description="SQL dialect, e.g. `spark`.")]
    sql: Annotated[str, Field(description="SQL expression.")]


class FunctionDefinitionVersionRef(ContractModel):
    definition_id: Annotated[str, Field(alias="definition-id")]
    version_id: Annotated[int, Field(alias="version-id")]


class UpdateNamespacePropertiesResponse(ContractModel):
    updated: Annotated[list[str], Field(description="Keys that were set.")]
    removed: Annotated[list[str], Field(description="Keys that were removed.")]
    missing: Annotated[
        list[str] | None, Field(description="Keys asked to be removed that did not exist (optional).")
    ] = None


class BlobMetadata(ContractModel):
    type: str
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    sequence_number: Annotated[int, Field(alias="sequence-number")]
    fields: list[int]
    properties: dict[str, str] | None = None


class PartitionStatisticsFile(ContractModel):
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    statistics_path: Annotated[str, Field(alias="statistics-path")]
    file_size_in_bytes: Annotated[int, Field(alias="file-size-in-bytes")]


class BooleanTypeValue(RootModel[bool]):
    root: Annotated[bool, Field(description="Boolean value.", examples=[True])]


class IntegerTypeValue(RootModel[int]):
    root: Annotated[int, Field(description="Int value.", examples=[42])]


class LongTypeValue(RootModel[int]):
    root: Annotated[int, Field(description="Long value.", examples=[9223372036854775807])]


class FloatTypeValue(RootModel[float]):
    root: Annotated[float, Field(description="Float value.", examples=[3.14])]


class DoubleTypeValue(RootModel[float]):
    root: Annotated[float, Field(description="Double value.", examples=[123.456])]


class DecimalTypeValue(RootModel[str]):
    root: Annotated[
        str,
        Field(
            description="Decimal value as a string: plain digits for scale >= 0 (`123.4500`, `2`), scientific notation with exponent -scale for negative scale (`2E+20`).",
            examples=["123.4500"],
        ),
    ]


class StringTypeValue(RootModel[str]):
    root: Annotated[str, Field(description="String value.", examples=["hello"])]


class UUIDTypeValue(RootModel[UUID]):
    root: Annotated[
        UUID,
        Field(
            description="UUID value as 36 lowercase characters (RFC 4122 form).",
            examples=["eb26bdb1-a1d8-4aa6-990e-da940875492c"],
        ),
    ]


class DateTypeValue(RootModel[date]):
    root: Annotated[date, Field(description="Date value, ISO-8601 `YYYY-MM-DD`.", examples=["2007-12-03"])]


class TimeTypeValue(RootModel[str]):
    root: Annotated[
        str,
        Field(description="Time value, ISO-8601 with microseconds (`HH:MM:SS.ssssss`).", examples=["22:31:08.123456"]),
    ]


class TimestampTypeValue(RootModel[str]):
    root: Annotated[
        str,
        Field(
            description="Timestamp without zone, ISO-8601 with microseconds.", examples=["2007-12-03T10:15:30.123456"]
        ),
    ]


class TimestampTzTypeValue(RootModel[str]):
    root: Annotated[
        str,
        Field(
            description="Timestamp with zone, ISO-8601 with microseconds and an offset (`+00:00` for UTC).",
            examples=["2007-12-03T10:15:30.123456+00:00"],
        ),
    ]


class TimestampNanoTypeValue(RootModel[str]):
    root: Annotated[
        str,
        Field(
            description="Timestamp without zone, ISO-8601 with nanoseconds.", examples=["2007-12-03T10:15:30.123456789"]
        ),
    ]


class TimestampTzNanoTypeValue(RootModel[str]):
    root: Annotated[
        str,
        Field(
            description="Timestamp with zone, ISO-8601 with nanoseconds and an offset (`+00:00` for UTC).",
            examples=["2007-12-03T10:15:30.123456789+00:00"],
        ),
    ]


class FixedTypeValue(RootModel[str]):
    root: Annotated[
        str, Field(description="Fixed-length bytes as uppercase hex, keeping the length.", examples=["78797A"])
    ]


class BinaryTypeValue(RootModel[str]):
    root: Annotated[str, Field(description="Binary bytes as uppercase hex.", examples=["78797A"])]


class CountMap(ContractModel):
    keys: Annotated[list[IntegerTypeValue] | None, Field(description="Column IDs.")] = None
    values: Annotated[list[LongTypeValue] | None, Field(description="Counts, matched to `keys` by position.")] = None


class PrimitiveTypeValue(
    RootModel[
        BooleanTypeValue
        | IntegerTypeValue
        | LongTypeValue
        | FloatTypeValue
        | DoubleTypeValue
        | DecimalTypeValue
        | StringTypeValue
        | UUIDTypeValue
        | DateTypeValue
        | TimeTypeValue
        | TimestampTypeValue
        | TimestampTzTypeValue
        | TimestampNanoTypeValue
        | TimestampTzNanoTypeValue
        | FixedTypeValue
        | BinaryTypeValue
    ]
):
    root: Annotated[
        BooleanTypeValue
        | IntegerTypeValue
        | LongTypeValue
        | FloatTypeValue
        | DoubleTypeValue
        | DecimalTypeValue
        | StringTypeValue
        | UUIDTypeValue
        | DateTypeValue
        | TimeTypeValue
        | TimestampTypeValue
        | TimestampTzTypeValue
        | TimestampNanoTypeValue
        | TimestampTzNanoTypeValue
        | FixedTypeValue
        | BinaryTypeValue,
        Field(description="Value of a primitive type."),
    ]


class FileFormat(RootModel[Literal["avro", "orc", "parquet", "puffin"]]):
    root: Annotated[Literal["avro", "orc", "parquet", "puffin"], Field(description="Data file format.")]


class ContentFile(ContractModel):
    content: str
    file_path: Annotated[str, Field(alias="file-path")]
    file_format: Annotated[FileFormat, Field(alias="file-format")]
    spec_id: Annotated[int, Field(alias="spec-id")]
    partition: Annotated[
        list[PrimitiveTypeValue],
        Field(description="Partition values in the order of the partition spec `spec-id`.", examples=[[1, "bar"]]),
    ]
    file_size_in_bytes: Annotated[int, Field(alias="file-size-in-bytes", description="File size in bytes.")]
    record_count: Annotated[int, Field(alias="record-count", description="Number of records.")]
    key_metadata: Annotated[
        BinaryTypeValue | None, Field(alias="key-metadata", description="Encryption key metadata.")
    ] = None
    split_offsets: Annotated[
        list[int] | None, Field(alias="split-offsets", description="Offsets where the file can be split.")
    ] = None
    sort_order_id: Annotated[int | None, Field(alias="sort-order-id")] = None


class PositionDeleteFile(ContentFile):
    content: Literal["position-deletes"]
    content_offset: Annotated[
        int | None, Field(alias="content-offset", description="Offset of the delete content in the file.")
    ] = None
    content_size_in_bytes: Annotated[
        int | None,
        Field(alias="content-size-in-bytes", description="Size of the delete content; required with `content-offset`."),
    ] = None


class EqualityDeleteFile(ContentFile):
    content: Literal["equality-deletes"]
    equality_ids: Annotated[
        list[int] | None, Field(alias="equality-ids", description="Field IDs used for equality.")
    ] = None


class PlanTask(RootModel[str]):
    root: Annotated[
        str, Field(description="Opaque unit of planning work from the server, expanded with fetchScanTasks.")
    ]


class MultiValuedMap(RootModel[dict[str, list[str]]]):
    root: dict[str, list[str]]


class RemoteSignRequest(ContractModel):
    region: str
    uri: str
    method: Literal["PUT", "GET", "HEAD", "POST", "DELETE", "PATCH", "OPTIONS"]
    headers: Headers
    properties: dict[str, str] | None = None
    body: Annotated[
        str | None,
        Field(
            description="Request body, only for requests whose body must be checked before signing (e.g. S3 DeleteObjects)."
        ),
    ] = None
    provider: Annotated[
        str | None, Field(description="Storage provider, named by its URI scheme (e.g. `s3`, the default).")
    ] = None


class RemoteSignResult(ContractModel):
    uri: str
    headers: MultiValuedMap


class RemoteSigningConfig(ContractModel):
    properties: Annotated[
        dict[str, str] | None, Field(description="Properties the signer client sends unchanged in every sign request.")
    ] = None
    headers: Annotated[
        MultiValuedMap | None, Field(description="Headers the signer client sends unchanged to the signing endpoint.")
    ] = None


class CreateNamespaceRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    namespace: NamespaceLevels
    properties: Annotated[
        dict[str, str], Field(description="Namespace properties.", examples=[{"owner": "data-eng"}])
    ] = {}


class RenameTableRequest(ContractModel):
    source: TableIdentifier
    destination: TableIdentifier


class Literal1(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["literal"]
    value: PrimitiveTypeValue
    data_type: Annotated[PrimitiveType | None, Field(alias="data-type")] = None


class LiteralModel(RootModel[PrimitiveTypeValue | Literal1]):
    root: Annotated[
        PrimitiveTypeValue | Literal1,
        Field(description="Literal value: a bare value or a literal object, optionally typed."),
    ]


class Literals1(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["literals"]
    values: list[PrimitiveTypeValue]
    data_type: Annotated[PrimitiveType, Field(alias="data-type")]


class Literals(RootModel[list[LiteralModel] | Literals1]):
    root: Annotated[
        list[LiteralModel] | Literals1,
        Field(description="Several literals: a bare array, or an object giving one data type for all values."),
    ]


class Reference(RootModel[IdReference | NamedReference]):
    root: Annotated[
        IdReference | NamedReference,
        Field(
            description="Field reference, by field ID (bound) or by name (unbound); the context decides which is valid."
        ),
    ]


class TransformTerm(ContractModel):
    type: Literal["transform"]
    transform: Transform
    term: TermReference


class SetPartitionStatisticsUpdate(BaseUpdate):
    action: Literal["set-partition-statistics"]
    partition_statistics: Annotated[PartitionStatisticsFile, Field(alias="partition-statistics")]


class ViewRequirement(RootModel[AssertViewUUID]):
    root: Annotated[AssertViewUUID, Field(description="A condition a view commit checks first.", discriminator="type")]


class FailedPlanningResult(ContractModel):
    error: ErrorModel
    status: Literal["failed"]


class AsyncPlanningResult(ContractModel):
    status: Literal["submitted"]
    plan_id: Annotated[str, Field(alias="plan-id", description="Plan ID to poll with.")]


class EmptyPlanningResult(ContractModel):
    status: Literal["cancelled"]


class ReportMetricsRequest2(CommitReport):
    report_type: Annotated[str, Field(alias="report-type")]


class FunctionRepresentation(RootModel[FunctionSQLRepresentation]):
    root: Annotated[FunctionSQLRepresentation, Field(description="An implementation of a function.")]


class FunctionDefinitionLogEntry(ContractModel):
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms", description="Time of the change in epoch milliseconds.")]
    definition_versions: Annotated[
        list[FunctionDefinitionVersionRef],
        Field(alias="definition-versions", description="Version in use for each definition."),
    ]


class StatisticsFile(ContractModel):
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    statistics_path: Annotated[str, Field(alias="statistics-path")]
    file_size_in_bytes: Annotated[int, Field(alias="file-size-in-bytes")]
    file_footer_size_in_bytes: Annotated[int, Field(alias="file-footer-size-in-bytes")]
    blob_metadata: Annotated[list[BlobMetadata], Field(alias="blob-metadata")]


class ValueMap(ContractModel):
    keys: Annotated[list[IntegerTypeValue] | None, Field(description="Column IDs.")] = None
    values: Annotated[list[PrimitiveTypeValue] | None, Field(description="Values, matched to `keys` by position.")] = (
        None
    )


class DataFile(ContentFile):
    content: Literal["data"]
    first_row_id: Annotated[
        int | None, Field(alias="first-row-id", description="Row ID of the first row in the file.")
    ] = None
    column_sizes: Annotated[CountMap | None, Field(alias="column-sizes", description="Bytes per column.")] = None
    value_counts: Annotated[
        CountMap | None, Field(alias="value-counts", description="Values per column, including nulls and NaNs.")
    ] = None
    null_value_counts: Annotated[CountMap | None, Field(alias="null-value-counts", description="Nulls per column.")] = (
        None
    )
    nan_value_counts: Annotated[CountMap | None, Field(alias="nan-value-counts", description="NaNs per column.")] = None
    lower_bounds: Annotated[ValueMap | None, Field(alias="lower-bounds", description="Lower bound per column.")] = None
    upper_bounds: Annotated[ValueMap | None, Field(alias="upper-bounds", description="Upper bound per column.")] = None


class DeleteFile(RootModel[PositionDeleteFile | EqualityDeleteFile]):
    root: Annotated[
        PositionDeleteFile | EqualityDeleteFile, Field(description="A delete file.", discriminator="content")
    ]


class FetchScanTasksRequest(ContractModel):
    plan_task: Annotated[Text, Field(alias="plan-task")]


class Term(RootModel[TermReference | TransformTerm]):
    root: Annotated[
        TermReference | TransformTerm,
        Field(deprecated=True, description="Deprecated operand form of older predicates; use Reference or Apply."),
    ]


class SetStatisticsUpdate(BaseUpdate):
    action: Literal["set-statistics"]
    snapshot_id: Annotated[
        int | None,
        Field(
            alias="snapshot-id", deprecated=True, description="Deprecated, to be removed; use `statistics.snapshot-id`."
        ),
    ] = None
    statistics: StatisticsFile


class FunctionDefinitionVersion(ContractModel):
    version_id: Annotated[int, Field(alias="version-id", description="Version ID, increasing with every version.")]
    representations: Annotated[list[FunctionRepresentation], Field(description="Implementations of this version.")]
    deterministic: Annotated[bool, Field(description="Whether equal inputs always give equal results.")] = False
    on_null_input: Annotated[
        Literal["return-null", "call"], Field(alias="on-null-input", description="Behaviour when an argument is NULL.")
    ] = "call"
    timestamp_ms: Annotated[int, Field(alias="timestamp-ms", description="Creation time in epoch milliseconds.")]


class StructField(ContractModel):
    id: int
    name: str
    type: Type
    required: bool
    doc: str | None = None
    initial_default: Annotated[PrimitiveTypeValue | None, Field(alias="initial-default")] = None
    write_default: Annotated[PrimitiveTypeValue | None, Field(alias="write-default")] = None


class StructType(ContractModel):
    type: Literal["struct"]
    fields: list[StructField]


class ListType(ContractModel):
    type: Literal["list"]
    element_id: Annotated[int, Field(alias="element-id")]
    element: Type
    element_required: Annotated[bool, Field(alias="element-required")]


class MapType(ContractModel):
    type: Literal["map"]
    key_id: Annotated[int, Field(alias="key-id")]
    key: Type
    value_id: Annotated[int, Field(alias="value-id")]
    value: Type
    value_required: Annotated[bool, Field(alias="value-required")]


class AndOrPredicate(ContractModel):
    type: ExpressionType
    left: Predicate
    right: Predicate


class NotPredicate(ContractModel):
    type: ExpressionType
    child: Predicate


class UnaryPredicate(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: ExpressionType
    child: ValueExpression | None = None
    term: Annotated[Term | None, Field(deprecated=True, description="Deprecated; use `child`.")] = None


class ComparisonPredicate(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: ExpressionType
    left: ValueExpression | None = None
    right: ValueExpression | None = None
    term: Annotated[Term | None, Field(deprecated=True, description="Deprecated; use `left`.")] = None
    value: Annotated[LiteralModel | None, Field(deprecated=True, description="Deprecated; use `right`.")] = None


class SetPredicate(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: ExpressionType
    child: ValueExpression | None = None
    term: Annotated[Term | None, Field(deprecated=True, description="Deprecated; use `child`.")] = None
    values: Literals


class Apply(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["apply"]
    function: Function | CatalogObjectIdentifier | Function1
    arguments: list[FunctionArgument]


class TableMetadata(ContractModel):
    format_version: Annotated[int, Field(alias="format-version", ge=1, le=3)]
    table_uuid: Annotated[str, Field(alias="table-uuid")]
    location: str | None = None
    last_updated_ms: Annotated[int | None, Field(alias="last-updated-ms")] = None
    next_row_id: Annotated[
        int | None, Field(alias="next-row-id", description="Next row ID to assign; greater than any assigned one.")
    ] = None
    properties: dict[str, str] | None = None
    schemas: list[Schema] | None = None
    current_schema_id: Annotated[int | None, Field(alias="current-schema-id")] = None
    last_column_id: Annotated[int | None, Field(alias="last-column-id")] = None
    partition_specs: Annotated[list[PartitionSpec] | None, Field(alias="partition-specs")] = None
    default_spec_id: Annotated[int | None, Field(alias="default-spec-id")] = None
    last_partition_id: Annotated[int | None, Field(alias="last-partition-id")] = None
    sort_orders: Annotated[list[SortOrder] | None, Field(alias="sort-orders")] = None
    default_sort_order_id: Annotated[int | None, Field(alias="default-sort-order-id")] = None
    encryption_keys: Annotated[list[EncryptedKey] | None, Field(alias="encryption-keys")] = None
    snapshots: list[Snapshot] | None = None
    refs: SnapshotReferences | None = None
    current_snapshot_id: Annotated[int | None, Field(alias="current-snapshot-id")] = None
    last_sequence_number: Annotated[int | None, Field(alias="last-sequence-number")] = None
    snapshot_log: Annotated[SnapshotLog | None, Field(alias="snapshot-log")] = None
    metadata_log: Annotated[MetadataLog | None, Field(alias="metadata-log")] = None
    statistics: list[StatisticsFile] | None = None
    partition_statistics: Annotated[list[PartitionStatisticsFile] | None, Field(alias="partition-statistics")] = None


class ViewMetadata(ContractModel):
    view_uuid: Annotated[str, Field(alias="view-uuid")]
    format_version: Annotated[int, Field(alias="format-version", ge=1, le=1)]
    location: str
    current_version_id: Annotated[int, Field(alias="current-version-id")]
    versions: list[ViewVersion]
    version_log: Annotated[list[ViewHistoryEntry], Field(alias="version-log")]
    schemas: list[Schema]
    properties: dict[str, str] | None = None


class AddSchemaUpdate(BaseUpdate):
    action: Literal["add-schema"]
    schema_: Annotated[Schema, Field(alias="schema")]
    last_column_id: Annotated[
        int | None,
        Field(
            alias="last-column-id", deprecated=True, description="Deprecated, to be removed; the server works it out."
        ),
    ] = None


class LoadTableResult(ContractModel):
    metadata_location: Annotated[
        str | None, Field(alias="metadata-location", description="Null when the table is only staged.")
    ] = None
    metadata: TableMetadata
    config: dict[str, str] | None = None
    storage_credentials: Annotated[list[StorageCredential] | None, Field(alias="storage-credentials")] = None
    remote_signing_config: Annotated[RemoteSigningConfig | None, Field(alias="remote-signing-config")] = None


class ScanTasks(ContractModel):
    delete_files: Annotated[
        list[DeleteFile] | None, Field(alias="delete-files", description="Delete files used by the file scan tasks.")
    ] = None
    file_scan_tasks: Annotated[list[FileScanTask] | None, Field(alias="file-scan-tasks")] = None
    plan_tasks: Annotated[list[PlanTask] | None, Field(alias="plan-tasks")] = None


class CommitTableRequest(ContractModel):
    identifier: Annotated[
        TableIdentifier | None, Field(description="Table to change; required inside a transaction commit.")
    ] = None
    requirements: TableRequirements
    updates: TableUpdates


class CommitViewRequest(ContractModel):
    identifier: Annotated[TableIdentifier | None, Field(description="View to change.")] = None
    requirements: list[ViewRequirement] | None = None
    updates: list[ViewUpdate]


class CommitTransactionRequest(ContractModel):
    table_changes: Annotated[list[CommitTableRequest], Field(alias="table-changes")]


class CreateTableRequest(ContractModel):
    name: str
    location: str | None = None
    schema_: Annotated[Schema, Field(alias="schema")]
    partition_spec: Annotated[PartitionSpec | None, Field(alias="partition-spec")] = None
    write_order: Annotated[SortOrder | None, Field(alias="write-order")] = None
    stage_create: Annotated[bool | None, Field(alias="stage-create")] = None
    properties: dict[str, str] | None = None


class UnregisterTableResult(ContractModel):
    metadata_location: Annotated[
        str, Field(alias="metadata-location", description="Metadata location at the time of unregistering.")
    ]
    metadata: TableMetadata


class CreateViewRequest(ContractModel):
    name: str
    location: str | None = None
    schema_: Annotated[Schema, Field(alias="schema")]
    view_version: Annotated[
        ViewVersion,
        Field(
            alias="view-version",
            description="First view version; its schema-id is replaced by the ID given to `schema`.",
        ),
    ]
    properties: dict[str, str]


class LoadViewResult(ContractModel):
    metadata_location: Annotated[str, Field(alias="metadata-location")]
    metadata: ViewMetadata
    config: dict[str, str] | None = None


class ScanReport(ContractModel):
    table_name: Annotated[str, Field(alias="table-name")]
    snapshot_id: Annotated[int, Field(alias="snapshot-id")]
    filter: Predicate
    schema_id: Annotated[int, Field(alias="schema-id")]
    projected_field_ids: Annotated[list[int], Field(alias="projected-field-ids")]
    projected_field_names: Annotated[list[str], Field(alias="projected-field-names")]
    metrics: Metrics
    metadata: dict[str, str] | None = None


class LoadFunctionResult(ContractModel):
    metadata_location: Annotated[str | None, Field(alias="metadata-location")] = None
    metadata: FunctionMetadata


class FunctionMetadata(ContractModel):
    function_uuid: Annotated[
        UUID, Field(alias="function-uuid", description="UUID of the function, assigned once at creation.")
    ]
    format_version: Annotated[
        int, Field(alias="format-version", description="Function metadata format version.", ge=1, le=1)
    ]
    definitions: Annotated[list[FunctionDefinition], Field(description="Function definitions (overloads).")]
    definition_log: Annotated[
        list[FunctionDefinitionLogEntry],
        Field(alias="definition-log", description="History of the definitions' current versions."),
    ]
    location: Annotated[str | None, Field(description="Base location for the function's metadata files.")] = None
    properties: Annotated[dict[str, str] | None, Field(description="Function properties.")] = None
    secure: Annotated[bool, Field(description="Whether the function is secure.")] = False
    doc: Annotated[str | None, Field(description="Documentation.")] = None


class FunctionDefinition(ContractModel):
    definition_id: Annotated[
        str, Field(alias="definition-id", description="Parameter types joined by commas without spaces.")
    ]
    specific_name: Annotated[
        str | None,
        Field(alias="specific-name", description="Optional name for the definition, unique within the function."),
    ] = None
    parameters: Annotated[list[FunctionParameter], Field(description="Parameters in call order.")]
    return_type: Annotated[FunctionDataType, Field(alias="return-type")]
    return_nullable: Annotated[
        bool, Field(alias="return-nullable", description="Hint whether the result may be null.")
    ] = True
    versions: Annotated[list[FunctionDefinitionVersion], Field(description="Versions of this definition.")]
    current_version_id: Annotated[int, Field(alias="current-version-id", description="Current version ID.")]
    function_type: Annotated[
        Literal["udf", "udtf"],
        Field(
            alias="function-type",
            description="`udf` (scalar) or `udtf` (table function, whose return type is a struct).",
        ),
    ]
    doc: Annotated[str | None, Field(description="Documentation.")] = None


class FunctionParameter(ContractModel):
    type: FunctionDataType
    name: str
    doc: Annotated[str | None, Field(description="Documentation.")] = None


class FunctionListType(ContractModel):
    type: Literal["list"]
    element: FunctionDataType


class FunctionMapType(ContractModel):
    type: Literal["map"]
    key: FunctionDataType
    value: FunctionDataType


class FunctionStructType(ContractModel):
    type: Literal["struct"]
    fields: list[FunctionStructField]


class FunctionStructField(ContractModel):
    name: str
    type: FunctionDataType


class CommitTableResponse(ContractModel):
    metadata_location: Annotated[str, Field(alias="metadata-location")]
    metadata: TableMetadata


class PlanTableScanRequest(ContractModel):
    snapshot_id: Annotated[int | None, Field(alias="snapshot-id", description="Snapshot for a point-in-time scan.")] = (
        None
    )
    select: Annotated[list[Text] | None, Field(description="Fields to read.")] = None
    filter: Annotated[Json | None, Field(description="Row filter.")] = None
    min_rows_requested: Annotated[
        int | None,
        Field(
            alias="min-rows-requested",
            description="Hint: the client needs at least this many rows; the server may return more or fewer.",
        ),
    ] = None
    case_sensitive: Annotated[
        bool, Field(alias="case-sensitive", description="Match field names in `select` and `filter` case-sensitively.")
    ] = True
    use_snapshot_schema: Annotated[
        bool,
        Field(
            alias="use-snapshot-schema",
            description="Use the snapshot's own schema (time travel) instead of the table schema (branches).",
        ),
    ] = False
    start_snapshot_id: Annotated[
        int | None, Field(alias="start-snapshot-id", description="First snapshot of an incremental scan, exclusive.")
    ] = None
    end_snapshot_id: Annotated[
        int | None,
        Field(
            alias="end-snapshot-id",
            description="Last snapshot of an incremental scan, inclusive; needed with `start-snapshot-id`.",
        ),
    ] = None
    stats_fields: Annotated[
        list[Text] | None, Field(alias="stats-fields", description="Fields to return column statistics for.")
    ] = None


class FileScanTask(ContractModel):
    data_file: Annotated[DataFile, Field(alias="data-file")]
    delete_file_references: Annotated[
        list[int] | None,
        Field(alias="delete-file-references", description="Positions (0-based) in the delete files list."),
    ] = None
    residual_filter: Annotated[
        Predicate | None,
        Field(
            alias="residual-filter",
            description="Filter still to apply to this file's rows; if missing the client works it out or uses the original filter.",
        ),
    ] = None


class Schema(StructType):
    schema_id: Annotated[int | None, Field(alias="schema-id")] = None
    identifier_field_ids: Annotated[list[int] | None, Field(alias="identifier-field-ids")] = None


class Type(RootModel[VariantType | PrimitiveType | StructType | ListType | MapType]):
    root: Annotated[
        VariantType | PrimitiveType | StructType | ListType | MapType,
        Field(description="Any Iceberg type: variant, primitive, struct, list or map."),
    ]


class Predicate(
    RootModel[
        bool
        | TrueExpression
        | FalseExpression
        | AndOrPredicate
        | NotPredicate
        | UnaryPredicate
        | ComparisonPredicate
        | SetPredicate
    ]
):
    root: Annotated[
        bool
        | TrueExpression
        | FalseExpression
        | AndOrPredicate
        | NotPredicate
        | UnaryPredicate
        | ComparisonPredicate
        | SetPredicate,
        Field(description="Boolean filter expression; a bare `true` or `false` is allowed."),
    ]


class ValueExpression(RootModel[LiteralModel | Reference | Apply]):
    root: Annotated[
        LiteralModel | Reference | Apply,
        Field(description="An expression producing a value: literal, field reference or function call."),
    ]


class TableUpdate(
    RootModel[
        AssignUUIDUpdate
        | UpgradeFormatVersionUpdate
        | AddSchemaUpdate
        | SetCurrentSchemaUpdate
        | AddPartitionSpecUpdate
        | SetDefaultSpecUpdate
        | AddSortOrderUpdate
        | SetDefaultSortOrderUpdate
        | AddSnapshotUpdate
        | SetSnapshotRefUpdate
        | RemoveSnapshotsUpdate
        | RemoveSnapshotRefUpdate
        | SetLocationUpdate
        | SetPropertiesUpdate
        | RemovePropertiesUpdate
        | SetStatisticsUpdate
        | RemoveStatisticsUpdate
        | SetPartitionStatisticsUpdate
        | RemovePartitionStatisticsUpdate
        | RemovePartitionSpecsUpdate
        | RemoveSchemasUpdate
        | AddEncryptionKeyUpdate
        | RemoveEncryptionKeyUpdate
    ]
):
    root: Annotated[
        AssignUUIDUpdate
        | UpgradeFormatVersionUpdate
        | AddSchemaUpdate
        | SetCurrentSchemaUpdate
        | AddPartitionSpecUpdate
        | SetDefaultSpecUpdate
        | AddSortOrderUpdate
        | SetDefaultSortOrderUpdate
        | AddSnapshotUpdate
        | SetSnapshotRefUpdate
        | RemoveSnapshotsUpdate
        | RemoveSnapshotRefUpdate
        | SetLocationUpdate
        | SetPropertiesUpdate
        | RemovePropertiesUpdate
        | SetStatisticsUpdate
        | RemoveStatisticsUpdate
        | SetPartitionStatisticsUpdate
        | RemovePartitionStatisticsUpdate
        | RemovePartitionSpecsUpdate
        | RemoveSchemasUpdate
        | AddEncryptionKeyUpdate
        | RemoveEncryptionKeyUpdate,
        Field(description="Any update allowed in a table commit."),
    ]


class ViewUpdate(
    RootModel[
        AssignUUIDUpdate
        | UpgradeFormatVersionUpdate
        | AddSchemaUpdate
        | SetLocationUpdate
        | SetPropertiesUpdate
        | RemovePropertiesUpdate
        | AddViewVersionUpdate
        | SetCurrentViewVersionUpdate
    ]
):
    root: Annotated[
        AssignUUIDUpdate
        | UpgradeFormatVersionUpdate
        | AddSchemaUpdate
        | SetLocationUpdate
        | SetPropertiesUpdate
        | RemovePropertiesUpdate
        | AddViewVersionUpdate
        | SetCurrentViewVersionUpdate,
        Field(description="Any update allowed in a view commit."),
    ]


class CompletedPlanningResult(ScanTasks):
    status: Literal["completed"]
    storage_credentials: Annotated[
        list[StorageCredential] | None,
        Field(alias="storage-credentials", description="Credentials for reading the returned files."),
    ] = None


class FetchScanTasksResult(ScanTasks):
    pass


class ReportMetricsRequest1(ScanReport):
    report_type: Annotated[str, Field(alias="report-type")]


class FunctionDataType(RootModel[str | FunctionListType | FunctionMapType | FunctionStructType]):
    root: Annotated[
        str | FunctionListType | FunctionMapType | FunctionStructType,
        Field(
            description="Parameter or return type: a type string without spaces or quotes (e.g. `int`, `decimal(9,2)`), or an object for list, map and struct types; extra fields in those objects are ignored."
        ),
    ]


class FunctionArgument(RootModel[ValueExpression | Predicate]):
    root: Annotated[ValueExpression | Predicate, Field(description="Argument of a function call.")]


class CompletedPlanningWithIDResult(CompletedPlanningResult):
    plan_id: Annotated[str, Field(alias="plan-id", description="Plan ID.")]
    status: Literal["completed"]


class FetchPlanningResult(RootModel[CompletedPlanningResult | FailedPlanningResult | EmptyPlanningResult]):
    root: Annotated[
        CompletedPlanningResult | FailedPlanningResult | EmptyPlanningResult,
        Field(description="Answer of fetchPlanningResult.", discriminator="status"),
    ]


class ReportMetricsRequest(RootModel[ReportMetricsRequest1 | ReportMetricsRequest2]):
    root: Annotated[
        ReportMetricsRequest1 | ReportMetricsRequest2,
        Field(description="Scan or commit metrics report; `report-type` says which."),
    ]


class PlanTableScanResult(
    RootModel[CompletedPlanningWithIDResult | FailedPlanningResult | AsyncPlanningResult | EmptyPlanningResult]
):
    root: Annotated[
        CompletedPlanningWithIDResult | FailedPlanningResult | AsyncPlanningResult | EmptyPlanningResult,
        Field(description="Answer of planTableScan.", discriminator="status"),
    ]


StructField.model_rebuild()
ListType.model_rebuild()
MapType.model_rebuild()
AndOrPredicate.model_rebuild()
NotPredicate.model_rebuild()
UnaryPredicate.model_rebuild()
ComparisonPredicate.model_rebuild()
SetPredicate.model_rebuild()
Apply.model_rebuild()
TableMetadata.model_rebuild()
ViewMetadata.model_rebuild()
AddSchemaUpdate.model_rebuild()
ScanTasks.model_rebuild()
CommitViewRequest.model_rebuild()
CreateTableRequest.model_rebuild()
CreateViewRequest.model_rebuild()
ScanReport.model_rebuild()
LoadFunctionResult.model_rebuild()
FunctionMetadata.model_rebuild()
FunctionDefinition.model_rebuild()
FunctionParameter.model_rebuild()
FunctionListType.model_rebuild()
FunctionMapType.model_rebuild()
FunctionStructType.model_rebuild()
FunctionStructField.model_rebuild()
FileScanTask.model_rebuild()
CompletedPlanningResult.model_rebuild()
FetchScanTasksResult.model_rebuild()
ReportMetricsRequest1.model_rebuild()
CompletedPlanningWithIDResult.model_rebuild()
