"""``StoreConfig`` and the delay-level spec refuse bad values by name, before any file is touched."""

from __future__ import annotations

import pytest

from rmqrun.broker.store import StoreConfig, StoreError
from rmqrun.broker.store.config import FlushMode, delete_hours, parse_delay_levels


def test_delay_levels_parse_and_refuse_junk() -> None:
    assert parse_delay_levels("1s 5m 2h 1d") == [1000, 300_000, 7_200_000, 86_400_000]
    with pytest.raises(ValueError, match=r"delay level '5x' in '1s 5x' is not <number><s\|m\|h\|d>"):
        parse_delay_levels("1s 5x")
    with pytest.raises(ValueError, match="must name at least one level"):
        parse_delay_levels("   ")


def test_delete_when_names_hours() -> None:
    assert delete_hours("04;16") == {4, 16}
    with pytest.raises(StoreError, match=r"delete_when='25': '25' is not an hour 00-23"):
        delete_hours("25")


@pytest.mark.parametrize(("field", "value", "words"), [
    ("max_message_size", 100, "max_message_size=100 is too small (min 128)"),
    ("segment_size", 1000, "segment_size=1000 must be >= max_message_size + 8 (1032)"),
    ("consume_queue_entries_per_file", 0, "consume_queue_entries_per_file must be >= 1"),
    ("delete_when", "noon", "delete_when='noon'"),
    ("file_reserved_hours", 0, "file_reserved_hours must be > 0, got 0"),
    ("disk_max_used_space_ratio", 99, "disk_max_used_space_ratio must be a percentage between 10 and 95, got 99"),
    ("disk_space_clean_forcibly_ratio", 5, "disk_space_clean_forcibly_ratio must be a percentage"),
    ("delete_files_batch_max", 0, "delete_files_batch_max must be >= 1, got 0"),
    ("flush_interval_ms", 0, "flush_interval_ms must be > 0, got 0"),
    ("clean_resource_interval_ms", -1, "clean_resource_interval_ms must be > 0, got -1"),
])
def test_each_bad_store_setting_is_refused_by_name(field: str, value: object, words: str) -> None:
    kw: dict[str, object] = {"max_message_size": 1024, "segment_size": 4096, field: value}
    with pytest.raises(StoreError) as err:
        StoreConfig(**kw)  # type: ignore[arg-type]
    assert words in str(err.value)


def test_flush_mode_may_be_given_as_text() -> None:
    assert StoreConfig(flush_mode="sync").flush_mode is FlushMode.SYNC  # type: ignore[arg-type]
