"""The small JSON stores: consumer offsets, topic configs, subscription groups."""

from __future__ import annotations

import json
import os

import pytest

from rmqrun.broker.store import (
    ConsumerOffsetStore,
    LoadSource,
    MessageStore,
    SubscriptionGroupConfig,
    SubscriptionGroupStore,
    TopicConfig,
    TopicConfigStore,
)
from rmqrun.broker.store.json_file import JsonFile
from tests.unit.store_records import small_config
from tests.waiting import eventually


def test_json_file_atomic_save_keeps_backup(tmp_path) -> None:
    f = JsonFile(tmp_path / "x.json")
    assert f.load().source is LoadSource.EMPTY and f.load().problem is None
    f.save({"v": 1})
    f.save({"v": 2})
    assert json.loads((tmp_path / "x.json").read_text()) == {"v": 2}
    assert json.loads((tmp_path / "x.json.bak").read_text()) == {"v": 1}
    assert not (tmp_path / "x.json.tmp").exists()
    loaded = f.load()
    assert (loaded.data, loaded.source, loaded.problem) == ({"v": 2}, LoadSource.MAIN, None)


def test_corrupt_file_falls_back_to_backup_and_is_kept_aside(tmp_path) -> None:
    f = JsonFile(tmp_path / "x.json")
    f.save({"v": 1})
    f.save({"v": 2})
    (tmp_path / "x.json").write_text('{"v": 2, trunc')
    loaded = f.load()
    assert loaded.data == {"v": 1} and loaded.source is LoadSource.BACKUP
    assert "corrupt" in loaded.problem
    assert (tmp_path / "x.json.corrupt").read_text() == '{"v": 2, trunc'
    f.save({"v": 3})  # the good backup is not replaced by the corrupt file
    assert f.load().data == {"v": 3}
    assert json.loads((tmp_path / "x.json.bak").read_text()) == {"v": 1}


def test_both_corrupt_gives_empty_and_reports(tmp_path) -> None:
    (tmp_path / "x.json").write_text("garbage")
    (tmp_path / "x.json.bak").write_text("more garbage")
    loaded = JsonFile(tmp_path / "x.json").load()
    assert loaded.data is None and loaded.source is LoadSource.EMPTY
    assert "x.json is corrupt" in loaded.problem and "x.json.bak is corrupt" in loaded.problem


def test_crash_between_renames_uses_backup(tmp_path) -> None:
    f = JsonFile(tmp_path / "x.json")
    f.save({"v": 1})
    os.replace(tmp_path / "x.json", tmp_path / "x.json.bak")  # state after the first rename
    loaded = f.load()
    assert loaded.data == {"v": 1} and loaded.source is LoadSource.BACKUP


def test_consumer_offsets(tmp_path) -> None:
    s = ConsumerOffsetStore(tmp_path / "o.json")
    s.load()
    assert s.query("G", "T", 0) is None
    s.commit("G", "T", 0, 10)
    s.commit("G", "T", 3, 7)
    s.commit("G", "%RETRY%G", 0, 2)
    s.commit("H", "T", 0, 1)
    assert s.flush() and not s.flush()  # nothing changed since
    s.commit("G", "T", 0, 10)
    assert not s.flush()  # same value: not dirty
    again = ConsumerOffsetStore(tmp_path / "o.json")
    assert again.load().problem is None
    assert again.offsets("G", "T") == {0: 10, 3: 7}
    assert again.query("G", "%RETRY%G", 0) == 2
    assert again.groups() == ["G", "H"] and again.groups_of_topic("T") == ["G", "H"]
    assert again.topics_of("G") == ["%RETRY%G", "T"]
    assert again.remove_group("H") and again.groups() == ["G"]
    assert again.remove_group("G", "T") and again.topics_of("G") == ["%RETRY%G"]


def test_topic_configs_round_trip_and_data_version(tmp_path) -> None:
    s = TopicConfigStore(tmp_path / "topics.json")
    s.load()
    v0 = s.data_version
    s.put(TopicConfig("T", read_queue_nums=4, write_queue_nums=4))
    s.put(TopicConfig("%DLQ%G", 1, 1, perm=6, order=True))
    assert s.data_version.counter == v0.counter + 2
    assert s.flush()
    raw = json.loads((tmp_path / "topics.json").read_text())
    assert raw["topicConfigTable"]["T"]["readQueueNums"] == 4  # RocketMQ field names
    again = TopicConfigStore(tmp_path / "topics.json")
    again.load()
    assert again.get("T") == TopicConfig("T", 4, 4)
    assert again.get("%DLQ%G").order is True
    assert again.data_version == s.data_version
    assert again.delete("T") and not again.delete("T")
    assert list(again.all()) == ["%DLQ%G"]


