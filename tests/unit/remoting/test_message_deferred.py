"""A decoded message defers five derived fields; what a handler sees must not change.

``decode_message`` leaves ``properties``, ``msg_id``, ``offset_msg_id``,
``born_host`` and ``store_host`` to be computed on first read (the worker's CPU
per no-op message). These tests pin that the deferred message equals, field
by field and as a whole, a message built eagerly from the same inputs (with
values worked out here from what was encoded, not by the decoder), whatever
is read or written first, and through pickling, copying and
``dataclasses`` helpers; and that a handler changing ``properties`` sees
what it did before.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import pickle
import struct
import zlib

import lz4.frame
import pytest
import zstandard

from rmqrun.model import Message
from rmqrun.remoting import message as codec
from rmqrun.remoting import compression
from rmqrun.remoting.errors import ProtocolError

DEFERRED = ("properties", "msg_id", "offset_msg_id", "born_host", "store_host")
FIELDS = [f.name for f in dataclasses.fields(Message)]


def _zlib(body: bytes) -> bytes:
    return zlib.compress(body)


def _lz4(body: bytes) -> bytes:
    return lz4.frame.compress(body, block_size=lz4.frame.BLOCKSIZE_MAX4MB, block_linked=False,
                              content_checksum=False, store_size=False)


def _zstd(body: bytes) -> bytes:
    c = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    return c.compress(body) + c.flush()


def _offset_id(store_host: str, commit_log_offset: int) -> str:
    """The broker's message id worked out from the spec: IPv4/IPv6 bytes, port, offset, upper hex."""
    import socket

    host, _, port = store_host.rpartition(":")
    family = socket.AF_INET6 if host.startswith("[") else socket.AF_INET
    raw = socket.inet_pton(family, host.strip("[]"))
    return (raw + struct.pack(">iq", int(port), commit_log_offset)).hex().upper()


