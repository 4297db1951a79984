"""Requests only a 5.x mqadmin sends, as its ``MQClientAPIImpl`` sends them, against the embedded broker.

A 5.x ``mqadmin consumerProgress`` (and ``topicStatus``) asks every broker of the route for GET_TOPIC_CONFIG
(351) and stops with "request code 351 not supported" when a broker does not serve it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.store.topic_configs import TopicConfig
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.codes import ResponseCode
from tests.integration.broker_kit import Client


def test_get_topic_config_answers_a_topic_as_5x_reads_it_and_says_topic_not_exist_otherwise(tmp_path: Path) -> None:
    async def main() -> None:
        eb = EmbeddedBroker(tmp_path / "data")
        await eb.start()
        c = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            eb.broker.topics.put(TopicConfig("T5", 3, 2, perm=4, order=True))
            # MQClientAPIImpl.getTopicConfig: header {topic, lo=true}
            resp = await c.call(R.GET_TOPIC_CONFIG, {"topic": "T5", "lo": "true"})
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            body = fastjson.loads(resp.body)
            assert body == {"attributes": {}, "order": True, "perm": 4, "readQueueNums": 3,
                            "topicFilterType": "SINGLE_TAG", "topicName": "T5", "topicSysFlag": 0,
                            "writeQueueNums": 2}
            assert "mappingDetail" not in body  # no static topic: null, left out as fastjson leaves nulls out
            missing = await c.call(R.GET_TOPIC_CONFIG, {"topic": "Nope", "lo": "true"})
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "Nope" in (missing.remark or "")
            no_topic = await c.call(R.GET_TOPIC_CONFIG, {"lo": "true"})
            assert no_topic.code == ResponseCode.SYSTEM_ERROR and "<topic>" in (no_topic.remark or "")
        finally:
            await c.close()
            await eb.stop()
    asyncio.run(asyncio.wait_for(main(), 60))
