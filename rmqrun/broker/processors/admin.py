"""The admin requests worth having in an embedded broker (a subset of ``AdminBrokerProcessor``).

UPDATE_AND_CREATE_TOPIC (so ``mqadmin updateTopic`` and tests can size a topic
before use), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP / DELETE_SUBSCRIPTIONGROUP,
GET_ALL_TOPIC_CONFIG, VIEW_MESSAGE_BY_ID, QUERY_TOPIC_CONSUME_BY_WHO and
DELETE_TOPIC_IN_BROKER. The read-only views are in :mod:`inspect`, the requests
answered by asking the clients in :mod:`forward`. Everything else an admin tool
may send is answered REQUEST_CODE_NOT_SUPPORTED by the server, never left hanging.
"""

from __future__ import annotations

from rmqrun.broker.processors.common import BadRequest, answer, parse_header
from rmqrun.broker.processors.context import BrokerContext
from rmqrun.broker.store import StoreError
from rmqrun.broker.store.subscription_groups import SubscriptionGroupConfig
from rmqrun.broker.topics import TopicConfig, topic_problem
from rmqrun.protocol.admin import CreateTopicRequestHeader
from rmqrun.protocol.headers import ViewMessageRequestHeader
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.frame import RemotingCommand


class AdminProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def update_and_create_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, CreateTopicRequestHeader)
        except BadRequest as bad:
            return bad.response
        problem = topic_problem(h.topic)
        if problem:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, problem, typed=False)
        topics = self.broker.topics
        assert topics is not None
        if topics.is_system(h.topic):
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"The topic[{h.topic}] is conflict with system topic.",
                          typed=False)
        topics.put(TopicConfig(h.topic, h.read_queue_nums, h.write_queue_nums, h.perm, h.topic_filter_type,
                               h.topic_sys_flag or 0, h.order))
        # The real broker sets the code but never clears the default remark.
        return answer(cmd, ResponseCode.SUCCESS, "not set any response code", typed=False)

    async def get_all_topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topics = self.broker.topics
        assert topics is not None
        table = {tc.topic_name: _topic_json(tc) for tc in topics.all()}
        version = self.broker.store.topic_configs.data_version.to_json()
        body = {"dataVersion": {"counter": version["counter"], "timestamp": version["timestamp"]},
                "topicConfigTable": table}
        return answer(cmd, body=fastjson.dumps(body))

    async def get_topic_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_TOPIC_CONFIG (5.x, 351): one topic's config as ``TopicConfigAndQueueMapping``.

        A 5.x mqadmin asks every broker of a route for it (``consumerProgress``, ``topicStatus``) and
        takes TOPIC_NOT_EXIST as "not on this broker". The embedded broker has no static topics, so the
        mapping (``mappingDetail``) is absent, as fastjson leaves out a null field.
        """
        topic = cmd.ext_fields.get("topic")
        if not topic:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null", typed=False)
        topics = self.broker.topics
        assert topics is not None
        tc = topics.get(topic)
        if tc is None:
            return answer(cmd, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return answer(cmd, body=fastjson.dumps({**_topic_json(tc), "attributes": {}}))

    async def delete_topic_in_broker(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER: the config, the consume queues and every group's offsets of the topic.

        The commit log keeps the records until retention removes them, as in RocketMQ.
        """
        topic = cmd.ext_fields.get("topic")
        if not topic:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null", typed=False)
        topics = self.broker.topics
        assert topics is not None
        if topics.is_system(topic):
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.",
                          typed=False)
        topics.delete(topic)
        offsets = self.broker.store.consumer_offsets
        for group in offsets.groups_of_topic(topic):
            offsets.remove_group(group, topic)
        self.broker.store.delete_topic_queues(topic)
        return answer(cmd, typed=False)

    async def update_and_create_subscription_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            data = fastjson.loads(cmd.body or b"")
            sgc = SubscriptionGroupConfig.from_json(data)
        except (ProtocolError, KeyError, TypeError, ValueError) as exc:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"bad subscription group body: {exc}", typed=False)
        assert self.broker.groups is not None
        self.broker.groups.put(sgc)
        return answer(cmd, typed=False)

    async def delete_subscription_group(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        group = cmd.ext_fields.get("groupName")
        if not group:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <groupName> is null", typed=False)
        assert self.broker.groups is not None
        self.broker.groups.delete(group)
        return answer(cmd, typed=False)

    async def view_message_by_id(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            h = parse_header(cmd, ViewMessageRequestHeader)
        except BadRequest as bad:
            return bad.response
        try:
            record = self.broker.store.read_at(h.offset)
        except (StoreError, ValueError):
            record = None
        if record is None:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}",
                          typed=False)
        return answer(cmd, body=bytes(record), typed=False)

    async def query_topic_consume_by_who(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.ext_fields.get("topic")
        if not topic:
            return answer(cmd, ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null", typed=False)
        groups = list(dict.fromkeys(self.broker.consumers.groups_consuming(topic)
                                    + self.broker.store.consumer_offsets.groups_of_topic(topic)))
        return answer(cmd, body=fastjson.dumps({"groupList": groups}), typed=False)


def _topic_json(tc: TopicConfig) -> dict[str, object]:
    """A TopicConfig under Java's field names, as GET_ALL_TOPIC_CONFIG and GET_TOPIC_CONFIG carry it."""
    return {"order": tc.order, "perm": tc.perm, "readQueueNums": tc.read_queue_nums,
            "topicFilterType": tc.topic_filter_type, "topicName": tc.topic_name, "topicSysFlag": tc.topic_sys_flag,
            "writeQueueNums": tc.write_queue_nums}
