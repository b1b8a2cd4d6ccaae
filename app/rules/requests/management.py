"""Request bodies of the management API (openapi/management.yaml), typed once at the edge.

The yaml checks a body first (types, lengths, patterns, enums, no unknown keys); these models give
the services its shape instead of ``dict[str, Any]``. They check nothing more: the services word
the refusals a body can still earn (a securable's parts, a name's letters, a sink's url), the same
for the API and the console, which builds these models from its forms. A field the client left
out stays unset (``None``, or the yaml's default): an update changes only what it names.

The enums come from their one home: ``Privilege`` (app/rules/privileges.py) for grants, and
``SecurableType`` here for securables (app/management/service.py's ``SECURABLE_TYPES`` derives from it).
Policy types and credentials modes stay strings checked by the rules that own their lists
(app/rules/maintenance.py ``POLICY_TYPES``, app/storage_access/delegation.py ``CREDENTIALS_MODES``). Secrets
(a webhook's key, a SASL password, storage keys) are ``SecretStr``: never in a repr or a dump.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, SecretStr
from pyiceberg.typedef import IcebergBaseModel

from app.rules.privileges import Privilege


class SecurableType(StrEnum):
    """The yaml's SecurableType: what a grant, a protection mark or a policy is on."""

    CATALOG = "catalog"
    WAREHOUSE = "warehouse"
    NAMESPACE = "namespace"
    TABLE = "table"
    VIEW = "view"


class SecurableRef(IcebergBaseModel):
    """A securable named by its parts (the yaml's Securable, and ProtectionMark, whose warehouse
    is the path's). Which parts each type needs is the service's to check
    (app/management/service.py ``parse_securable``, app/recycle_bin/protection.py)."""

    type: SecurableType
    warehouse: str | None = None
    namespace: tuple[str, ...] | None = None
    name: str | None = None

    def view(self) -> dict[str, Any]:
        """As the request named it (audit lines, change events): the parts given, JSON values."""
        return self.model_dump(mode="json")


# -- principals, roles and grants ----------------------------------------------------------------


class CreatePrincipalRequest(IcebergBaseModel):
    name: str
    admin: bool = False


class CreateRoleRequest(IcebergBaseModel):
    name: str


class GrantRequest(IcebergBaseModel):
    """grantPrivilege's and revokePrivilege's body."""

    privilege: Privilege
    securable: SecurableRef


# -- warehouses ----------------------------------------------------------------------------------


class StorageSettings(IcebergBaseModel):
    """A warehouse's storage block: unset fields keep the warehouse's (or take the server's)."""

    endpoint: str | None = None
    region: str | None = None
    path_style: bool | None = Field(default=None, alias="path-style")
    credentials_mode: str | None = Field(default=None, alias="credentials-mode")
    access_key_id: SecretStr | None = Field(default=None, alias="access-key-id")
    secret_access_key: SecretStr | None = Field(default=None, alias="secret-access-key")


class DeletionPolicySettings(IcebergBaseModel):
    """The yaml's DeletionPolicy as a request gives it (an unset part keeps the current one)."""

    mode: Literal["soft", "hard"] | None = None
    retention: str | None = None


class UpdateWarehouseRequest(IcebergBaseModel):
    location: str | None = None
    storage: StorageSettings | None = None
    allowed_locations: tuple[str, ...] | None = Field(default=None, alias="allowed-locations")
    deletion_policy: DeletionPolicySettings | None = Field(default=None, alias="deletion-policy")
    refuse_deletes: bool | None = Field(default=None, alias="refuse-deletes")

    def given(self) -> list[str]:
        """The fields the request names (the yaml's keys), sorted: what an update changes."""
        return sorted(self.model_dump(exclude_unset=True))


class CreateWarehouseRequest(UpdateWarehouseRequest):
    name: str
    location: str  # type: ignore[assignment] - required here


# -- the recycle bin and protection --------------------------------------------------------------


class UndropRequest(IcebergBaseModel):
    """Where a unit comes back: its old place for what is unset."""

    namespace: tuple[str, ...] | None = None
    name: str | None = None


# -- event sinks ---------------------------------------------------------------------------------


class EventSinkFilters(IcebergBaseModel):
    warehouses: tuple[str, ...] | None = None
    operation_types: tuple[str, ...] | None = Field(default=None, alias="operation-types")
    catalog_objects_by_name: tuple[tuple[str, ...], ...] | None = Field(default=None, alias="catalog-objects-by-name")


class KafkaSinkSettings(IcebergBaseModel):
    topic: str
    security_protocol: Literal["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"] = Field(
        default="plaintext", alias="security-protocol"
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        default=None, alias="sasl-mechanism"
    )
    sasl_username: str | None = Field(default=None, alias="sasl-username")
    sasl_password: SecretStr | None = Field(default=None, alias="sasl-password")
    ssl_ca_pem: str | None = Field(default=None, alias="ssl-ca-pem")


class CreateEventSinkRequest(IcebergBaseModel):
    name: str
    kind: Literal["nats", "webhook", "kafka"]
    url: str
    secret: SecretStr | None = None
    max_attempts: int | None = Field(default=None, alias="max-attempts")
    filters: EventSinkFilters | None = None
    kafka: KafkaSinkSettings | None = None


# -- maintenance ---------------------------------------------------------------------------------


class DetachPolicyRequest(IcebergBaseModel):
    policy_type: str = Field(alias="policy-type")
    securable: SecurableRef


class AttachPolicyRequest(DetachPolicyRequest):
    content: dict[str, Any]  # the yaml's PolicyContent (open: Polaris's config map): app/rules/maintenance.py checks it


class RunRequest(IcebergBaseModel):
    policy_type: str = Field(alias="policy-type")
    dry_run: bool = Field(default=False, alias="dry-run")
