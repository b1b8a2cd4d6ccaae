"""``make run``'s authentication set-up: on by default, its secrets kept in git-ignored files."""

from __future__ import annotations

import subprocess

from scripts.run import REPO, local_auth


def test_first_run_makes_the_credential_and_later_runs_reuse_it(tmp_path):
    env: dict[str, str] = {}
    path = local_auth(env, tmp_path)
    assert env["GROWLER_AUTH"] == "oauth2" and env["GROWLER_TOKEN_KEY_PASSWORD"]
    assert path.read_text().strip() == f"{env['GROWLER_BOOTSTRAP_CLIENT_ID']}:{env['GROWLER_BOOTSTRAP_CLIENT_SECRET']}"
    assert env["GROWLER_BOOTSTRAP_CLIENT_ID"] == "admin"
    assert path.stat().st_mode & 0o077 == 0 and (tmp_path / "token-key-password").stat().st_mode & 0o077 == 0
    again: dict[str, str] = {}
    local_auth(again, tmp_path)
    assert again == env


def test_given_values_win_and_none_writes_nothing(tmp_path):
    env = {"GROWLER_BOOTSTRAP_CLIENT_ID": "me", "GROWLER_BOOTSTRAP_CLIENT_SECRET": "s"}
    env["GROWLER_TOKEN_KEY_PASSWORD"] = "p"
    assert local_auth(env, tmp_path) is None and env["GROWLER_TOKEN_KEY_PASSWORD"] == "p"
    assert local_auth({"GROWLER_AUTH": "none"}, tmp_path / "off") is None
    assert not (tmp_path / "off").exists()


def test_the_files_are_git_ignored():
    ignored = subprocess.run(["git", "check-ignore", ".growler/credential"], cwd=REPO, capture_output=True)
    assert ignored.returncode == 0
