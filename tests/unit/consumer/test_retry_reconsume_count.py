"""The reconsume count of a cached record, read and rewritten in place (``consumer/retry.py``).

The orderly and keyed services count retries on the cached record (Java's
``msg.setReconsumeTimes``) and dead-letter it once the count reaches the maximum, so
RECONSUMETIMES must be found exactly. It sits after both host fields, whose widths
depend on the sysFlag: a 4.9.8 broker with an IPv6 address sets STOREHOSTADDRESS_V6
(0x20) and writes a 16-byte store address; a client on IPv6 sets BORNHOST_V6 (0x10)
and a 16-byte born address. The records here come from ``tests/unit/store_records``,
written from the format and not from rmqrun's codec.
"""

from __future__ import annotations

import struct

import pytest

from rmqrun.consumer.retry import reconsume_times, with_reconsume_times
from rmqrun.remoting import message as codec
from tests.unit.store_records import BORNHOST_V6, STOREHOST_V6, build_record

V4_BORN, V4_STORE = ("10.0.0.1", 50000), ("10.0.0.2", 10911)
V6_BORN, V6_STORE = ("fd00::1", 50000), ("fd00::a:2", 10911)


@pytest.mark.parametrize("born, store, flags", [
    (V4_BORN, V6_STORE, STOREHOST_V6),
    (V6_BORN, V6_STORE, BORNHOST_V6 | STOREHOST_V6),
    (V6_BORN, V4_STORE, BORNHOST_V6),
    (V4_BORN, V4_STORE, 0),
], ids=["store-v6", "both-v6", "born-v6", "v4"])
def test_the_reconsume_count_is_found_after_hosts_of_either_width(born: tuple[str, int], store: tuple[str, int],
                                                                  flags: int) -> None:
    record = build_record("Orders", 3, b"payload", born_host=born, store_host=store, reconsume_times=15,
                          properties={"KEYS": "k1"})
    (sys_flag,) = struct.unpack_from(">i", record, codec.SYSFLAG_POS)
    assert sys_flag & (BORNHOST_V6 | STOREHOST_V6) == flags  # the premise: the broker's host bits

    # An orderly consumer with max_reconsume_times 16 sees 15: one more try, then the DLQ.
    assert reconsume_times(record) == 15
    counted = with_reconsume_times(record, 16)
    assert reconsume_times(counted) == 16 and reconsume_times(record) == 15  # a copy, the cache is untouched

    # Only the four RECONSUMETIMES bytes changed: the store host (and everything else) is as stored.
    changed = [i for i, (a, b) in enumerate(zip(record, counted)) if a != b]
    assert len(counted) == len(record) and changed and max(changed) - min(changed) < 4
    before, _ = codec.decode_message(bytes(record))
    after, _ = codec.decode_message(bytes(counted))
    assert after.reconsume_times == 16 and before.reconsume_times == 15
    assert (after.store_host, after.born_host) == (before.store_host, before.born_host)
    assert after.store_host.rsplit(":", 1)[1] == "10911"
    assert (after.body, after.properties, after.topic) == (b"payload", {"KEYS": "k1"}, "Orders")
