"""``make run``: serve Growler locally, with embedded PostgreSQL / S3 unless external ones are configured.

Environment (the app reads the same names):

  GROWLER_DATABASE_URL        external PostgreSQL; unset: embedded one in $GROWLER_DATA_DIR/postgres
  GROWLER_S3_ENDPOINT         external S3; unset: embedded SeaweedFS in $GROWLER_DATA_DIR/s3
  GROWLER_S3_ACCESS_KEY / GROWLER_S3_SECRET_KEY / GROWLER_S3_REGION (us-east-1)
  GROWLER_WAREHOUSE (warehouse), GROWLER_WAREHOUSE_LOCATION (s3://growler-warehouse/)
  GROWLER_BIND (127.0.0.1:8181), GROWLER_WORKERS (2, read by gunicorn.conf.py)
  GROWLER_STORAGE_CREDENTIALS_MODE (sts with the embedded SeaweedFS, whose STS is then on and
  GROWLER_STS_ROLE_ARN defaults to its role: clients asking for vended-credentials get
  table-scoped temporary credentials, those asking for remote-signing the signer; with an
  external S3: sts where GROWLER_STS_ROLE_ARN or GROWLER_STS_ENDPOINT is set, else remote-signing)
  GROWLER_DATA_DIR (<repo>/.growler)
  GROWLER_EMBEDDED_PG_PORT (54329), GROWLER_EMBEDDED_S3_PORT (8333)
  GROWLER_AUTH (oauth2): the bootstrap admin's credential is kept in $GROWLER_DATA_DIR/credential
  (``client_id:secret``, mode 0600; made on the first run unless GROWLER_BOOTSTRAP_CLIENT_ID/SECRET
  are set), the signing keys' password in $GROWLER_DATA_DIR/token-key-password, unless
  GROWLER_TOKEN_KEY_PASSWORD is set.

Ctrl-C / SIGTERM stops gunicorn, then S3, then PostgreSQL, and exits 0. An embedded service that
dies is started again (gunicorn's workers answer 503 meanwhile and recover by themselves).
Data directories persist between runs (initdb happens only the first time).
"""

from __future__ import annotations

import http.client
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from scripts.postgres import EmbeddedPostgres
from scripts.processes import die_with_parent, port_is_listening, signals_deferred, stop_process_group
from scripts.seaweedfs import STS_ROLE_ARN, EmbeddedS3

REPO = Path(__file__).resolve().parent.parent

# Development-only credentials for the embedded S3 server (it listens on 127.0.0.1
# only).  Never use these for a real deployment: set GROWLER_S3_* instead.
DEV_S3_ACCESS_KEY = "growler"
DEV_S3_SECRET_KEY = "growler-secret-key"

GUNICORN_STARTUP_TIMEOUT = 60.0
GUNICORN_STOP_TIMEOUT = 40.0  # > graceful_timeout (30 s) in gunicorn.conf.py
MAX_RESTART_FAILURES = 5  # an embedded service that dies is restarted, up to this many failures in a row


def log(msg: str) -> None:
    print(f"[run] {msg}", file=sys.stderr, flush=True)


def _env_int(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name) or str(default)
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a port number") from None


def parse_bind(bind: str) -> tuple[str, int] | None:
    """``host:port`` from a gunicorn bind string -> (host to probe, port); None for unix sockets."""
    bind = bind.split(",")[0].strip()
    if bind.startswith(("unix:", "fd://")):
        return None
    host, _, port = bind.rpartition(":")
    if not host:  # just a host name: gunicorn's default port
        host, port = port, "8000"
    host = host.strip("[]")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return host, int(port)


