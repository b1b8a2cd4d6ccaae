"""What clients are told about reaching a warehouse's storage, and how they get access to it.

The ``config`` of a LoadTableResult says where the bytes are (endpoint, region, addressing
style). How a client gets at them is the warehouse's credentials mode (``credentials-mode`` in
its storage settings; the default warehouse takes ``GROWLER_STORAGE_CREDENTIALS_MODE``):

- ``remote-signing`` (default): the client is told to send each S3 request to the table's
  ``/sign`` endpoint (``app.storage_access.signing``); no key leaves Growler.
- ``sts``: temporary credentials from the storage's STS ``AssumeRole`` with a session policy
  limited to the table's folders (``storage.sts``), vended as ``storage-credentials``.
- ``static``: the warehouse's own keys are vended (development only: full access to the bucket).
- ``none``: nothing is vended and nothing is signed.

Credentials are only ever handed out to a request that asked for ``vended-credentials``
delegation; a client that asked for delegation in a warehouse that vends none is answered with
remote signing (``X-Iceberg-Access-Delegation`` lists what the client can do, and both Java and
PyIceberg can sign).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from app.ground.audit_note import note_access
from app.ground.settings import S3Settings, Settings
from app.rules.table.answers import PLAIN
from storage.warehouses import WarehouseRow

VENDED_CREDENTIALS = "vended-credentials"
REMOTE_SIGNING_DELEGATION = "remote-signing"
# Credentials modes of a warehouse.
REMOTE_SIGNING = "remote-signing"
STS = "sts"
STATIC = "static"
NONE = "none"
CREDENTIALS_MODES = (REMOTE_SIGNING, STS, STATIC, NONE)
# FileIO properties that are secrets: they reach a client only in answer to its own request and
# are never kept anywhere (an idempotent replay vends them anew, see ``strip_credentials``).
SECRET_PROPERTIES = frozenset({"s3.access-key-id", "s3.secret-access-key", "s3.session-token"})


@dataclass(frozen=True)
class Delegation:
    """The mechanisms a request's ``X-Iceberg-Access-Delegation`` header lists."""

    vended: bool = False
    signing: bool = False

    @classmethod
    def parse(cls, header: str | None) -> Delegation:
        if not header:
            return NO_DELEGATION
        modes = {part.strip().lower() for part in header.split(",")}
        return cls(VENDED_CREDENTIALS in modes, REMOTE_SIGNING_DELEGATION in modes)

    @property
    def variant(self) -> str:
        """For ETags: responses to different delegations differ."""
        if self.signing:
            return "vended+signing" if self.vended else "signing"
        return "vended" if self.vended else PLAIN


NO_DELEGATION = Delegation()


def credentials_mode(warehouse: WarehouseRow, settings: Settings) -> str:
    mode = (warehouse.storage or {}).get("credentials-mode") or settings.storage_credentials_mode
    return mode if mode in CREDENTIALS_MODES else NONE


def answer_with(
    warehouse: WarehouseRow, settings: Settings, delegation: Delegation, location: str | None = None
) -> str | None:
    """``"credentials"``, ``"signing"`` or None: how this request gets at the table's storage
    (``location``: the table's, where it is not the warehouse's - a federated warehouse's)."""
    mode = credentials_mode(warehouse, settings)
    if mode == NONE or not (delegation.vended or delegation.signing):
        return None
    if not (location or warehouse.location).startswith("s3://"):
        return None
    if delegation.vended and mode in (STATIC, STS):
        return "credentials"
    return "signing"


def table_endpoint(settings: Settings, prefix: str, namespace: tuple[str, ...], name: str, tail: str) -> str:
    """``v1/{prefix}/namespaces/{ns}/tables/{name}/{tail}``: relative to the catalog URI the client
    already has (Java and PyIceberg resolve it against their ``uri``), so Growler needs to know no
    public URL of its own."""
    separator = settings.namespace_separator
    return "/".join(
        [
            "v1",
            quote(prefix, safe=""),
            "namespaces",
            separator.join(quote(level, safe="") for level in namespace),
            "tables",
            quote(name, safe=""),
            tail,
        ]
    )


def signing_config(settings: Settings, prefix: str, namespace: tuple[str, ...], name: str) -> dict[str, str]:
    """FileIO properties that make Java's S3FileIO and PyIceberg sign through this catalog.

    Java (1.10 and later) signs when ``s3.remote-signing-enabled`` is true, at the table's
    ``/sign`` path it computes itself; PyIceberg 0.12 and older Java clients need the signer
    (``s3.signer``, its FsspecFileIO) and ``s3.signer.endpoint``.
    """
    return {
        "s3.remote-signing-enabled": "true",
        "s3.signer": "S3V4RestSigner",
        "s3.signer.endpoint": table_endpoint(settings, prefix, namespace, name, "sign"),
        "py-io-impl": "pyiceberg.io.fsspec.FsspecFileIO",
    }


