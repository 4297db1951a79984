"""The name server's KV table on disk: Java's layout, saved on every change, a damaged file set aside."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rmqrun.broker.kv_config import ORDER_TOPIC_CONFIG, KVConfigTable


def test_every_change_is_saved_in_javas_layout_and_loaded_again(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigTable(path)
    kv.load()
    kv.put(ORDER_TOPIC_CONFIG, "T", "broker-a:8")
    kv.put("OTHER", "k", "v")
    assert json.loads(path.read_text()) == {"configTable": {ORDER_TOPIC_CONFIG: {"T": "broker-a:8"},
                                                            "OTHER": {"k": "v"}}}
    assert kv.delete(ORDER_TOPIC_CONFIG, "T") and not kv.delete(ORDER_TOPIC_CONFIG, "T")
    again = KVConfigTable(path)
    again.load()
    assert again.get(ORDER_TOPIC_CONFIG, "T") is None and again.get("OTHER", "k") == "v"
    assert again.namespace(ORDER_TOPIC_CONFIG) == {} and again.namespace("NONE") is None


def test_a_damaged_file_is_moved_aside_and_reported_not_overwritten_silently(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    path.write_text('{"configTable": ["not", "an", "object"]}')
    kv = KVConfigTable(path)
    kv.load()
    assert kv.problem is not None and "kvConfig.json is corrupt" in kv.problem
    assert (tmp_path / "kvConfig.json.corrupt").exists()
    assert kv.get(ORDER_TOPIC_CONFIG, "T") is None


def test_without_a_path_the_table_lives_in_memory(tmp_path: Path) -> None:
    kv = KVConfigTable(None)
    kv.load()
    kv.put(ORDER_TOPIC_CONFIG, "T", "broker-a:4")
    assert kv.get(ORDER_TOPIC_CONFIG, "T") == "broker-a:4" and kv.path is None
    assert list(tmp_path.iterdir()) == []


def test_a_failed_save_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    # the rule the KV table shares with the broker's request-mode table (broker/store/saved_table.py): what a
    # client is told matches what a restart finds
    path = tmp_path / "namesrv" / "kvConfig.json"
    kv = KVConfigTable(path)
    kv.load()
    kv.put(ORDER_TOPIC_CONFIG, "T", "broker-a:8")
    shutil.rmtree(path.parent)
    path.parent.write_text("")  # the file's directory is a file now: no save can succeed
    with pytest.raises(OSError):
        kv.put(ORDER_TOPIC_CONFIG, "T", "broker-b:4")
    assert kv.get(ORDER_TOPIC_CONFIG, "T") == "broker-a:8"
    with pytest.raises(OSError):
        kv.put("NEW", "k", "v")
    assert kv.namespace("NEW") is None
    with pytest.raises(OSError):
        kv.delete(ORDER_TOPIC_CONFIG, "T")
    assert kv.get(ORDER_TOPIC_CONFIG, "T") == "broker-a:8"