def wait_for_http(proc: subprocess.Popen, host: str, port: int, timeout: float) -> bool:
    """Wait until a worker answers HTTP (any status) on host:port; False if gunicorn died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if port_is_listening(port, host):
            conn = http.client.HTTPConnection(host, port, timeout=5)
            try:
                conn.request("GET", "/v1/config")
                conn.getresponse().read()
                return True
            except (OSError, http.client.HTTPException):
                pass
            finally:
                conn.close()
        time.sleep(0.1)
    raise TimeoutError(f"gunicorn did not answer on {host}:{port} within {timeout:.0f} s")


def restart_embedded(name: str, svc: EmbeddedPostgres | EmbeddedS3, failures: dict[str, int]) -> bool:
    """Start a dead embedded service again; False after MAX_RESTART_FAILURES failures in a row.

    Growler's workers ride out the gap (503 meanwhile, ready again once it is back), so an
    embedded service that stopped is restarted rather than taking ``make run`` down.
    """
    log(f"embedded {name} stopped (see {svc.log_path}); restarting it")
    try:
        svc.stop()  # forget the dead process
        svc.start()
    except (RuntimeError, TimeoutError, OSError) as e:
        failures[name] = failures.get(name, 0) + 1
        if failures[name] >= MAX_RESTART_FAILURES:
            log(f"embedded {name} failed to restart {failures[name]} times ({e}); shutting down")
            return False
        log(f"embedded {name} failed to restart ({e}); trying again")
        time.sleep(min(2.0 ** failures[name], 30.0))
        return True
    failures[name] = 0
    log(f"embedded {name} restarted")
    return True


def local_auth(env: dict[str, str], data_dir: Path) -> Path | None:
    """Authentication on by default, with its secrets kept in git-ignored files under ``data_dir``.

    Returns the credential file the bootstrap admin's ``client_id:secret`` is in (None when
    authentication is off or the bootstrap credential comes from the environment).
    """
    env.setdefault("GROWLER_AUTH", "oauth2")
    if env["GROWLER_AUTH"] == "none":
        return None
    data_dir.mkdir(parents=True, exist_ok=True)
    if not env.get("GROWLER_TOKEN_KEY_PASSWORD"):
        env["GROWLER_TOKEN_KEY_PASSWORD"] = _kept_secret(data_dir / "token-key-password", secrets.token_urlsafe(32))
    if env.get("GROWLER_BOOTSTRAP_CLIENT_ID"):
        return None
    credential = _kept_secret(data_dir / "credential", f"admin:{secrets.token_urlsafe(32)}")
    env["GROWLER_BOOTSTRAP_CLIENT_ID"], _, env["GROWLER_BOOTSTRAP_CLIENT_SECRET"] = credential.partition(":")
    return data_dir / "credential"


def _kept_secret(path: Path, new: str) -> str:
    """The file's content, or ``new`` written to it first (mode 0600)."""
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.write_text(new + "\n")
        tmp.replace(path)
    return path.read_text().strip()


def warehouse_bucket(location: str) -> str | None:
    parts = urlsplit(location)
    return parts.netloc if parts.scheme == "s3" and parts.netloc else None


