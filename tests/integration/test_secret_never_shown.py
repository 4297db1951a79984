"""``--help-settings``, ``--print-settings`` and ``check`` never show a secret, wherever it came from.

Each secret is a distinct string (the config file's ``secret_key``, ``RMQRUN_SECRET_KEY``,
``RMQRUN_SECURITY_TOKEN``, a ``secret_key_file``'s line), set where the command reads it; the command's
whole output (stdout and stderr) is searched for each. ``check`` runs against a closed port, so it goes
through settings, security, handler and the failed name server, and against settings that are refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cli_kit import child_env, run_cli

FILE_SECRET = "yaml-Secret-6d21"
ENV_SECRET = "env-Secret-9a07"
TOKEN = "sts-Token-4c88"
LINE_SECRET = "file-Secret-1f5e"
ALL = (FILE_SECRET, ENV_SECRET, TOKEN, LINE_SECRET)
CLOSED = "127.0.0.1:1"


def _hidden(out: str) -> None:
    for secret in ALL:
        assert secret not in out, f"{secret} shown:\n{out}"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    config = tmp_path / "app.yaml"
    config.write_text(f"access_key: orders-app\nsecret_key: '{FILE_SECRET}'\nsecurity_token: '{TOKEN}'\n"
                      f"group: G\ntopic: T\nnamesrv: '{CLOSED}'\n", encoding="utf-8")
    secret_file = tmp_path / "secret"
    secret_file.write_text(LINE_SECRET + "\n", encoding="utf-8")
    return config, secret_file


def test_help_settings_shows_no_secret_from_any_source(files: tuple[Path, Path]) -> None:
    config, secret_file = files
    env = child_env(RMQRUN_SECRET_KEY=ENV_SECRET, RMQRUN_SECURITY_TOKEN=TOKEN)
    r = run_cli(["run", "--config", str(config), "--help-settings"], env=env)
    assert r.returncode == 0, r.stderr
    assert "secret_key" in r.stdout and "security_token" in r.stdout  # the rows are there, their values are not
    _hidden(r.stdout + r.stderr)
    r = run_cli(["run", "--help-settings"], env=child_env(RMQRUN_SECRET_KEY_FILE=str(secret_file)))
    assert r.returncode == 0, r.stderr
    _hidden(r.stdout + r.stderr)


def test_print_settings_and_check_show_no_secret(files: tuple[Path, Path]) -> None:
    config, secret_file = files
    r = run_cli(["run", "workers.noop:handle", "--config", str(config), "--print-settings"])
    assert r.returncode == 0 and r.stdout.count("(set, hidden)") == 2, r.stdout  # secret_key, security_token
    _hidden(r.stdout + r.stderr)

    r = run_cli(["check", "workers.noop:handle", "--config", str(config)])
    assert r.returncode == 1, r.stdout + r.stderr  # the name server is a closed port
    out = r.stdout + r.stderr  # a failed check prints its report on stdout, as a passing one
    assert "ACL access key orders-app with security token" in out and "FAIL  name server" in out, out
    _hidden(r.stdout + r.stderr)

    env = child_env(RMQRUN_ACCESS_KEY="orders-app", RMQRUN_SECRET_KEY_FILE=str(secret_file),
                    RMQRUN_SECURITY_TOKEN=TOKEN)
    r = run_cli(["check", "workers.noop:handle", "--namesrv", CLOSED, "--group", "G", "--topic", "T"], env=env)
    assert r.returncode == 1 and "ok    security" in r.stdout + r.stderr, r.stdout + r.stderr
    _hidden(r.stdout + r.stderr)


def test_refused_settings_name_the_setting_not_the_secret(files: tuple[Path, Path]) -> None:
    config, secret_file = files
    # two sources of one secret: refused naming both, showing neither
    env = child_env(RMQRUN_SECRET_KEY=ENV_SECRET, RMQRUN_SECRET_KEY_FILE=str(secret_file))
    r = run_cli(["check", "workers.noop:handle", "--config", str(config)], env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "secret_key" in r.stdout + r.stderr and "secret_key_file" in r.stdout + r.stderr
    _hidden(r.stdout + r.stderr)
    # a secret without its access key
    r = run_cli(["run", "workers.noop:handle", "--namesrv", CLOSED, "--group", "G", "--topic", "T"],
                env=child_env(RMQRUN_SECRET_KEY=ENV_SECRET))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "secret_key is set but access_key is not" in r.stderr
    _hidden(r.stdout + r.stderr)
