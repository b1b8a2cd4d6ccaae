"""What clients are told about reaching a warehouse's storage, and the credentials they may get.

The ``config`` of a LoadTableResult says where the bytes are (endpoint, region, addressing
style). Credentials are only ever handed out as ``storage-credentials`` to a request that
asked for ``vended-credentials`` delegation, scoped by the table's location prefix.
"""

from __future__ import annotations

from typing import Any

from app.ground.settings import Settings
from storage.repository import WarehouseRow

VENDED_CREDENTIALS = "vended-credentials"
# FileIO properties that are secrets: they reach a client only in answer to its own request and
# are never kept anywhere (an idempotent replay vends them anew, see ``strip_credentials``).
SECRET_PROPERTIES = frozenset({"s3.access-key-id", "s3.secret-access-key", "s3.session-token"})


def wants_vended_credentials(header: str | None) -> bool:
    """``X-Iceberg-Access-Delegation`` is a comma-separated list of mechanisms."""
    if not header:
        return False
    return VENDED_CREDENTIALS in {part.strip().lower() for part in header.split(",")}


def client_storage_config(warehouse: WarehouseRow) -> dict[str, str]:
    """Non-secret FileIO properties understood by both the Java (S3FileIO) and Python clients."""
    storage = warehouse.storage or {}
    if not warehouse.location.startswith("s3://") or not storage.get("endpoint"):
        return {}
    config = {
        "s3.endpoint": storage["endpoint"],
        "s3.path-style-access": "true" if storage.get("path-style", True) else "false",
        "s3.region": storage.get("region") or "us-east-1",
        "client.region": storage.get("region") or "us-east-1",
    }
    if storage.get("path-style", True):
        config["s3.force-virtual-addressing"] = "false"
    return config


def storage_credentials(settings: Settings, warehouse: WarehouseRow, location: str) -> list[dict[str, Any]]:
    """Static keys of the warehouse, scoped to ``location``; empty when there is nothing to vend."""
    s3 = settings.s3
    if not location.startswith("s3://") or not (s3.access_key and s3.secret_key):
        return []
    config = dict(client_storage_config(warehouse))
    config["s3.access-key-id"] = s3.access_key
    config["s3.secret-access-key"] = s3.secret_key
    return [{"prefix": location, "config": config}]


def strip_credentials(result: dict[str, Any]) -> str | None:
    """Remove vended credentials from a LoadTableResult-shaped body, in place.

    Returns the location they were vended for (to vend anew on replay), or None when the body
    carried none. The secrets leave both ``storage-credentials`` and ``config``.
    """
    credentials = result.pop("storage-credentials", None)
    if not credentials:
        return None
    config = result.get("config")
    if isinstance(config, dict):
        for name in SECRET_PROPERTIES & config.keys():
            del config[name]
    return str(credentials[0]["prefix"])


def attach_credentials(result: dict[str, Any], credentials: list[dict[str, Any]]) -> None:
    """The inverse of ``strip_credentials`` with freshly vended credentials (same shape as a load)."""
    if not credentials:
        return
    if "config" in result:  # a LoadTableResult carries them in its config too; a scan plan does not
        result["config"] = {**result["config"], **credentials[0]["config"]}
    result["storage-credentials"] = credentials
