"""Offset stores: increase-only updates, persistence through an injected commit, the local file."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.consumer.offsets import (
    OFFSET_NOT_FOUND,
    OFFSET_READ_FAILED,
    LocalFileOffsetStore,
    OffsetStoreError,
    ReadOffsetType,
    RemoteOffsetStore,
    format_offset_table,
    parse_offset_table,
)
from rmqrun.model import MessageQueue

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)
MQB = MessageQueue("T", "broker-b", 0)
OTHER = MessageQueue("U", "broker-a", 0)


def run(coro):
    return asyncio.run(coro)


class FakeBroker:
    """Records commits; answers queries from a dict; can be told to fail."""

    def __init__(self) -> None:
        self.commits: list[tuple[MessageQueue, int]] = []
        self.stored: dict[MessageQueue, int] = {}
        self.fail_commit: set[MessageQueue] = set()
        self.fail_query = False

    async def commit(self, mq: MessageQueue, offset: int) -> None:
        await asyncio.sleep(0)
        if mq in self.fail_commit:
            raise ConnectionError(f"broker of {mq} is down")
        self.commits.append((mq, offset))
        self.stored[mq] = offset

    async def fetch(self, mq: MessageQueue) -> int | None:
        await asyncio.sleep(0)
        if self.fail_query:
            raise TimeoutError("no answer")
        return self.stored.get(mq)


# --- the in-memory table ------------------------------------------------------------------


def test_update_increase_only_never_moves_back() -> None:
    store = RemoteOffsetStore("G", FakeBroker().commit)
    assert store.update(MQ0, 10, increase_only=True)
    assert not store.update(MQ0, 7, increase_only=True)
    assert store.read_memory(MQ0) == 10
    assert store.update(MQ0, 12, increase_only=True)
    assert not store.update(MQ0, 12, increase_only=True)
    # Orderly / reset: increase_only=False may go back.
    assert store.update(MQ0, 3, increase_only=False)
    assert store.read_memory(MQ0) == 3


def test_negative_offsets_are_never_stored() -> None:
    store = RemoteOffsetStore("G", FakeBroker().commit)
    assert not store.update(MQ0, -1, increase_only=True)
    assert MQ0 not in store
    store.update(MQ0, 5, increase_only=False)
    assert not store.update(MQ0, -1, increase_only=False)
    assert store.read_memory(MQ0) == 5


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 1000), st.booleans()), max_size=40))
def test_increase_only_updates_are_monotone(ops: list[tuple[int, bool]]) -> None:
    store = RemoteOffsetStore("G", FakeBroker().commit)
    current = None
    for offset, increase_only in ops:
        before = store.read_memory(MQ0)
        store.update(MQ0, offset, increase_only)
        after = store.read_memory(MQ0)
        if increase_only:
            assert after >= before
        if offset >= 0 and (not increase_only or current is None or offset > current):
            current = offset
        assert after == (current if current is not None else -1)


def test_read_types() -> None:
    broker = FakeBroker()
    broker.stored[MQ0] = 40
    store = RemoteOffsetStore("G", broker.commit, broker.fetch)
    assert run(store.read(MQ0)) == OFFSET_NOT_FOUND  # memory only by default
    assert run(store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE)) == 40
    assert store.read_memory(MQ0) == 40  # cached
    store.update(MQ0, 50, increase_only=True)
    assert run(store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE)) == 50
    # From the store replaces memory even backwards: the broker is the truth on takeover.
    assert run(store.read(MQ0, ReadOffsetType.READ_FROM_STORE)) == 40
    assert store.read_memory(MQ0) == 40
    assert run(store.read(MQ1, ReadOffsetType.READ_FROM_STORE)) == OFFSET_NOT_FOUND
    assert MQ1 not in store
    broker.fail_query = True
    assert run(store.read(MQ1, ReadOffsetType.READ_FROM_STORE)) == OFFSET_READ_FAILED
    no_fetch = RemoteOffsetStore("G", broker.commit)
    assert run(no_fetch.read(MQ0, ReadOffsetType.READ_FROM_STORE)) == OFFSET_READ_FAILED


# --- remote persistence -------------------------------------------------------------------


def test_persist_all_commits_assigned_and_forgets_the_rest() -> None:
    broker = FakeBroker()
    store = RemoteOffsetStore("G", broker.commit)
    store.update(MQ0, 5, True)
    store.update(MQ1, 9, True)
    store.update(OTHER, 3, True)
    persisted = run(store.persist_all([MQ0, MQ1]))
    assert persisted == {MQ0: 5, MQ1: 9}
    assert sorted(broker.commits) == [(MQ0, 5), (MQ1, 9)]
    assert OTHER not in store  # no longer assigned: dropped, like Java's unusedMQ


def test_persist_all_with_no_queues_does_nothing() -> None:
    broker = FakeBroker()
    store = RemoteOffsetStore("G", broker.commit)
    store.update(MQ0, 5, True)
    assert run(store.persist_all([])) == {}
    assert broker.commits == [] and MQ0 in store


def test_one_failing_broker_does_not_block_the_others(caplog: pytest.LogCaptureFixture) -> None:
    broker = FakeBroker()
    broker.fail_commit.add(MQB)
    store = RemoteOffsetStore("G", broker.commit)
    store.update(MQ0, 1, True)
    store.update(MQB, 2, True)
    with caplog.at_level(logging.ERROR):
        assert run(store.persist_all([MQ0, MQB])) == {MQ0: 1}
    assert "broker of" in caplog.text
    assert MQB in store  # kept for the next period
    assert not run(store.persist(MQB))
    broker.fail_commit.clear()
    assert run(store.persist(MQB))
    assert broker.stored[MQB] == 2


def test_a_broker_failing_every_commit_is_reported_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    """A broker that is down fails each of its queues every persist period: one ERROR line for the
    broker, the repeats at DEBUG, and the next failure after a recovery is reported at once."""
    broker = FakeBroker()
    mq2 = MessageQueue("T", "broker-b", 1)
    broker.fail_commit.update({MQB, mq2})
    store = RemoteOffsetStore("G", broker.commit)
    store.update(MQB, 2, True)
    store.update(mq2, 3, True)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            assert run(store.persist_all([MQB, mq2])) == {}
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "committing offset 2 of" in errors[0].getMessage()
    broker.fail_commit.clear()
    assert run(store.persist_all([MQB, mq2])) == {MQB: 2, mq2: 3}
    broker.fail_commit.add(MQB)
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert run(store.persist_all([MQB, mq2])) == {mq2: 3}
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1


def test_persist_single_and_remove() -> None:
    broker = FakeBroker()
    store = RemoteOffsetStore("G", broker.commit)
    assert not run(store.persist(MQ0))  # nothing known: nothing sent
    store.update(MQ0, 77, True)
    assert run(store.persist(MQ0))
    assert broker.commits == [(MQ0, 77)]
    store.remove(MQ0)
    store.remove(MQ0)
    assert store.read_memory(MQ0) == -1


def test_offset_updated_during_persist_is_not_lost() -> None:
    """An update landing while a commit is awaited is kept and sent next time."""
    broker = FakeBroker()
    store = RemoteOffsetStore("G", broker.commit)
    store.update(MQ0, 10, True)

    async def scenario() -> None:
        task = asyncio.ensure_future(store.persist_all([MQ0]))
        await asyncio.sleep(0)
        store.update(MQ0, 20, True)
        await task
        await store.persist_all([MQ0])

    run(scenario())
    assert broker.commits == [(MQ0, 10), (MQ0, 20)]


def test_clone_table_by_topic() -> None:
    store = RemoteOffsetStore("G", FakeBroker().commit)
    store.update(MQ0, 1, True)
    store.update(OTHER, 2, True)
    assert store.clone_table("T") == {MQ0: 1}
    assert store.clone_table() == {MQ0: 1, OTHER: 2}
    clone = store.clone_table()
    clone[MQ0] = 99
    assert store.read_memory(MQ0) == 1


# --- local file -----------------------------------------------------------------------------


def test_local_store_path_and_round_trip(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "192.0.2.2@DEFAULT", tmp_path)
    assert store.path == tmp_path / "192.0.2.2@DEFAULT" / "G" / "offsets.json"
    store.update(MQ1, 12, True)
    store.update(MQ0, 30, True)
    assert run(store.persist_all([MQ0, MQ1])) == {MQ0: 30, MQ1: 12}
    data = json.loads(store.path.read_text())
    assert data == {
        "offsetTable": {
            "MessageQueue [topic=T, brokerName=broker-a, queueId=0]": 30,
            "MessageQueue [topic=T, brokerName=broker-a, queueId=1]": 12,
        }
    }
    fresh = LocalFileOffsetStore("G", "192.0.2.2@DEFAULT", tmp_path)
    fresh.load()
    assert fresh.clone_table() == {MQ0: 30, MQ1: 12}


def test_local_store_keeps_previous_version_as_backup(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "c", tmp_path)
    store.update(MQ0, 1, True)
    run(store.persist(MQ0))
    assert not store.backup_path.exists()
    store.update(MQ0, 2, True)
    run(store.persist(MQ0))
    assert parse_offset_table(store.backup_path.read_text()) == {MQ0: 1}
    assert parse_offset_table(store.path.read_text()) == {MQ0: 2}
    assert not list(store.path.parent.glob("*.tmp"))


def test_local_store_merges_with_file_like_java(tmp_path: Path) -> None:
    a = LocalFileOffsetStore("G", "c", tmp_path)
    a.update(OTHER, 8, True)
    run(a.persist(OTHER))
    b = LocalFileOffsetStore("G", "c", tmp_path)
    b.update(MQ0, 4, True)
    run(b.persist_all([MQ0]))
    assert parse_offset_table(b.path.read_text()) == {OTHER: 8, MQ0: 4}


def test_local_store_falls_back_to_backup(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "c", tmp_path)
    store.update(MQ0, 1, True)
    run(store.persist(MQ0))
    store.update(MQ0, 2, True)
    run(store.persist(MQ0))
    store.path.write_text('{"offsetTable": {"MessageQueue [topic=T, brok')  # torn write
    fresh = LocalFileOffsetStore("G", "c", tmp_path)
    fresh.load()
    assert fresh.read_memory(MQ0) == 1
    store.path.unlink()
    assert run(LocalFileOffsetStore("G", "c", tmp_path).read(MQ0, ReadOffsetType.READ_FROM_STORE)) == 1


def test_local_store_both_corrupt_raises(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "c", tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text("garbage")
    store.backup_path.write_text("also garbage")
    with pytest.raises(OffsetStoreError):
        store.load()
    store.update(MQ0, 3, True)
    assert not run(store.persist(MQ0))  # refuses to overwrite what it cannot read
    assert store.path.read_text() == "garbage"


def test_local_store_first_start_is_empty(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "c", tmp_path)
    store.load()
    assert store.clone_table() == {}
    assert run(store.read(MQ0, ReadOffsetType.MEMORY_FIRST_THEN_STORE)) == OFFSET_NOT_FOUND
    assert run(store.persist_all([MQ0])) == {}  # nothing known: the file may be written empty
    store.remove(MQ0)


def test_local_store_reads_java_fastjson_files(tmp_path: Path) -> None:
    """Java writes MessageQueue keys as objects, pretty-printed with tabs by toJson(true)."""
    java_pretty = (
        '{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":0,\n'
        '\t\t\t"topic":"T"\n\t\t}:250,{\n\t\t\t"brokerName":"broker-b",\n\t\t\t"queueId":0,\n'
        '\t\t\t"topic":"T"\n\t\t}:7\n\t}\n}'
    )
    java_compact = '{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:19}}'
    assert parse_offset_table(java_pretty) == {MQ0: 250, MQB: 7}
    assert parse_offset_table(java_compact) == {MQ1: 19}
    store = LocalFileOffsetStore("G", "192.0.2.2@DEFAULT", tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text(java_pretty)
    store.load()
    assert store.read_memory(MQ0) == 250
    store.update(MQ0, 251, True)
    run(store.persist(MQ0))  # rewritten in our format, Java's kept as the backup
    assert parse_offset_table(store.path.read_text()) == {MQ0: 251, MQB: 7}
    assert store.backup_path.read_text() == java_pretty


def test_offset_table_text_is_strict_about_content() -> None:
    for bad in ('{"offsetTable": {"nonsense": 1}}', '{"offsetTable": {"MessageQueue [topic=T, brokerName=b, queueId=0]": "x"}}',
                '{"offsetTable": []}', "[1]", "{{"):
        with pytest.raises(ValueError):
            parse_offset_table(bad)
    assert parse_offset_table('{"offsetTable": {}}') == {}
    assert parse_offset_table("{}") == {}


def test_broker_names_with_odd_characters_round_trip() -> None:
    table = {
        MessageQueue("%RETRY%G", "idc1@broker, queueId=3]", 2): 5,
        MessageQueue("T|x", "b", 0): 6,
        MessageQueue("T", "经纪人", 1): 7,
    }
    assert parse_offset_table(format_offset_table(table)) == table


def test_local_store_read_from_store_with_both_files_corrupt_is_not_found(tmp_path: Path) -> None:
    """A read at queue assignment does not raise on unreadable files: the queue starts by consume-from-where."""
    store = LocalFileOffsetStore("G", "c", tmp_path)
    store.path.parent.mkdir(parents=True)
    store.path.write_text("garbage")
    store.backup_path.write_text("also garbage")
    assert run(store.read(MQ0, ReadOffsetType.READ_FROM_STORE)) == OFFSET_NOT_FOUND
    store.backup_path.write_text("   ")  # an empty backup counts as a first start
    assert run(store.read(MQ0, ReadOffsetType.READ_FROM_STORE)) == OFFSET_NOT_FOUND


def test_local_store_persist_of_an_unknown_queue_writes_nothing(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "c", tmp_path)
    assert run(store.persist(MQ0)) is False
    assert run(store.persist_all([])) == {}
    assert not store.path.exists()


def test_local_store_unreadable_or_unwritable_files_are_reported_not_raised(tmp_path: Path) -> None:
    store = LocalFileOffsetStore("G", "c", tmp_path)
    store.update(MQ0, 3, True)
    assert run(store.persist(MQ0))
    store.update(MQ0, 4, True)
    assert run(store.persist(MQ0))  # the backup now holds 3
    # the main file turns into a directory: unreadable (not missing); the backup answers
    store.path.unlink()
    store.path.mkdir()
    assert run(LocalFileOffsetStore("G", "c", tmp_path).read(MQ0, ReadOffsetType.READ_FROM_STORE)) == 3
    # writing over a directory fails: persist says False instead of raising, and the table is kept
    store.update(MQ0, 5, True)
    assert run(store.persist(MQ0)) is False
    assert store.read_memory(MQ0) == 5
    # the backup unreadable as well: the read is refused loudly, nothing is guessed
    store.backup_path.unlink()
    store.backup_path.mkdir()
    with pytest.raises(OffsetStoreError, match="cannot read"):
        store.load()
