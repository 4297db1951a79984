"""The compiled per-class header codecs write and read exactly what the field-by-field loop did.

``Header.to_ext_declared`` / ``from_ext`` run a function compiled once per class (issue #38, cut 6), and
``to_ext`` keeps the Java order per (class, fields present). The reference here is the plain loop over the
specs with :func:`format_value` / :func:`parse_value`, which is what the codec did before; hypothesis draws
values of every kind (and of the wrong kind: numbers as strings, booleans as numbers, text that is not a
number, missing fields) for every header class, and both must agree value for value, key for key, in
order, and on every error.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.protocol import header_codec, headers
from rmqrun.protocol.header_codec import Header, format_value, java_map_order, parse_value
from rmqrun.remoting.errors import MissingFieldError, ProtocolError
from rmqrun.remoting.frame import RemotingCommand, SerializeType, decode, encode


def header_classes() -> list[type[Header]]:
    out = []
    for obj in vars(headers).values():
        if isinstance(obj, type) and issubclass(obj, Header) and obj is not Header and obj.specs():
            out.append(obj)
    return sorted(out, key=lambda c: c.__name__)


CLASSES = header_classes()


def reference_declared(h: Header) -> dict[str, str]:
    out: dict[str, str] = {}
    for spec in h.specs():
        value = getattr(h, spec.attr)
        if value is None:
            if spec.required:
                raise ProtocolError(f"{type(h).__name__}: required field {spec.wire!r} is None")
            continue
        out[spec.wire] = format_value(value, spec.kind)
    return out


def reference_kwargs(cls: type[Header], ext: dict[str, Any]) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for spec in cls.specs():
        raw = ext.get(spec.wire)
        if raw is None:
            if spec.required:
                raise MissingFieldError(cls.__name__, spec.wire)
            continue
        kwargs[spec.attr] = parse_value(raw, spec.kind, f"{cls.__name__}.{spec.wire}")
    return kwargs


def value_of(kind: str) -> st.SearchStrategy[Any]:
    if kind == "int":
        return st.one_of(st.integers(-2**63, 2**63 - 1), st.booleans())
    if kind == "bool":
        return st.one_of(st.booleans(), st.integers(0, 2))
    return st.text(max_size=12)


def raw_of(kind: str) -> st.SearchStrategy[Any]:
    """What a peer may send for a field: its kind as text or as JSON, or something else entirely."""
    return st.one_of(
        st.none(), st.integers(-2**63, 2**63 - 1).map(str), st.integers(-10**6, 10**6), st.booleans(),
        st.sampled_from([" 12 ", "\u00a07\t", "1_000", "-0", "+5", "", "x1", "1.0", "true", "TRUE", "0", "1",
                         "\u0661\u0662", "9" * 30]),
        st.floats(allow_nan=False, allow_infinity=False, width=32), st.text(max_size=6))


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_encoding_matches_the_field_loop_byte_for_byte(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(CLASSES), label="class")
    kwargs = {}
    for spec in cls.specs():
        draw_none = not spec.required or data.draw(st.integers(0, 9), label="required left None") == 0
        if draw_none and data.draw(st.booleans(), label=f"{spec.wire} None"):
            kwargs[spec.attr] = None
        else:
            kwargs[spec.attr] = data.draw(value_of(spec.kind), label=spec.wire)
    h = cls(**kwargs)
    try:
        want = reference_declared(h)
    except ProtocolError as exc:
        with pytest.raises(ProtocolError) as got:
            h.to_ext_declared()
        assert str(got.value) == str(exc)
        return
    declared = h.to_ext_declared()
    assert list(declared.items()) == list(want.items())
    if cls is headers.SendMessageRequestHeader:
        return  # its own to_ext (v1 / v2 names) builds on to_ext_declared
    java = h.to_ext()
    assert list(java.items()) == list(h._java_ordered(want, cls.JAVA_CLASS, None).items())
    assert list(h.to_ext().items()) == list(java.items())  # the cached order, the second time
    for ser in (SerializeType.JSON, SerializeType.ROCKETMQ):
        cmd = RemotingCommand(11, java, opaque=7, serialize_type=ser)
        back = decode(encode(cmd)[4:])
        assert back.ext_fields == java and list(back.ext_fields) == list(java)


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_decoding_matches_the_field_loop_value_for_value(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(CLASSES), label="class")
    ext: dict[str, Any] = {}
    for spec in cls.specs():
        raw = data.draw(raw_of(spec.kind), label=spec.wire)
        if raw is not None:
            ext[spec.wire] = raw
    if data.draw(st.booleans(), label="unknown key"):
        ext["ReqT"] = "x"
    try:
        want = reference_kwargs(cls, ext)
    except (ProtocolError, MissingFieldError) as exc:
        with pytest.raises(type(exc)) as got:
            cls.from_ext(ext)
        assert str(got.value) == str(exc)
        return
    got_header = cls.from_ext(ext)
    for spec in cls.specs():
        if spec.attr in want:
            value = getattr(got_header, spec.attr)
            assert value == want[spec.attr] and type(value) is type(want[spec.attr]), spec.wire


def test_the_pull_headers_are_compiled_once_per_class() -> None:
    h = headers.PullMessageRequestHeader(consumer_group="G", topic="T", queue_id=1, queue_offset=5, max_msg_nums=32,
                                         sys_flag=2, commit_offset=0, suspend_timeout_millis=15000,
                                         sub_version=1, expression_type="TAG")
    first = h.to_ext()
    encode_fn = type(h).__dict__["_encode"]
    assert h.to_ext() == first and type(h).__dict__["_encode"] is encode_fn
    assert java_map_order(dict(first)) == first
    resp = headers.PullMessageResponseHeader.from_ext({"suggestWhichBrokerId": "0", "nextBeginOffset": "37",
                                                       "minOffset": "0", "maxOffset": "100"})
    assert (resp.next_begin_offset, resp.max_offset) == (37, 100)
    with pytest.raises(MissingFieldError):
        headers.PullMessageResponseHeader.from_ext({"nextBeginOffset": "1"})
    with pytest.raises(ProtocolError, match="is not an integer"):
        headers.PullMessageResponseHeader.from_ext({"suggestWhichBrokerId": "0", "nextBeginOffset": "x",
                                                    "minOffset": "0", "maxOffset": "1"})
    assert header_codec._TO_EXT_ORDER
