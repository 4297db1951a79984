"""``rmqrun spark MODULE:FUNC`` run as a real process against the embedded broker, on a local Spark master.

The handler module is copied into a temporary working directory (a user's module, not installed), so the
runner must ship it to the executors. The handlers record every message they see under a directory given by
``RMQRUN_HANDLER_RECORD_DIR``; the tests compare those records with what the broker holds.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_kit import Child, child_env, produce, run_cli, wait_for
from tests.integration.signals_kit import committed, queue_max_offsets, topic_messages

pytestmark = pytest.mark.timeout(240)
HANDLER_SRC = Path(__file__).with_name("backfill_handler.py")
LOCAL = ["--master", "local[2]", "--conf", "spark.ui.enabled=false"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A working directory holding the handler module, and the record directory inside it."""
    shutil.copy(HANDLER_SRC, tmp_path / "backfill_handler.py")
    (tmp_path / "rec").mkdir()
    return tmp_path


def spark_cli(workdir: Path, args: list[str], timeout: float = 150.0, **env: str) -> Any:
    return run_cli(["spark", *args], cwd=workdir, timeout=timeout,
                   env=child_env(RMQRUN_HANDLER_RECORD_DIR=str(workdir / "rec"), **env))


def records(workdir: Path, name: str = "handled") -> list[list[str]]:
    return [line.split() for f in sorted((workdir / "rec").glob(f"{name}-*")) for line in f.read_text().splitlines()]


def test_backlog_is_handled_once_failures_go_to_jsonl_and_init_runs_per_partition(broker: Any, workdir: Path) -> None:
    produce(broker.namesrv_address, "SparkRunA", 120)
    stored = {m.body.decode(): m for m in topic_messages(broker, "SparkRunA")}
    assert len(stored) == 120

    res = spark_cli(workdir, ["backfill_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkRunA",
                              *LOCAL, "--partitions", "6", "--worker-init", "backfill_handler:init",
                              "--failed-to", str(workdir / "failed.jsonl"), "--time-limit", "1"],
                    RMQRUN_HANDLER_FAIL="m5,m17=later,m80,m41=slow")
    assert res.returncode == 0, res.stderr[-3000:]

    seen = records(workdir)
    handled = Counter(r[2] for r in seen)
    assert set(handled) == set(stored) and set(handled.values()) == {1}, "every message exactly once"
    for qid, off, body, _how, times in seen:
        assert (int(qid), int(off), int(times)) == (stored[body].queue_id, stored[body].queue_offset, 0)
    parts = int(re.search(r"handled 120 messages in (\d+) partitions", res.stdout).group(1))  # type: ignore[union-attr]
    assert parts >= 6, "--partitions is a minimum; ranges are split by offset"
    inits = [int(r[0]) for r in records(workdir, "inits")]
    assert sorted(inits) == list(range(parts)), "worker_init once per partition, with the partition index"

    failed = [json.loads(line) for line in (workdir / "failed.jsonl").read_text().splitlines()]
    assert sorted(f["body"] for f in failed) == ["m17", "m41", "m5", "m80"]
    for f in failed:
        m = stored[f["body"]]
        assert (f["topic"], f["broker"], f["queue_id"], f["queue_offset"], f["msg_id"]) == \
            ("SparkRunA", "broker-a", m.queue_id, m.queue_offset, m.msg_id)
        assert f["properties"] == m.properties and f["store_timestamp"] == m.store_timestamp
    reasons = {f["body"]: f["reason"] for f in failed}
    assert reasons["m5"] == "raised ValueError: bad body m5"
    assert reasons["m17"] == "returned ReconsumeLater(delay_level=0)"
    assert reasons["m41"] == "soft time limit (1 s) exceeded"

    out = res.stdout
    assert "116 succeeded, 4 failed" in out
    assert "  success: 116" in out and "  raised ValueError: 2" in out and "  ReconsumeLater: 1" in out
    assert "  time limit: 1" in out
    assert f"4 failed messages written to {workdir / 'failed.jsonl'}" in out
    assert "progress 120/120 messages (100%)" in res.stderr and f"{parts}/{parts} partitions" in res.stderr


