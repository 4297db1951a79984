"""search_offset_by_timestamp: RocketMQ 5.x BoundaryType semantics, binary search on disk."""

from __future__ import annotations

import pytest

from rmqrun.broker.store import MessageStore
from tests.unit.store_records import build_record, small_config

# offset:      0    1    2    3    4    5    6    7
TIMES = [100, 100, 100, 300, 300, 500, 700, 700]


@pytest.fixture
def store(tmp_path):
    with MessageStore(tmp_path, small_config()) as s:
        for t in TIMES:
            s.put("T", 0, build_record("T", 0, b"x" * 50, store_ts=t), 0)
        yield s


@pytest.mark.parametrize(
    "ts,lower,upper",
    [
        (50, 0, 0),  # before the first message: lower -> min offset; upper -> 0 (no message <= ts)
        (100, 0, 2),  # equal run: lower = first of the run, upper = last of the run
        (200, 3, 2),  # between runs: lower = first newer, upper = last older
        (300, 3, 4),
        (500, 5, 5),
        (600, 6, 5),
        (700, 6, 7),
        (701, 8, 7),  # after the last message: lower -> max offset, upper -> last offset
        (10**15, 8, 7),
    ],
)
def test_boundaries(store, ts, lower, upper) -> None:
    assert store.search_offset_by_timestamp("T", 0, ts) == lower  # default boundary is lower
    assert store.search_offset_by_timestamp("T", 0, ts, "lower") == lower
    assert store.search_offset_by_timestamp("T", 0, ts, "upper") == upper


def test_empty_queue(store) -> None:
    assert store.search_offset_by_timestamp("T", 5, 123) == 0
    assert store.search_offset_by_timestamp("T", 5, 123, "upper") == 0


def test_bad_boundary(store) -> None:
    with pytest.raises(ValueError):
        store.search_offset_by_timestamp("T", 0, 1, "middle")  # type: ignore[arg-type]


def test_large_queue_uses_few_probes(tmp_path, monkeypatch) -> None:
    with MessageStore(tmp_path, small_config(segment_size=1 << 20, consume_queue_entries_per_file=300)) as s:
        n = 2000
        s.put_many("T", 0, [build_record("T", 0, b"x", store_ts=10 * i) for i in range(n)], [0] * n)
        probes = []
        real = s._log.store_timestamp_at
        monkeypatch.setattr(s._log, "store_timestamp_at", lambda p, z: probes.append(p) or real(p, z))
        assert s.search_offset_by_timestamp("T", 0, 12345) == 1235
        assert s.search_offset_by_timestamp("T", 0, 12340, "upper") == 1234
        assert len(probes) <= 2 * 12
