"""Gunicorn settings for Growler (``python -m gunicorn -c gunicorn.conf.py``; ``make run`` does this).

Everything the app itself needs comes from GROWLER_* environment variables (see app/settings.py).
"""

import os

# The ASGI app, served by uvicorn workers under gunicorn's process management.
wsgi_app = "app.asgi:application"
worker_class = "uvicorn_worker.UvicornWorker"

bind = os.environ.get("GROWLER_BIND", "127.0.0.1:8181")  # loopback by default: no auth in dev
workers = int(os.environ.get("GROWLER_WORKERS", "2"))

# A worker that does not report for 60 s is killed and replaced (a stuck request must not wedge it).
timeout = 60
# On SIGTERM, in-flight requests (e.g. a commit) get 30 s to finish before workers are killed.
graceful_timeout = 30
# Keep idle client connections (Spark/PyIceberg reuse them) open briefly.
keepalive = 5

# Access and error logs to stdout/stderr: the process supervisor (or terminal) collects them.
accesslog = "-"
errorlog = "-"

# Each worker imports the app itself: no connection pools/threads created before fork,
# and code changes are picked up by a plain worker restart.
preload_app = False

# gunicorn >= 25 opens a control socket at one fixed per-user path (~/.gunicorn/gunicorn.ctl):
# two servers (make run + a test server) would clobber each other's. We do not use gunicornc.
control_socket_disable = True
