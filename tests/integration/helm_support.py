"""helm (built from the Go module proxy by ``make helm`` into .cache/) and the chart it renders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "growler"
# The cluster version helm renders for in most tests (one renders with helm's own default: a
# helm built by `make helm` assumes the Kubernetes version of its client-go, like a release).
KUBE_VERSION = "1.33.0"


def helm_binary() -> str:
    """$GROWLER_HELM (make test sets it), else the newest one ``make helm`` left in .cache/ (an
    older build, without the release's link flags, may still be there)."""
    named = os.environ.get("GROWLER_HELM")
    found = REPO.glob(".cache/helm-*/helm")
    candidates = [Path(named)] if named else sorted(found, key=lambda path: path.stat().st_mtime, reverse=True)
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return str(candidate)
    if os.environ.get("GROWLER_TEST_HELM_REQUIRED"):  # make test built it: its absence is a failure
        pytest.fail(f"helm not found ({named or '.cache/helm-*/helm'}) although make test builds it")
    pytest.skip("helm is not built (make helm: go install from the Go module proxy into .cache/)")


def helm(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HELM_CACHE_HOME=str(REPO / ".cache" / "helm-home" / "cache"))
    env.update(
        HELM_CONFIG_HOME=str(REPO / ".cache" / "helm-home" / "config"),
        HELM_DATA_HOME=str(REPO / ".cache" / "helm-home" / "data"),
    )
    return subprocess.run([helm_binary(), *args], capture_output=True, text=True, env=env, timeout=120)


def render(values: Path | None = None, *extra: str) -> list[dict]:
    """``helm template`` of the chart: every manifest it renders (hooks included), parsed."""
    args = ["template", "fleet", str(CHART), "--namespace", "catalog", "--kube-version", KUBE_VERSION]
    if values is not None:
        args += ["--values", str(values)]
    done = helm(*args, *extra)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]
