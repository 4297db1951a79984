"""``rmqrun offsets reset``'s targets: one option per kind, no guessing between seconds, ms and offsets.

No broker needed. The old ``--to`` read any integer below 10^12 as a queue
offset, so ``--to 1714564800`` (epoch seconds) was clamped to the end of every
queue; a bare number there is now refused, naming the options it could mean.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from rmqrun.admin.offsets_target import LATEST_TIMESTAMP, Target, choose_target, parse_datetime, parse_to
from rmqrun.errors import ConfigError

MAY_1_UTC_MS = int(datetime(2024, 5, 1, 12, tzinfo=timezone.utc).timestamp() * 1000)


def test_words_and_the_timestamps_sent_to_running_clients() -> None:
    assert parse_to("earliest") == Target("earliest", text="earliest") and parse_to("EARLIEST").timestamp == 0
    assert parse_to(" latest ").timestamp == LATEST_TIMESTAMP == -1  # the broker's "max offset"
    assert choose_target(to_earliest=True) == parse_to("earliest")
    assert choose_target(to_latest=True) == parse_to("latest")


@pytest.mark.parametrize("number", ["0", "3", "1714564800", "1714564800000", "-5"])
def test_a_bare_number_in_to_is_refused_with_the_three_options_it_could_mean(number: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_to(number)
    text = str(caught.value)
    assert text.startswith(f"--to {number!r} is ambiguous")
    assert f"--to-offset {number}" in text and f"--to-timestamp-ms {number}" in text and "--to-datetime" in text


def test_each_number_option_means_one_thing() -> None:
    offset = choose_target(to_offset=1714564800)
    assert (offset.kind, offset.value, offset.timestamp) == ("offset", 1714564800, None)
    ms = choose_target(to_timestamp_ms=1714564800)
    assert (ms.kind, ms.value, ms.timestamp) == ("time", 1714564800, 1714564800)
    # what a number means is shown before anything acts: seconds given as ms read as January 1970
    assert ms.describe() == "1714564800 ms (1970-01-20T20:16:04.800Z)"
    assert choose_target(to_timestamp_ms=MAY_1_UTC_MS).describe().endswith("(2024-05-01T12:00:00.000Z)")
    shift = choose_target(shift_by=-5)
    assert (shift.kind, shift.value, shift.timestamp, shift.describe()) == ("shift", -5, None, "the stored offset -5")


def test_datetimes_with_and_without_a_zone() -> None:
    utc = parse_datetime("2024-05-01T12:00:00Z")
    assert utc.kind == "time" and utc.value == MAY_1_UTC_MS and utc.timestamp == MAY_1_UTC_MS
    assert parse_datetime("2024-05-01T14:00:00+02:00").value == utc.value
    local = parse_datetime("2024-05-01T12:00:00")
    assert local.value == int(datetime(2024, 5, 1, 12).timestamp() * 1000)  # no zone: local time
    assert parse_datetime("2024-05-01").kind == "time"
    assert choose_target(to_datetime="2024-05-01T12:00:00Z") == utc == parse_to("2024-05-01T12:00:00Z")
    assert utc.describe() == f"2024-05-01T12:00:00Z (2024-05-01T12:00:00.000Z, {MAY_1_UTC_MS} ms)"


@pytest.mark.parametrize("bad", ["", "soon", "12:00", "2024-02-30"])
def test_anything_else_is_a_config_error_naming_the_option(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^--to .* is invalid"):
        parse_to(bad)
    with pytest.raises(ConfigError, match=r"^--to-datetime .* is invalid: give an ISO 8601 time"):
        choose_target(to_datetime=bad)


def test_exactly_one_target() -> None:
    with pytest.raises(ConfigError, match="^missing the target: give one of --to-earliest, --to-latest, "):
        choose_target()
    with pytest.raises(ConfigError, match="^give one target, not --to-datetime and --to-offset$"):
        choose_target(to_offset=0, to_datetime="2024-05-01")
    with pytest.raises(ConfigError, match="^give one target, not --to-earliest and --to$"):
        choose_target(to_earliest=True, to="latest")