def test_subscription_groups_defaults(tmp_path) -> None:
    s = SubscriptionGroupStore(tmp_path / "sub.json")
    s.load()
    g = s.get_or_create("G")
    assert (g.retry_max_times, g.retry_queue_nums, g.consume_enable) == (16, 1, True)
    s.put(SubscriptionGroupConfig("H", retry_max_times=3, consume_enable=False))
    s.flush()
    again = SubscriptionGroupStore(tmp_path / "sub.json")
    again.load()
    assert again.get("H") == SubscriptionGroupConfig("H", retry_max_times=3, consume_enable=False)
    assert again.get("G") == SubscriptionGroupConfig("G")


def test_message_store_persists_and_reports_corrupt_json(tmp_path) -> None:
    with MessageStore(tmp_path, small_config(config_flush_interval_ms=60_000)) as s:
        s.consumer_offsets.commit("G", "T", 0, 42)
        s.topic_configs.put(TopicConfig("T", 8, 8))
        s.subscription_groups.put(SubscriptionGroupConfig("G"))
    with MessageStore(tmp_path, small_config()) as s:  # close flushed them
        assert s.config_problems == []
        assert s.consumer_offsets.query("G", "T", 0) == 42
        assert s.topic_configs.get("T").read_queue_nums == 8
        s.consumer_offsets.commit("G", "T", 0, 43)
    (tmp_path / "config" / "consumerOffset.json").write_bytes(b"\x00\x00\x00")
    with MessageStore(tmp_path, small_config()) as s:
        assert len(s.config_problems) == 1 and "consumerOffset.json" in s.config_problems[0]
        assert s.consumer_offsets.query("G", "T", 0) == 42  # from the backup


def test_periodic_flush(tmp_path) -> None:
    with MessageStore(tmp_path, small_config(config_flush_interval_ms=50)) as s:
        s.consumer_offsets.commit("G", "T", 1, 5)
        path = tmp_path / "config" / "consumerOffset.json"
        eventually(path.exists, what=f"{path.name} written")
        assert json.loads(path.read_text())["offsetTable"]["G"]["T"] == {"1": 5}


@pytest.mark.parametrize("content", ['[1, 2]', '{"offsetTable": {"G": {"T": {"x": 1}}}}', '{"other": 1}', "\udcff"])
def test_wrong_structure_counts_as_corrupt(tmp_path, content) -> None:
    good = ConsumerOffsetStore(tmp_path / "o.json")
    good.load()
    good.commit("G", "T", 0, 9)
    good.flush()
    good.commit("G", "T", 0, 10)
    good.flush()  # o.json has 10, o.json.bak has 9
    (tmp_path / "o.json").write_bytes(content.encode("utf-8", "surrogateescape"))
    s = ConsumerOffsetStore(tmp_path / "o.json")
    loaded = s.load()
    assert loaded.source is LoadSource.BACKUP and "corrupt" in loaded.problem
    assert s.query("G", "T", 0) == 9
    assert (tmp_path / "o.json.corrupt").exists()


def test_topic_table_with_wrong_structure(tmp_path) -> None:
    (tmp_path / "topics.json").write_text('{"topicConfigTable": {"T": {"readQueueNums": 4}}}')  # no topicName
    s = TopicConfigStore(tmp_path / "topics.json")
    loaded = s.load()
    assert loaded.source is LoadSource.EMPTY and "corrupt" in loaded.problem and s.all() == {}


def test_a_failed_offsets_save_is_written_by_the_close_of_an_idle_store(tmp_path) -> None:
    """A save of consumerOffset.json that failed (a full disk, an I/O error) leaves the table dirty: with no
    commit after it, the stop of an idle broker still writes it, and a restart reads the last commits."""
    with MessageStore(tmp_path, small_config(config_flush_interval_ms=60_000)) as s:
        s.consumer_offsets.commit("G", "T", 0, 41)
        s.flush_configs()
        s.consumer_offsets.commit("G", "T", 0, 42)
        real_save = s.consumer_offsets._file.save
        failures = []

        def failing_once(payload) -> None:
            if not failures:
                failures.append(payload)
                raise OSError(28, "No space left on device")
            real_save(payload)

        s.consumer_offsets._file.save = failing_once
        with pytest.raises(OSError):
            s.flush_configs()
        assert failures, "the save never failed"
        # nothing commits any more: the group is idle until the broker stops
    with MessageStore(tmp_path, small_config()) as s:
        assert s.consumer_offsets.query("G", "T", 0) == 42, "the restart went back to what was saved before"
