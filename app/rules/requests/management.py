"""Request bodies of the management API: the generated models of ``openapi/management.yaml``
(app/rules/contract/management.py), named here as the services know them.

The yaml checks a body first (types, lengths, patterns, enums, no unknown keys); the models give
the services its shape instead of ``dict[str, Any]``. The services word the refusals a body can
still earn (a securable's parts, a name's letters, a sink's url), the same for the API and the
console, which builds these models from its forms (``model_construct``: unchecked, the services
check). A field the client left out stays unset (``None``, or the yaml's default): an update
changes only what it names (``given()``).

What the generator's configuration (scripts/models.py) adds to the yaml's shapes: the enums come
from their one home, ``Privilege`` and ``SecurableType`` (app/rules/privileges.py); namespaces and
lists are tuples; secrets (a webhook's key, a SASL password, storage keys) are ``SecretStr``,
never in a repr or a dump; a securable has ``view()`` and a warehouse's request ``given()``
(app/rules/contract/shapes.py). A protection mark's body is parsed as a Securable (its warehouse
is the path's). Policy types and credentials modes are the yaml's enums, checked again by the
rules that own their lists (app/rules/maintenance.py ``POLICY_TYPES``, app/storage_access/delegation.py
``CREDENTIALS_MODES``).
"""

from __future__ import annotations

from app.rules.contract.management import (
    AttachPolicyRequest,
    CreateEventSinkRequest,
    CreatePrincipalRequest,
    CreateRoleRequest,
    CreateWarehouseRequest,
    DetachPolicyRequest,
    EventSinkFilters,
    FederationAuth,
    FederationSettings,
    GrantRequest,
    KafkaSinkSettings,
    RunRequest,
    StorageSettings,
    UndropRequest,
    UpdateWarehouseRequest,
)
from app.rules.contract.management import DeletionPolicy as DeletionPolicySettings
from app.rules.contract.management import MaintenanceRunReport as RunReport
from app.rules.contract.management import Securable as SecurableRef
from app.rules.privileges import SecurableType

__all__ = [
    "AttachPolicyRequest",
    "CreateEventSinkRequest",
    "CreatePrincipalRequest",
    "CreateRoleRequest",
    "CreateWarehouseRequest",
    "DeletionPolicySettings",
    "DetachPolicyRequest",
    "EventSinkFilters",
    "FederationAuth",
    "FederationSettings",
    "GrantRequest",
    "KafkaSinkSettings",
    "RunReport",
    "RunRequest",
    "SecurableRef",
    "SecurableType",
    "StorageSettings",
    "UndropRequest",
    "UpdateWarehouseRequest",
]
