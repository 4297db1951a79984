"""The ACL's decision for every request code, pinned: which resources a request needs and with which permission.

A table written from the ``elif`` chain the ACL had before its needs moved into the request specs
(:mod:`rmqrun.protocol.requests`): every request code is sent with every variant below (no fields, all fields,
a retry topic, a pop retry topic, a required field missing, an unreadable body) and the answer, in order (the
first resource refused names the refusal), must be what it was. A code or variant missing from
:data:`EXPECTED` needs nothing. The admin codes (an ``admin: true`` account) are pinned the same way.
"""

from __future__ import annotations

import json

import pytest

from rmqrun.broker.acl.config import PUB, SUB
from rmqrun.broker.acl.resources import ADMIN_CODES, RequestUnreadable, needed
from rmqrun.protocol.pop_batch_ack import BatchAck, encode_batch_ack_body
from rmqrun.remoting.codes import RequestCode
from rmqrun.remoting.frame import RemotingCommand

FULL = {"topic": "T", "group": "G", "consumerGroup": "CG", "producerGroup": "PG", "a": "PA", "b": "TB",
        "clientID": "cid", "clientId": "cid", "queueId": "0", "commitOffset": "5", "extraInfo": "x"}
HEARTBEAT = json.dumps({"clientID": "cid", "producerDataSet": [{"groupName": "PG"}], "consumerDataSet": [
    {"groupName": "CG1", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
     "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
     "subscriptionDataSet": [{"topic": "T1", "subString": "*"}, {"topic": "%RETRY%CG1", "subString": "*"}]},
    {"groupName": "CG2", "consumeType": "CONSUME_ACTIVELY", "messageModel": "BROADCASTING",
     "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": []}]}).encode()
BATCH_ACK = encode_batch_ack_body("b0", [
    BatchAck("CG", "T", "0", 10, 0, 0, 1, 1000, 0b11),
    BatchAck("CG9", "%RETRY%CG9_T9", "1", 3, 1, 0, 1, 1000, 0b100)])
#: name -> (ext fields, body): every variant is sent with every request code
VARIANTS = {
    "none": ({}, None),
    "full": (FULL, HEARTBEAT),
    "full_batch": (FULL, BATCH_ACK),
    "retry_topic": ({**FULL, "topic": "%RETRY%X", "b": "%RETRY%Y"}, None),
    "retry_no_group": ({"topic": "%RETRY%X", "b": "%RETRY%Y"}, None),
    "pop_retry_v1": ({**FULL, "topic": "%RETRY%CG_T"}, None),
    "pop_retry_v2": ({**FULL, "topic": "%RETRY%CG+T"}, None),
    "topic_only": ({"topic": "T"}, None),
    "group_only": ({"consumerGroup": "CG", "group": "G"}, None),
    "bad_body": ({"topic": "T"}, b"{not json"),
    "required_missing_commit": ({k: v for k, v in FULL.items() if k != "commitOffset"}, None),
}

