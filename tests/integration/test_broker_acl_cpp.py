"""The Apache C++ client (PyPI rocketmq 0.4.4) signing with set_session_credentials against the
ACL broker: its correctly signed produce and consume pass, a wrong secret or no credentials are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from loguru import logger

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting.codes import RequestCode
from tests.acl_kit import USER_AK, USER_SK, write_acl
from tests.peers.cpp import cpp_available, cpp_unavailable_reason, run_producer, start_consumer
from tests.waiting import eventually

pytestmark = [pytest.mark.cpp, pytest.mark.timeout(240)]

FAST = " ".join(["1s"] * 18)
SEND_REFUSALS = tuple(f"ACL refused {code.name}(" for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                                                                RequestCode.SEND_BATCH_MESSAGE))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    if not cpp_available():
        pytest.skip(cpp_unavailable_reason())
    acl = write_acl(tmp_path / "plain_acl.yml")
    with EmbeddedBroker(tmp_path / "data", message_delay_levels=FAST, acl_file=str(acl)) as eb:
        yield eb


def test_signed_cpp_producer_and_consumer_pass(broker: EmbeddedBroker, tmp_path: Path) -> None:
    sent = run_producer(broker.namesrv_address, topic="OpenTopic", count=6, tags=["TagA"], home=tmp_path / "p",
                        credentials=(USER_AK, USER_SK))
    assert [s["status"] for s in sent] == ["OK"] * 6
    with start_consumer(broker.namesrv_address, topic="OpenTopic", group="OpenGroup", expect=6, timeout=60,
                        fail_first=[1], home=tmp_path / "c", credentials=(USER_AK, USER_SK)) as consumer:
        lines = consumer.wait_ok(6, timeout=60)
    ok = {int(m["properties"]["idx"]) for m in lines if m["verdict"] == "CONSUME_SUCCESS"}
    assert ok == set(range(6))
    # the retried message went back through the signed send-back and %RETRY%OpenGroup
    assert any(int(m["properties"]["idx"]) == 1 and m["reconsume_times"] >= 1 for m in lines)
    assert broker.broker.acl is not None and broker.broker.acl.refused == 0


@pytest.mark.parametrize("credentials, reason", [
    ((USER_AK, "not-the-secret"), f"Check signature failed for accessKey={USER_AK}"),
    (None, "No acl config for "),   # the C++ client sends AccessKey "" without credentials
    ((USER_AK, USER_SK), "No default permission for topic:ClosedTopic"),
])
def test_wrongly_signed_or_unpermitted_cpp_sends_are_refused(broker: EmbeddedBroker, tmp_path: Path,
                                                              credentials: tuple[str, str] | None,
                                                              reason: str) -> None:
    # DEBUG too: the broker logs a client's first refusal for a reason at WARNING and the rest at DEBUG, and on a
    # loaded machine the C++ client's heartbeat can be that first one.
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG", format="{message}",
                      filter=lambda r: r["message"].startswith("ACL refused "))
    topic = "ClosedTopic" if credentials == (USER_AK, USER_SK) else "OpenTopic"
    try:
        results = run_producer(broker.namesrv_address, topic=topic, count=2, home=tmp_path / "p",
                               credentials=credentials, check=False, keep_going=True, send_deadline=5.0,
                               send_timeout_ms=2000)
        assert results and all(r["event"] == "send_failed" for r in results), results
        # What the code guarantees, whatever the scheduler did: a send that reached the broker was refused (a
        # send the client gave up on first may never have), and the refusal gives the reason. How many refusals
        # there were depends on how many sends and heartbeats got there before the client's deadlines.
        eventually(lambda: [ln for ln in lines if ln.startswith(SEND_REFUSALS)], what="a refused send", timeout=30)
    finally:
        logger.remove(sink)
    assert topic not in broker.broker.topics  # nothing stored: not even an auto-created topic
    assert broker.broker.acl is not None and broker.broker.acl.refused >= 1
    assert all(reason in ln for ln in lines), lines
