"""The chain behind "a failed message is never dropped", one refused step at a time.

A failed message goes back to the broker with CONSUMER_SEND_MSG_BACK; if the
broker refuses, the consumer re-publishes a copy to ``%RETRY%<group>``; if that
is refused too, the message stays cached and is consumed again locally 5 s later
with its reconsume count raised. The refusals are injected into the embedded
broker's request table (real TCP, real worker processes): the broker answers
SYSTEM_ERROR to the requests the test names, and counts them, so each test also
shows that the step it is about really ran.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.processors.common import answer
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.engine_kit import FAST_DELAYS, Running, broker, consumer_config, pool_config, produce, wait_for

HANDLER = "tests.integration.handlers.chain_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 150))


@dataclass
class Delivery:
    event: str
    idx: int
    topic: str
    queue_id: int
    offset: int
    reconsume: int
    at: float


def deliveries(path: Path) -> list[Delivery]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        p = line.split()
        if len(p) == 7:
            out.append(Delivery(p[0], int(p[1]), p[2], int(p[3]), int(p[4]), int(p[5]), float(p[6])))
    return out


@dataclass
class Refusals:
    """Makes the broker refuse send-backs and/or sends to retry topics, counting what it refused."""

    eb: EmbeddedBroker
    send_back: bool = False
    retry_publish: bool = False
    refused: dict[str, int] = field(default_factory=lambda: {"send_back": 0, "retry_publish": 0})

    def install(self) -> "Refusals":
        procs = self.eb.broker.processors
        real_send, real_back = procs.send.send, procs.send.send_back

        async def send(conn, cmd):  # type: ignore[no-untyped-def]
            topic = cmd.ext_fields.get("topic") or cmd.ext_fields.get("b") or ""
            if self.retry_publish and topic.startswith("%RETRY%"):
                self.refused["retry_publish"] += 1
                return answer(cmd, ResponseCode.SYSTEM_ERROR, "refused by the test")
            return await real_send(conn, cmd)

        async def send_back(conn, cmd):  # type: ignore[no-untyped-def]
            if self.send_back:
                self.refused["send_back"] += 1
                return answer(cmd, ResponseCode.SYSTEM_ERROR, "refused by the test")
            return await real_back(conn, cmd)

        server = self.eb.broker.server
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
            server.register(code, send)
        server.register(RequestCode.CONSUMER_SEND_MSG_BACK, send_back)
        return self


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "chain.txt"
    monkeypatch.setenv("CHAIN_RECORD", str(path))
    monkeypatch.setenv("CHAIN_FAIL_IDX", "3")
    return path


def _source_request(r: Running, topic: str):  # type: ignore[no-untyped-def]
    engine = r.supervisor.engine
    assert engine is not None
    return {mq.queue_id: req for mq, req in engine.table.items() if mq.topic == topic}


def test_send_back_refused_the_message_is_republished_to_the_retry_topic(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS, auto_create_queue_nums=1) as eb:
            refusals = Refusals(eb, send_back=True).install()
            await produce(eb.namesrv_address, "RC1", 6)
            async with Running(consumer_config(eb.namesrv_address, "GRC1", "RC1"), pool_config(HANDLER)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: any(d.event == "fail" for d in deliveries(record)), what="idx 3 failing")
                (fail,) = [d for d in deliveries(record) if d.event == "fail"]
                req = _source_request(r, "RC1")[fail.queue_id]
                # it leaves the cache only once the retry topic has it (the re-publish is a SYNC send)
                await wait_for(lambda: fail.offset not in req.pq, what="idx 3 handed back")
                # a re-published copy waits in the delay queue of its level (3), then moves to %RETRY%
                store = eb.broker.store
                assert store.max_offset("SCHEDULE_TOPIC_XXXX", 2) + store.max_offset("%RETRY%GRC1", 0) >= 1, \
                    "the message left the cache without reaching the broker"
                await wait_for(lambda: sum(d.event == "ok" for d in deliveries(record)) >= 6, timeout=60,
                               what="six successes, idx 3 through the re-published copy")
                assert await r.stop() == 0
            assert refusals.refused["send_back"] >= 1 and refusals.refused["retry_publish"] == 0
            got = [d for d in deliveries(record) if d.idx == 3]
            assert [(d.event, d.reconsume) for d in got] == [("fail", 0), ("ok", 1)], got
            first, second = got
            assert first.topic == "RC1" and second.topic == "RC1", "the handler sees the real topic on a retry"
            assert (second.queue_id, second.offset) != (first.queue_id, first.offset), \
                "the second delivery comes from the retry topic, not from a local retry"
            assert sorted(d.idx for d in deliveries(record) if d.event == "ok") == list(range(6))
    run(main())


def test_send_back_and_republish_refused_the_message_is_retried_locally(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS, auto_create_queue_nums=1) as eb:
            refusals = Refusals(eb, send_back=True, retry_publish=True).install()
            await produce(eb.namesrv_address, "RC2", 6)
            async with Running(consumer_config(eb.namesrv_address, "GRC2", "RC2"), pool_config(HANDLER)) as r:
                await wait_for(lambda: refusals.refused["send_back"] >= 1 and refusals.refused["retry_publish"] >= 1,
                               timeout=60, what="both ways back to the broker refused")
                (fail,) = [d for d in deliveries(record) if d.event == "fail"]
                req = _source_request(r, "RC2")[fail.queue_id]
                # held: the failed message is still cached and the commit has not passed it
                assert fail.offset in req.pq
                assert r.supervisor.engine.offset_store.read_memory(req.mq) <= fail.offset  # type: ignore[union-attr]
                await wait_for(lambda: len([d for d in deliveries(record) if d.idx == 3]) >= 2, timeout=60,
                               what="the local retry of idx 3")
                again = [(d.event, d.reconsume) for d in deliveries(record) if d.idx == 3]
                assert again == [("fail", 0), ("ok", 1)], f"the local retry counts as a reconsume: {again}"
                await wait_for(lambda: sum(d.event == "ok" for d in deliveries(record)) >= 6, what="every message")
                await wait_for(lambda: r.supervisor.engine.offset_store.read_memory(req.mq) == 6,  # type: ignore[union-attr]
                               what="the commit after the local retry")
                assert await r.stop() == 0
            got = [d for d in deliveries(record) if d.idx == 3]
            assert [(d.event, d.reconsume) for d in got] == [("fail", 0), ("ok", 1)], got
            first, second = got
            assert (second.topic, second.queue_id, second.offset) == (first.topic, first.queue_id, first.offset), \
                "a local retry delivers the cached message again, from its own queue"
            assert second.at - first.at >= 4.0, "the local retry waits SEND_BACK_FAILED_RESUBMIT_DELAY_MS (5 s)"
    run(main())


def test_reconsume_later_delay_level_n_comes_back_after_level_n(tmp_path: Path, record: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """ReconsumeLater(delay_level=5) → %RETRY% with level 5's delay (4 s here; every other level is 1 s)."""
    monkeypatch.setenv("CHAIN_DELAY_LEVEL", "5")
    levels = "1s 1s 1s 1s 4s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=levels, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "RC3", 6)
            async with Running(consumer_config(eb.namesrv_address, "GRC3", "RC3"), pool_config(HANDLER)) as r:
                await wait_for(lambda: sum(d.event == "ok" for d in deliveries(record)) >= 6, timeout=60,
                               what="idx 3 back from the retry topic")
                assert await r.stop() == 0
            got = [d for d in deliveries(record) if d.idx == 3]
            assert [(d.event, d.reconsume) for d in got] == [("fail", 0), ("ok", 1)], got
            first, second = got
            assert second.topic == "RC3" and (second.queue_id, second.offset) != (first.queue_id, first.offset)
            # level 5 is 4 s; the default for a first retry (level 3) would be 1 s
            assert second.at - first.at >= 3.5, f"came back after {second.at - first.at:.2f} s, level 5 is 4 s"
    run(main())


def test_default_retry_delay_grows_with_the_reconsume_count(tmp_path: Path, record: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a chosen level the n-th retry waits level 3 + n: here level 3 is 1 s and level 4 is 4 s."""
    monkeypatch.setenv("CHAIN_FAIL_TIMES", "2")
    levels = "1s 1s 1s 4s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=levels, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "RC4", 6)
            async with Running(consumer_config(eb.namesrv_address, "GRC4", "RC4"), pool_config(HANDLER)) as r:
                await wait_for(lambda: sum(d.event == "ok" for d in deliveries(record)) >= 6, timeout=60,
                               what="idx 3 after two retries")
                assert await r.stop() == 0
            got = [d for d in deliveries(record) if d.idx == 3]
            assert [(d.event, d.reconsume) for d in got] == [("fail", 0), ("fail", 1), ("ok", 2)], got
            assert got[2].at - got[1].at >= 3.5, f"second retry after {got[2].at - got[1].at:.2f} s; level 4 is 4 s"
    run(main())
