"""``rmqrun spark`` refuses bad input with one clear line and the documented exit code, before Spark starts.

Exit 2: a bad option; 3: the handler or worker_init does not load; 1: the name server does not answer, the
topic does not exist, pyspark or Java is missing. None of these may start a JVM (no Spark log line appears).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_kit import child_env, free_port, produce, run_cli

pytestmark = pytest.mark.timeout(120)
HANDLER_SRC = Path(__file__).with_name("backfill_handler.py")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(HANDLER_SRC, tmp_path / "backfill_handler.py")
    return tmp_path


def spark_cli(workdir: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_cli(["spark", *args], cwd=workdir, timeout=60, env=env or child_env())


def one_error(res: Any, code: int, *fragments: str) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == code, res.stderr[-2000:]
    errors = [ln for ln in lines if ln.startswith("rmqrun: error:")]
    assert len(errors) == 1, res.stderr[-2000:]
    for f in fragments:
        assert f in errors[0], errors[0]
    assert "Traceback" not in res.stderr and "log4j" not in res.stderr and "SparkContext" not in res.stderr
    return errors[0]


def test_handler_that_does_not_load_exits_3_before_spark(broker: Any, workdir: Path) -> None:
    ns = broker.namesrv_address
    one_error(spark_cli(workdir, "no_such_module:handle", "--namesrv", ns, "--topic", "T"), 3,
              "Module 'no_such_module' not found")
    one_error(spark_cli(workdir, "backfill_handler:handel", "--namesrv", ns, "--topic", "T"), 3,
              "did you mean 'backfill_handler:handle'")
    one_error(spark_cli(workdir, "backfill_handler:handle", "--namesrv", ns, "--topic", "T", "--batch-size", "4"),
              3, "@rmqrun.batch")
    one_error(spark_cli(workdir, "backfill_handler:handle", "--namesrv", ns, "--topic", "T",
                        "--worker-init", "backfill_handler:nope"), 3, "worker_init")


@pytest.mark.parametrize("args, fragment", [
    (["--from", "yesterday"], "--from 'yesterday'"),
    (["--from", "latest"], "--from 'latest'"),
    (["--to", "earliest"], "--to 'earliest'"),
    (["--from", '{"T": {"broker-a:0": 3'], "--from is not valid JSON"),
    (["--from", '{"Other": {"broker-a:0": 3}}'], "names topic 'Other'"),
    (["--batch-size", "0"], "--batch-size '0' must be >= 1"),
    (["--time-limit", "soon"], "--time-limit 'soon'"),
    (["--partitions", "x"], "--partitions 'x'"),
    (["--conf", "novalue"], "--conf 'novalue'"),
    (["--group", "%RETRY%x"], "--group"),
    (["--tags", "||"], "--tags '||'"),
])
def test_bad_options_exit_2_naming_the_option(workdir: Path, args: list[str], fragment: str) -> None:
    res = spark_cli(workdir, "backfill_handler:handle", "--namesrv", "127.0.0.1:1", "--topic", "T", *args)
    one_error(res, 2, fragment)


def test_missing_topic_and_name_server(workdir: Path) -> None:
    one_error(spark_cli(workdir, "backfill_handler:handle", "--namesrv", "127.0.0.1:1"), 2, "--topic")
    one_error(spark_cli(workdir, "backfill_handler:handle", "--topic", "T"), 2, "NAMESRV_ADDR")


def test_unknown_topic_and_silent_name_server_exit_1(broker: Any, workdir: Path) -> None:
    one_error(spark_cli(workdir, "backfill_handler:handle", "--namesrv", broker.namesrv_address,
                        "--topic", "NoSuchTopicHere"), 1, "--topic 'NoSuchTopicHere'", "does not exist")
    silent = f"127.0.0.1:{free_port()}"
    one_error(spark_cli(workdir, "backfill_handler:handle", "--namesrv", silent, "--topic", "T"), 1,
              f"--namesrv {silent}", "did not answer")


def test_to_before_from_exits_2(broker: Any, workdir: Path) -> None:
    produce(broker.namesrv_address, "SparkRunErr", 12)
    res = spark_cli(workdir, "backfill_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkRunErr",
                    "--from", '{"SparkRunErr": {"broker-a:0": 2}}', "--to", "2001-09-10T00:00:00Z")
    one_error(res, 2, "--to time", "is before --from", "broker-a:0: from 2, to 0")


def test_missing_java_or_pyspark_is_one_line(workdir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = child_env(PATH=str(empty))
    env.pop("JAVA_HOME", None)
    one_error(spark_cli(workdir, "backfill_handler:handle", "--namesrv", "127.0.0.1:1", "--topic", "T", env=env), 1,
              "Spark needs Java 17+")

    fake = tmp_path / "no-pyspark"
    (fake / "pyspark").mkdir(parents=True)
    (fake / "pyspark" / "__init__.py").write_text("raise ImportError(\"No module named 'pyspark'\")\n")
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([str(fake), env["PYTHONPATH"]])
    one_error(spark_cli(workdir, "backfill_handler:handle", "--namesrv", "127.0.0.1:1", "--topic", "T", env=env), 1,
              "pip install 'rmqrun[spark]'")
