"""``--failed-to`` parts and task retries, without a JVM: what an attempt writes, what the driver commits,
which masters get retries and what a failed job's error line says."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rmqrun.model import Message
from rmqrun.spark import failure_parts
from rmqrun.spark.backfill import FailedMessage
from rmqrun.spark.retries import job_failure_cause, with_task_retries


def _failed(n: int, start: int = 0) -> list[FailedMessage]:
    return [FailedMessage.of(Message(topic="T", body=f"b{i}".encode(), properties={"k": str(i)}, msg_id=f"id{i}",
                                     broker_name="broker-a", queue_id=0, queue_offset=i), f"reason {i}")
            for i in range(start, start + n)]


@pytest.mark.parametrize("suffix", ["jsonl", "parquet"])
def test_only_the_parts_named_by_results_are_committed_each_row_once(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"failed.{suffix}"
    staging = failure_parts.staging_dir(str(target))
    parquet = suffix == "parquet"
    # partition 0: a first attempt wrote a whole part, then died before Spark saw its result; the retry wins
    lost = failure_parts.PartWriter(staging, 0, parquet)
    for f in _failed(5):
        lost.add(f)
    assert lost.close()
    retry = failure_parts.PartWriter(staging, 0, parquet)
    for f in _failed(5):
        retry.add(f)
    won0 = retry.close()
    # partition 1: more rows than one row group; an attempt killed mid-write leaves only an .inprogress file
    big = failure_parts.PartWriter(staging, 1, parquet)
    for f in _failed(failure_parts.ROWS_PER_GROUP + 7, start=100):
        big.add(f)
    won1 = big.close()
    killed = failure_parts.PartWriter(staging, 1, parquet)
    for f in _failed(failure_parts.ROWS_PER_GROUP + 1, start=100):
        killed.add(f)
    assert any(n.endswith(failure_parts.INPROGRESS) for n in os.listdir(staging))
    # partition 2: nothing failed, no part
    assert failure_parts.PartWriter(staging, 2, parquet).close() is None

    failure_parts.commit(str(target), staging, [won0, won1])  # type: ignore[list-item]
    if parquet:
        import pyarrow.parquet as pq
        rows = pq.read_table(target).to_pylist()
        bodies = [r["body"].decode() for r in rows]
    else:
        rows = [json.loads(ln) for ln in target.read_text().splitlines()]
        bodies = [r["body"] for r in rows]
    expected = [f"b{i}" for i in range(5)] + [f"b{i}" for i in range(100, 100 + failure_parts.ROWS_PER_GROUP + 7)]
    assert bodies == expected, "the winners' rows, in partition order, each once"
    assert rows[3]["reason"] == "reason 3" and rows[3]["msg_id"] == "id3"
    assert not os.path.exists(staging), "the staging directory is removed"


def test_no_failures_still_writes_an_empty_file_and_a_part_the_driver_cannot_see_is_an_error(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    for name in ("none.jsonl", "none.parquet"):
        staging = failure_parts.staging_dir(str(tmp_path / name))
        failure_parts.commit(str(tmp_path / name), staging, [])
    assert (tmp_path / "none.jsonl").read_text() == ""
    assert pq.read_table(tmp_path / "none.parquet").num_rows == 0

    (tmp_path / "kept.jsonl").write_text("old\n")
    staging = failure_parts.staging_dir(str(tmp_path / "kept.jsonl"))
    with pytest.raises(failure_parts.PartsMissingError, match="filesystem the driver and the executors share"):
        failure_parts.commit(str(tmp_path / "kept.jsonl"), staging, ["part-00003-abcdef01.jsonl"])
    assert (tmp_path / "kept.jsonl").read_text() == "old\n", "nothing replaced"


def test_abort_removes_the_attempts_unfinished_part(tmp_path: Path) -> None:
    staging = failure_parts.staging_dir(str(tmp_path / "f.jsonl"))
    w = failure_parts.PartWriter(staging, 4, False)
    for f in _failed(failure_parts.ROWS_PER_GROUP + 1):
        w.add(f)
    w.abort()
    assert os.listdir(staging) == []


@pytest.mark.parametrize("master, conf, expected", [
    ("local[*]", {}, "local[*,4]"),
    ("local[2]", {}, "local[2,4]"),
    ("local", {}, "local[1,4]"),
    ("local[3]", {"spark.task.maxFailures": "6"}, "local[3,6]"),
    ("local[2,8]", {}, "local[2,8]"),
    ("spark://127.0.0.1:7077", {}, "spark://127.0.0.1:7077"),
    ("local-cluster[2,1,1024]", {}, "local-cluster[2,1,1024]"),
])
def test_local_masters_that_run_a_task_once_get_retries_and_say_so(master: str, conf: dict[str, str],
                                                                    expected: str) -> None:
    got, why = with_task_retries(master, conf)
    assert got == expected
    assert (why is None) == (got == master)
    if why:
        assert f"using {expected} so a failed task is retried" in why and master in why


def test_a_failed_jobs_error_names_the_tasks_cause_not_the_py4j_call() -> None:
    crash = ("An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
             ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 2 in stage 0.0 failed 4 "
             "times, most recent failure: Lost task 2.3 in stage 0.0 (TID 9) (127.0.0.1 executor driver): "
             "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)\n"
             "\tat org.apache.spark.api.python.BasePythonRunner...\n")
    assert job_failure_cause(RuntimeError(crash)) == (
        "Task 2 in stage 0.0 failed 4 times; the last attempt: org.apache.spark.SparkException: Python worker "
        "exited unexpectedly (crashed)")
    ours = crash.replace("(crashed)\n", "\n  File \"task.py\", line 9, in run\n"
                         "rmqrun.spark.task.PartitionFailedError: rmqrun spark: partition 2 (T broker-a:0 [0, 9)) "
                         "failed: ValueError: x\n")
    assert job_failure_cause(RuntimeError(ours)) == "rmqrun spark: partition 2 (T broker-a:0 [0, 9)) failed: ValueError: x"
