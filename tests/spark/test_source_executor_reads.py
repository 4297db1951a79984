"""What a partition does on an executor, called in this process as Spark's Python worker calls it, against a
real embedded broker: one consumer per worker process shared by its tasks, dropped when a task fails, closed
at exit; Arrow batches that hold exactly what one row per message holds."""

from __future__ import annotations

import os
import select
from typing import Any

import pyarrow as pa
import pytest

from rmqrun.model import Message
from rmqrun.spark import executor_clients
from rmqrun.spark.batch import read_partition
from rmqrun.spark.options import ReadOptions
from rmqrun.spark.ranges import QueueRange, open_consumer
from rmqrun.spark.schema import arrow_schema, to_arrow, to_row
from tests.integration.signals_kit import produce


def _ranges(broker: Any, topic: str) -> list[QueueRange]:
    consumer = open_consumer(broker.namesrv_address, timeout=10)
    try:
        return [QueueRange(topic, mq.broker_name, mq.queue_id, consumer.min_offset(mq), consumer.max_offset(mq))
                for mq in sorted(consumer.fetch_subscribe_message_queues(topic))]
    finally:
        consumer.close()


def test_tasks_of_one_worker_share_its_consumer_and_a_failed_task_drops_it(broker: Any) -> None:
    produce(broker, "ExecReuse", 20)
    opts = ReadOptions.parse({"namesrv": broker.namesrv_address, "topic": "ExecReuse"}, streaming=False)
    other = ReadOptions.parse({"namesrv": broker.namesrv_address, "topic": "ExecReuse", "group": "GID_exec_other"},
                              streaming=False)
    executor_clients.close_all()
    first = executor_clients.consumer_for(opts)
    rows = [r for q in _ranges(broker, "ExecReuse") for b in read_partition(opts, q) for r in b.to_pylist()]
    assert sorted(r["body"] for r in rows) == sorted(f"msg-{i}".encode() for i in range(20))
    assert executor_clients.consumer_for(opts) is first          # every task above used the same one
    assert executor_clients.consumer_for(other) is not first     # another group: another connection
    assert executor_clients.cached() == 2

    # a task that fails (a range past the queue's end, failOnDataLoss) drops its consumer; the next opens one
    beyond = QueueRange("ExecReuse", "broker-a", 0, 0, 500)
    with pytest.raises(Exception, match="before the planned end 500"):
        list(read_partition(opts, beyond))
    fresh = executor_clients.consumer_for(opts)
    assert fresh is not first
    assert [r["queue_offset"] for b in read_partition(opts, _ranges(broker, "ExecReuse")[0])
            for r in b.to_pylist()][:1] == [0]

    executor_clients.close_all()
    assert executor_clients.cached() == 0
    with pytest.raises(Exception, match="not started"):
        fresh.min_offset(beyond.mq)


def test_a_forked_worker_opens_its_own_consumer(broker: Any) -> None:
    produce(broker, "ExecFork", 2)
    opts = ReadOptions.parse({"namesrv": broker.namesrv_address, "topic": "ExecFork"}, streaming=False)
    parent = executor_clients.consumer_for(opts)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what a Spark worker forked by its daemon does
        ok = b"0"
        try:
            child = executor_clients.consumer_for(opts)
            ok = b"1" if child is not parent and child.max_offset(_ranges(broker, "ExecFork")[0].mq) >= 0 else b"0"
            executor_clients.close_all()
        finally:
            os.write(write, ok)
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 120)   # bounded: a hung child fails the test, never hangs it
    assert ready and os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    assert executor_clients.consumer_for(opts) is parent
    executor_clients.close_all()


def test_an_arrow_batch_holds_what_one_row_per_message_holds() -> None:
    msgs = []
    for i, props in enumerate([{"TAGS": "a", "KEYS": "k1 k2", "UNIQ_KEY": "ID1"}, {}, {"x": "1", "TAGS": ""}]):
        m = Message("T", f"body-{i}".encode(), props, reconsume_times=i)
        m.broker_name, m.queue_id, m.queue_offset = "broker-a", i, 100 + i
        m.born_timestamp, m.store_timestamp = 1_700_000_000_123 + i, 1_700_000_000_456 + i
        m.msg_id = f"ID{i}"
        msgs.append(m)
    batch = to_arrow(msgs, arrow_schema())
    assert batch.schema == arrow_schema() and isinstance(batch, pa.RecordBatch)
    for i, m in enumerate(msgs):
        got = [batch.column(j)[i].as_py() for j in range(batch.num_columns)]
        got[8] = dict(got[8])
        assert tuple(got) == to_row(m)


@pytest.mark.parametrize("tags", ["*", "TagA || TagC"])
def test_a_partition_s_batches_hold_the_rows_the_per_message_path_gave(broker: Any, tags: str) -> None:
    """Against the real broker: read_partition (pull answers decoded straight into columns) gives, over
    several ranges packed in one partition, the rows to_arrow gave over read_range's messages."""
    from rmqrun.spark.pulling import read_range

    topic = "ExecColumnsAll" if tags == "*" else "ExecColumnsTagged"
    produce(broker, topic, 300, tags=["TagA", "TagB", "TagC"], props={"uni": "ü→€ ✓"})
    opts = ReadOptions.parse({"namesrv": broker.namesrv_address, "topic": topic, "tags": tags}, streaming=False)
    ranges = _ranges(broker, topic)
    # the first range cut in two: a pull from inside a queue, and a range's end inside a pull
    first = ranges[0]
    cut = first.start + first.size // 2 + 1
    ranges = [QueueRange(topic, first.broker, first.queue_id, first.start, cut),
              QueueRange(topic, first.broker, first.queue_id, cut, first.end), *ranges[1:]]
    new = pa.Table.from_batches(list(read_partition(opts, ranges)), schema=arrow_schema())
    consumer = open_consumer(broker.namesrv_address, timeout=10)
    try:
        old = pa.Table.from_batches([to_arrow([m for r in ranges for m in read_range(consumer, r, tags)],
                                              arrow_schema())])
    finally:
        consumer.close()
    assert new.num_rows == old.num_rows == (300 if tags == "*" else 200)
    assert new.to_pylist() == old.to_pylist()
    assert set(new.column("tags").to_pylist()) == ({"TagA", "TagB", "TagC"} if tags == "*" else
                                                           {"TagA", "TagC"})
    executor_clients.close_all()
