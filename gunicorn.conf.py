"""Gunicorn settings for Growler (``python -m gunicorn -c gunicorn.conf.py``; ``make run`` does this).

Everything the app itself needs comes from GROWLER_* environment variables (see app/ground/settings.py);
the process-level ones below are documented in docs/operations.md ("Deploying"). Signals to the master:
TERM = graceful stop (in-flight requests, e.g. commits, finish within ``graceful_timeout``),
HUP = graceful reload (new workers with re-read code and config, old ones finish their requests),
INT/QUIT = fast stop.
"""

import ctypes
import ctypes.util
import gc
import glob
import os
import shutil
import tempfile
import warnings

from app.edge.protocol import GrowlerHttpProtocol
from app.edge.recycling import hand_over_finished
from app.edge.serving import AcceptShares, GrowlerWorker
from app.ground.settings import HttpLimits

# connexion 3.3 imports starlette's TestClient when it is imported, and starlette warns there that
# its httpx support is deprecated: a matter between two dependencies, which every worker printed on
# every start. Set in the master, before the fork, so every worker inherits it (pyproject.toml
# ignores the same warning in the tests).
warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {raw!r}") from None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what this process may use (containers, taskset)
    except AttributeError:
        return os.cpu_count() or 1


# The ASGI app, served by uvicorn workers under gunicorn's process management
# (app/edge/serving.py: each worker accepts in turn with the others, and drains on a graceful stop).
wsgi_app = "app.edge.asgi:application"
worker_class = GrowlerWorker
# A worker holding more open connections than another leaves a new connection to that one for this
# long, then takes it itself (the other may be stuck): connections spread evenly over the workers.
GrowlerWorker.accept_patience_s = _int("GROWLER_ACCEPT_PATIENCE_MS", 10) / 1000
# Bounds on request heads and deadlines for heads and bodies, enforced while a request is read
# (app/edge/protocol.py; GROWLER_MAX_HEADER_BYTES, GROWLER_MAX_HEADERS, GROWLER_HEADER_TIMEOUT_S,
# GROWLER_BODY_TIMEOUT_S).
try:
    GrowlerHttpProtocol.limits = HttpLimits.from_env(os.environ)
except ValueError as exc:
    raise SystemExit(str(exc)) from None
# Each worker's open-connection count, shared with the workers forked from here; made anew when a
# reload re-reads this file (old and new workers then balance among their own kind while they overlap).
ACCEPT_SHARES = AcceptShares()
proc_name = "growler"

bind = os.environ.get("GROWLER_BIND", "127.0.0.1:8181")  # loopback by default: no auth
# One worker per core (at least 2, so one busy or restarting worker never stops service): each
# worker is async for I/O and runs the catalog code in its own thread pool, so more workers than
# cores only add PostgreSQL connections (workers x GROWLER_DB_POOL_MAX).
workers = _int("GROWLER_WORKERS", max(2, _cores()))

# X-Forwarded-For/-Proto are honoured only from these peers (uvicorn's forwarded_allow_ips):
# loopback by default, where nginx runs in deploy/nginx.conf; "" trusts nobody. Never "*"
# unless every path to gunicorn goes through the proxy.
forwarded_allow_ips = os.environ.get("GROWLER_TRUSTED_PROXIES", "127.0.0.1,::1")

