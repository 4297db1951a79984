"""Typed headers: every class both ways, required fields, tolerant parsing, the V2 letters."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.protocol import headers as H
from rmqrun.protocol.header_codec import Header
from rmqrun.remoting.errors import ProtocolError

# One hand-written instance per header, with the ext fields Java would send for it.
CASES: list[tuple[Header, dict[str, str]]] = [
    (H.SendMessageRequestHeader(
        producer_group="PG", topic="T", default_topic="TBW102", default_topic_queue_nums=4, queue_id=1,
        sys_flag=769, born_timestamp=1795303759249, flag=0, properties="TAGS\x01A", reconsume_times=0,
        bname="broker-a"),
     {"producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": "1",
      "sysFlag": "769", "bornTimestamp": "1795303759249", "flag": "0", "properties": "TAGS\x01A",
      "reconsumeTimes": "0", "unitMode": "false", "batch": "false", "bname": "broker-a"}),
    (H.SendMessageResponseHeader(msg_id="7F00000100002A9F0000000000000000", queue_id=1, queue_offset=0,
                                 msg_region="DefaultRegion", trace_on=True),
     {"msgId": "7F00000100002A9F0000000000000000", "queueId": "1", "queueOffset": "0",
      "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}),
    (H.PullMessageRequestHeader(consumer_group="G", topic="T", queue_id=3, queue_offset=0, max_msg_nums=32,
                                sys_flag=2, commit_offset=0, suspend_timeout_millis=15000,
                                sub_version=1795303788133, expression_type="TAG", bname="broker-a"),
     {"consumerGroup": "G", "topic": "T", "queueId": "3", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "2",
      "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "1795303788133",
      "expressionType": "TAG", "bname": "broker-a"}),
    (H.PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=5, min_offset=0, max_offset=5),
     {"suggestWhichBrokerId": "0", "nextBeginOffset": "5", "minOffset": "0", "maxOffset": "5"}),
    (H.QueryConsumerOffsetRequestHeader(consumer_group="G", topic="T", queue_id=3, bname="b"),
     {"consumerGroup": "G", "topic": "T", "queueId": "3", "bname": "b"}),
    (H.UpdateConsumerOffsetRequestHeader(consumer_group="G", topic="T", queue_id=3, commit_offset=5),
     {"consumerGroup": "G", "topic": "T", "queueId": "3", "commitOffset": "5"}),
    (H.GetMaxOffsetRequestHeader(topic="T", queue_id=0, bname="b"), {"topic": "T", "queueId": "0", "bname": "b"}),
    (H.GetMinOffsetRequestHeader(topic="T", queue_id=0), {"topic": "T", "queueId": "0"}),
    (H.GetEarliestMsgStoretimeRequestHeader(topic="T", queue_id=2), {"topic": "T", "queueId": "2"}),
    (H.SearchOffsetRequestHeader(topic="T", queue_id=0, timestamp=1795304228875, bname="b"),
     {"topic": "T", "queueId": "0", "timestamp": "1795304228875", "bname": "b"}),
    (H.OffsetResponseHeader(offset=-1), {"offset": "-1"}),
    (H.GetEarliestMsgStoretimeResponseHeader(timestamp=1795304228421), {"timestamp": "1795304228421"}),
    (H.ViewMessageRequestHeader(offset=494), {"offset": "494"}),
    (H.QueryMessageRequestHeader(topic="ScnG_Topic", key="setup-key-1", max_num=64, begin_timestamp=0,
                                 end_timestamp=9223372036854775807),
     {"beginTimestamp": "0", "topic": "ScnG_Topic", "maxNum": "64", "endTimestamp": "9223372036854775807",
      "key": "setup-key-1"}),
    (H.QueryMessageResponseHeader(index_last_update_timestamp=1795304536329, index_last_update_phyoffset=9652),
     {"indexLastUpdatePhyoffset": "9652", "indexLastUpdateTimestamp": "1795304536329"}),
    (H.ConsumerSendMsgBackRequestHeader(offset=0, group="G", delay_level=0, origin_msg_id="FD00", origin_topic="T",
                                        max_reconsume_times=16, bname="broker-a"),
     {"offset": "0", "group": "G", "delayLevel": "0", "originMsgId": "FD00", "originTopic": "T",
      "unitMode": "false", "maxReconsumeTimes": "16", "bname": "broker-a"}),
    (H.UnregisterClientRequestHeader(client_id="1.2.3.4@1#2", producer_group="PG"),
     {"clientID": "1.2.3.4@1#2", "producerGroup": "PG"}),
    (H.GetConsumerListByGroupRequestHeader(consumer_group="G"), {"consumerGroup": "G"}),
    (H.NotifyConsumerIdsChangedRequestHeader(consumer_group="G"), {"consumerGroup": "G"}),
    (H.GetConsumerRunningInfoRequestHeader(consumer_group="G", client_id="c"),
     {"consumerGroup": "G", "clientId": "c", "jstackEnable": "false"}),
    (H.ResetOffsetRequestHeader(topic="T", group="G", timestamp=1795304469878, is_force=False),
     {"topic": "T", "group": "G", "timestamp": "1795304469878", "isForce": "false"}),
    (H.GetConsumerStatusRequestHeader(topic="T", group="G"), {"topic": "T", "group": "G"}),
    (H.ConsumeMessageDirectlyResultRequestHeader(consumer_group="G", client_id="c", msg_id="m", broker_name="b"),
     {"consumerGroup": "G", "clientId": "c", "msgId": "m", "brokerName": "b"}),
    (H.GetRouteInfoRequestHeader(topic="T"), {"topic": "T"}),
]

ALL_HEADER_CLASSES = sorted({type(h) for h, _ in CASES}, key=lambda c: c.__name__)


def test_cases_cover_every_header_class() -> None:
    declared = {obj for obj in vars(H).values()
                if isinstance(obj, type) and issubclass(obj, Header) and obj is not Header}
    assert declared == set(ALL_HEADER_CLASSES)


@pytest.mark.parametrize("header,ext", CASES, ids=lambda v: type(v).__name__ if isinstance(v, Header) else "")
def test_to_ext_and_back(header: Header, ext: dict[str, str]) -> None:
    assert header.to_ext() == ext
    assert type(header).from_ext(ext) == header


@pytest.mark.parametrize("cls", ALL_HEADER_CLASSES, ids=lambda c: c.__name__)
def test_missing_required_field_is_named(cls: type[Header]) -> None:
    full = next(ext for h, ext in CASES if type(h) is cls)
    required = [s.wire for s in cls.specs() if s.required]
    assert required, cls
    for wire in required:
        partial = {k: v for k, v in full.items() if k != wire}
        with pytest.raises(ProtocolError, match=repr(wire)):
            cls.from_ext(partial)


def test_optional_fields_may_be_missing_and_unknown_keys_are_ignored() -> None:
    h = H.ConsumerSendMsgBackRequestHeader.from_ext(
        {"offset": "703", "group": "CG", "delayLevel": 0, "AccessKey": "", "Signature": "x", "ReqT": "0"})
    assert h == H.ConsumerSendMsgBackRequestHeader(offset=703, group="CG", delay_level=0)
    assert h.origin_msg_id is None and h.max_reconsume_times is None and h.unit_mode is False
    assert h.to_ext() == {"offset": "703", "group": "CG", "delayLevel": "0", "unitMode": "false"}


def test_cpp_numbers_and_flags_are_accepted() -> None:
    # The C++ client sends some values as JSON numbers and booleans as 0/1.
    h = H.SendMessageRequestHeader.from_ext({
        "producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4, "queueId": 0,
        "sysFlag": 0, "bornTimestamp": "1795304268669", "flag": 0, "reconsumeTimes": "0", "unitMode": "0",
        "batch": "1"})
    assert (h.queue_id, h.default_topic_queue_nums, h.unit_mode, h.batch) == (0, 4, False, True)
    pull = H.PullMessageRequestHeader.from_ext({
        "consumerGroup": "G", "topic": "T", "queueId": 0, "queueOffset": "0", "maxMsgNums": 32.0, "sysFlag": 6,
        "commitOffset": "0", "suspendTimeoutMillis": "15000", "subVersion": "1", "subscription": "A || B"})
    assert pull.max_msg_nums == 32 and pull.subscription == "A || B" and pull.expression_type is None


def test_bad_integer_names_the_field() -> None:
    with pytest.raises(ProtocolError, match="queueId"):
        H.GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": "zero"})


def test_booleans_follow_java_parse_boolean() -> None:
    parse = H.ResetOffsetRequestHeader.from_ext
    base = {"topic": "T", "group": "G", "timestamp": "1"}
    assert parse({**base, "isForce": "TRUE"}).is_force is True
    assert parse({**base, "isForce": "yes"}).is_force is False
    assert parse({**base, "isForce": True}).is_force is True


def test_required_field_set_to_none_refuses_to_encode() -> None:
    h = H.GetMinOffsetRequestHeader(topic="T", queue_id=0)
    h.topic = None  # type: ignore[assignment]
    with pytest.raises(ProtocolError, match="'topic'"):
        h.to_ext()


def test_send_header_v2_letters_both_directions() -> None:
    v1 = CASES[0][1]
    header = CASES[0][0]
    assert isinstance(header, H.SendMessageRequestHeader)
    v2 = header.to_ext(v2=True)
    assert v2 == {H.V2_NAMES[k]: v for k, v in v1.items()}
    assert v2 == {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "769", "g": "1795303759249",
                  "h": "0", "i": "TAGS\x01A", "j": "0", "k": "false", "m": "false", "n": "broker-a"}
    assert H.SendMessageRequestHeader.from_ext(v2) == header
    assert H.SendMessageRequestHeader.from_ext_v2(v2) == header
    with_max = dataclasses.replace(header, max_reconsume_times=3)
    assert with_max.to_ext_v2()["l"] == "3" and with_max.to_ext()["maxReconsumeTimes"] == "3"
    with pytest.raises(ProtocolError, match="'producerGroup'"):
        H.SendMessageRequestHeader.from_ext({k: v for k, v in v2.items() if k != "a"})


def test_pull_sys_flag_bits() -> None:
    assert H.pull_sys_flag(commit_offset=False, suspend=True, subscription=False) == 2
    assert H.pull_sys_flag(commit_offset=True, suspend=True, subscription=True) == 7
    assert H.pull_sys_flag(commit_offset=False, suspend=True, subscription=True, lite_pull=True) == 22


def _strategy_for(cls: type[Header]) -> st.SearchStrategy[Header]:
    kinds = {s.attr: (s.kind, s.required) for s in cls.specs()}
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
    parts = {}
    for attr, (kind, required) in kinds.items():
        base = {"str": text, "int": st.integers(-2**63, 2**63 - 1), "bool": st.booleans()}[kind]
        nullable = not required and next(f for f in dataclasses.fields(cls) if f.name == attr).default is None
        parts[attr] = st.one_of(st.none(), base) if nullable else base
    return st.builds(cls, **parts)


@pytest.mark.parametrize("cls", ALL_HEADER_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_any_header_roundtrips(cls: type[Header], data: st.DataObject) -> None:
    header = data.draw(_strategy_for(cls))
    ext = header.to_ext()
    assert all(isinstance(v, str) for v in ext.values())
    assert cls.from_ext(ext) == header