#: code name -> variant -> resource -> permission ("unreadable": refused, the request cannot be judged)
EXPECTED: dict[str, dict[str, object]] = {
    'SEND_MESSAGE': {
        'full': {'T': 'PUB'},
        'full_batch': {'T': 'PUB'},
        'retry_topic': {'%RETRY%G': 'SUB'},
        'pop_retry_v1': {'%RETRY%G': 'SUB'},
        'pop_retry_v2': {'%RETRY%G': 'SUB'},
        'topic_only': {'T': 'PUB'},
        'bad_body': {'T': 'PUB'},
        'required_missing_commit': {'T': 'PUB'},
    },
    'PULL_MESSAGE': {
        'full': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'full_batch': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%X': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_no_group': {'%RETRY%X': 'SUB'},
        'pop_retry_v1': {'%RETRY%CG_T': 'SUB', '%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'%RETRY%CG+T': 'SUB', '%RETRY%CG': 'SUB'},
        'topic_only': {'T': 'SUB'},
        'group_only': {'%RETRY%CG': 'SUB'},
        'bad_body': {'T': 'SUB'},
        'required_missing_commit': {'T': 'SUB', '%RETRY%CG': 'SUB'},
    },
    'QUERY_MESSAGE': {
        'full': {'T': 'SUB'},
        'full_batch': {'T': 'SUB'},
        'retry_topic': {'%RETRY%X': 'SUB'},
        'retry_no_group': {'%RETRY%X': 'SUB'},
        'pop_retry_v1': {'%RETRY%CG_T': 'SUB'},
        'pop_retry_v2': {'%RETRY%CG+T': 'SUB'},
        'topic_only': {'T': 'SUB'},
        'bad_body': {'T': 'SUB'},
        'required_missing_commit': {'T': 'SUB'},
    },
    'UPDATE_CONSUMER_OFFSET': {
        'full': {'%RETRY%CG': 'SUB', 'T': 'SUB'},
        'full_batch': {'%RETRY%CG': 'SUB', 'T': 'SUB'},
        'retry_topic': {'%RETRY%CG': 'SUB', '%RETRY%X': 'SUB'},
        'retry_no_group': 'unreadable',
        'pop_retry_v1': {'%RETRY%CG': 'SUB', '%RETRY%CG_T': 'SUB'},
        'pop_retry_v2': {'%RETRY%CG': 'SUB', '%RETRY%CG+T': 'SUB'},
        'topic_only': 'unreadable',
        'group_only': 'unreadable',
        'bad_body': 'unreadable',
        'required_missing_commit': 'unreadable',
    },
    'HEART_BEAT': {
        'full': {'%RETRY%CG1': 'SUB', 'T1': 'SUB', '%RETRY%CG2': 'SUB'},
        'full_batch': 'unreadable',
        'retry_topic': 'unreadable',
        'retry_no_group': 'unreadable',
        'pop_retry_v1': 'unreadable',
        'pop_retry_v2': 'unreadable',
        'topic_only': 'unreadable',
        'group_only': 'unreadable',
        'bad_body': 'unreadable',
        'required_missing_commit': 'unreadable',
    },
    'UNREGISTER_CLIENT': {
        'full': {'%RETRY%CG': 'SUB'},
        'full_batch': {'%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%CG': 'SUB'},
        'retry_no_group': 'unreadable',
        'pop_retry_v1': {'%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'%RETRY%CG': 'SUB'},
        'topic_only': 'unreadable',
        'group_only': 'unreadable',
        'bad_body': 'unreadable',
        'required_missing_commit': {'%RETRY%CG': 'SUB'},
    },
    'CONSUMER_SEND_MSG_BACK': {
        'full': {'%RETRY%G': 'SUB'},
        'full_batch': {'%RETRY%G': 'SUB'},
        'retry_topic': {'%RETRY%G': 'SUB'},
        'pop_retry_v1': {'%RETRY%G': 'SUB'},
        'pop_retry_v2': {'%RETRY%G': 'SUB'},
        'group_only': {'%RETRY%G': 'SUB'},
        'required_missing_commit': {'%RETRY%G': 'SUB'},
    },
    'GET_CONSUMER_LIST_BY_GROUP': {
        'full': {'%RETRY%CG': 'SUB'},
        'full_batch': {'%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%CG': 'SUB'},
        'retry_no_group': 'unreadable',
        'pop_retry_v1': {'%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'%RETRY%CG': 'SUB'},
        'topic_only': 'unreadable',
        'group_only': {'%RETRY%CG': 'SUB'},
        'bad_body': 'unreadable',
        'required_missing_commit': {'%RETRY%CG': 'SUB'},
    },
    'SEND_MESSAGE_V2': {
        'full': {'TB': 'PUB'},
        'full_batch': {'TB': 'PUB'},
        'retry_topic': {'%RETRY%PA': 'SUB'},
        'pop_retry_v1': {'TB': 'PUB'},
        'pop_retry_v2': {'TB': 'PUB'},
        'required_missing_commit': {'TB': 'PUB'},
    },
    'POP_MESSAGE': {
        'full': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'full_batch': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%X': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_no_group': {'%RETRY%X': 'SUB'},
        'pop_retry_v1': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'topic_only': {'T': 'SUB'},
        'group_only': {'%RETRY%CG': 'SUB'},
        'bad_body': {'T': 'SUB'},
        'required_missing_commit': {'T': 'SUB', '%RETRY%CG': 'SUB'},
    },
    'ACK_MESSAGE': {
        'full': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'full_batch': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%X': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_no_group': {'%RETRY%X': 'SUB'},
        'pop_retry_v1': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'topic_only': {'T': 'SUB'},
        'group_only': {'%RETRY%CG': 'SUB'},
        'bad_body': {'T': 'SUB'},
        'required_missing_commit': {'T': 'SUB', '%RETRY%CG': 'SUB'},
    },
    'CHANGE_MESSAGE_INVISIBLETIME': {
        'full': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'full_batch': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%X': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_no_group': {'%RETRY%X': 'SUB'},
        'pop_retry_v1': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'topic_only': {'T': 'SUB'},
        'group_only': {'%RETRY%CG': 'SUB'},
        'bad_body': {'T': 'SUB'},
        'required_missing_commit': {'T': 'SUB', '%RETRY%CG': 'SUB'},
    },
    'NOTIFICATION': {
        'full': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'full_batch': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%X': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_no_group': {'%RETRY%X': 'SUB'},
        'pop_retry_v1': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'topic_only': {'T': 'SUB'},
        'group_only': {'%RETRY%CG': 'SUB'},
        'bad_body': {'T': 'SUB'},
        'required_missing_commit': {'T': 'SUB', '%RETRY%CG': 'SUB'},
    },
    'POLLING_INFO': {
        'full': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'full_batch': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_topic': {'%RETRY%X': 'SUB', '%RETRY%CG': 'SUB'},
        'retry_no_group': {'%RETRY%X': 'SUB'},
        'pop_retry_v1': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'pop_retry_v2': {'T': 'SUB', '%RETRY%CG': 'SUB'},
        'topic_only': {'T': 'SUB'},
        'group_only': {'%RETRY%CG': 'SUB'},
        'bad_body': {'T': 'SUB'},
        'required_missing_commit': {'T': 'SUB', '%RETRY%CG': 'SUB'},
    },
    'BATCH_ACK_MESSAGE': {
        'full_batch': {'T': 'SUB', '%RETRY%CG': 'SUB', 'T9': 'SUB', '%RETRY%CG9': 'SUB'},
        'retry_topic': 'unreadable',
        'retry_no_group': 'unreadable',
        'pop_retry_v1': 'unreadable',
        'pop_retry_v2': 'unreadable',
        'topic_only': 'unreadable',
        'group_only': 'unreadable',
        'bad_body': 'unreadable',
        'required_missing_commit': 'unreadable',
    },
}

ADMIN = {"DELETE_SUBSCRIPTIONGROUP", "DELETE_TOPIC_IN_BROKER", "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
         "UPDATE_AND_CREATE_TOPIC", "UPDATE_BROKER_CONFIG"}
_NAMES = {PUB: "PUB", SUB: "SUB"}


def _answer(code: RequestCode, ext: dict[str, str], body: bytes | None) -> object:
    try:
        got = needed(RemotingCommand(code=int(code), ext_fields=dict(ext), body=body))
    except RequestUnreadable:
        return "unreadable"
    return [(resource, _NAMES[perm]) for resource, perm in got.items()]


@pytest.mark.parametrize("code", list(RequestCode), ids=lambda c: c.name)
def test_needs_of_every_code_are_unchanged(code: RequestCode) -> None:
    for variant, (ext, body) in VARIANTS.items():
        want = EXPECTED.get(code.name, {}).get(variant, {})
        want = want if want == "unreadable" else list(want.items())  # type: ignore[union-attr]
        assert _answer(code, ext, body) == want, (code.name, variant)


def test_admin_codes_are_unchanged() -> None:
    assert {RequestCode(c).name for c in ADMIN_CODES} == ADMIN
