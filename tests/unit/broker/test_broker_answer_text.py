"""``answer_text``, the pop answer's builder, gives the command :func:`answer` gives for the same header: the
same fields in the same order on the wire (Java's HashMap order in JSON, declaration order in ROCKETMQ)."""

from __future__ import annotations

from rmqrun.broker.processors.common import answer, answer_text
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand, SerializeType, encode

POP_HEADER = {"popTime": "1732931231231", "invisibleTime": "60000", "reviveQid": "3", "restNum": "12",
              "startOffsetInfo": "0 5 100", "msgOffsetInfo": "0 5 100,101,102"}


def test_answer_text_is_answer_for_a_header_already_in_text() -> None:
    for serialize_type in (SerializeType.JSON, SerializeType.ROCKETMQ):
        for fields in (POP_HEADER, {**POP_HEADER, "orderCountInfo": "0 5 100 1"}, {}):
            cmd = RemotingCommand(RequestCode.POP_MESSAGE, {}, serialize_type=serialize_type)
            cmd.opaque = 7
            want = answer(cmd, ResponseCode.SUCCESS, "FOUND", header=fields, body=b"xy")
            got = answer_text(cmd, ResponseCode.SUCCESS, "FOUND", dict(fields), b"xy")
            assert list(got.ext_fields.items()) == list(want.ext_fields.items()), (serialize_type, fields)
            assert got.empty_ext_present == want.empty_ext_present
            assert bytes(encode(got)) == bytes(encode(want))
    json_cmd = RemotingCommand(RequestCode.POP_MESSAGE, {}, serialize_type=SerializeType.JSON)
    assert list(answer_text(json_cmd, 0, None, dict(POP_HEADER)).ext_fields) != list(POP_HEADER), \
        "JSON carries Java's HashMap order, not the declaration order"
