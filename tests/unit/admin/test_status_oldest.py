"""``rmqrun status`` shows a queue's oldest unfinished message once it has waited long (a stuck key)."""

from __future__ import annotations

from rmqrun.admin.status import QueueProgress, to_json
from rmqrun.cli.status.format import STUCK_AFTER_S, render
from rmqrun.consumer.oldest import store_timestamp_ms
from rmqrun.model import MessageQueue
from rmqrun.remoting.message import encode_stored


def rows(age: float | None) -> list[QueueProgress]:
    return [QueueProgress(MessageQueue("T", "b", 0), 10, 10),
            QueueProgress(MessageQueue("T", "b", 1), 50, 7, age, consumed_up_to_ms=1_700_000_000_123)]


def test_the_column_appears_only_when_something_waits_long() -> None:
    young = render(rows(STUCK_AFTER_S - 1), "G").splitlines()
    assert young[1].split() == ["topic", "broker", "queue", "broker", "offset", "consumer", "offset", "lag",
                                "consumed", "up", "to", "(UTC)"]
    # mqadmin consumerProgress's #LastTime: the store time of the last message consumed ('-': not known)
    assert young[3].split()[-1] == "-" and young[4].split()[-2:] == ["2023-11-14", "22:13:20"]
    old = render(rows(3 * 3600), "G").splitlines()
    assert old[1].split()[-2:] == ["oldest", "unfinished"]
    assert old[3].split()[-1] == "-"  # no lag, nothing waits
    assert old[4].split()[-2:] == ["3.0", "h"]
    assert old[-1].split() == ["total", "2", "60", "17", "43"]


def test_json_names_the_offset_and_age() -> None:
    out = to_json(rows(75.5), "G")["queues"]
    assert out[0]["consumed_up_to_ms"] is None and out[1]["consumed_up_to_ms"] == 1_700_000_000_123
    assert out[0]["oldest_unfinished_offset"] is None and out[0]["oldest_unfinished_age_s"] is None
    assert out[1]["oldest_unfinished_offset"] == 7 and out[1]["oldest_unfinished_age_s"] == 75.5


def test_store_timestamp_of_raw_records_v4_and_v6_hosts() -> None:
    for born in ("127.0.0.1:5", "[::1]:5"):
        raw = encode_stored(topic="T", body=b"x", born_host=born, store_timestamp=1_700_000_000_123)
        assert store_timestamp_ms(bytes(raw)) == 1_700_000_000_123
    assert store_timestamp_ms(b"short") is None
