"""Property-based tests of the codecs: round trips, and bad bytes never crash or hang.

"Never crash" means: any input either decodes or raises ProtocolError (the
one error the connection turns into "close this connection"). Any other
exception type escaping here would take down a reader task.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rmqrun.remoting import compression, fastjson, frame, message, message_batch, message_props, msg_id
from rmqrun.remoting.errors import FrameTooLargeError, ProtocolError
from rmqrun.remoting.frame import RemotingCommand, SerializeType

settings.register_profile("rmqrun", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rmqrun")

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints16 = st.integers(-(2**15), 2**15 - 1)

commands = st.builds(
    RemotingCommand,
    code=ints16,
    ext_fields=st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12),
                               text, max_size=8),
    body=st.one_of(st.none(), st.binary(min_size=1, max_size=200)),
    opaque=ints32,
    flag=st.integers(0, 3),
    remark=st.one_of(st.none(), text.filter(bool)),
    language=st.sampled_from(["JAVA", "CPP", "PYTHON", "GO"]),
    version=ints16,
    serialize_type=st.sampled_from(list(SerializeType)),
)


@given(commands)
def test_command_roundtrip(cmd: RemotingCommand) -> None:
    again = frame.decode_with_prefix(frame.encode(cmd))
    assert (again.code, again.opaque, again.flag, again.language, again.version) == \
        (cmd.code, cmd.opaque, cmd.flag, cmd.language, cmd.version)
    assert again.ext_fields == cmd.ext_fields
    assert again.body == cmd.body
    assert again.remark == cmd.remark
    assert again.serialize_type == cmd.serialize_type


def _only_protocol_errors(fn, *args) -> None:
    try:
        fn(*args)
    except ProtocolError:
        pass


@given(st.binary(max_size=300))
def test_random_bytes_never_escape_as_anything_but_protocol_error(data: bytes) -> None:
    _only_protocol_errors(frame.decode, data)
    _only_protocol_errors(frame.decode_with_prefix, data)
    _only_protocol_errors(lambda d: list(frame.iter_frames(bytearray(d))), data)
    _only_protocol_errors(message.decode_messages, data)
    _only_protocol_errors(message.scan_records, data)
    _only_protocol_errors(message_batch.decode_batch, data)
    _only_protocol_errors(fastjson.loads, data)


@given(commands, st.data())
def test_truncated_frames_fail_cleanly(cmd: RemotingCommand, data: st.DataObject) -> None:
    raw = frame.encode(cmd)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(ProtocolError):
        frame.decode_with_prefix(raw[:cut])
    # A stream decoder keeps the partial frame and yields nothing.
    buf = bytearray(raw[:cut])
    assert list(frame.iter_frames(buf)) == []
    assert bytes(buf) == raw[:cut]


@given(st.one_of(st.integers(-(2**31), 3), st.integers(frame.DEFAULT_MAX_FRAME_SIZE + 1, 2**31 - 1)))
def test_absurd_lengths_are_refused_before_reading(length: int) -> None:
    buf = bytearray(struct.pack(">i", length) + b"\x00" * 16)
    with pytest.raises(FrameTooLargeError):
        list(frame.iter_frames(buf))


def test_max_frame_size_is_configurable() -> None:
    raw = frame.encode(RemotingCommand(code=1, body=b"x" * 1000))
    with pytest.raises(FrameTooLargeError):
        list(frame.iter_frames(bytearray(raw), max_frame_size=500))
    assert len(list(frame.iter_frames(bytearray(raw), max_frame_size=2000))) == 1


@pytest.mark.parametrize("header", [b"{not json", b"[1,2]", b'{"opaque":1}', b'{"code":"x"}',
                                    b'{"code":1,"extFields":[1]}', b"\xff\xfe"])
def test_invalid_json_headers(header: bytes) -> None:
    raw = struct.pack(">iI", 4 + len(header), len(header)) + header
    with pytest.raises(ProtocolError):
        frame.decode_with_prefix(raw)


def test_unknown_serialize_type() -> None:
    header = b'{"code":1}'
    raw = struct.pack(">iI", 4 + len(header), (7 << 24) | len(header)) + header
    with pytest.raises(ProtocolError, match="serialize type 7"):
        frame.decode_with_prefix(raw)


def test_iter_frames_splits_a_stream_at_any_boundary() -> None:
    cmds = [RemotingCommand(code=i, ext_fields={"k": str(i)}, body=bytes([i]) * i) for i in range(1, 20)]
    stream = b"".join(frame.encode(c) for c in cmds)
    for chunk in (1, 3, 7, 64, len(stream)):
        buf = bytearray()
        got = []
        for i in range(0, len(stream), chunk):
            buf += stream[i:i + chunk]
            got.extend(frame.iter_frames(buf))
        assert [c.code for c in got] == [c.code for c in cmds]
        assert not buf


hosts = st.one_of(
    st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255))
    .map(lambda t: ".".join(map(str, t))),
    st.sampled_from(["::1", "fe80::1", "2001:db8::42"]).map(lambda h: f"[{h}]"),
).flatmap(lambda h: st.integers(0, 65535).map(lambda p: f"{h}:{p}"))

props = st.dictionaries(
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=10),
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=20),
    max_size=6)


@given(topic=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200), body=st.binary(max_size=500),
       properties=props, born=hosts, store=hosts, queue_id=ints32, queue_offset=st.integers(0, 2**62),
       phys=st.integers(0, 2**62), reconsume=st.integers(0, 100), compress=st.booleans())
def test_stored_record_roundtrip(topic, body, properties, born, store, queue_id, queue_offset, phys, reconsume,
                                 compress) -> None:
    assume(len(topic.encode()) <= 32767)
    stored = zlib.compress(body, 5) if compress else body
    raw = message.encode_stored(topic=topic, body=stored, properties=properties, queue_id=queue_id,
                                sys_flag=(message.SYSFLAG_COMPRESSED | compression.COMPRESSION_ZLIB) if compress else 0,
                                born_timestamp=1, born_host=born, store_timestamp=2, store_host=store,
                                reconsume_times=reconsume, queue_offset=queue_offset, commit_log_offset=phys)
    (m,) = message.decode_messages(bytes(raw))
    assert (m.topic, m.body, m.properties, m.queue_id, m.queue_offset, m.commit_log_offset, m.reconsume_times) == \
        (topic, body, properties, queue_id, queue_offset, phys, reconsume)
    assert (m.born_host, m.store_host) == (born, store)
    assert msg_id.decode_offset_msg_id(m.offset_msg_id)[1] == phys
    (head,) = message.scan_records(raw)
    assert (head.size, head.queue_offset, head.properties) == (len(raw), queue_offset, properties)


@given(st.data())
def test_corrupted_records_raise_protocol_error(data: st.DataObject) -> None:
    raw = bytearray(message.encode_stored(topic="T", body=b"hello world", properties={"TAGS": "a"},
                                          born_host="10.0.0.1:1", store_host="10.0.0.2:2"))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(1, len(raw)))
    _only_protocol_errors(message.decode_messages, bytes(raw[:cut]))
    _only_protocol_errors(message.scan_records, bytes(raw[:cut]))


def test_corrupt_compressed_body_is_a_protocol_error() -> None:
    raw = message.encode_stored(topic="T", body=b"not zlib at all", sys_flag=message.SYSFLAG_COMPRESSED)
    with pytest.raises(ProtocolError, match="inflate"):
        message.decode_messages(raw)
    # Without inflating, the record still decodes (a consumer may pass it through).
    (m,) = message.decode_messages(raw, decompress=False)
    assert m.body == b"not zlib at all"


def test_unsupported_compression_names_itself() -> None:
    raw = message.encode_stored(topic="T", body=b"x", sys_flag=message.SYSFLAG_COMPRESSED | compression.COMPRESSION_ZSTD)
    with pytest.raises(ProtocolError, match="ZSTD"):
        message.decode_messages(raw)


@given(st.lists(st.builds(message_batch.BatchItem, body=st.binary(max_size=50), properties=props,
                          flag=st.integers(0, 2**31 - 1)), max_size=5))
def test_batch_roundtrip(items) -> None:
    assert message_batch.decode_batch(message_batch.encode_batch(items)) == items


@pytest.mark.parametrize("text,expected", [
    ("", 0), ("TagA", 2598919), ("a", 97), ("hello world", 1794106052),
    ("\u00e9t\u00e9", 227742), ("\U0001F600", 1772899),
])
def test_java_string_hash(text: str, expected: int) -> None:
    # Values computed by the rule in java.lang.String.hashCode over UTF-16 units.
    assert message_props.java_string_hash(text) == expected


@given(st.text(max_size=50))
def test_java_string_hash_is_signed_32_bit(s: str) -> None:
    h = message_props.java_string_hash(s)
    assert -(2**31) <= h < 2**31
    units = s.encode("utf-16-be")
    expect = 0
    for i in range(0, len(units), 2):
        expect = (expect * 31 + int.from_bytes(units[i:i + 2], "big")) % 2**32
    assert h % 2**32 == expect


@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), text),
                    lambda inner: st.one_of(st.lists(inner, max_size=4),
                                            st.dictionaries(st.integers(0, 99), inner, max_size=4),
                                            st.dictionaries(text, inner, max_size=4)), max_leaves=20))
def test_fastjson_unquoted_keys_roundtrip(value) -> None:
    def norm(v):
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v
    assert fastjson.loads(fastjson.dumps(value, unquoted_int_keys=True)) == norm(value)
    assert fastjson.loads(fastjson.dumps(value)) == norm(value)
