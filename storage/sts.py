"""``sts`` credentials mode: temporary credentials limited to one table's folders.

Growler calls the storage's STS ``AssumeRole`` (the AWS STS query API, which AWS, MinIO, Ceph
RGW and SeaweedFS's embedded IAM serve) with its own keys, the role of ``GROWLER_STS_ROLE_ARN``
and an inline session policy that allows only the table's objects: read and write under the
folders it owns (its location, metadata directory and data path: ``app.rules.table.table_roots``),
and listing the bucket only with those prefixes. The effective permissions are
the intersection of the role's and the session policy, so the credentials cannot reach
another table even when the role could. They expire after ``GROWLER_STS_DURATION_S``; clients
refresh them through ``loadCredentials``.

The request is signed with ``minio.signer.sign_v4_sts`` and sent with urllib3 (both already
dependencies); the secret of the answer is returned to the caller only, never logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit
from xml.etree import ElementTree

import urllib3
from minio.credentials import Credentials
from minio.signer import sign_v4_sts

from app.ground.errors import ServiceUnavailable
from app.ground.locations import InvalidLocation, Location
from app.ground.settings import S3Settings, Settings
from storage.warehouses import WarehouseRow

log = logging.getLogger(__name__)

_HTTP = urllib3.PoolManager(retries=False)
_NS = "{https://sts.amazonaws.com/doc/2011-06-15/}"
READ_ACTIONS = ["s3:GetObject", "s3:GetObjectVersion"]
WRITE_ACTIONS = ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]


def session_policy(roots: str | Sequence[str], write: bool = True, delete: bool = True) -> dict[str, Any]:
    """An IAM policy allowing only the objects under ``roots`` - a table's location, or every folder
    it owns (its location, metadata directory and data path) - read-only unless ``write``; without
    s3:DeleteObject unless ``delete`` (a warehouse that refuses deletes, a protected table). Listing is allowed in
    each root's bucket with that root's prefix only."""
    parsed = [Location.parse(root) for root in ([roots] if isinstance(roots, str) else roots)]
    prefixes = {(place.bucket, place.key.rstrip("/") + "/"): None for place in parsed if place.key}
    buckets = dict.fromkeys(bucket for bucket, _ in prefixes)
    statements: list[dict[str, Any]] = [
        {
            "Effect": "Allow",
            "Action": READ_ACTIONS + ([a for a in WRITE_ACTIONS if delete or a != "s3:DeleteObject"] if write else []),
            "Resource": [f"arn:aws:s3:::{bucket}/{prefix}*" for bucket, prefix in prefixes],
        },
        *(
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": [f"arn:aws:s3:::{bucket}"],
                "Condition": {"StringLike": {"s3:prefix": [f"{p}*" for b, p in prefixes if b == bucket]}},
            }
            for bucket in buckets
        ),
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def table_credentials(
    settings: Settings,
    warehouse: WarehouseRow,
    roots: str | Sequence[str],
    s3: S3Settings | None = None,
    write: bool = True,
    delete: bool = True,
) -> dict[str, str]:
    """FileIO properties holding fresh credentials for a table's folders (``roots``: its location,
    or every folder it owns), 503 when STS fails; without s3:DeleteObject unless ``delete`` and the
    warehouse accepts deletes."""
    texts = [roots] if isinstance(roots, str) else list(roots)
    valid = []
    for number, text in enumerate(texts):
        try:
            valid.append(Location.parse(text).uri)
        except InvalidLocation:
            if number == 0:  # the table's location: nothing to vend for
                return {}
    policy = session_policy(valid, write=write, delete=delete and not warehouse.refuse_deletes)
    storage = warehouse.storage or {}
    endpoint = settings.sts.endpoint or storage.get("sts-endpoint") or storage.get("endpoint") or settings.s3.endpoint
    region = storage.get("region") or settings.s3.region
    credentials = assume_role(
        endpoint=str(endpoint),
        region=region,
        access_key=(s3 or settings.s3).access_key or "",
        secret_key=(s3 or settings.s3).secret_key or "",
        role_arn=settings.sts.role_arn,
        policy=policy,
        duration_s=settings.sts.duration_s,
        timeout_s=settings.s3.timeout_s,
    )
    return {
        "s3.access-key-id": credentials["AccessKeyId"],
        "s3.secret-access-key": credentials["SecretAccessKey"],
        "s3.session-token": credentials["SessionToken"],
        "s3.session-token-expires-at-ms": str(_expiry_ms(credentials.get("Expiration", ""))),
    }


def assume_role(
    *,
    endpoint: str,
    region: str,
    access_key: str,
    secret_key: str,
    role_arn: str,
    policy: dict[str, Any],
    duration_s: int,
    timeout_s: float,
) -> dict[str, str]:
    """STS ``AssumeRole`` (form POST, SigV4 for service ``sts``); the ``Credentials`` element."""
    form = {
        "Action": "AssumeRole",
        "Version": "2011-06-15",
        "RoleSessionName": f"growler-{secrets.token_hex(8)}",
        "DurationSeconds": str(duration_s),
        "Policy": json.dumps(policy, separators=(",", ":")),
    }
    if role_arn:
        form["RoleArn"] = role_arn
    body = urlencode(form).encode()
    url = urlsplit(endpoint.rstrip("/") + "/")
    headers: dict[str, Any] = {
        "Host": url.netloc,
        "Content-Type": "application/x-www-form-urlencoded",
        "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
    }
    date = datetime.now(UTC)
    headers["x-amz-date"] = date.strftime("%Y%m%dT%H%M%SZ")
    sign_v4_sts(
        method="POST",
        url=url,
        region=region,
        headers=headers,
        credentials=Credentials(access_key, secret_key),
        content_sha256=headers["x-amz-content-sha256"],
        date=date,
    )
    try:
        response = _HTTP.request(
            "POST", url.geturl(), body=body, headers=headers, timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s)
        )
    except urllib3.exceptions.HTTPError as exc:
        log.warning("STS AssumeRole failed: %s", type(exc).__name__)
        raise ServiceUnavailable("The storage's STS service cannot be reached") from None
    if response.status != 200:
        code = _text(response.data, "Code") or str(response.status)
        log.warning("STS AssumeRole refused: %s", code)
        raise ServiceUnavailable(f"The storage's STS service refused to issue credentials: {code}")
    root = ElementTree.fromstring(response.data)
    found = root.find(f".//{_NS}Credentials")
    if found is None:
        found = root.find(".//Credentials")
    if found is None:
        raise ServiceUnavailable("The storage's STS service answered without credentials")
    return {child.tag.rsplit("}", 1)[-1]: (child.text or "") for child in found}


def _text(data: bytes, tag: str) -> str | None:
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return None
    for element in root.iter():
        if element.tag.rsplit("}", 1)[-1] == tag:
            return element.text
    return None


def _expiry_ms(text: str) -> int:
    try:
        return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0
