"""``rmqrun spark`` survives task failures: a killed Python worker on the default master is retried and the job
commits; failures never travel through the driver, so a backfill where every message fails finishes under a
small ``spark.driver.maxResultSize``; a job that fails anyway names the task's cause, not the Py4J call.

Real processes: the CLI, its Spark JVM and Python workers (the handler SIGKILLs its own worker), the embedded
broker over TCP.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rmqrun.client.producer import Producer
from tests.integration.cli_kit import child_env, run_cli
from tests.integration.signals_kit import committed, queue_max_offsets

pytestmark = pytest.mark.timeout(300)
HANDLER_SRC = Path(__file__).with_name("backfill_handler.py")
NO_UI = ["--conf", "spark.ui.enabled=false"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copy(HANDLER_SRC, tmp_path / "backfill_handler.py")
    (tmp_path / "rec").mkdir()
    return tmp_path


def spark_cli(workdir: Path, args: list[str], **env: str) -> Any:
    return run_cli(["spark", *args], cwd=workdir, timeout=240,
                   env=child_env(RMQRUN_HANDLER_RECORD_DIR=str(workdir / "rec"), **env))


def records(workdir: Path) -> list[list[str]]:
    return [line.split() for f in sorted((workdir / "rec").glob("handled-*")) for line in f.read_text().splitlines()]


def send(namesrv: str, topic: str, n: int, pad: int = 0) -> None:
    async def main() -> None:
        async with Producer(namesrv, "PG_spark_retries") as producer:
            for i in range(n):
                await producer.send(topic, f"m{i}".encode() + b"x" * pad)
    asyncio.run(main())


def test_a_worker_killed_mid_backfill_on_the_default_master_is_retried_and_the_job_commits(
        broker: Any, workdir: Path) -> None:
    send(broker.namesrv_address, "SparkRetryA", 400)
    res = spark_cli(workdir, ["backfill_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkRetryA",
                              *NO_UI, "--partitions", "4", "--group", "BackfillRetryA"],
                    RMQRUN_HANDLER_FAIL="m150=kill")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "master local[*] runs each task once; using local[*,4] so a failed task is retried" in res.stderr
    assert (workdir / "rec" / "killed-m150").exists(), "the worker really was killed"
    seen = Counter(r[2] for r in records(workdir))
    assert set(seen) == {f"m{i}" for i in range(400)}, "every message handled"
    assert seen["m150"] == 2, "the killed attempt's message ran again in the retry"
    assert "400 succeeded, 0 failed" in res.stdout
    assert committed(broker, "BackfillRetryA", "SparkRetryA") == queue_max_offsets(broker, "SparkRetryA")


def test_a_backfill_where_every_message_fails_finishes_under_a_small_max_result_size(
        broker: Any, workdir: Path) -> None:
    n = 3000  # ~3 MiB of failed bodies; the driver accepts 1 MiB of task results in all
    send(broker.namesrv_address, "SparkRetryB", n, pad=1024)
    target = workdir / "failed.jsonl"
    res = spark_cli(workdir, ["backfill_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkRetryB",
                              *NO_UI, "--partitions", "2", "--conf", "spark.driver.maxResultSize=1m",
                              "--group", "BackfillRetryB", "--failed-to", str(target)],
                    RMQRUN_HANDLER_FAIL_ALL="1")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(line) for line in target.read_text().splitlines()]
    assert sorted(r["body"][:r["body"].index("x")] for r in rows) == sorted(f"m{i}" for i in range(n)), \
        "every failure written, each once"
    assert all(len(r["body"]) > 1024 and r["reason"].startswith("raised ValueError: bad body m") for r in rows)
    assert f"0 succeeded, {n} failed" in res.stdout and f"{n} failed messages written to {target}" in res.stdout
    assert committed(broker, "BackfillRetryB", "SparkRetryB") == queue_max_offsets(broker, "SparkRetryB")
    assert [p.name for p in workdir.iterdir() if p.name.startswith(".failed.jsonl.parts")] == [], "staging removed"


def test_a_task_that_always_crashes_fails_the_job_naming_the_cause_and_nothing_is_committed(
        broker: Any, workdir: Path) -> None:
    send(broker.namesrv_address, "SparkRetryC", 40)
    target = workdir / "failed.jsonl"
    target.write_text("from an earlier run\n")
    res = spark_cli(workdir, ["backfill_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkRetryC",
                              *NO_UI, "--master", "local[2]", "--conf", "spark.task.maxFailures=2",
                              "--group", "BackfillRetryC", "--failed-to", str(target)],
                    RMQRUN_HANDLER_FAIL="m3=crash,m5")
    assert res.returncode == 1, res.stderr[-3000:]
    assert "using local[2,2] so a failed task is retried (2 attempts" in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("rmqrun: error:")]
    assert len(errors) == 1, res.stderr[-3000:]
    assert "the Spark job failed; nothing was committed: Task " in errors[0]
    assert "failed 2 times; the last attempt: " in errors[0] and "Python worker exited unexpectedly" in errors[0]
    assert "collectAndServe" not in errors[0]
    assert sum(1 for r in records(workdir) if r[2] == "m3") == 2, "two attempts"
    assert target.read_text() == "from an earlier run\n", "--failed-to untouched by a failed job"
    assert [p.name for p in workdir.iterdir() if p.name.startswith(".failed.jsonl.parts")] == [], "staging removed"
    assert committed(broker, "BackfillRetryC", "SparkRetryC") == committed(broker, "NeverUsedC", "SparkRetryC")
