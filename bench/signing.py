"""Remote signing throughput: signatures per second of one worker (indicative).

Two figures:

- ``in-process``: ``RemoteSigner.sign`` called in a loop with what the table's name holds already
  read (the worker reads it per request, one query on the event loop, not counted here): parsing
  (the body into its model, the S3 request), the scope check and SigV4. No database, no
  network; the ceiling of one worker's signing.
- ``http``: wrk POSTs the same signRequest to a running Growler (give it one worker,
  ``GROWLER_WORKERS=1``) for ``--seconds``: the figure per worker, HTTP stack included.

    python -m bench.signing                       # in-process only
    python -m bench.signing --url http://127.0.0.1:8181 --warehouse warehouse --table ns.t \
        --credential "$(cat .growler/credential)"

The http run needs the table to exist and the warehouse in a mode that signs (any but ``none``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from app.authorization import Authorizer
from app.ground.settings import S3Settings, Settings
from app.rules.requests import parse_request
from app.rules.requests.tables import RemoteSignRequest
from app.storage_access.signing import RemoteSigner
from app.tables.access import StorageScopeOf
from storage.warehouses import WarehouseRow

ENDPOINT = "http://127.0.0.1:8333"
LOCATION = "s3://bench-bucket/warehouse/ns/t"


def sign_request(endpoint: str, location: str) -> dict[str, Any]:
    """A GET of a data file of the table, as Java's S3FileIO sends it to the signer."""
    bucket, _, key = location.removeprefix("s3://").partition("/")
    return {
        "method": "GET",
        "region": "us-east-1",
        "uri": f"{endpoint}/{bucket}/{key}/data/id_bucket=3/00000-0-5e2c.parquet",
        "headers": {"amz-sdk-invocation-id": ["a8c1"], "User-Agent": ["aws-sdk-java/2.x"], "Range": ["bytes=0-1023"]},
        "provider": "s3",
    }


def in_process(seconds: float) -> dict[str, Any]:
    settings = Settings(
        database_url="postgresql://unused",
        s3=S3Settings(endpoint=ENDPOINT, access_key="bench-access", secret_key="bench-secret"),
    )
    warehouse = WarehouseRow(1, "warehouse", "s3://bench-bucket/warehouse/", {"endpoint": ENDPOINT})
    tables = SimpleNamespace(
        authorizer=Authorizer.allow_all(),  # a benchmark: no caller, nothing to enforce
        warehouses=SimpleNamespace(get=lambda _name: warehouse, s3_settings=lambda _row: settings.s3),
        storage_scope=lambda *_args: StorageScopeOf(((LOCATION,),), staged=False),
        restrictions_for_storage=lambda *_args: None,  # allow_all: no caller, no read restrictions
    )
    signer = RemoteSigner(settings, tables)
    request = sign_request(ENDPOINT, LOCATION)
    count = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            signer.sign("warehouse", ("ns",), "t", parse_request(RemoteSignRequest, request))
        count += 100
    elapsed = time.perf_counter() - started
    return {"signatures": count, "seconds": round(elapsed, 2), "per_second": round(count / elapsed)}


def over_http(
    url: str,
    warehouse: str,
    table: str,
    s3_endpoint: str,
    location: str,
    seconds: float,
    connections: int,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    from bench import wrk

    namespace, _, name = table.rpartition(".")
    sign_url = f"{url}/v1/{warehouse}/namespaces/{namespace.replace('.', '%1F')}/tables/{name}/sign"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as body:
        json.dump(sign_request(s3_endpoint, location), body)
    try:
        return wrk.run(
            sign_url,
            duration_s=seconds,
            connections=connections,
            threads=2,
            script="post.lua",
            body_file=Path(body.name),
            headers=headers,
        )
    finally:
        Path(body.name).unlink()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--url", help="a running Growler (one worker) for the http figure")
    parser.add_argument("--warehouse", default="warehouse")
    parser.add_argument("--table", default="ns.t", help="namespace.table that exists in the warehouse")
    parser.add_argument("--s3-endpoint", default=ENDPOINT, help="the warehouse's S3 endpoint")
    parser.add_argument("--location", default=None, help="the table's location (default: loaded)")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--credential", help="client_id:secret for a bearer token (Growler authenticates)")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"in_process": in_process(args.seconds)}
    if args.url:
        import httpx

        headers = {}
        if args.credential:
            client_id, _, secret = args.credential.partition(":")
            form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
            token = httpx.post(f"{args.url}/v1/oauth/tokens", data=form).raise_for_status().json()["access_token"]
            headers["Authorization"] = f"Bearer {token}"
        location = args.location
        if location is None:
            namespace, _, name = args.table.rpartition(".")
            loaded = httpx.get(f"{args.url}/v1/{args.warehouse}/namespaces/{namespace}/tables/{name}", headers=headers)
            location = loaded.raise_for_status().json()["metadata"]["location"]
        result["http"] = over_http(
            args.url, args.warehouse, args.table, args.s3_endpoint, location, args.seconds, args.connections, headers
        )
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
