"""``rmqrun offsets reset --to``: which words, times and numbers mean what (no broker needed)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from rmqrun.cli.offsets import EPOCH_MS_FLOOR, LATEST_TIMESTAMP, Target, parse_to
from rmqrun.errors import ConfigError


def test_words_and_the_timestamps_sent_to_running_clients() -> None:
    assert parse_to("earliest") == Target("earliest", text="earliest") and parse_to("EARLIEST").timestamp == 0
    assert parse_to(" latest ").timestamp == LATEST_TIMESTAMP == -1  # the broker's "max offset"


def test_numbers_below_the_epoch_floor_are_queue_offsets() -> None:
    assert parse_to("0") == Target("offset", 0, "offset 0") and parse_to("0").timestamp is None
    assert parse_to(str(EPOCH_MS_FLOOR - 1)).kind == "offset"
    at = parse_to(str(EPOCH_MS_FLOOR))
    assert (at.kind, at.value, at.timestamp) == ("time", EPOCH_MS_FLOOR, EPOCH_MS_FLOOR)


def test_iso_times_with_and_without_a_zone() -> None:
    utc = parse_to("2024-05-01T12:00:00Z")
    assert utc.kind == "time" and utc.value == int(datetime(2024, 5, 1, 12, tzinfo=timezone.utc).timestamp() * 1000)
    assert parse_to("2024-05-01T14:00:00+02:00").value == utc.value
    local = parse_to("2024-05-01T12:00:00")
    assert local.value == int(datetime(2024, 5, 1, 12).timestamp() * 1000)  # no zone: local time
    assert parse_to("2024-05-01").kind == "time"


@pytest.mark.parametrize("bad", ["", "soon", "-1", "12:00", "2024-02-30"])
def test_anything_else_is_a_config_error_naming_the_option(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^--to .* is invalid"):
        parse_to(bad)
