"""gunicorn.conf.py of the checkout gunicorn runs in, plus yappi in every worker (``bench/ab.py``'s call counts).

    cd CHECKOUT && AB_GUNICORN_CONF=$PWD/bench/gunicorn_yappi.py PROF_LABEL=new GROWLER_WORKERS=1 \
        .venv/bin/python /path/to/bench/ab.py serve info.json

Each worker waits for ``<PROF_DIR>/<label>.start`` (a file; PROF_DIR defaults to the temporary
directory), profiles every thread (CPU clock, builtins included) until ``<label>.stop`` appears,
writes ``<label>-<pid>.pstat``, removes both files and waits for the next start. yappi is not a
dependency of Growler: ``pip install yappi`` where it is used. Not for production: profiling
slows a worker several times.
"""

import os
import tempfile
import threading
import time

_SHIPPED = os.path.join(os.getcwd(), "gunicorn.conf.py")
with open(_SHIPPED) as _file:
    exec(compile(_file.read(), _SHIPPED, "exec"))  # noqa: S102 - the checkout's own settings and hooks

_shipped_post_worker_init = post_worker_init  # noqa: F821 - defined by the shipped file
_BASE = os.path.join(os.environ.get("PROF_DIR", tempfile.gettempdir()), os.environ.get("PROF_LABEL", "growler"))


def _profile_on_request() -> None:
    import yappi

    while True:
        while not os.path.exists(_BASE + ".start"):
            time.sleep(0.1)
        yappi.clear_stats()
        yappi.set_clock_type("cpu")
        yappi.start(builtins=True, profile_threads=True)
        while not os.path.exists(_BASE + ".stop"):
            time.sleep(0.1)
        yappi.stop()
        yappi.get_func_stats().save(f"{_BASE}-{os.getpid()}.pstat", type="pstat")
        os.remove(_BASE + ".start")
        os.remove(_BASE + ".stop")


def post_worker_init(worker):
    _shipped_post_worker_init(worker)
    threading.Thread(target=_profile_on_request, daemon=True, name="yappi-control").start()
