"""The security settings in the one settings table: resolution into ClientSecurity, secrets never shown."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rmqrun.cli import settings as table
from rmqrun.cli.security import client_security, exposure_warnings
from rmqrun.errors import ConfigError
from rmqrun.remoting.security import SECRET_ENV, ClientSecurity
from tests.tls_kit import TestCA

SECRET = "pa55-Secret-value"


def resolve(cli: dict | None = None, environ: dict | None = None, config: Path | None = None) -> table.Resolved:
    return table.resolve(cli or {}, config_file=config, environ=environ or {})


def test_the_secret_variables_workers_never_get_are_exactly_the_secret_settings() -> None:
    assert set(SECRET_ENV) == {s.env for s in table.SETTINGS if s.secret}
    assert {s.key for s in table.SETTINGS if s.secret} == {"secret_key", "security_token"}
    assert all(s.flag is None for s in table.SETTINGS if s.secret)  # a command line is visible in ps


def test_environment_and_file_resolve_into_one_client_security(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text(f"{SECRET}\n", encoding="utf-8")
    ca = str(TestCA.create(tmp_path / "ca").cert_path)
    r = resolve({"access_key": "ak", "tls": True},
                environ={"RMQRUN_SECRET_KEY_FILE": str(secret_file), "RMQRUN_TLS_CA_FILE": ca})
    assert client_security(r) == ClientSecurity("ak", SECRET, tls=True, tls_ca_file=ca)
    assert client_security(resolve()) is None
    config = tmp_path / "app.yaml"
    config.write_text(f"access_key: ak\nsecret_key: '{SECRET}'\nsecurity_token: tok\n", encoding="utf-8")
    assert client_security(resolve(config=config)) == ClientSecurity("ak", SECRET, "tok")


def test_conflicts_and_bad_files_are_named_without_the_secret(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="secret_key_file=.* is empty"):
        client_security(resolve({"access_key": "ak", "secret_key_file": str(empty)}))
    with pytest.raises(ConfigError, match="cannot be read"):
        client_security(resolve({"access_key": "ak", "secret_key_file": str(tmp_path / "missing")}))
    with pytest.raises(ConfigError, match="secret_key .*environment RMQRUN_SECRET_KEY.* and secret_key_file .* both"):
        client_security(resolve({"access_key": "ak", "secret_key_file": str(empty)},
                                environ={"RMQRUN_SECRET_KEY": SECRET}))
    with pytest.raises(ConfigError) as info:
        resolve(environ={"RMQRUN_SECRET_KEY": "   "})  # invalid (empty) value: named, not shown
    assert "secret_key=(hidden) (environment RMQRUN_SECRET_KEY) is invalid" in str(info.value)


def test_print_settings_hides_secrets() -> None:
    text = table.describe(resolve({"access_key": "ak"}, environ={"RMQRUN_SECRET_KEY": SECRET,
                                                                 "RMQRUN_SECURITY_TOKEN": "tok-123"}))
    assert SECRET not in text and "tok-123" not in text
    assert text.count("(set, hidden)") == 2 and "ak" in text
    assert SECRET not in table.describe() and SECRET not in table.markdown()


def test_build_puts_security_on_the_consumer_and_not_on_the_pool(tmp_path: Path) -> None:
    r = resolve({"handler": "workers.noop:handle", "namesrv": "127.0.0.1:9876", "group": "G", "topic": "T",
                 "access_key": "ak"}, environ={"RMQRUN_SECRET_KEY": SECRET})
    settings = table.build(r)
    assert settings.consumer.security == ClientSecurity("ak", SECRET)
    assert SECRET not in repr(settings)  # repr of the run settings (logs, tracebacks) carries no secret
    assert SECRET not in repr(settings.pool.worker)  # what workers get at BOOT


def test_exposure_warnings_for_readable_files(tmp_path: Path) -> None:
    config = tmp_path / "app.yaml"
    config.write_text(f"access_key: ak\nsecret_key: '{SECRET}'\n", encoding="utf-8")
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET, encoding="utf-8")
    os.chmod(config, 0o640)
    os.chmod(secret_file, 0o604)
    r = resolve({"secret_key_file": None}, config=config)
    assert exposure_warnings(r, str(config)) == [
        f"config file {config} holds a secret and is readable by other users (mode 0640): chmod 600 {config}"]
    r2 = resolve({"access_key": "ak", "secret_key_file": str(secret_file)})
    assert exposure_warnings(r2, None) == [f"secret_key_file {secret_file} holds a secret and is readable by other "
                                           f"users (mode 0604): chmod 600 {secret_file}"]
    os.chmod(config, 0o600)
    os.chmod(secret_file, 0o400)
    assert exposure_warnings(r, str(config)) == [] and exposure_warnings(r2, None) == []
    # a config file without a secret in it is no concern, whatever its mode
    plain = tmp_path / "plain.yaml"
    plain.write_text("access_key: ak\n", encoding="utf-8")
    os.chmod(plain, 0o644)
    assert exposure_warnings(resolve(config=plain), str(plain)) == []


def test_a_yaml_error_never_quotes_the_secret_line(tmp_path: Path) -> None:
    config = tmp_path / "app.yaml"
    config.write_text(f"access_key: ak\nsecret_key: {SECRET}: oops\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        resolve(config=config)
    assert "is not valid YAML: mapping values are not allowed here (line 2, column" in str(info.value)
    assert SECRET not in str(info.value)


def test_tls_files_that_do_not_load_are_setting_errors_before_any_connection(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"tls_ca_file='{bad}' cannot be loaded"):
        client_security(resolve({"tls": True, "tls_ca_file": str(bad)}))
    with pytest.raises(ConfigError, match="tls_cert_file=.* cannot be loaded"):
        client_security(resolve({"tls": True, "tls_cert_file": str(bad)}))
