"""A real nginx (Debian's package; ``make test`` installs it) running deploy/nginx.conf in a tmp dir.

The site file is the one we ship, with only the listen address, the upstream address and the
log paths replaced; a minimal main config around it gives nginx its own pid, temp and log paths,
so it runs unprivileged-style next to anything else (``-g 'daemon off;'``, own process group).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SITE_CONF = REPO / "deploy" / "nginx.conf"


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )
    if found is None:
        if os.environ.get("GROWLER_TEST_NGINX_REQUIRED"):  # make test installed it: its absence is a failure
            pytest.fail("nginx not found although make test installed it")
        pytest.skip("nginx is not installed (make test installs Debian's nginx package)")
    return found


def render_site(upstream: str | list[str], port: int, log_dir: Path) -> str:
    """deploy/nginx.conf with our port, upstream(s) (round robin: several replicas) and log
    directory; fails if the file drifted."""
    text = SITE_CONF.read_text()
    servers = "".join(
        f"    server {address} max_fails=0;\n" for address in ([upstream] if isinstance(upstream, str) else upstream)
    )
    replacements = [
        ("    server 127.0.0.1:8181 max_fails=0;\n", servers),
        ("    listen 80;\n    listen [::]:80;\n", f"    listen 127.0.0.1:{port};\n"),
        ("/var/log/nginx/", f"{log_dir}/"),
    ]
    for old, new in replacements:
        assert old in text, f"deploy/nginx.conf no longer contains {old!r}; update the test"
        text = text.replace(old, new)
    return text


@dataclass
class Nginx:
    url: str
    process: subprocess.Popen
    prefix: Path

    def access_log(self) -> str:
        path = self.prefix / "growler.access.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def error_log(self) -> str:
        return "\n".join(
            (self.prefix / name).read_text(errors="replace")
            for name in ("error.log", "growler.error.log", "stderr.log")
            if (self.prefix / name).exists()
        )


def start_nginx(upstream: str | list[str], tmp_dir: Path) -> Nginx:
    from scripts.processes import free_port, port_is_listening

    binary = nginx_binary()
    port = free_port()
    prefix = tmp_dir / f"nginx-{port}"
    prefix.mkdir(parents=True)
    site = prefix / "growler.conf"
    site.write_text(render_site(upstream, port, prefix))
    main = prefix / "nginx.conf"
    main.write_text(
        "\n".join(
            [
                # As root the workers would switch to "nobody", who cannot enter pytest's 0700 tmp dirs.
                "user root;" if os.geteuid() == 0 else "",
                "worker_processes 2;",
                f"pid {prefix}/nginx.pid;",
                f"error_log {prefix}/error.log info;",
                "events { worker_connections 1024; }",
                "http {",
                f"    client_body_temp_path {prefix}/client_body;",
                f"    proxy_temp_path {prefix}/proxy;",
                f"    fastcgi_temp_path {prefix}/fastcgi;",
                f"    uwsgi_temp_path {prefix}/uwsgi;",
                f"    scgi_temp_path {prefix}/scgi;",
                f"    include {site};",
                "}",
                "",
            ]
        )
    )
    command = [binary, "-p", f"{prefix}/", "-e", f"{prefix}/error.log", "-c", str(main)]
    check = subprocess.run([*command, "-t"], capture_output=True, text=True)
    assert check.returncode == 0, f"nginx -t failed:\n{check.stderr}"
    with open(prefix / "stderr.log", "wb") as err:
        process = subprocess.Popen(
            [*command, "-g", "daemon off;"], stdout=err, stderr=subprocess.STDOUT, start_new_session=True
        )
    nginx = Nginx(f"http://127.0.0.1:{port}", process, prefix)
    deadline = time.monotonic() + 60  # a hang guard: a busy machine starts nginx slower
    while not port_is_listening(port, "127.0.0.1"):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_nginx(nginx)
            raise RuntimeError(f"nginx did not start:\n{nginx.error_log()}")
        time.sleep(0.05)
    return nginx


def stop_nginx(nginx: Nginx) -> None:
    if nginx.process.poll() is None:
        os.killpg(nginx.process.pid, signal.SIGQUIT)  # graceful: finish requests, then exit
        try:
            nginx.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(nginx.process.pid, signal.SIGKILL)
            nginx.process.wait()
