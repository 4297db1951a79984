"""POP_MESSAGE's and ACK_MESSAGE's headers read on the broker's hot path (``_fast_pop_header``,
``_fast_ack_header``) against the generic parser: the same header for every request the fast path takes, and
the generic parser's answer (its exact refusal) for the rest."""

from __future__ import annotations

import pytest

from rmqrun.broker.processors.common import BadRequest, parse_header
from rmqrun.broker.processors.pop import _fast_pop_header
from rmqrun.broker.processors.pop_ack import _fast_ack_header
from rmqrun.protocol.pop import AckMessageRequestHeader, PopMessageRequestHeader
from rmqrun.remoting.frame import RemotingCommand

FULL = PopMessageRequestHeader(consumer_group="G", topic="T", queue_id=-1, max_msg_nums=32, invisible_time=60000,
                               poll_time=15000, born_time=1795500243867, init_mode=0, exp_type="TAG", exp="A || B",
                               order=True, attempt_id="at-1", bname="broker-a").to_ext()
BARE = PopMessageRequestHeader(consumer_group="G", topic="T", queue_id=3, max_msg_nums=1, invisible_time=5000,
                               poll_time=0, born_time=0, init_mode=1).to_ext()


def _slow(ext: dict[str, str]) -> PopMessageRequestHeader | str:
    try:
        return parse_header(RemotingCommand(200050, dict(ext)), PopMessageRequestHeader)
    except BadRequest as bad:
        return bad.response.remark or ""


@pytest.mark.parametrize("ext", [
    FULL, BARE, {**BARE, "order": "false"}, {**BARE, "queueId": " 7 "}, {**FULL, "ReqT": "x", "unknown": "y"},
], ids=["full", "bare", "order-false", "spaces", "extra-keys"])
def test_the_fast_path_reads_what_the_generic_parser_reads(ext: dict[str, str]) -> None:
    fast = _fast_pop_header(ext)
    assert fast is not None and fast == _slow(ext)


@pytest.mark.parametrize("ext", [
    {k: v for k, v in FULL.items() if k != "topic"},  # a required field missing
    {**FULL, "maxMsgNums": "many"},  # not a number
    {**FULL, "order": "TRUE"},  # Boolean.parseBoolean's case-blind "true"
    {**FULL, "order": "1"},  # the C++ client's flag
    {**FULL, "order": "yes"},
], ids=["missing", "not-a-number", "order-upper", "order-one", "order-other"])
def test_what_the_fast_path_leaves_gets_the_generic_parsers_answer(ext: dict[str, str]) -> None:
    assert _fast_pop_header(ext) is None
    slow = _slow(ext)
    if isinstance(slow, str):
        assert slow  # the refusal's text, as the broker answers it
    else:
        assert slow.order is (ext["order"] in ("TRUE", "1"))


# ------------------------------------------------------------------ ACK_MESSAGE (``_fast_ack_header``)

ACK = AckMessageRequestHeader(consumer_group="G", topic="T", queue_id=3, extra_info="10 1795500243867 60000 2 0 b 3 12",
                              offset=12, bname="broker-a").to_ext()


def _slow_ack(ext: dict[str, object]) -> AckMessageRequestHeader | str:
    try:
        return parse_header(RemotingCommand(200051, dict(ext)), AckMessageRequestHeader)
    except BadRequest as bad:
        return bad.response.remark or ""


@pytest.mark.parametrize("ext", [
    ACK, {k: v for k, v in ACK.items() if k != "bname"}, {**ACK, "offset": " 12 "}, {**ACK, "unknown": "y"},
    {**ACK, "offset": 12},  # a number where Java sends text: both readers take it as it is
], ids=["full", "no-bname", "spaces", "extra-keys", "int-offset"])
def test_the_fast_ack_path_reads_what_the_generic_parser_reads(ext: dict[str, object]) -> None:
    fast = _fast_ack_header(ext)  # type: ignore[arg-type]
    assert fast is not None and fast == _slow_ack(ext)


@pytest.mark.parametrize("ext", [
    {k: v for k, v in ACK.items() if k != "extraInfo"},  # a required field missing
    {**ACK, "queueId": "three"},  # not a number
    {**ACK, "topic": 7},  # a number for a text field: the generic reader's own handling
], ids=["missing", "not-a-number", "int-topic"])
def test_what_the_fast_ack_path_leaves_gets_the_generic_parsers_answer(ext: dict[str, object]) -> None:
    assert _fast_ack_header(ext) is None  # type: ignore[arg-type]
    slow = _slow_ack(ext)
    assert slow if isinstance(slow, str) else slow.offset == 12 and slow.topic in ("T", "7")