def refresh_config(settings: Settings, prefix: str, namespace: tuple[str, ...], name: str) -> dict[str, str]:
    """What makes Java's S3FileIO refresh temporary credentials before they expire, for a job
    that outlives them: ``client.refresh-credentials-endpoint`` (loadCredentials) turns on its
    ``VendedCredentialsProvider``, which fetches new ones 5 minutes before the vended
    ``s3.session-token-expires-at-ms`` with a session of its own (the catalog's ``credential``)."""
    return {"client.refresh-credentials-endpoint": table_endpoint(settings, prefix, namespace, name, "credentials")}


# LoadTableResult's ``remote-signing-config`` (the spec's RemoteSigningConfig): what a signer
# client must pass through, unchanged, in every request to the signer. Growler needs nothing passed
# through (the /sign path names the table, the bearer token names the caller), so both maps are
# empty: the field says "sign through this catalog" to the clients that read it, and the
# deprecated ``s3.signer.*`` keys of ``signing_config`` say it to those that do not yet.
REMOTE_SIGNING_CONFIG: dict[str, dict[str, Any]] = {"properties": {}, "headers": {}}


def remote_signing_config(config: dict[str, str]) -> dict[str, dict[str, Any]] | None:
    """The ``remote-signing-config`` of a LoadTableResult whose ``config`` is ``config``: present
    exactly when that config tells the client to sign through Growler."""
    return REMOTE_SIGNING_CONFIG if config.get("s3.remote-signing-enabled") == "true" else None


def wants_vended_credentials(header: str | None) -> bool:
    """``X-Iceberg-Access-Delegation`` is a comma-separated list of mechanisms."""
    if not header:
        return False
    return VENDED_CREDENTIALS in {part.strip().lower() for part in header.split(",")}


def client_storage_config(warehouse: WarehouseRow, location: str | None = None) -> dict[str, str]:
    """Non-secret FileIO properties understood by both the Java (S3FileIO) and Python clients
    (``location``: the table's, where it is not the warehouse's - a federated warehouse's)."""
    storage = warehouse.storage or {}
    if not (location or warehouse.location).startswith("s3://") or not storage.get("endpoint"):
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


def storage_credentials(
    settings: Settings,
    warehouse: WarehouseRow,
    roots: Sequence[str],
    s3: S3Settings | None = None,
    write: bool = True,
    delete: bool = True,
) -> list[dict[str, Any]]:
    """Credentials for a table's folders (``roots``: its location first, then its metadata directory
    and data path: ``app.rules.table.table_roots``) in the warehouse's mode; empty when it vends
    none. One credential, its ``prefix`` the location (Java's refresh takes exactly one); in ``sts``
    mode its session policy covers every root, and the keys are in the table's ``config`` too, so a
    client reaches the roots outside the location with them (Java's S3FileIO falls back to that
    config for a path no credential's prefix matches).

    ``s3``: the warehouse's own storage settings and keys (``WarehouseDirectory.s3_settings``);
    the environment's when not given. ``write`` False (a caller without WRITE on the table): in
    ``sts`` mode the session policy allows reads only. ``delete`` False (a protected table), or a
    warehouse that refuses deletes: in ``sts`` mode the policy has no s3:DeleteObject. ``static``
    keys cannot be narrowed: they are the warehouse's own.
    """
    s3 = s3 or settings.s3
    mode = credentials_mode(warehouse, settings)
    location = roots[0] if roots else ""
    if not location.startswith("s3://") or mode not in (STATIC, STS):
        return []
    config = dict(client_storage_config(warehouse, location))
    if mode == STS:
        from storage.sts import table_credentials  # only warehouses in sts mode need it

        config.update(table_credentials(settings, warehouse, roots, s3, write=write, delete=delete))
        expires = config.get("s3.session-token-expires-at-ms")
        _vended(STS, roots, write, delete and not warehouse.refuse_deletes, expires)
        return [{"prefix": location, "config": config}]
    if not (s3.access_key and s3.secret_key):
        return []
    config["s3.access-key-id"] = s3.access_key
    config["s3.secret-access-key"] = s3.secret_key
    _vended(STATIC, roots, True, True, None)  # the warehouse's own keys: not narrowed, no expiry
    return [{"prefix": location, "config": config}]


def _vended(mode: str, roots: Sequence[str], write: bool, delete: bool, expires_at_ms: str | None) -> None:
    """What was vended, for the audit trail: where, which methods, until when - never the keys."""
    methods = ["GET", "HEAD"] + (["PUT", "POST"] if write else []) + (["DELETE"] if write and delete else [])
    detail: dict[str, Any] = {"kind": "vended", "mode": mode, "prefixes": list(roots)[:4], "methods": methods}
    if expires_at_ms is not None and expires_at_ms.isdigit():
        detail["expires-at-ms"] = int(expires_at_ms)
    note_access(detail)


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