def main() -> int:
    env = dict(os.environ)
    data_dir = Path(env.get("GROWLER_DATA_DIR") or REPO / ".growler").absolute()
    env.setdefault("GROWLER_S3_REGION", "us-east-1")
    env.setdefault("GROWLER_WAREHOUSE", "warehouse")
    env.setdefault("GROWLER_WAREHOUSE_LOCATION", "s3://growler-warehouse/")
    env.setdefault("GROWLER_BIND", "127.0.0.1:8181")
    env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(data_dir / "metrics"))  # emptied by gunicorn at start
    credential_file = local_auth(env, data_dir)
    pg_port = _env_int(env, "GROWLER_EMBEDDED_PG_PORT", 54329)
    s3_port = _env_int(env, "GROWLER_EMBEDDED_S3_PORT", 8333)

    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        # One KeyboardInterrupt at most: a second signal (a second Ctrl-C, or SIGINT and SIGTERM
        # together) may run this handler again before the first interrupt has reached the cleanup,
        # or while it is being handled, and must not raise into that.
        nonlocal stopping
        if stopping:
            log("already stopping, please wait")
            return
        stopping = True
        raise KeyboardInterrupt  # unwinds whatever is in progress (also a startup) into the cleanup

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    postgres: EmbeddedPostgres | None = None
    s3: EmbeddedS3 | None = None
    gunicorn: subprocess.Popen | None = None
    failures: dict[str, int] = {}
    rc = 0
    try:
        if not env.get("GROWLER_DATABASE_URL"):
            postgres = EmbeddedPostgres(data_dir / "postgres", pg_port)
            t0 = time.monotonic()
            postgres.start()
            env["GROWLER_DATABASE_URL"] = postgres.url
            log(f"PostgreSQL ready in {time.monotonic() - t0:.1f} s: {postgres.display_url} (log {postgres.log_path})")
        else:
            log("using external PostgreSQL from GROWLER_DATABASE_URL")

        if not env.get("GROWLER_S3_ENDPOINT"):
            env["GROWLER_S3_ACCESS_KEY"] = env.get("GROWLER_S3_ACCESS_KEY") or DEV_S3_ACCESS_KEY
            env["GROWLER_S3_SECRET_KEY"] = env.get("GROWLER_S3_SECRET_KEY") or DEV_S3_SECRET_KEY
            s3 = EmbeddedS3(
                data_dir / "s3",
                s3_port,
                env["GROWLER_S3_ACCESS_KEY"],
                env["GROWLER_S3_SECRET_KEY"],
                region=env["GROWLER_S3_REGION"],
                # sts mode (the default here): SeaweedFS's own STS issues the table-scoped credentials
                sts=env.get("GROWLER_STORAGE_CREDENTIALS_MODE", "sts").strip().lower() in ("", "sts"),
            )
            if s3.sts:
                env.setdefault("GROWLER_STS_ROLE_ARN", STS_ROLE_ARN)
            t0 = time.monotonic()
            s3.start()
            env["GROWLER_S3_ENDPOINT"] = s3.endpoint
            bucket = warehouse_bucket(env["GROWLER_WAREHOUSE_LOCATION"])
            if bucket:
                s3.ensure_bucket(bucket)
            log(f"S3 ready in {time.monotonic() - t0:.1f} s: {s3.endpoint} (log {s3.log_path})")
        else:
            log(f"using external S3 at {env['GROWLER_S3_ENDPOINT']}")

        # Own session: a terminal Ctrl-C reaches only us, and we stop gunicorn gracefully (SIGTERM).
        with signals_deferred():
            gunicorn = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"],
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
        target = parse_bind(env["GROWLER_BIND"])
        up = wait_for_http(gunicorn, *target, GUNICORN_STARTUP_TIMEOUT) if target else gunicorn.poll() is None
        if up:
            where = f"http://{target[0]}:{target[1]}/" if target else env["GROWLER_BIND"]
            print(
                f"Growler is up at {where} (warehouse {env['GROWLER_WAREHOUSE']!r}, "
                f"{env['GROWLER_WAREHOUSE_LOCATION']}); Ctrl-C to stop",
                flush=True,
            )
            if target:
                print(f"Console: {where}ui/ (sign in with a principal's client id and secret)", flush=True)
            if credential_file is not None:
                print(
                    f"Authentication is on: the admin credential (client_id:secret) is in {credential_file}"
                    " (Spark: credential=<that>; docs/security.md, Authentication)",
                    flush=True,
                )
            elif env["GROWLER_AUTH"] == "none":
                print("Authentication is off (GROWLER_AUTH=none)", flush=True)
        else:
            log(f"gunicorn exited with {gunicorn.returncode} during startup")
            rc = gunicorn.returncode or 1

        while not rc:
            code = gunicorn.poll()
            if code is not None:
                log(f"gunicorn exited with {code}")
                rc = code or 1
                break
            for name, svc in (("PostgreSQL", postgres), ("S3", s3)):
                if svc is not None and not svc.running and not restart_embedded(name, svc, failures):
                    rc = 1
            if not rc:
                time.sleep(0.5)
    except KeyboardInterrupt:
        log("stopping")
        rc = 0
    except (RuntimeError, TimeoutError) as e:
        log(f"error: {e}")
        rc = 1
    finally:
        stopping = True
        if gunicorn is not None:
            stop_process_group(gunicorn, [(signal.SIGTERM, GUNICORN_STOP_TIMEOUT)])
        if s3 is not None:
            s3.stop()
        if postgres is not None:
            postgres.stop()
    log("stopped")
    return rc


if __name__ == "__main__":
    sys.exit(main())
