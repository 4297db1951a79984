"""What ``rmqrun status`` reads from a client's running info and how it shows the POP part.

The end-to-end path (a real ``rmqrun run --consume-mode pop`` asked through the embedded broker) is
``tests/integration/test_status_pop.py``; here the edges it does not reach: a pull consumer's body, the
text when every topic is pull, an unknown mode.
"""

from __future__ import annotations

from rmqrun.admin.pop_status import PopClient, PopView, TopicMode, client_from_running_info
from rmqrun.cli.status.format import render_pop
from rmqrun.remoting import fastjson

MQ_KEY = '{"brokerName":"broker-a","queueId":-1,"topic":"Orders"}'


def test_a_pop_consumers_running_info_gives_its_figures_and_assignments() -> None:
    body = fastjson.loads('{"properties":{"consumeMode":"POP","popUnacked":"2","popAcks":"40","popNacks":"1",'
                          '"popInvisibleExtensions":"3","popRevived":"0","popInvisibleTime":"60000"},'
                          '"mqPopTable":{' + MQ_KEY + ':{"waitAckCount":2,"droped":false,"lastPopTimestamp":7}}}')
    client = client_from_running_info("c1", body)
    assert client.answered
    assert client.figures == {"unacked": 2, "acks": 40, "nacks": 1, "invisible_extensions": 3, "revived": 0,
                              "invisible_time_ms": 60000}
    (a,) = client.assignments
    assert (a.mq.topic, a.mq.broker_name, a.mq.queue_id, a.wait_ack_count, a.dropped) == ("Orders", "broker-a", -1,
                                                                                          2, False)
    assert client.to_json()["threshold_for_queue"] is None  # a property the client did not send


def test_a_pull_consumers_running_info_is_not_a_pop_answer() -> None:
    body = {"properties": {"consumeType": "CONSUME_PASSIVELY"}, "mqTable": {}}
    assert client_from_running_info("c2", body) == PopClient("c2", False)


def test_the_text_says_nothing_for_pull_and_unknown_where_nothing_was_said() -> None:
    assert render_pop(PopView((TopicMode("Orders", "PULL"),))) == ""
    assert not PopView((TopicMode("Orders", "PULL"),)).shown
    old = render_pop(PopView((TopicMode("Orders", None),)))
    assert old == "topic Orders: consume mode unknown (a RocketMQ 4.x broker, or no master answered)"
    text = render_pop(PopView((TopicMode("Orders", "POP", 0, None, 5),), (PopClient("c3", False),)))
    assert "consume mode POP, popShareQueueNum 0, revived by the broker 5 (last hour unknown)" in text
    row = next(line.split() for line in text.splitlines() if line.startswith("c3"))
    assert row == ["c3"] + ["unknown"] * 5
    assert "POP clients: none online" in render_pop(PopView((TopicMode("Orders", "POP", 0, 0, 0),)))


def test_a_java_pop_consumer_shows_its_assignments_without_counts() -> None:
    body = fastjson.loads('{"properties":{"consumeType":"CONSUME_PASSIVELY"},'
                          '"mqPopTable":{' + MQ_KEY + ':{"waitAckCount":4,"droped":false,"lastPopTimestamp":9}}}')
    client = client_from_running_info("java", body)
    assert client.answered and client.figures == {}
    assert [a.wait_ack_count for a in client.assignments] == [4]
    row = next(line.split() for line in render_pop(PopView((TopicMode("Orders", "POP", 0, 0, 0),), (client,)))
               .splitlines() if line.startswith("java"))
    assert row == ["java"] + ["?"] * 5


def test_an_rmqrun_client_says_its_consume_mode_in_the_words_of_its_start_up_line() -> None:
    body = fastjson.loads('{"properties":{"consumeMode":"POP","popUnacked":"0","messageListener":"rmqrun worker pool (orderly by POP)"},'
                          '"mqPopTable":{}}')
    client = client_from_running_info("c4", body)
    assert client.mode == "orderly by POP" and client.to_json()["mode"] == "orderly by POP"
    text = render_pop(PopView((TopicMode("Orders", "POP", 0, 0, 0),), (client,)))
    assert "  consumes orderly by POP" in text.splitlines()
    assert client_from_running_info("java", fastjson.loads('{"properties":{},"mqPopTable":{"x":1}}')).mode is None


def test_last_hour_is_known_only_when_every_master_reported_it() -> None:
    """Issue #32: on a 5.3.3 broker (no POP_REVIVE_NUMS statistic) a group that never had a revive showed "last
    hour 0" and another "unknown"; the broker said nothing about either."""
    from rmqrun.admin.pop_status import revived_last_hour
    assert revived_last_hour([None]) is None, "an Apache broker: unknown, whatever the group"
    assert revived_last_hour([]) is None
    assert revived_last_hour([0]) == 0, "the embedded broker said 0"
    assert revived_last_hour([2, 3]) == 5
    assert revived_last_hour([2, None]) is None, "one master silent: the sum is not the figure"
    text = render_pop(PopView((TopicMode("Orders", "POP", 0, revived_last_hour([None]), 0),)))
    assert "revived by the broker 0 (last hour unknown)" in text
