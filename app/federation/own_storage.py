"""Storage access of Growler's own for a federated warehouse's tables (issue 50, docs/federation.md
"Storage access of Growler's own").

A federated warehouse may have storage settings in Growler - an endpoint, a credentials mode, keys
or an STS role - and ``allowed-locations``: the folders of the remote's tables Growler itself
serves. For a table the remote places inside them, the client gets Growler's access instead of the
remote's: credentials scoped to the table's own folders (STS) or remote signing through Growler's
``/sign``, both bound to the caller's grants (read-only without WRITE), its read restrictions (none
for an untrusted restricted caller) and the protection marks (no deletes), exactly as for a native
table. The remote's ``storage-credentials`` and storage settings are dropped from such an answer:
a client never holds both.

Where the files are comes from the remote's answer (the table's location, its metadata file's
folder, its data path), so only the folders inside the warehouse's allowed locations are served:
those overlap no other warehouse's (the management API refuses it), and a remote answering with
another warehouse's location gets nothing of Growler's for it - its own answer passes unchanged.
A table outside them keeps what the remote vends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.federation.changes import Namespace
from app.federation.remote import Answer
from app.ground.errors import Forbidden
from app.ground.locations import InvalidLocation, Location, is_allowed
from app.ground.settings import Settings
from app.rules.metadata_files import metadata_directory_of
from app.rules.table.files import data_path, stored_roots
from app.storage_access.delegation import NONE, Delegation, credentials_mode
from app.tables.access import StorageScopeOf, TableStorageAccess
from storage.protection_rows import ProtectionRows
from storage.warehouses import WarehouseRow

# Answers that carry a table's metadata and its client config (LoadTableResult).
LOAD_RESULTS = frozenset({"loadTable", "createTable", "registerTable"})
# Keys of a load answer's config that say how to reach storage: the remote's, dropped where
# Growler's own access replaces them (a client must not mix the remote's keys with Growler's).
_STORAGE_KEY_PREFIXES = ("s3.", "client.", "adls.", "gcs.", "py-io-impl", "io-impl")


class OwnStorageAccess:
    def __init__(self, settings: Settings, access: TableStorageAccess, protection: ProtectionRows) -> None:
        self.settings = settings
        self.access = access  # the native tables' vending and signing config, applied to the remote's folders
        self.protection = protection  # marks on the remote's objects, by path (migration 0040)

    def serves(self, warehouse: WarehouseRow) -> bool:
        """Whether the warehouse has storage access of Growler's own (settings and folders)."""
        return credentials_mode(warehouse, self.settings) != NONE and bool(warehouse.allowed_locations)

    def answered(
        self,
        warehouse: WarehouseRow,
        table: tuple[Namespace, str],
        answer: Answer,
        delegation: Delegation,
        creating: bool = False,
    ) -> Answer:
        """A LoadTableResult with Growler's access for a table inside the allowed locations (the
        remote's storage config and credentials gone); any other answer as it came."""
        if answer.status != 200 or not isinstance(answer.data, dict):
            return answer
        roots = self.roots(warehouse, answer.data)
        if roots is None:
            return answer
        config, credentials = self.access.storage_access(
            warehouse, table, roots, delegation, creating=creating, protected=self.protected(warehouse, table)
        )
        remote_config = answer.data.get("config")
        kept = {k: v for k, v in (remote_config or {}).items() if not k.startswith(_STORAGE_KEY_PREFIXES)}
        data = {key: value for key, value in answer.data.items() if key != "storage-credentials"}
        data["config"] = {**kept, **config}
        if credentials:
            data["storage-credentials"] = credentials
        return replace(answer, data=data, body=json.dumps(data, separators=(",", ":")).encode())

    def credentials(
        self, warehouse: WarehouseRow, table: tuple[Namespace, str], loaded: Answer
    ) -> list[dict[str, Any]] | None:
        """loadCredentials' credentials of Growler's own for the loaded table; None when the table
        lies outside the allowed locations (the remote's answer stands)."""
        roots = self.roots(warehouse, loaded.data) if isinstance(loaded.data, dict) else None
        if roots is None:
            return None
        prefix = warehouse.name
        self.access.restrictions_for_storage(prefix, *table)
        write = self.access.entries.may_write(prefix, *table)
        return self.access.credentials(warehouse, roots, True, write, protected=self.protected(warehouse, table))

    def scope(self, warehouse: WarehouseRow, table: tuple[Namespace, str], loaded: Answer) -> StorageScopeOf:
        """The folders signing serves for the loaded table: 403 when none are Growler's to serve."""
        roots = self.roots(warehouse, loaded.data) if isinstance(loaded.data, dict) else None
        if roots is None:
            raise Forbidden(
                f"Table {'.'.join((*table[0], table[1]))} lies outside the allowed locations of warehouse"
                f" {warehouse.name}: Growler does not sign for it (the remote catalog vends its storage access)"
            )
        return StorageScopeOf((tuple(roots),), staged=False, protected=self.protected(warehouse, table))

    def roots(self, warehouse: WarehouseRow, data: dict[str, Any]) -> list[str] | None:
        """The table's folders inside the warehouse's allowed locations (its location first); None
        when its location is not inside them, or the answer names none."""
        metadata = data.get("metadata")
        if not isinstance(metadata, dict) or not isinstance(metadata.get("location"), str):
            return None
        location = metadata["location"]
        properties = metadata.get("properties") if isinstance(metadata.get("properties"), dict) else {}
        metadata_location = data.get("metadata-location")
        directory = (
            metadata_location.rsplit("/", 1)[0]
            if isinstance(metadata_location, str) and "/" in metadata_location
            else metadata_directory_of(location, properties)
        )
        roots = stored_roots(location, directory, data_path(properties))
        inside = _inside(warehouse.allowed_locations)
        if not inside(roots[0]):
            return None
        return [root for root in roots if inside(root)]

    def protected(self, warehouse: WarehouseRow, table: tuple[Namespace, str]) -> bool:
        return self.protection.federated_protection_of(warehouse.id, *table) is not None


def _inside(allowed: tuple[str, ...]) -> Callable[[str], bool]:
    folders = []
    for text in allowed:
        try:
            folders.append(Location.parse(text))
        except InvalidLocation:
            continue

    def inside(root: str) -> bool:
        try:
            parsed = Location.parse(root)
        except InvalidLocation:
            return False
        return parsed.scheme == "s3" and is_allowed(parsed, folders)  # strictly under one: never a folder itself

    return inside