def test_batch_handler_acks_a_prefix_and_the_rest_goes_to_parquet(broker: Any, workdir: Path) -> None:
    import pyarrow.parquet as pq

    produce(broker.namesrv_address, "SparkRunB", 60)
    stored = {m.body.decode(): m for m in topic_messages(broker, "SparkRunB")}
    target = workdir / "failed.parquet"
    res = spark_cli(workdir, ["backfill_handler:handle_batch", "--namesrv", broker.namesrv_address,
                              "--topic", "SparkRunB", *LOCAL, "--batch-size", "4", "--partitions", "4",
                              "--failed-to", str(target)], RMQRUN_HANDLER_FAIL="m10,m33")
    assert res.returncode == 0, res.stderr[-3000:]

    seen = records(workdir)
    assert Counter(r[2] for r in seen) == Counter(set(stored)), "every message exactly once"
    calls: dict[str, list[list[str]]] = {}
    for r in seen:
        calls.setdefault(r[3], []).append(r)
    assert all(1 <= len(c) <= 4 and {x[4] for x in c} == {f"size={len(c)}"} for c in calls.values())
    expected_failed = set()
    for c in calls.values():
        bodies = [x[2] for x in sorted(c, key=lambda x: int(x[1]))]
        for i, b in enumerate(bodies):
            if b in ("m10", "m33"):
                expected_failed.update(bodies[i:])
                break
    table = pq.read_table(target).to_pylist()
    assert sorted(row["body"].decode() for row in table) == sorted(expected_failed)
    for row in table:
        m = stored[row["body"].decode()]
        assert (row["queue_id"], row["queue_offset"], row["msg_id"]) == (m.queue_id, m.queue_offset, m.msg_id)
        assert row["reason"].startswith("returned AckIndex(")
        assert dict(row["properties"]) == m.properties
    n = len(expected_failed)
    assert f"{60 - n} succeeded, {n} failed" in res.stdout and f"AckIndex: not acked: {n}" in res.stdout


def test_group_failures_go_to_retry_and_run_continues_exactly_after_the_backfill(
        broker: Any, workdir: Path, tmp_path: Path) -> None:
    produce(broker.namesrv_address, "SparkRunC", 40)
    stored = {m.body.decode(): m for m in topic_messages(broker, "SparkRunC")}
    res = spark_cli(workdir, ["backfill_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkRunC",
                              *LOCAL, "--group", "BackfillC"], RMQRUN_HANDLER_FAIL="m7")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "1 failed messages sent to %RETRY%BackfillC" in res.stdout
    assert committed(broker, "BackfillC", "SparkRunC") == queue_max_offsets(broker, "SparkRunC")

    retried = topic_messages(broker, "%RETRY%BackfillC")
    assert [m.body for m in retried] == [b"m7"]
    props = retried[0].properties
    assert props["RETRY_TOPIC"] == "SparkRunC" and retried[0].reconsume_times == 1, "reconsume times + 1"
    assert props["ORIGIN_MESSAGE_ID"] == stored["m7"].msg_id

    # A live consumer of the same group gets only what came after the backfill, plus the retried message.
    ends = queue_max_offsets(broker, "SparkRunC")
    produce(broker.namesrv_address, "SparkRunC", 12)
    after = queue_max_offsets(broker, "SparkRunC")
    shutil.rmtree(workdir / "rec")
    (workdir / "rec").mkdir()
    env = child_env(RMQRUN_HANDLER_RECORD_DIR=str(workdir / "rec"))
    with Child(["run", "tests.spark.backfill_handler:handle", "--namesrv", broker.namesrv_address,
                "--group", "BackfillC", "--topic", "SparkRunC", "--workers", "1"], tmp_path, env=env) as run:
        wait_for(lambda: len(records(workdir)) >= 13, timeout=90, what="13 deliveries to rmqrun run")
        run.signal(15)
        assert run.wait(30) == 0, run.stderr[-3000:]
    seen = records(workdir)
    new = sorted((int(r[0]), int(r[1])) for r in seen if r[4] == "0")
    assert new == sorted((q, off) for q in after for off in range(ends[q], after[q])), \
        "exactly the offsets produced after the backfill, each once"
    assert [(r[2], r[4]) for r in seen if r[4] != "0"] == [("m7", "1")], "the retried message, once"


def test_a_failed_job_is_one_error_line_and_commits_nothing(broker: Any, workdir: Path) -> None:
    produce(broker.namesrv_address, "SparkRunD", 16)
    res = spark_cli(workdir, ["backfill_handler:handle", "--namesrv", broker.namesrv_address, "--topic", "SparkRunD",
                              *LOCAL, "--group", "BackfillD", "--worker-init", "backfill_handler:init"],
                    RMQRUN_HANDLER_INIT_FAIL="1")
    assert res.returncode == 1, res.stderr[-3000:]
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("rmqrun: error:")]
    assert len(errors) == 1 and "the Spark job failed; nothing was committed" in errors[0], res.stderr[-3000:]
    assert "RuntimeError: init refused in partition" in errors[0] and "SparkRunD broker-a:" in errors[0]
    # (the broker answers 0, not "none", for a group without an offset on a queue that starts at 0)
    assert committed(broker, "BackfillD", "SparkRunD") == committed(broker, "NeverUsedD", "SparkRunD"), \
        "no offset committed"
    assert all(v > 0 for v in queue_max_offsets(broker, "SparkRunD").values())
    assert "handled" not in res.stdout
