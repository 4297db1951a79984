"""What each request needs: the topics and groups it touches, and how (4.9.8's rules).

A group is checked as its retry topic (``%RETRY%group``). The codes and the
fields read are those of 4.9.8's ``PlainAccessValidator``:

=========================  =====================================================
SEND_MESSAGE (10)          topic: PUB; a retry topic instead needs the retry topic
                           of the field ``group``: SUB. That field is not part of
                           a send's header (it has ``producerGroup``), so a 4.9.8
                           broker checks nothing for it but the signature; the
                           embedded broker reads the same field, to answer alike
SEND_MESSAGE_V2 (310)      topic (``b``): PUB; a retry topic instead needs the
                           retry topic of the producer group (``a``): SUB (a
                           consumer's send-back)
CONSUMER_SEND_MSG_BACK     group: SUB
PULL_MESSAGE               topic: SUB and group: SUB
QUERY_MESSAGE              topic: SUB
HEART_BEAT                 every consumer group: SUB, each subscribed topic: SUB
UNREGISTER_CLIENT          the consumer group, if any: SUB
GET_CONSUMER_LIST_BY_GROUP group: SUB
UPDATE_CONSUMER_OFFSET     group: SUB and topic: SUB
=========================  =====================================================

4.9.8 knows no POP; the POP codes follow 5.x, whose headers declare SUB (GET
for POLLING_INFO) on their ``topic`` and ``consumerGroup``: POP_MESSAGE,
ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION, POLLING_INFO need
topic: SUB and group: SUB, the topic being the original one when an ack
names a pop retry topic (``%RETRY%<group>_<topic>``); BATCH_ACK_MESSAGE needs
the same for every ack in its body.

Every other code needs only a valid signature, except the admin codes
(:data:`ADMIN_CODES`), which also need an ``admin: true`` account. That
includes SEND_BATCH_MESSAGE (320), which 4.9.8 does not check per topic; the
embedded broker keeps that gap rather than refuse what a real broker accepts.
"""

from __future__ import annotations

from typing import Mapping

from rmqrun.broker.acl.config import SUB, PUB
from rmqrun.errors import RmqrunError
from rmqrun.model import RETRY_TOPIC_PREFIX
from rmqrun.protocol.bodies import HeartbeatData
from rmqrun.protocol.pop import decode_batch_ack_body, original_topic
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.frame import RemotingCommand

UPDATE_BROKER_CONFIG = int(R.UPDATE_BROKER_CONFIG)

#: Codes only an ``admin: true`` account may send (4.9.8's Permission.ADMIN_CODE).
ADMIN_CODES = frozenset({int(R.UPDATE_AND_CREATE_TOPIC), UPDATE_BROKER_CONFIG, int(R.DELETE_TOPIC_IN_BROKER),
                         int(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP), int(R.DELETE_SUBSCRIPTIONGROUP)})

#: Fields the typed headers of these codes require (a missing one is refused, as decoding fails in Java).
_REQUIRED = {
    int(R.UNREGISTER_CLIENT): ("clientID",),
    int(R.GET_CONSUMER_LIST_BY_GROUP): ("consumerGroup",),
    int(R.UPDATE_CONSUMER_OFFSET): ("consumerGroup", "topic", "queueId", "commitOffset"),
}


class RequestUnreadable(RmqrunError):
    """The request's fields or body cannot be read to know what it touches (refused)."""


def retry_topic(group: str | None) -> str | None:
    return None if group is None else RETRY_TOPIC_PREFIX + group


def is_group_resource(resource: str) -> bool:
    return resource.startswith(RETRY_TOPIC_PREFIX)


def needed(cmd: RemotingCommand) -> dict[str, int]:
    """Resource -> permission the request needs (later entries for the same name win, as in 4.9.8)."""
    ext: Mapping[str, str] = cmd.ext_fields
    code = cmd.code
    if not ext:
        return {}  # no fields at all: 4.9.8 looks no further (only a white address can let it in)
    for name in _REQUIRED.get(code, ()):
        if ext.get(name) is None:
            raise RequestUnreadable(f"the custom field <{name}> is null")
    out: dict[str, int] = {}

    def add(resource: str | None, perm: int) -> None:
        if resource is not None:
            out[resource] = perm

    if code in (R.SEND_MESSAGE, R.SEND_MESSAGE_V2):
        # 4.9.8 reads "group" for SEND_MESSAGE (a field its header lacks) and "a" (producerGroup) for V2
        topic, group = (ext.get("topic"), ext.get("group")) if code == R.SEND_MESSAGE else (ext.get("b"), ext.get("a"))
        if topic is not None and topic.startswith(RETRY_TOPIC_PREFIX):
            add(retry_topic(group), SUB)
        else:
            add(topic, PUB)
    elif code == R.CONSUMER_SEND_MSG_BACK:
        add(retry_topic(ext.get("group")), SUB)
    elif code == R.PULL_MESSAGE:
        add(ext.get("topic"), SUB)
        add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code == R.QUERY_MESSAGE:
        add(ext.get("topic"), SUB)
    elif code == R.HEART_BEAT:
        try:
            data = HeartbeatData.from_json(cmd.body or b"")
        except Exception as exc:  # whatever the body's fault, the request cannot be judged: refused
            raise RequestUnreadable(f"heartbeat body unreadable: {exc}") from exc
        for consumer in data.consumer_data_set:
            add(retry_topic(consumer.group_name), SUB)
            for sub in consumer.subscription_data_set:
                topic = sub.get("topic") if isinstance(sub, dict) else getattr(sub, "topic", None)
                add(None if topic is None else str(topic), SUB)
    elif code == R.UNREGISTER_CLIENT:
        add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code == R.GET_CONSUMER_LIST_BY_GROUP:
        add(retry_topic(ext.get("consumerGroup")), SUB)
    elif code == R.UPDATE_CONSUMER_OFFSET:
        add(retry_topic(ext.get("consumerGroup")), SUB)
        add(ext.get("topic"), SUB)
    elif code in _POP_CODES:
        _add_pop(add, ext.get("topic"), ext.get("consumerGroup"))
    elif code == R.BATCH_ACK_MESSAGE:
        try:
            _, acks = decode_batch_ack_body(cmd.body or b"")
        except Exception as exc:  # the acks cannot be judged: refused
            raise RequestUnreadable(f"batch ack body unreadable: {exc}") from exc
        for ack in acks:
            _add_pop(add, ack.topic, ack.consumer_group)
    return out


_POP_CODES = frozenset({int(R.POP_MESSAGE), int(R.ACK_MESSAGE), int(R.CHANGE_MESSAGE_INVISIBLETIME),
                        int(R.NOTIFICATION), int(R.POLLING_INFO)})


def _add_pop(add, topic: str | None, group: str | None) -> None:  # type: ignore[no-untyped-def]
    """A POP request's topic (the original for a pop retry topic) and group: SUB."""
    if topic is not None and group is not None:
        topic = original_topic(topic, group)
    add(topic, SUB)
    add(retry_topic(group), SUB)
