"""A whole pull's messages reach the consume service after the queue's next pull was sent
(``rmqrun/consumer/puller.py``, the module's note), in concurrent mode and orderly by queue; orderly by key
(entries, not a whole run) hands them over before the next pull, as before."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from rmqrun.client.broker import PullResult, PullStatus
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.offsets import RemoteOffsetStore
from rmqrun.consumer.process_queue import ProcessQueue
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.aio import after_writes_done, cancel_and_wait
from rmqrun.consumer.puller import pull_loop
from rmqrun.consumer.queued import QueuedRun
from rmqrun.model import MessageQueue
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.message import encode_stored

MQ = MessageQueue("T", "broker-a", 0)
ADDR = "127.0.0.1:10911"


def _body(first: int, n: int) -> bytes:
    return b"".join(bytes(encode_stored(topic="T", body=b"x", queue_offset=first + i)) for i in range(n))


def _engine(cfg: ConsumerConfig, events: list[tuple[Any, ...]], fail_hand_over: bool = False,
            cancel_second: bool = False) -> SimpleNamespace:
    """A pull context whose broker answers the first pull with offsets 0-3 and holds every later one
    (``cancel_second``: the pull task is cancelled as it sends the second, in the step that read the first)."""
    async def pull(addr: str, header: Any, *, timeout: float) -> PullResult:
        offset = int(header["queueOffset"])
        events.append(("pull", offset))
        if offset == 0:
            return PullResult(PullStatus.FOUND, 4, 0, 100, 0, _body(0, 4))
        if cancel_second:
            raise asyncio.CancelledError
        await asyncio.Future()  # a long poll nothing answers
        raise AssertionError("unreachable")

    def submit_run(req: PullRequest, run: QueuedRun) -> None:
        events.append(("hand over", list(run.offsets)))
        if fail_hand_over:
            raise RuntimeError("the consume service refused")

    async def address(mq: MessageQueue) -> str:
        return ADDR

    async def commit(mq: MessageQueue, offset: int) -> None:
        return None

    async def fetch(mq: MessageQueue) -> int | None:
        return 0

    return SimpleNamespace(
        config=cfg, paused=False, offset_store=RemoteOffsetStore("G", commit, fetch),
        instance=SimpleNamespace(broker=SimpleNamespace(pull=pull), broker_address=lambda name: ADDR),
        # the keyed service (orderly by key) takes entries only, as rmqrun's does: no ``submit_run``
        consume_service=SimpleNamespace(
            submit=lambda req, entries: events.append(("submit", [e.offset for e in entries])),
            **({} if cfg.order_by_key else {"submit_run": submit_run})),
        status=SimpleNamespace(on_pulled=lambda topic, n, seconds: None),
        note_suggested_broker=lambda mq, broker_id: None,
        pull_failures=SimpleNamespace(recovered=lambda mq: None, failed=lambda *a: events.append(("failed",) + a)),
        queue_thresholds=lambda: (1000, 100.0), subscription=lambda topic: SubscriptionData.build("T", "*"),
        pull_address=address)


def test_a_stop_right_after_an_answer_still_hands_its_messages_over() -> None:
    """The pull task ends in the step that read an answer (here: cancelled as it sent the next pull): a stop
    that finds it done waits no step in ``cancel_and_wait``; after ``after_writes_done``, as
    ``PushConsumer.shutdown`` awaits it before it stops the consume service, the answer's run is the
    service's."""
    events: list[tuple[Any, ...]] = []
    engine = _engine(_config(orderly=True), events, cancel_second=True)
    pq = ProcessQueue(MQ)
    pq.locked = True
    req = PullRequest(MQ, pq, next_offset=0, previously_locked=True)

    async def main() -> None:
        task = asyncio.ensure_future(pull_loop(engine, req))  # type: ignore[arg-type]
        while not task.done():
            await asyncio.sleep(0)
        assert ("hand over", [0, 1, 2, 3]) not in events, "not handed over in the step that read it"
        await cancel_and_wait([task])
        assert ("hand over", [0, 1, 2, 3]) not in events, "cancel_and_wait waited no step for an ended task"
        await after_writes_done()
        assert events == [("pull", 0), ("pull", 4), ("hand over", [0, 1, 2, 3])]
    asyncio.run(main())


