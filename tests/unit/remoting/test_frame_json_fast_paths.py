"""The JSON header's read and write without json.loads's and JSONEncoder.encode's Python steps: the same object,
the same bytes and the same refusals as those two, for the usual header and for everything around it."""

from __future__ import annotations

import json

import pytest

from rmqrun.remoting import frame as codec
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand, SerializeType

HEADER = '{"code":200050,"extFields":{"topic":"T","queueId":"-1"},"flag":0,"language":"JAVA","opaque":7,' \
         '"serializeTypeCurrentRPC":"JSON","version":409}'


@pytest.mark.parametrize("text", [
    HEADER, " " + HEADER, HEADER + " \n", "\t" + HEADER + "\r\n", '{"code":1}', "{}", "[1,2]", '"x"', "null",
    HEADER + "x", HEADER + HEADER, "\ufeff" + HEADER, "", " ", "{", '{"code":1,}', "{'code':1}", "NaN",
    '{"a":1e999}', '{"a":"\\ud800"}',
], ids=lambda t: repr(t[:12]))
def test_the_header_read_is_json_loads(text: str) -> None:
    try:
        want: object = json.loads(text)
    except ValueError as exc:
        with pytest.raises(type(exc)) as got:
            codec._loads(text)
        assert str(got.value) == str(exc)
        return
    assert repr(codec._loads(text)) == repr(want)  # repr: NaN is not equal to itself


def test_frames_around_the_fast_read_decode_as_before() -> None:
    for text, ok in ((HEADER, True), (" " + HEADER + " ", True), (HEADER + "]", False), ("[]", False)):
        raw = text.encode()
        frame = len(raw).to_bytes(4, "big") + raw + b"body"
        if ok:
            cmd = codec.decode(frame)
            assert (cmd.code, cmd.opaque, cmd.ext_fields, cmd.body) == (200050, 7, {"topic": "T", "queueId": "-1"},
                                                                        b"body")
            assert cmd.serialize_type is SerializeType.JSON
        else:
            with pytest.raises(ProtocolError):
                codec.decode(frame)


@pytest.mark.parametrize("cmd", [
    RemotingCommand(0, {"a": "é\"\n\u2028", "b": "1"}, remark="x\ty", opaque=3, flag=1, language="JAVA"),
    RemotingCommand(200050, {}, opaque=2**31 - 1),
    RemotingCommand(17, {}, remark="", empty_ext_present=True),
], ids=["escapes", "empty", "empty-ext-kept"])
def test_the_header_write_is_the_encoders(cmd: RemotingCommand) -> None:
    obj = json.loads(codec._encode_json_header(cmd))
    assert codec._encode_json_header(cmd) == codec._JSON_HEADER.encode(obj).encode("utf-8")
    assert codec.dump_header(obj) == json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def test_a_value_json_cannot_write_is_refused_alike() -> None:
    for bad in ({"a": b"x"}, {"a": object()}, {"a": float("nan")}):
        try:
            want = codec._JSON_HEADER.encode(bad)
        except (TypeError, ValueError) as exc:
            with pytest.raises(type(exc)) as got:
                codec.dump_header(bad)
            assert str(got.value) == str(exc)
        else:
            assert codec.dump_header(bad) == want
