"""A pull's request fields from a per-queue template, and its answer's four numbers read straight from the ext
fields: the same fields, order and values (or errors) as the header classes give."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, strategies as st

from rmqrun.client.broker import PullStatus, PullTemplate, pull_result_from_response
from rmqrun.protocol.headers import PullMessageRequestHeader
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand, decode_with_prefix, encode

HEADERS = [
    PullMessageRequestHeader(consumer_group="G", topic="T", queue_id=3, queue_offset=0, max_msg_nums=32,
                             sys_flag=0, commit_offset=0, suspend_timeout_millis=15000, subscription=None,
                             sub_version=1700000000000, expression_type="TAG", bname="broker-a"),
    PullMessageRequestHeader(consumer_group="%RETRY%G", topic="Ordre", queue_id=0, queue_offset=0, max_msg_nums=1,
                             sys_flag=0, commit_offset=0, suspend_timeout_millis=1000, subscription="TagA || TagB",
                             sub_version=5, expression_type=None, bname=None),
]


@pytest.mark.parametrize("base", HEADERS)
@given(offset=st.integers(0, 2**63 - 1), flag=st.integers(0, 31), commit=st.integers(0, 2**63 - 1))
def test_a_template_fills_what_the_header_would_write(base: PullMessageRequestHeader, offset: int, flag: int,
                                                      commit: int) -> None:
    template = PullTemplate("k", base)
    filled = template.fill(offset, flag, commit)
    expected = replace(base, queue_offset=offset, sys_flag=flag, commit_offset=commit).to_ext()
    assert list(filled.items()) == list(expected.items())  # the Java map order too
    # and the frame on the wire is the same bytes, the JSON text from the template spliced in or not
    assert filled.text is not None
    wire = encode(RemotingCommand(11, expected, opaque=7, flag=flag))
    assert encode(RemotingCommand(11, filled, opaque=7, flag=flag, ext_text=filled.text)) == wire
    assert encode(RemotingCommand(11, filled, opaque=7, flag=flag)) == wire


def test_a_template_whose_fields_hold_its_marker_writes_no_text_and_is_encoded_from_its_fields() -> None:
    odd = replace(HEADERS[0], consumer_group="G\x00queueOffset\x00")
    filled = PullTemplate("k", odd).fill(1, 2, 3)
    assert filled.text is None
    assert list(filled.items()) == list(replace(odd, queue_offset=1, sys_flag=2, commit_offset=3).to_ext().items())


@pytest.mark.parametrize("language, remark", [("JAVA", None), ("PYTHÖN \"q\"", None), ("PYTHON", "a remark")])
def test_a_header_with_ext_text_is_the_bytes_the_fields_give(language: str, remark: str | None) -> None:
    filled = PullTemplate("k", HEADERS[1]).fill(9, 2, 8)
    args = dict(opaque=2**31 - 1, flag=1, language=language, remark=remark, version=317)
    assert encode(RemotingCommand(11, filled, ext_text=filled.text, **args)) == encode(
        RemotingCommand(11, dict(filled), **args))


def test_a_filled_template_is_a_fresh_dict_each_pull() -> None:
    template = PullTemplate("k", HEADERS[0])
    first = template.fill(1, 2, 3)
    first["queueOffset"] = "999"
    assert template.fill(4, 2, 3)["queueOffset"] == "4"


def _answer(ext: dict[str, str], code: int = ResponseCode.SUCCESS) -> RemotingCommand:
    return decode_with_prefix(encode(RemotingCommand(code, ext, body=b"xyz", flag=1, remark="r")))


def test_a_pull_answer_reads_its_four_numbers() -> None:
    result = pull_result_from_response(_answer(
        {"suggestWhichBrokerId": "1", "nextBeginOffset": "64", "minOffset": "0", "maxOffset": "100"}))
    assert (result.status, result.next_begin_offset, result.min_offset, result.max_offset,
            result.suggest_which_broker_id, result.body, result.remark) == (PullStatus.FOUND, 64, 0, 100, 1, b"xyz", "r")


@pytest.mark.parametrize("ext", [
    {"suggestWhichBrokerId": "1", "nextBeginOffset": "64", "minOffset": "0"},                    # one missing
    {"suggestWhichBrokerId": "1", "nextBeginOffset": "sixty", "minOffset": "0", "maxOffset": "1"},  # not a number
])
def test_a_pull_answer_without_its_numbers_is_a_protocol_error(ext: dict[str, str]) -> None:
    with pytest.raises(ProtocolError):
        pull_result_from_response(_answer(ext, ResponseCode.PULL_NOT_FOUND))