def _run(cfg: ConsumerConfig, fail_hand_over: bool = False) -> tuple[list[tuple[Any, ...]], PullRequest]:
    events: list[tuple[Any, ...]] = []
    engine = _engine(cfg, events, fail_hand_over)
    pq = ProcessQueue(MQ)
    pq.locked = True
    req = PullRequest(MQ, pq, next_offset=0, previously_locked=True)

    async def main() -> None:
        task = asyncio.ensure_future(pull_loop(engine, req))  # type: ignore[arg-type]
        for _ in range(200):
            if len(events) >= 3:
                break
            await asyncio.sleep(0.005)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    asyncio.run(main())
    return events, req


def _config(**kw: Any) -> ConsumerConfig:
    return ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"}, **kw)


@pytest.mark.parametrize("kw", [{}, {"orderly": True}], ids=["concurrent", "orderly"])
def test_a_queue_s_next_pull_leaves_before_its_messages_are_handed_over(kw: dict[str, Any]) -> None:
    events, req = _run(_config(**kw))
    assert events == [("pull", 0), ("pull", 4), ("hand over", [0, 1, 2, 3])]
    assert req.pq.msg_count == 4, "the answer was cached before the next pull: flow control counts it"


def test_orderly_by_key_hands_its_entries_over_before_the_next_pull() -> None:
    events, _ = _run(_config(orderly=True, order_by="key"))
    assert events == [("pull", 0), ("submit", [0, 1, 2, 3]), ("pull", 4)]


def test_a_hand_over_that_fails_is_logged_and_the_pulls_go_on() -> None:
    from loguru import logger
    seen: list[str] = []
    sink = logger.add(lambda m: seen.append(str(m)), level="ERROR")
    try:
        events, _ = _run(_config(orderly=True), fail_hand_over=True)
    finally:
        logger.remove(sink)
    assert events == [("pull", 0), ("pull", 4), ("hand over", [0, 1, 2, 3])]
    assert any("handing the messages pulled from" in line and "the consume service refused" in line
               for line in seen), seen


class _NoExecutor:
    async def run(self, job: Any) -> Any:
        raise AssertionError("not used")


@pytest.mark.parametrize("kw", [{}, {"orderly": True}], ids=["concurrent", "orderly"])
def test_the_engine_s_stop_lets_a_pull_s_last_hand_over_reach_the_service_before_stopping_it(
        kw: dict[str, Any]) -> None:
    """``PushConsumer.shutdown`` itself (not only the helper): a pull task that ended in the step that read its
    last answer, its hand-over put behind that step's writes (``call_after_writes``, as the puller does), is found
    done by the stop, which cancels nothing and waits no step for it; the hand-over still reaches the consume
    service before the service is stopped (else those messages come back only after a restart)."""
    from rmqrun.aio import call_after_writes
    from rmqrun.consumer.push import PushConsumer

    events: list[str] = []

    async def main() -> None:
        engine = PushConsumer(_config(**kw), _NoExecutor())  # type: ignore[arg-type]

        async def nothing(*args: Any, **kwargs: Any) -> None:
            return None

        async def stop(grace: float) -> None:
            events.append("service stopped")

        engine.consume_service.stop = stop  # type: ignore[method-assign]
        engine.offset_store.persist_all = nothing  # type: ignore[method-assign]
        engine.rebalancer.unlock_all = nothing  # type: ignore[method-assign]
        engine.send_back.close = nothing  # type: ignore[method-assign]
        engine.instance.unregister_consumer = nothing  # type: ignore[method-assign]
        engine.instance.close = nothing  # type: ignore[method-assign]

        async def last_pull() -> None:  # read its last answer; the hand-over goes behind this step's writes
            call_after_writes(events.append, "handed over")

        pq = ProcessQueue(MQ)
        req = PullRequest(MQ, pq, next_offset=0)
        req.task = asyncio.ensure_future(last_pull())
        engine.table[MQ] = req
        engine._running = True
        while not req.task.done():
            await asyncio.sleep(0)
        assert events == [], "the hand-over is still two steps away"
        await engine.shutdown(grace=1.0)

    asyncio.run(main())
    assert events == ["handed over", "service stopped"]
