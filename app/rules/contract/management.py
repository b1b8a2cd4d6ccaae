# Generated from openapi/management.yaml by scripts/models.py (`make models`): do not edit.
# tests/unit/test_contract_models.py fails when this file differs from a regeneration.

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, ConfigDict, Field, RootModel, SecretStr

from app.rules.contract.shapes import (
    ContractModel,
    Json,
    JsonObject,
    NamespaceLevels,
    NamespacePaths,
    SecurableShape,
    Strings,
    Text,
    UpdateShape,
)
from app.rules.privileges import Privilege, SecurableType


class AuditRecord(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    id: int
    recorded_at: Annotated[AwareDatetime, Field(alias="recorded-at")]
    request_id: Annotated[str | None, Field(alias="request-id")] = None
    principal: str | None = None
    identity_provider: Annotated[
        str | None,
        Field(
            alias="identity-provider",
            description="growler (a principal of the catalog's own) or oidc (the configured identity provider)",
        ),
    ] = None
    roles: Annotated[
        list[str],
        Field(
            description="The roles the identity provider's token carried (a principal of the catalog's own has its roles in the catalog)"
        ),
    ]
    operation: Annotated[
        str,
        Field(
            description="The operationId, or unmatched (no operation was matched, e.g. a request refused before routing)"
        ),
    ]
    method: str
    path: str
    object: str | None = None
    decision: Literal["allowed", "refused", "unauthenticated", "error"]
    rule: Annotated[str | None, Field(description="The grant or right that allowed, or why it was refused")] = None
    status: int
    client: str | None = None
    user_agent: Annotated[str | None, Field(alias="user-agent")] = None
    access: Annotated[
        list[dict[str, Any]] | None,
        Field(description="Storage access given to the caller (signed requests, vended credentials), never a key"),
    ] = None


class KafkaSinkSettings(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    topic: Annotated[
        str,
        Field(
            description="The topic, or a template in which {warehouse} is the warehouse's name (_installation for management events)",
            max_length=249,
            min_length=1,
        ),
    ]
    security_protocol: Annotated[
        Literal["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"], Field(alias="security-protocol")
    ] = "plaintext"
    sasl_mechanism: Annotated[
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None,
        Field(
            alias="sasl-mechanism", description="Required with sasl_plaintext and sasl_ssl; PLAIN only over sasl_ssl"
        ),
    ] = None
    sasl_username: Annotated[str | None, Field(alias="sasl-username", max_length=256, min_length=1)] = None
    sasl_password: Annotated[
        SecretStr | None,
        Field(
            alias="sasl-password",
            description="Stored encrypted (needs GROWLER_SECRETS_KEY), never returned",
            max_length=256,
            min_length=1,
        ),
    ] = None
    ssl_ca_pem: Annotated[
        str | None,
        Field(
            alias="ssl-ca-pem",
            description="PEM certificates the brokers' certificates are verified against (ssl, sasl_ssl; default the system's)",
            max_length=65536,
        ),
    ] = None


class KafkaSinkView(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    topic: str
    security_protocol: Annotated[str, Field(alias="security-protocol")]
    sasl_mechanism: Annotated[str | None, Field(alias="sasl-mechanism")] = None
    sasl_username: Annotated[str | None, Field(alias="sasl-username")] = None
    ssl_ca_pem: Annotated[str | None, Field(alias="ssl-ca-pem")] = None
    sasl_password_set: Annotated[bool, Field(alias="sasl-password-set")]


class CatalogObjectsByNameItem(RootModel[list[str]]):
    root: Annotated[list[str], Field(max_length=64, min_length=1)]


class EventSinkFilters(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    warehouses: Annotated[Strings | None, Field(max_length=100)] = None
    operation_types: Annotated[Strings | None, Field(alias="operation-types", max_length=32)] = None
    catalog_objects_by_name: Annotated[
        NamespacePaths | None, Field(alias="catalog-objects-by-name", max_length=100)
    ] = None
    audit: Annotated[
        bool,
        Field(
            description="Also deliver the audit trail, as a stream of its own (org.growler.audit.* events, every record, in the order of their transactions; the other filters do not apply to it). docs/audit.md."
        ),
    ] = False
    changes: Annotated[
        bool,
        Field(description="Deliver the change feed's events (false with audit true - a sink of the audit trail only)."),
    ] = True


class EventSink(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: str
    kind: str
    url: str
    filters: EventSinkFilters
    max_attempts: Annotated[int, Field(alias="max-attempts")]
    signed: Annotated[bool, Field(description="A webhook's requests carry X-Growler-Signature")]
    kafka: KafkaSinkView | None = None


class ListEventSinksResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    event_sinks: Annotated[list[EventSink], Field(alias="event-sinks")]


class DeadLetter(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    event_id: Annotated[str, Field(alias="event-id")]
    position: int
    attempts: int
    last_error: Annotated[str, Field(alias="last-error")]
    replay_requested: Annotated[bool, Field(alias="replay-requested")]
    created_at: Annotated[str, Field(alias="created-at")]


class ListDeadLettersResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    dead_letters: Annotated[list[DeadLetter], Field(alias="dead-letters")]


class CreatePrincipalRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: Annotated[str, Field(max_length=128, min_length=1)]
    admin: bool = False
    trusted_engine: Annotated[bool, Field(alias="trusted-engine")] = False


class PrincipalCredential(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    client_id: Annotated[str, Field(alias="client-id")]
    client_secret: Annotated[str, Field(alias="client-secret")]


class Principal(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: str
    admin: bool
    trusted_engine: Annotated[bool | None, Field(alias="trusted-engine")] = None
    roles: list[str]


class ListPrincipalsResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    principals: list[str]
    next_page_token: Annotated[
        str | None,
        Field(alias="next-page-token", description="Opaque token for the next page; absent on the last page."),
    ] = None


class CreateRoleRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: Annotated[str, Field(max_length=128, min_length=1)]


class Role(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: str
    created_at: Annotated[AwareDatetime, Field(alias="created-at")]
    trusted_engine: Annotated[
        bool | None,
        Field(alias="trusted-engine", description="Its holders are trusted engines (setRoleTrustedEngine)."),
    ] = None


class ListRolesResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    roles: list[str]
    next_page_token: Annotated[
        str | None,
        Field(alias="next-page-token", description="Opaque token for the next page; absent on the last page."),
    ] = None


class ListMembersResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    members: list[str]
    next_page_token: Annotated[
        str | None,
        Field(alias="next-page-token", description="Opaque token for the next page; absent on the last page."),
    ] = None


class NamespaceItem(RootModel[str]):
    root: Annotated[str, Field(min_length=1)]


class Securable(SecurableShape):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: SecurableType
    warehouse: Annotated[str | None, Field(max_length=128, min_length=1)] = None
    namespace: Annotated[NamespaceLevels | None, Field(min_length=1)] = None
    name: Annotated[str | None, Field(min_length=1)] = None


class GrantRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    privilege: Privilege
    securable: Securable


class Grant(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    role: str
    privilege: Privilege
    securable: Securable


class ListGrantsResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    grants: list[Grant]
    next_page_token: Annotated[
        str | None,
        Field(alias="next-page-token", description="Opaque token for the next page; absent on the last page."),
    ] = None


class StorageSettings(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    endpoint: Annotated[str | None, Field(examples=["http://127.0.0.1:8333"], max_length=2048, min_length=1)] = None
    region: Annotated[str | None, Field(max_length=64, min_length=1)] = None
    path_style: Annotated[bool | None, Field(alias="path-style")] = None
    credentials_mode: Annotated[
        Literal["remote-signing", "sts", "static", "none"] | None, Field(alias="credentials-mode")
    ] = None
    access_key_id: Annotated[SecretStr | None, Field(alias="access-key-id", max_length=1024, min_length=1)] = None
    secret_access_key: Annotated[SecretStr | None, Field(alias="secret-access-key", max_length=1024, min_length=1)] = (
        None
    )


class StorageView(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    endpoint: Annotated[str | None, Field(...)]
    region: str
    path_style: Annotated[bool, Field(alias="path-style")]
    credentials_mode: Annotated[str, Field(alias="credentials-mode")]
    has_own_keys: Annotated[
        bool,
        Field(alias="has-own-keys", description="Whether the warehouse has storage keys of its own (never shown)."),
    ]


class FederationAuth(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["none", "bearer", "oauth2"]
    token: Annotated[SecretStr | None, Field(max_length=8192, min_length=1)] = None
    client_id: Annotated[str | None, Field(alias="client-id", max_length=1024, min_length=1)] = None
    client_secret: Annotated[SecretStr | None, Field(alias="client-secret", max_length=1024, min_length=1)] = None
    token_endpoint: Annotated[str | None, Field(alias="token-endpoint", max_length=2048, min_length=1)] = None
    scope: Annotated[str | None, Field(max_length=1024, min_length=1)] = None


class FederationSettings(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    uri: Annotated[
        str,
        Field(
            description="The remote catalog's base URI (its routes are <uri>/v1/...).",
            examples=["https://catalog.example.com/api/catalog"],
            max_length=2048,
            min_length=1,
        ),
    ]
    warehouse: Annotated[
        str,
        Field(
            description="The warehouse name sent to the remote's GET /v1/config, whose overrides.prefix is the remote prefix.",
            max_length=1024,
            min_length=1,
        ),
    ]
    auth: FederationAuth | None = None
    read_only: Annotated[
        bool | None, Field(alias="read-only", description="Refuse every write (403) before it reaches the remote.")
    ] = None
    timeout_ms: Annotated[
        int | None,
        Field(
            alias="timeout-ms",
            description="The timeout of each request to the remote (connect and read); 10000 when unset.",
            ge=100,
            le=120000,
        ),
    ] = None
    cache_ttl_ms: Annotated[
        int | None,
        Field(
            alias="cache-ttl-ms",
            description="How long a worker may answer a loadTable from the remote's last answer without asking the remote again (docs/federation.md \"Caching\"). Never after a commit made through Growler (checked against the catalog's record of the table's version on every such answer), never for an answer carrying storage credentials. 0 when unset - every load asks the remote, with If-None-Match when its last answer had an ETag.",
            ge=0,
            le=300000,
        ),
    ] = None
    breaker_failures: Annotated[
        int | None,
        Field(
            alias="breaker-failures",
            description="Consecutive failures of the remote (unreachable, timed out, a 5xx or an answer not of the spec) after which each worker's circuit breaker refuses requests to it at once (503 with Retry-After); 5 when unset.",
            ge=1,
            le=100,
        ),
    ] = None
    breaker_cooldown_ms: Annotated[
        int | None,
        Field(
            alias="breaker-cooldown-ms",
            description="How long an open breaker refuses before it lets one request through; 30000 when unset.",
            ge=1000,
            le=600000,
        ),
    ] = None


class Auth(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: str
    client_id: Annotated[str | None, Field(alias="client-id")] = None
    token_endpoint: Annotated[str | None, Field(alias="token-endpoint")] = None
    scope: str | None = None
    has_secret: Annotated[
        bool, Field(alias="has-secret", description="Whether a token or client secret is stored (never shown).")
    ]


class FederationView(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    uri: str
    warehouse: str
    auth: Auth
    read_only: Annotated[bool, Field(alias="read-only")]
    timeout_ms: Annotated[int, Field(alias="timeout-ms")]
    cache_ttl_ms: Annotated[int, Field(alias="cache-ttl-ms")]
    breaker_failures: Annotated[int, Field(alias="breaker-failures")]
    breaker_cooldown_ms: Annotated[int, Field(alias="breaker-cooldown-ms")]


class AllowedLocation(RootModel[str]):
    root: Annotated[str, Field(examples=["s3://bucket/warehouse/"], max_length=4096, min_length=1)]


class DeletionPolicy(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    mode: Literal["soft", "hard"] | None = None
    retention: Annotated[
        str | None,
        Field(
            description="7d, 12h, 30m, 45s or a number of seconds (1 second to 3650 days)",
            examples=["7d"],
            pattern="^\\s*[0-9]{1,9}\\s*[smhd]?\\s*$",
        ),
    ] = None


class UndropRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    namespace: Annotated[
        NamespaceLevels | None,
        Field(
            description="Where it comes back (a namespace unit's new path); its old place when absent.", min_length=1
        ),
    ] = None
    name: Annotated[
        str | None, Field(description="A table's or view's new name; its old one when absent.", min_length=1)
    ] = None


class BinUnit(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    id: int
    kind: Literal["table", "view", "namespace"]
    namespace: Annotated[list[str], Field(description="An entry's namespace; a namespace unit's own path.")]
    name: str | None = None
    uuid: str | None = None
    dropped_at: Annotated[AwareDatetime, Field(alias="dropped-at")]
    dropped_by: Annotated[str | None, Field(alias="dropped-by")] = None
    expires_at: Annotated[
        AwareDatetime,
        Field(
            alias="expires-at", description="When the retention ends (then the unit is forgotten, and purged if asked)."
        ),
    ]
    purge_requested: Annotated[bool, Field(alias="purge-requested")]
    purging_since: Annotated[AwareDatetime | None, Field(alias="purging-since")] = None
    metadata_location: Annotated[
        str | None, Field(alias="metadata-location", description="A table's or view's last metadata file.")
    ] = None


class ListBinResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    units: list[BinUnit]
    next_page_token: Annotated[
        str | None,
        Field(alias="next-page-token", description="Opaque token for the next page; absent on the last page."),
    ] = None


class ProtectionMark(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["warehouse", "namespace", "table", "view"]
    namespace: Annotated[list[NamespaceItem] | None, Field(min_length=1)] = None
    name: Annotated[str | None, Field(min_length=1)] = None


class ListProtectionsResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    marks: list[ProtectionMark]


class TrustedEngineRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    trusted_engine: Annotated[bool, Field(alias="trusted-engine")]


class ReadRestrictionGrantee(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    type: Literal["role", "principal"]
    name: Annotated[str, Field(max_length=128, min_length=1)]


class ColumnRestriction(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: Annotated[str, Field(max_length=1024, min_length=1)]
    action: Literal[
        "hide",
        "replace-with-null",
        "mask-to-default",
        "mask-alphanum",
        "show-first-4",
        "show-last-4",
        "truncate-to-year",
        "truncate-to-month",
        "sha-256-global",
        "sha-256-query-local",
    ]


class ReadRestrictionTarget(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    securable: ProtectionMark
    grantee: ReadRestrictionGrantee


class ReadRestrictionPolicy(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    securable: ProtectionMark
    grantee: ReadRestrictionGrantee
    row_filter: Annotated[
        Json | None,
        Field(
            alias="row-filter",
            description='An Iceberg expression (the catalog API\'s Expression JSON, column names as terms) a row must be true for. A string value "${principal}" stands for the caller\'s name; in an in or not-in list, "${roles}" stands for each role the caller holds.',
        ),
    ] = None
    columns: Annotated[list[ColumnRestriction] | None, Field(max_length=1000)] = None
    created_by: Annotated[str | None, Field(alias="created-by")] = None


class ListReadRestrictionsResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    restrictions: list[ReadRestrictionPolicy]


class PolicySecurableType(RootModel[Literal["catalog", "warehouse", "namespace", "table"]]):
    root: Literal["catalog", "warehouse", "namespace", "table"]


class PolicyContent(ContractModel):
    version: str | None = None
    enable: bool
    config: Annotated[dict[str, Any] | None, Field(max_length=50)] = None
    older_than: float | None = None
    location: Annotated[str | None, Field(max_length=4096)] = None
    target_file_size_bytes: float | None = None


class AttachPolicyRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    policy_type: Annotated[Text, Field(alias="policy-type")]
    securable: Securable
    content: JsonObject


class DetachPolicyRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    policy_type: Annotated[Text, Field(alias="policy-type")]
    securable: Securable


class AttachedPolicy(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    policy_type: Annotated[Text, Field(alias="policy-type")]
    securable: Securable
    content: PolicyContent


class ListMaintenancePoliciesResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    policies: list[AttachedPolicy]


class Policy(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    policy_type: Annotated[Text, Field(alias="policy-type")]
    content: PolicyContent
    inherited_from: Annotated[
        Literal["catalog", "warehouse", "namespace", "table", "table-properties"], Field(alias="inherited-from")
    ]


class EffectivePoliciesResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    policies: list[Policy]


class RunRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    policy_type: Annotated[Text, Field(alias="policy-type")]
    dry_run: Annotated[bool, Field(alias="dry-run")] = False


class RunProgress(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    file_groups_done: Annotated[int | None, Field(alias="file-groups-done")] = None
    file_groups_total: Annotated[int | None, Field(alias="file-groups-total")] = None
    bytes_done: Annotated[int | None, Field(alias="bytes-done")] = None
    bytes_total: Annotated[int | None, Field(alias="bytes-total")] = None


class MaintenanceRunReport(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    progress: RunProgress | None = None
    result: Annotated[dict[str, int] | None, Field(max_length=16)] = None
    error: Annotated[str | None, Field(max_length=2000)] = None


class MaintenanceRunReportAnswer(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    stop: Annotated[
        bool,
        Field(
            description="The run was cancelled, or the table protected, dropped or its policy revoked - the job stops before its next commit"
        ),
    ]


class Snapshots(ContractModel):
    count: int
    oldest_age_ms: Annotated[int | None, Field(alias="oldest-age-ms")] = None
    newest_age_ms: Annotated[int | None, Field(alias="newest-age-ms")] = None
    expirable: int


class Manifests(ContractModel):
    count: int
    small: int


class Partition(ContractModel):
    partition: str
    data_files: Annotated[int, Field(alias="data-files")]
    delete_files: Annotated[int, Field(alias="delete-files")]
    records: int
    bytes: int
    small_data_files: Annotated[int, Field(alias="small-data-files")]


class ErrorModel(ContractModel):
    message: str
    type: Annotated[str, Field(examples=["NotFoundException"])]
    code: Annotated[int, Field(ge=400, le=600)]
    stack: list[str] | None = None


class NamespaceItem3(RootModel[str]):
    root: Annotated[str, Field(max_length=255, min_length=1)]


class TableMoveSource(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    namespace: Annotated[NamespaceLevels, Field(max_length=16, min_length=1)]
    name: Annotated[str, Field(max_length=255, min_length=1)]


class TableMoveTarget(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    warehouse: Annotated[str, Field(max_length=63, min_length=1)]
    namespace: Annotated[NamespaceLevels, Field(max_length=16, min_length=1)]
    name: Annotated[
        str | None,
        Field(
            description="The table's name in the native warehouse; its name in the remote when absent.",
            max_length=255,
            min_length=1,
        ),
    ] = None


class MoveTableRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    namespace: Annotated[NamespaceLevels, Field(max_length=16, min_length=1)]
    name: Annotated[str, Field(max_length=255, min_length=1)]
    target: TableMoveTarget
    remote: Annotated[
        Literal["drop", "keep"],
        Field(
            description="drop (default) - drop the table from the remote catalog, its files kept; keep - leave it there, read-only through Growler, until the move is undone or finished with drop."
        ),
    ] = "drop"
    files: Annotated[
        Literal["in-place", "copy"],
        Field(
            description="in-place (default) - the native table takes the remote's metadata and files where they are; copy - they are copied into the native warehouse's storage under a new location, every path rewritten, and the native table owns the copy (needs Growler's own storage access to the remote's table - the federated warehouse's storage and allowed-locations; docs/federation.md \"Moving a table home\")."
        ),
    ] = "in-place"


class NamespaceMoveTarget(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    warehouse: Annotated[str, Field(max_length=63, min_length=1)]
    namespace: Annotated[NamespaceLevels, Field(max_length=16, min_length=1)]


class TableMoveEnd(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    warehouse: str
    namespace: list[str]
    name: str


class IcebergErrorResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    error: ErrorModel


class ListAuditRecordsResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    records: list[AuditRecord]
    next_page_token: Annotated[
        str | None,
        Field(alias="next-page-token", description="Opaque token for the next (older) page; absent on the last page."),
    ] = None


class CreateEventSinkRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: Annotated[str, Field(max_length=63)]
    kind: Literal["nats", "webhook", "kafka"]
    url: Annotated[
        str,
        Field(
            description="nats://host:port (JetStream; stream GROWLER, subjects growler.>), kafka://host:port[,host:port...] (the Kafka cluster's bootstrap servers) or the webhook's http(s) URL. A webhook's host must resolve to global addresses only (no loopback, link-local, private, multicast or database address unless the operator's GROWLER_WEBHOOK_ALLOWED_NETWORKS names it): 400 otherwise; checked again at each delivery, and redirects are not followed",
            max_length=2048,
        ),
    ]
    secret: Annotated[
        SecretStr | None,
        Field(
            description="A webhook's signing key (X-Growler-Signature, HMAC-SHA256 of the body); stored encrypted, never returned",
            max_length=256,
            min_length=16,
        ),
    ] = None
    max_attempts: Annotated[
        int | None,
        Field(
            alias="max-attempts",
            description="A webhook's attempts per event before it is a dead letter (default 8)",
            ge=1,
            le=100,
        ),
    ] = None
    filters: EventSinkFilters | None = None
    kafka: KafkaSinkSettings | None = None


class CreateWarehouseRequest(UpdateShape):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: Annotated[str, Field(max_length=63, min_length=1)]
    federation: FederationSettings | None = None
    location: Annotated[str | None, Field(examples=["s3://bucket/warehouse/"], max_length=4096, min_length=1)] = None
    storage: StorageSettings | None = None
    allowed_locations: Annotated[
        Strings | None,
        Field(
            alias="allowed-locations",
            description="Extra prefixes where tables and views of the warehouse may live (registered or custom-located tables). For a federated warehouse, with storage, the folders of the remote's tables that Growler's own storage access serves (docs/federation.md \"Storage access of Growler's own\").",
            max_length=100,
        ),
    ] = None
    deletion_policy: Annotated[DeletionPolicy | None, Field(alias="deletion-policy")] = None
    refuse_deletes: Annotated[
        bool | None,
        Field(
            alias="refuse-deletes",
            description="Refuse to sign DELETE requests and vend credentials without s3:DeleteObject, so no engine deletes table files behind the catalog's back (static keys cannot be narrowed).",
        ),
    ] = None


class UpdateWarehouseRequest(UpdateShape):
    model_config = ConfigDict(
        extra="forbid",
    )
    federation: Annotated[
        FederationSettings | None,
        Field(
            description="A federated warehouse's new remote settings (only for a federated warehouse, with at most its storage and allowed-locations); without auth the current authentication and its stored credential are kept."
        ),
    ] = None
    location: Annotated[str | None, Field(examples=["s3://bucket/warehouse/"], max_length=4096, min_length=1)] = None
    storage: StorageSettings | None = None
    allowed_locations: Annotated[Strings | None, Field(alias="allowed-locations", max_length=100)] = None
    deletion_policy: Annotated[DeletionPolicy | None, Field(alias="deletion-policy")] = None
    refuse_deletes: Annotated[bool | None, Field(alias="refuse-deletes")] = None


class Warehouse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    name: str
    location: str
    storage: StorageView
    allowed_locations: Annotated[list[str], Field(alias="allowed-locations")]
    deletion_policy: Annotated[DeletionPolicy, Field(alias="deletion-policy")]
    refuse_deletes: Annotated[bool, Field(alias="refuse-deletes")]
    protected: bool
    federation: FederationView | None = None


class ListWarehousesResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    warehouses: list[Warehouse]
    next_page_token: Annotated[
        str | None,
        Field(alias="next-page-token", description="Opaque token for the next page; absent on the last page."),
    ] = None


class MaintenanceRun(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    id: int
    policy_type: Annotated[str, Field(alias="policy-type")]
    trigger: Annotated[
        Literal["schedule", "request", "commits"],
        Field(
            description="Who asked for the run - `request` (a principal, named in `requested-by`), `schedule` (the table's schedule was due) or `commits` (commits past the threshold made it due). Every run is a job, whoever asked; the schedule's are queued by housekeeping and run by the job runners of the fleet like any other."
        ),
    ]
    requested_by: Annotated[
        str | None,
        Field(
            alias="requested-by",
            description="The principal who asked for the run (trigger `request`); absent for the schedule's runs.",
        ),
    ] = None
    dry_run: Annotated[bool, Field(alias="dry-run")]
    status: Literal["queued", "running", "succeeded", "failed", "skipped", "cancelled"]
    plan: dict[str, Any]
    outcome: dict[str, Any]
    files_removed: Annotated[int, Field(alias="files-removed")]
    error: str | None = None
    progress: RunProgress | None = None
    cancel_requested: Annotated[bool | None, Field(alias="cancel-requested")] = None
    started_at: Annotated[AwareDatetime, Field(alias="started-at")]
    finished_at: Annotated[AwareDatetime | None, Field(alias="finished-at")] = None


class ListRunsResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    runs: list[MaintenanceRun]


class TableHealth(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    snapshots: Snapshots
    manifests: Manifests
    data_files: Annotated[int, Field(alias="data-files")]
    delete_files: Annotated[int, Field(alias="delete-files")]
    small_file_ratio: Annotated[float, Field(alias="small-file-ratio")]
    target_file_size_bytes: Annotated[int, Field(alias="target-file-size-bytes")]
    partitions: list[Partition]
    last_runs: Annotated[list[MaintenanceRun], Field(alias="last-runs")]
    recommendations: Annotated[
        dict[str, str], Field(description="Per policy type, whether running it is worth it and why.")
    ]


class MoveNamespaceRequest(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    namespace: Annotated[NamespaceLevels, Field(max_length=16, min_length=1)]
    target: NamespaceMoveTarget
    remote: Literal["drop", "keep"] = "drop"
    files: Annotated[
        Literal["in-place", "copy"],
        Field(
            description="as a table's move; in-place (default) - the native table takes the remote's metadata and files where they are; copy - they are copied into the native warehouse's storage under a new location, every path rewritten, and the native table owns the copy (needs Growler's own storage access to the remote's table - the federated warehouse's storage and allowed-locations; docs/federation.md \"Moving a table home\")."
        ),
    ] = "in-place"
    nested: Annotated[
        bool,
        Field(
            description="Move the tables of every namespace below it too (each into the native namespace of the same relative path under the target, created where missing; create on the target's namespaces needed). At most 100 namespaces."
        ),
    ] = False


class TableMove(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    source: TableMoveEnd
    target: TableMoveEnd
    metadata_location: Annotated[
        str,
        Field(
            alias="metadata-location", description="The metadata file the move registered (a copy's, with files copy)."
        ),
    ]
    source_metadata_location: Annotated[
        str | None,
        Field(
            alias="source-metadata-location", description="With files copy, the remote's metadata file that was copied."
        ),
    ] = None
    remote: Annotated[
        Literal["dropped", "kept", "drop-pending"],
        Field(
            description="dropped - the remote no longer holds the table (the move is final); kept - it does, read-only through Growler; drop-pending - its drop failed and the move is to be retried or undone."
        ),
    ]
    moved_by: Annotated[str | None, Field(alias="moved-by")] = None
    moved_at: Annotated[AwareDatetime | None, Field(alias="moved-at")] = None


class ListTableMovesResponse(ContractModel):
    model_config = ConfigDict(
        extra="forbid",
    )
    moves: list[TableMove]