# (name, topic, body as stored, body the handler gets, properties as written, properties as read,
#  sys_flag, born host, store host)
CASES = [
    ("4x-uniq-key", "Orders", b"hello", b"hello",
     {"UNIQ_KEY": "7F00000100002A9F", "TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "true"}, None, 0,
     "10.1.2.3:50123", "127.0.0.1:10911"),
    ("no-uniq-key", "Orders", b"x" * 1024, b"x" * 1024, {"TAGS": "TagA"}, None, 0,
     "127.0.0.1:40000", "127.0.0.1:10911"),
    ("no-properties", "T", b"", b"", {}, None, 0, "127.0.0.1:1", "127.0.0.1:2"),
    # 5.x and the C++ client end the properties with a separator
    ("5x-trailing-separator", "Orders", b"b",
     b"b", "UNIQ_KEY\x01AC1100020001\x02TAGS\x01t\x02KEYS\x01k\x02",
     {"UNIQ_KEY": "AC1100020001", "TAGS": "t", "KEYS": "k"}, 0, "127.0.0.1:1", "127.0.0.1:2"),
    # items without a name/value separator are skipped (the tolerant path)
    ("malformed-items", "Orders", b"b", b"b", "TAGS\x01t\x02garbage\x02\x02KEYS\x01a\x01b",
     {"TAGS": "t", "KEYS": "a\x01b"}, 0, "127.0.0.1:1", "127.0.0.1:2"),
    ("unicode", "主题-Ünï", "ключ".encode() * 10, "ключ".encode() * 10,
     {"TAGS": "标签", "KEYS": "ключ 鍵 κλειδί", "ünï✓": "välue ✓", "UNIQ_KEY": "ÜNIQ"}, None, 0,
     "127.0.0.1:1", "127.0.0.1:2"),
    ("v2-long-topic", "T" * 200, b"b", b"b", {"TAGS": "a"}, None, 0, "127.0.0.1:1", "127.0.0.1:2"),
    ("ipv6-hosts", "Orders", b"b", b"b", {"TAGS": "a"}, None, 0, "[2001:db8::7]:50123", "[::1]:10911"),
    ("zlib-4x", "Orders", _zlib(b"zipped " * 300), b"zipped " * 300, {"TAGS": "z"}, None,
     codec.SYSFLAG_COMPRESSED, "127.0.0.1:1", "127.0.0.1:2"),
    ("lz4-5x", "Orders", _lz4(b"lz4 body " * 300), b"lz4 body " * 300, {"TAGS": "z", "UNIQ_KEY": "U"}, None,
     codec.SYSFLAG_COMPRESSED | compression.COMPRESSION_LZ4, "127.0.0.1:1", "127.0.0.1:2"),
    ("zstd-5x", "Orders", _zstd(b"zstd body " * 300), b"zstd body " * 300, {"TAGS": "z"}, None,
     codec.SYSFLAG_COMPRESSED | compression.COMPRESSION_ZSTD, "127.0.0.1:1", "127.0.0.1:2"),
]


def _pair(case: tuple) -> tuple[bytearray, Message]:  # type: ignore[type-arg]
    """The record, and the message an eager decoder gave for it (built field by field)."""
    _name, topic, stored, body, props_in, props_out, sys_flag, born, store = case
    record = codec.encode_stored(topic=topic, body=stored, properties=props_in, queue_id=3, flag=7,
                                 sys_flag=sys_flag, born_timestamp=1_700_000_000_123, born_host=born,
                                 store_timestamp=1_700_000_000_456, store_host=store, reconsume_times=2,
                                 prepared_transaction_offset=0, queue_offset=41, commit_log_offset=98765,
                                 crc=12345)
    props = dict(props_in) if props_out is None else props_out
    off_id = _offset_id(store, 98765)
    (stored_flag,) = struct.unpack_from(">i", record, codec.SYSFLAG_POS)  # encode_stored adds the host bits
    eager = Message(topic=topic, body=body, properties=props, msg_id=props.get("UNIQ_KEY") or off_id,
                    offset_msg_id=off_id, broker_name="broker-a", queue_id=3, queue_offset=41,
                    commit_log_offset=98765, born_timestamp=1_700_000_000_123, store_timestamp=1_700_000_000_456,
                    born_host=born, store_host=store, reconsume_times=2, flag=7, sys_flag=stored_flag,
                    body_crc=12345, prepared_transaction_offset=0)
    return record, eager


def _decoded(record: bytearray) -> Message:
    msg, end = codec.decode_message(memoryview(bytes(record)), 0, broker_name="broker-a")
    assert end == len(record)
    return msg


IDS = [c[0] for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_field_equals_the_eager_decode_with_the_same_type(case: tuple) -> None:  # type: ignore[type-arg]
    record, eager = _pair(case)
    msg = _decoded(record)
    for name in FIELDS:
        got, want = getattr(msg, name), getattr(eager, name)
        assert got == want, name
        assert type(got) is type(want), name
    assert type(msg) is Message and type(msg.properties) is dict
    assert (msg.tags, msg.keys, msg.key_list, msg.queue) == (eager.tags, eager.keys, eager.key_list, eager.queue)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("first", DEFERRED)
def test_whichever_deferred_field_is_read_first_all_five_come_out_right(
        case: tuple, first: str) -> None:  # type: ignore[type-arg]
    record, eager = _pair(case)
    msg = _decoded(record)
    assert getattr(msg, first) == getattr(eager, first)
    assert [getattr(msg, n) for n in DEFERRED] == [getattr(eager, n) for n in DEFERRED]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_whole_message_compares_reprs_pickles_and_copies_as_the_eager_one(
        case: tuple) -> None:  # type: ignore[type-arg]
    record, eager = _pair(case)
    # each check on a fresh message, so each one is the first to touch the deferred fields
    assert _decoded(record) == eager
    assert eager == _decoded(record)
    assert _decoded(record) == _decoded(record)
    assert repr(_decoded(record)) == repr(eager)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(_decoded(record), protocol))
        assert back == eager and type(back.properties) is dict
        assert [getattr(back, n) for n in FIELDS] == [getattr(eager, n) for n in FIELDS]
    assert copy.copy(_decoded(record)) == eager
    assert copy.deepcopy(_decoded(record)) == eager
    assert dataclasses.asdict(_decoded(record)) == dataclasses.asdict(eager)
    assert dataclasses.astuple(_decoded(record)) == dataclasses.astuple(eager)
    assert dataclasses.replace(_decoded(record), topic="X") == dataclasses.replace(eager, topic="X")
    assert _decoded(record) != dataclasses.replace(eager, born_host="1.2.3.4:5")


def test_a_handler_changing_properties_sees_its_changes_as_before() -> None:
    record, eager = _pair(CASES[0])
    for msg in (_decoded(record), eager):
        props = msg.properties
        assert msg.properties is props, "one dict, kept once parsed"
        props["TAGS"] = "Changed"
        props["mine"] = "1"
        del props["KEYS"]
        assert msg.properties is props
        assert (msg.tags, msg.keys, msg.key_list) == ("Changed", None, [])
        assert msg.properties == {"UNIQ_KEY": "7F00000100002A9F", "TAGS": "Changed", "WAIT": "true", "mine": "1"}
        assert msg.msg_id == "7F00000100002A9F"
    a, b = _decoded(record), _pair(CASES[0])[1]
    a.properties["x"] = "y"
    assert a != b
    b.properties["x"] = "y"
    assert a == b


@pytest.mark.parametrize("written", DEFERRED)
def test_a_field_written_before_any_read_keeps_the_written_value_and_the_others_are_right(written: str) -> None:
    record, eager = _pair(CASES[0])
    msg = _decoded(record)
    value = {"properties": {"mine": "only"}}.get(written, "set-by-handler")
    setattr(msg, written, value)
    for name in DEFERRED:
        assert getattr(msg, name) == (value if name == written else getattr(eager, name)), name


def test_replacing_properties_first_keeps_the_msg_id_the_record_had() -> None:
    """The eager decode took msg_id from the record's UNIQ_KEY; a handler's new dict does not change it."""
    record, eager = _pair(CASES[0])
    msg = _decoded(record)
    msg.properties = {"UNIQ_KEY": "other"}
    assert msg.msg_id == eager.msg_id == "7F00000100002A9F"


def test_changing_an_eager_field_first_does_not_change_the_derived_ids() -> None:
    record, eager = _pair(CASES[1])
    msg = _decoded(record)
    msg.commit_log_offset = 1
    msg.topic = "Other"
    assert msg.offset_msg_id == eager.offset_msg_id and msg.msg_id == eager.msg_id


def test_every_read_and_write_order_of_two_deferred_fields_agrees_with_the_eager_message() -> None:
    record, _ = _pair(CASES[0])
    for a, b in itertools.permutations(DEFERRED, 2):
        msg, ref = _decoded(record), _pair(CASES[0])[1]
        for target in (msg, ref):
            getattr(target, a)
            setattr(target, b, {"n": "v"} if b == "properties" else "w")
        assert msg == ref, (a, b)


def test_properties_that_are_not_utf8_still_fail_at_decode_not_on_first_read() -> None:
    record = codec.encode_stored(topic="T", body=b"b", properties="TAGS\x01ok")
    bad = bytes(record).replace(b"ok", b"\xff\xfe")
    with pytest.raises(ProtocolError, match="malformed"):
        codec.decode_message(bad)
    msg, _ = codec.decode_message(bad, properties_errors="replace")
    assert msg.properties == {"TAGS": "\ufffd\ufffd"}


def test_messages_built_by_hand_are_unchanged() -> None:
    a, b = Message("T", b""), Message("T", b"")
    assert a.properties == {} and a.properties is not b.properties, "a fresh dict each, as default_factory"
    assert (a.msg_id, a.offset_msg_id, a.born_host, a.store_host) == ("", "", "", "")
    c = Message("T", b"", None)  # type: ignore[arg-type]
    assert c.properties is None, "stored as given, as the generated __init__ did"
    m = Message(topic="T", body=b"b", properties={"TAGS": "a"}, msg_id="M", born_host="h:1")
    assert (m.tags, m.msg_id, m.born_host) == ("a", "M", "h:1")
    m.msg_id = "N"
    assert m.msg_id == "N" and pickle.loads(pickle.dumps(m)) == m
    assert Message.__match_args__ == tuple(FIELDS)
    with pytest.raises(AttributeError):
        m.not_a_field = 1  # type: ignore[attr-defined]
