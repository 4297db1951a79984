"""A committing pull consumer's heartbeat against the 4.9.8 Java pull consumers captured in scenario d.

``DefaultLitePullConsumer`` (assign mode, group ``CG_scnd_lite``) and ``DefaultMQPullConsumer`` heartbeat
their group with CONSUME_ACTIVELY, CLUSTERING, CONSUME_FROM_LAST_OFFSET and unit mode off. rmqrun's pull
consumer sends the same consumer data (rebuilt byte for byte here when it names no topic), plus a
subscription per topic it used, shaped as the lite consumer's subscribe mode sends them, with the
``subVersion`` 0 of ``DefaultMQPullConsumer``'s registered topics.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rmqrun.protocol.bodies import HeartbeatData, ProducerData
from rmqrun.pull.registration import GroupRegistration
from rmqrun.remoting.codes import RequestCode
from tests import captures

pytestmark = pytest.mark.captures


def _captured(group: str) -> Any:
    for cf in captures.requests(RequestCode.HEART_BEAT, "d"):
        body = json.loads(cf.body)
        if [c["groupName"] for c in body.get("consumerDataSet") or ()] == [group]:
            return cf
    raise AssertionError(f"no captured heartbeat of {group}")


@pytest.mark.parametrize("group", ["CG_scnd_lite", "CG_scnd_pull"])
def test_the_consumer_data_is_the_java_pull_consumers_byte_for_byte(group: str) -> None:
    cf = _captured(group)
    body = json.loads(cf.body)
    ours = HeartbeatData(body["clientID"], [ProducerData(p["groupName"]) for p in body["producerDataSet"]],
                         [GroupRegistration(None, group).consumer_data()])  # type: ignore[arg-type]
    assert ours.encode() == bytes(cf.body)


def test_a_used_topic_is_a_subscription_shaped_as_the_lite_consumers() -> None:
    theirs = json.loads(_captured("CG_scnd_litesub").body)["consumerDataSet"][0]
    registration = GroupRegistration(None, "CG_scnd_litesub")  # type: ignore[arg-type]
    registration.use_topic("ScnD_Topic")
    registration.use_topic("ScnD_Topic", "TagA || TagB")   # the expression of the latest pull wins
    registration.use_topic("ScnD_Topic")                   # a commit alone keeps it
    mine = json.loads(HeartbeatData("c", [], [registration.consumer_data()]).encode())["consumerDataSet"][0]
    assert list(mine) == list(theirs)
    assert {k: v for k, v in mine.items() if k != "subscriptionDataSet"} == {
        k: v for k, v in theirs.items() if k != "subscriptionDataSet"}
    (sub,), (java_sub,) = mine["subscriptionDataSet"], theirs["subscriptionDataSet"]
    assert list(sub) == list(java_sub)
    assert {k: v for k, v in sub.items() if k != "subVersion"} == {k: v for k, v in java_sub.items()
                                                                     if k != "subVersion"}
    assert sub["subVersion"] == 0
