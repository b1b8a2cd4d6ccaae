"""What a fresh worker holds in memory: nothing a request of the catalog's hot paths does not need.

pyarrow (with numpy) was about 40 MB of each worker's RSS, imported at startup by data compaction's
module although only a compaction that runs uses it (issue 47: at most 150 MB per worker). It is
imported where it is used (``app/maintenance/data.py``, ``storage/previews.py``); this holds a
worker built as gunicorn builds it (``create_app`` in a new interpreter) to that.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

from tests.conftest import auth_env_for_tests

REPO = Path(__file__).resolve().parents[2]
LAZY = ("pyarrow", "numpy", "pandas", "pyiceberg.io.pyarrow")

_WORKER = """
import pickle, sys, warnings
warnings.simplefilter("ignore")
from app.edge.factory import create_app
with open(sys.argv[1], "rb") as f:
    settings = pickle.load(f)
create_app(settings)
print(",".join(name for name in sys.argv[2:] if name in sys.modules))
"""


def test_a_fresh_worker_does_not_import_pyarrow(settings, tmp_path):
    saved = tmp_path / "settings.pickle"
    saved.write_bytes(pickle.dumps(settings))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROWLER_")} | auth_env_for_tests()
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, str(saved), *LAZY],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"a fresh worker imported {done.stdout.strip()}"


def test_the_check_sees_an_import():
    """The subprocess's report names a module that is imported (the check above can fail)."""
    code = "import sys, json; print(','.join(n for n in sys.argv[1:] if n in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code, "json", "pyarrow"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "json"