# Uvicorn workers answer gunicorn's heartbeat from their event loop, so a long commit (which runs
# in the worker's thread pool) does not trip this; a worker whose loop is stuck 60 s is replaced.
timeout = _int("GROWLER_WORKER_TIMEOUT_S", 60)
# On SIGTERM/SIGHUP/a recycle, a worker stops accepting and gets this long to finish its
# in-flight requests before it is killed. Longer than any commit may take; keep the supervisor's
# stop timeout (systemd TimeoutStopSec, Kubernetes terminationGracePeriodSeconds) above it.
graceful_timeout = _int("GROWLER_GRACEFUL_TIMEOUT_S", 30)
# Idle keep-alive connections are closed after 5 s; a proxy's upstream keep-alive must be shorter.
keepalive = _int("GROWLER_KEEPALIVE_S", 5)
# Worker recycling (app/edge/recycling.py, docs/operations.md "Worker recycling"): a worker whose
# resident memory exceeds GROWLER_MAX_WORKER_RSS_MB hands over to a successor started first and warm
# before it leaves. Not on a request count: a worker's memory stays flat once its caches are full,
# and gunicorn's count recycling stopped every worker at about the same time under load (seconds
# without a worker accepting). GROWLER_MAX_REQUESTS still turns it on for whoever needs it.
GrowlerWorker.max_rss_mb = _int("GROWLER_MAX_WORKER_RSS_MB", 1024)
max_requests = _int("GROWLER_MAX_REQUESTS", 0)
max_requests_jitter = _int("GROWLER_MAX_REQUESTS_JITTER", max(max_requests // 10, 0))

# The app writes one JSON line per request (app/edge/observability.py: request id, operationId,
# warehouse, namespace, table, status, duration), so uvicorn's plain-text access log is off.
# Gunicorn's own messages and the app's other logs go to stderr; the supervisor collects them.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("GROWLER_LOG_LEVEL", "info").lower()

# Not preloaded: create_app() opens the PostgreSQL pool and starts the housekeeping thread, which
# must not be shared across fork; and without preload, SIGHUP picks up new code.
preload_app = False

# Heartbeat files on tmpfs where there is one (a slow disk must not make workers look dead).
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"

# gunicorn >= 25 opens a control socket at one fixed per-user path (~/.gunicorn/gunicorn.ctl):
# two servers (make run + a test server) would clobber each other's. We do not use gunicornc.
control_socket_disable = True

# --- Prometheus multiprocess mode ---------------------------------------------------------------
# Workers write their metric values into files under PROMETHEUS_MULTIPROC_DIR; GET /metrics on any
# worker sums them. Set here, in the master, before any worker imports prometheus_client. A
# private temporary directory is made (and removed on exit) when none is configured; config
# re-reads on SIGHUP keep the directory, so counters survive reloads.
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="growler-metrics-")
    os.environ["GROWLER_METRICS_DIR_IS_TEMPORARY"] = os.environ["PROMETHEUS_MULTIPROC_DIR"]


def on_starting(server):
    """Start from empty metric files: values left by a previous run would be added to ours."""
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    os.makedirs(directory, exist_ok=True)
    for path in glob.glob(os.path.join(directory, "*.db")):
        os.remove(path)


def pre_fork(server, worker):
    """Give the worker about to be forked a slot of its own in ``ACCEPT_SHARES``, and tell it
    whether it succeeds a worker handing over (the master then runs one more than configured)."""
    taken = {w.accept_slot for w in server.WORKERS.values() if w.accept_shares is ACCEPT_SHARES}
    worker.accept_shares = ACCEPT_SHARES
    worker.accept_slot = ACCEPT_SHARES.claim(taken)
    worker.succeeds = server.num_workers > server.cfg.workers


def nworkers_changed(server, new_value, old_value):
    """The workers' view of how many the master runs (a hand-over waits for that many besides the
    leaving workers: app/edge/recycling.py)."""
    ACCEPT_SHARES.target.value = new_value


def child_exit(server, worker):
    """A worker is gone: out of the accept rotation, and its live gauges (in-progress requests,
    pool) out of the metric sums; if it left by hand-over, the extra worker it asked for is its
    replacement (app/edge/recycling.py), so the master's count goes back down."""
    from prometheus_client import multiprocess

    hand_over_finished(server, worker)
    if worker.accept_shares is not None and worker.accept_slot is not None:
        worker.accept_shares.leave(worker.accept_slot)
    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    temporary = os.environ.get("GROWLER_METRICS_DIR_IS_TEMPORARY")
    if temporary and temporary == os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        shutil.rmtree(temporary, ignore_errors=True)


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)  # glibc's mallopt and malloc_trim, where there
_M_ARENA_MAX = -8  # glibc's mallopt parameter


def post_fork(server, worker):
    """At most two malloc arenas per worker (glibc's default is eight per core).

    Every thread of a worker (the dispatcher's, the pools') that allocates gets an arena
    of its own, and freed memory stays scattered over them: 138 and 151 MB per worker after
    `make bench`'s W1-W8 with two, 152 and 153 MB with the default. The threads take turns on the
    GIL anyway, so they hardly contend for an arena.
    """
    if hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(_M_ARENA_MAX, 2)


def post_worker_init(worker):
    """Move everything the app built at start-up out of the garbage collector's sight.

    A worker holds a million long-lived objects after importing PyIceberg, pydantic and connexion
    and building the app; every full collection walked them all, which showed as stalls of
    hundreds of milliseconds at the tail of loadTable's latency. Then the memory that building the
    app used and freed (the yaml, resolved schemas) goes back to the system.
    """
    gc.collect()
    gc.freeze()
    if hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
