"""Several Growler instances over one PostgreSQL and one S3, behind nginx round robin.

Each instance is a gunicorn master of its own on its own port, as if on a host of its own; nginx
runs the shipped deploy/nginx.conf with all of them in its upstream. An instance can be stopped
gracefully and started again on the same port (a rolling upgrade) or killed outright.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tests.integration.conftest import Server, start_server, stop_server
from tests.integration.nginx_support import Nginx, start_nginx, stop_nginx

# One worker per instance: caches are per worker, so three instances are three caches to keep
# coherent, at a third of the start-up cost of the suite's two-worker servers.
INSTANCE_ENV = {"GROWLER_WORKERS": "1"}


@dataclass
class Fleet:
    settings: object
    tmp_dir: Path
    servers: list[Server]
    nginx: Nginx
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.nginx.url

    @property
    def warehouse(self) -> str:
        return self.servers[0].warehouse

    def port(self, index: int) -> int:
        return urlsplit(self.servers[index].url).port or 0

    def restart(self, index: int) -> Server:
        """Graceful stop (SIGTERM: in-flight requests finish), then a new master on the same port."""
        port = self.port(index)
        stop_server(self.servers[index])
        self.servers[index] = self._start(index, port)
        return self.servers[index]

    def kill(self, index: int) -> None:
        """SIGKILL to the instance's whole process group: no drain, no cleanup."""
        process = self.servers[index].process
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def start_again(self, index: int) -> Server:
        self.servers[index] = self._start(index, self.port(index))
        return self.servers[index]

    def _start(self, index: int, port: int | None) -> Server:
        directory = self.tmp_dir / f"instance-{index}"
        directory.mkdir(exist_ok=True)
        return start_server(self.settings, directory, {**INSTANCE_ENV, **self.extra_env}, port=port)


def start_fleet(settings, tmp_dir: Path, size: int = 3, extra_env: dict[str, str] | None = None) -> Fleet:
    fleet = Fleet(settings, tmp_dir, [], None, dict(extra_env or {}))  # type: ignore[arg-type]
    try:
        for index in range(size):
            fleet.servers.append(fleet._start(index, None))
        fleet.nginx = start_nginx([s.url.removeprefix("http://") for s in fleet.servers], tmp_dir)
    except BaseException:
        stop_fleet(fleet)
        raise
    from tests.integration.bearer import BEARER

    BEARER.register(fleet.nginx.url)
    return fleet


def stop_fleet(fleet: Fleet) -> None:
    if fleet.nginx is not None:
        stop_nginx(fleet.nginx)
    for server in fleet.servers:
        stop_server(server)
