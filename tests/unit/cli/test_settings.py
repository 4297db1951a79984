"""The settings table: precedence (flag > environment > file > default) and every kind of invalid input.

Files are real YAML files in tmp_path; the environment is passed explicitly
so the tests do not depend on (or leak into) the process environment. Every
refusal must name the key, the value as given, where it came from and what
is allowed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.cli import settings as table
from rmqrun.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
ESSENTIAL = {"handler": "workers.cpu:handle", "namesrv": "127.0.0.1:9876", "group": "G", "topic": "T"}


def write(tmp_path: Path, text: str, name: str = "rmqrun.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(cli: dict | None = None, *, file: Path | None = None, env: dict | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        table.resolve(cli or {}, config_file=file, environ=env or {})
    return str(info.value)


# --------------------------------------------------------------------------- precedence

def test_defaults_when_nothing_is_given() -> None:
    r = table.resolve({}, environ={})
    for s in table.SETTINGS:
        assert r[s.key] == s.default, s.key
        assert r.sources[s.key] == "default"


def test_precedence_cli_over_env_over_file_over_default(tmp_path: Path) -> None:
    f = write(tmp_path, "workers: 3\npull_batch_size: 8\nstatus_interval: 4\ngroup: from_file\n")
    env = {"RMQRUN_WORKERS": "5", "RMQRUN_PULL_BATCH_SIZE": "16"}
    r = table.resolve({"workers": "7"}, config_file=f, environ=env)
    assert r["workers"] == 7 and r.sources["workers"] == "command line --workers"
    assert r["pull_batch_size"] == 16 and r.sources["pull_batch_size"] == "environment RMQRUN_PULL_BATCH_SIZE"
    assert r["status_interval"] == 4.0 and r.sources["status_interval"] == f"config file {f}"
    assert r["group"] == "from_file"
    assert r["kill_grace"] == 10.0 and r.sources["kill_grace"] == "default"


def test_each_layer_alone_reaches_the_built_settings(tmp_path: Path) -> None:
    f = write(tmp_path, "max-memory-per-worker: 512MiB\norderly: yes\nconsume-from-where: consume_from_first_offset\n")
    r = table.resolve(ESSENTIAL, config_file=f, environ={"RMQRUN_GRACEFUL_TIMEOUT": "12.5",
                                                        "RMQRUN_LOG_FORMAT": "JSON"})
    built = table.build(r)
    assert built.pool.worker.max_memory == 512 * 1024 * 1024
    assert built.consumer.orderly is True
    assert built.consumer.consume_from_where == "CONSUME_FROM_FIRST_OFFSET"
    assert built.grace == 12.5
    assert built.pool.worker.log_format == "json"
    assert built.consumer.subscriptions == {"T": "*"}
    assert built.pool.worker.handler == "workers.cpu:handle"


def test_null_in_the_file_means_the_default(tmp_path: Path) -> None:
    f = write(tmp_path, "workers:\ntags:\n")
    r = table.resolve({}, config_file=f, environ={})
    assert r["workers"] is None and r["tags"] == "*"


def test_namesrv_addr_is_an_environment_alias_below_rmqrun_namesrv(tmp_path: Path) -> None:
    f = write(tmp_path, "namesrv: 10.0.0.1:9876\n")
    r = table.resolve({}, config_file=f, environ={"NAMESRV_ADDR": "10.0.0.2:9876"})
    assert r["namesrv"] == "10.0.0.2:9876" and r.sources["namesrv"] == "environment NAMESRV_ADDR"
    r = table.resolve({}, config_file=f, environ={"NAMESRV_ADDR": "10.0.0.2:9876", "RMQRUN_NAMESRV": "10.0.0.3:9876"})
    assert r["namesrv"] == "10.0.0.3:9876"
    r = table.resolve({"namesrv": "10.0.0.4:9876"}, environ={"RMQRUN_NAMESRV": "10.0.0.3:9876"})
    assert r["namesrv"] == "10.0.0.4:9876"


def test_handler_variables_are_left_to_handlers() -> None:
    r = table.resolve({}, environ={"RMQRUN_HANDLER_CPU_MS": "5", "RMQRUN_HANDLER_ANYTHING": "x", "PATH": "/bin"})
    assert r["workers"] is None
    assert not any(s.key.startswith("handler_") for s in table.SETTINGS), "that prefix belongs to handlers"


def test_example_configs_load_through_the_table() -> None:
    for name in ("example.yaml", "orderly.yaml"):
        path = ROOT / "config" / name
        r = table.resolve({}, config_file=path, environ={})
        built = table.build(r)
        assert r.sources["handler"] == f"config file {path}"
        assert built.consumer.group and built.pool.worker.handler
    assert table.build(table.resolve({}, config_file=ROOT / "config" / "orderly.yaml", environ={})).consumer.orderly


def test_print_settings_shows_value_and_source(tmp_path: Path) -> None:
    f = write(tmp_path, "workers: 3\n")
    text = table.describe(table.resolve({"group": "G"}, config_file=f, environ={"RMQRUN_TOPIC": "T"}))
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and line.split()}
    assert lines["workers"].split()[1] == "3" and lines["workers"].endswith(f"config file {f}")
    assert lines["topic"].endswith("environment RMQRUN_TOPIC")
    assert lines["group"].endswith("command line --group")


# --------------------------------------------------------------------------- unknown keys

def test_unknown_yaml_key_names_the_key_and_a_close_match(tmp_path: Path) -> None:
    f = write(tmp_path, "group: G\nworkerz: 4\n")
    msg = refused(file=f)
    assert "'workerz'" in msg and str(f) in msg and "did you mean workers" in msg


def test_unknown_yaml_key_without_a_close_match_points_at_the_list(tmp_path: Path) -> None:
    msg = refused(file=write(tmp_path, "zzz_qqq: 1\n"))
    assert "'zzz_qqq'" in msg and "--help-settings" in msg


def test_unknown_rmqrun_variable_is_refused_with_the_rule() -> None:
    msg = refused(env={"RMQRUN_WROKERS": "8"})
    assert "RMQRUN_WROKERS" in msg and "RMQRUN_WORKERS" in msg and "RMQRUN_HANDLER_" in msg
    msg = refused(env={"RMQRUN_CPU_MS": "1"})  # the old, pre-prefix name of the example's variable
    assert "RMQRUN_CPU_MS" in msg and "RMQRUN_HANDLER_" in msg


def test_env_names_are_upper_case_exactly() -> None:
    assert "RMQRUN_workers" in refused(env={"RMQRUN_workers": "2"})


def test_unknown_command_line_key() -> None:
    assert "'no_such'" in refused({"no_such": 1})


# --------------------------------------------------------------------------- invalid values

@pytest.mark.parametrize("key, value, allowed", [
    ("workers", "abc", "expected an integer"),
    ("workers", "0", "1 to 4096"),
    ("workers", "2.5", "expected an integer"),
    ("pull_batch_size", "5000", "from 1 to 1024"),
    ("pull_threshold_for_topic", "0", "-1 or 1 to 6553500"),
    ("orderly", "maybe", "expected true or false"),
    ("message_model", "PUBSUB", "one of CLUSTERING, BROADCASTING"),
    ("consume_from_where", "FROM_START", "one of CONSUME_FROM_LAST_OFFSET"),
    ("allocate_strategy", "RANDOM", "one of AVG"),
    ("max_memory_per_worker", "lots", "a size such as 512MiB"),
    ("max_memory_per_worker", "-5MiB", "a size such as 512MiB"),
    ("graceful_timeout", "soon", "expected a number"),
    ("graceful_timeout", "nan", "a finite number"),
    ("graceful_timeout", "-1", "0 or more seconds"),
    ("consume_timeout_minutes", "0", "a positive number of minutes"),
    ("kill_grace", "0", "a positive number of seconds"),
    ("crash_limit", "0", "1 or more"),
    ("crash_limit", "ten", "expected an integer"),
    ("crash_window", "0", "a positive number of seconds"),
    ("namesrv", "localhost", "host:port"),
    ("namesrv", "h:99999", "host:port"),
    ("namesrv", "a:1;b", "host:port"),
    ("group", "my group", "letters, digits"),
    ("topic", "a" * 128, "at most 127 characters"),
    ("handler", "app/handlers.py:go", "did you mean app.handlers:go"),
    ("handler", "mod:fn()", "module:function"),
    ("worker_init", "1bad:init", "module:function"),
    ("consume_timestamp", "2024-01-31", "yyyyMMddHHmmss"),
    ("log_level", "LOUD", "one of TRACE"),
    ("log_format", "xml", "text or json"),
    ("metrics_port", "70000", "0 to 65535"),
    ("group", "   ", "non-empty string"),
])
def test_invalid_value_from_any_source_names_key_value_source_and_allowed(tmp_path: Path, key: str, value: str,
                                                                          allowed: str) -> None:
    setting = table.BY_KEY[key]
    cases = {
        "command line": refused({key: value}),
        "environment": refused(env={setting.env: value}),
        "config file": refused(file=write(tmp_path, f"{key}: '{value}'\n")),
    }
    for source, msg in cases.items():
        assert msg.startswith(f"{key}={value!r} ("), (source, msg)
        assert source in msg, (source, msg)
        assert allowed in msg, (source, msg)


@pytest.mark.parametrize("yaml_value, allowed", [
    ("[1, 2]", "expected an integer"),
    ("{a: 1}", "expected an integer"),
    ("true", "expected an integer"),
    ("1.5", "expected an integer"),
])
def test_wrong_yaml_types_are_refused(tmp_path: Path, yaml_value: str, allowed: str) -> None:
    msg = refused(file=write(tmp_path, f"workers: {yaml_value}\n"))
    assert msg.startswith("workers=") and allowed in msg


def test_a_list_for_a_string_setting(tmp_path: Path) -> None:
    msg = refused(file=write(tmp_path, "group: [a, b]\n"))
    assert "group=['a', 'b']" in msg and "expected a string" in msg


def test_flag_given_only_in_the_file_reports_the_file_line_source(tmp_path: Path) -> None:
    f = write(tmp_path, "orderly: 3\n")
    msg = refused(file=f)
    assert msg == f"orderly=3 (config file {f}) is invalid: expected true or false (also yes/no, on/off, 1/0)"


# --------------------------------------------------------------------------- bad files

def test_missing_file(tmp_path: Path) -> None:
    msg = refused(file=tmp_path / "nope.yaml")
    assert "cannot read config file" in msg and "nope.yaml" in msg


def test_file_that_is_not_yaml(tmp_path: Path) -> None:
    msg = refused(file=write(tmp_path, "group: [unclosed\n"))
    assert "is not valid YAML" in msg


def test_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    msg = refused(file=write(tmp_path, "- group\n- topic\n"))
    assert "must hold a mapping" in msg and "list" in msg


def test_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("group: caf\xe9\n".encode("latin-1"))
    assert "not UTF-8" in refused(file=path)


def test_non_string_key(tmp_path: Path) -> None:
    assert "setting names must be strings, got 1" in refused(file=write(tmp_path, "1: x\n"))


def test_key_spelled_twice(tmp_path: Path) -> None:
    msg = refused(file=write(tmp_path, "pull-batch-size: 8\npull_batch_size: 16\n"))
    assert "twice" in msg and "'pull-batch-size'" in msg and "'pull_batch_size'" in msg


def test_empty_file_is_all_defaults(tmp_path: Path) -> None:
    r = table.resolve({}, config_file=write(tmp_path, "# nothing\n"), environ={})
    assert r["workers"] is None


# --------------------------------------------------------------------------- build

def test_missing_essentials_are_named_with_how_to_give_them() -> None:
    with pytest.raises(ConfigError) as info:
        table.build(table.resolve({"group": "G"}, environ={}))
    msg = str(info.value)
    assert "handler (MODULE:FUNCTION)" in msg and "namesrv (--namesrv or $NAMESRV_ADDR)" in msg
    assert "topic (--topic)" in msg and "group" not in msg.replace("missing", "")


def test_cross_checks_of_the_engine_still_apply() -> None:
    with pytest.raises(ConfigError) as info:
        table.build(table.resolve({**ESSENTIAL, "group": "DEFAULT_CONSUMER"}, environ={}))
    assert "DEFAULT_CONSUMER" in str(info.value)


def test_build_routes_every_setting_to_its_target() -> None:
    r = table.resolve({**ESSENTIAL, "tags": "A || B", "workers": "3",
                       "consume_message_batch_max_size": "4", "max_inflight_messages": "9",
                       "consume_timeout_minutes": "0.5", "log_level": "debug"}, environ={})
    built = table.build(r)
    assert built.consumer.subscriptions == {"T": "A || B"}
    assert built.pool.workers == 3 and built.pool.worker.batch_size == 4
    assert built.pool.worker.time_limit == 30.0 and built.pool.worker.log_level == "DEBUG"
    assert built.max_inflight_messages == 9


def test_crash_guard_limits_are_settings_that_reach_the_pool(tmp_path: Path) -> None:
    f = write(tmp_path, "crash_limit: 3\n")
    built = table.build(table.resolve(ESSENTIAL, config_file=f, environ={"RMQRUN_CRASH_WINDOW": "5"}))
    assert built.pool.crash_limit == 3 and built.pool.effective_crash_limit == 3
    assert built.pool.crash_window == 5.0
    default = table.build(table.resolve(ESSENTIAL, environ={}))
    assert default.pool.crash_limit is None and default.pool.crash_window == 60.0


def test_worker_class_and_concurrency_reach_the_workers(tmp_path: Path) -> None:
    """Flag, variable and file key each reach the BOOT frame's WorkerConfig; a bad value is refused by name."""
    f = write(tmp_path, "worker_class: threads\nworker_concurrency: 16\n")
    by_file = table.build(table.resolve(ESSENTIAL, config_file=f, environ={})).pool.worker
    assert (by_file.worker_class, by_file.concurrency) == ("threads", 16)
    by_env = table.build(table.resolve(ESSENTIAL, environ={"RMQRUN_WORKER_CLASS": "asyncio",
                                                           "RMQRUN_WORKER_CONCURRENCY": "32"})).pool.worker
    assert (by_env.worker_class, by_env.concurrency) == ("asyncio", 32)
    default = table.build(table.resolve(ESSENTIAL, environ={})).pool.worker
    assert (default.worker_class, default.concurrency) == ("process", 1)
    assert "worker_class='gevent' (command line --worker-class) is invalid: process, threads or asyncio" in \
        refused({**ESSENTIAL, "worker_class": "gevent"})
    assert "worker_concurrency='0' (environment RMQRUN_WORKER_CONCURRENCY) is invalid: an integer from 1" in \
        refused(ESSENTIAL, env={"RMQRUN_WORKER_CONCURRENCY": "0"})
    with pytest.raises(ConfigError, match=r"worker_concurrency 4 needs worker_class threads or asyncio"):
        table.build(table.resolve({**ESSENTIAL, "worker_concurrency": 4}, environ={}))
