"""Several pops in flight per POP assignment (issue #32), bounded as Java's one loop is: the un-acked messages
plus what the pops on the wire may bring stay within ``pop_threshold_for_queue`` + one pop; orderly POP keeps one."""

from __future__ import annotations

import asyncio

import pytest
from types import SimpleNamespace
from typing import Any

from rmqrun.client.pop_api import PopResult, PopStatus
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.pop_stats import PopStats
from rmqrun.consumer.pop_loop import POPS_IN_FLIGHT, _pop_once, pop_loop, pops_in_flight, window
from rmqrun.consumer.pop_queue import PopProcessQueue, PopRequest
from rmqrun.model import MessageQueue
from rmqrun.protocol.subscription import build_subscription_data
from tests.fakes.engine import popped
from tests.waiting import eventually_async


class _Entry:
    """Stands for a PopEntry: hashable by identity, with the flag ``done`` sets."""
    settled = False


def _in_flight(unacked: int, orderly: bool = False, threshold: int = 96, queues: int = 1,
               handler_s_per_msg: float | None = None) -> int:
    """How many pops the loop puts on the wire at once with ``unacked`` messages not acked (pops never answer),
    for an assignment covering ``queues`` queues, the handler's time per message measured or not (None)."""
    async def main() -> int:
        cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"}, orderly=orderly,
                             pop_threshold_for_queue=threshold)
        pq = PopProcessQueue(MessageQueue("T", "b", -1))
        pq.entries.update(_Entry() for _ in range(unacked))  # type: ignore[misc]
        on_wire = 0
        never = asyncio.Event()

        async def pop(*args: Any, **kw: Any) -> Any:
            nonlocal on_wire
            on_wire += 1
            await never.wait()
            return SimpleNamespace(status=PopStatus.NO_NEW_MSG, messages=[])

        async def broker_addr(mq: Any) -> str:
            return "addr"
        engine = SimpleNamespace(config=cfg, paused=False, pop_client=SimpleNamespace(pop=pop),
                                 subscription=lambda topic: SimpleNamespace(expression_type="TAG", sub_string="*"),
                                 broker_addr=broker_addr,
                                 pop_service=SimpleNamespace(handler_s_per_msg=handler_s_per_msg, workers=lambda: 2))
        req = PopRequest(MessageQueue("T", "b", -1), pq, queues=queues)
        task = asyncio.ensure_future(pop_loop(engine, req))  # type: ignore[arg-type]
        for _ in range(50):  # every loop gets far more turns than it needs to put its pop on the wire
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert pq.popping == 0, "a cancelled pop gives its reservation back"
        return on_wire
    return asyncio.run(main())


def test_pops_in_flight_fill_the_threshold_and_no_more() -> None:
    cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"})
    assert (cfg.pop_threshold_for_queue, cfg.pop_batch_size, POPS_IN_FLIGHT) == (96, 32, 3)
    assert _in_flight(0) == 3, "nothing un-acked: three pops of 32 fit under 96"
    assert _in_flight(50) == 2, "50 un-acked: 50 + 32 + 32 > 96 stops the third"
    assert _in_flight(96) == 1, "at the threshold one pop goes, as Java's loop pops at waitAckCount <= threshold"
    assert _in_flight(97) == 0, "past it: flow control"
    assert _in_flight(0, orderly=True) == 1, "orderly POP: one pop at a time"


def test_an_assignment_of_every_queue_pops_each_queue_s_share_once_the_handler_is_known_quick() -> None:
    """A queue -1 assignment of 8 queues: a pop on the wire per queue and 96 un-acked per queue (768), as a
    pulling client has a pull and a process queue per queue; Java's one threshold for the whole topic held a
    no-op drain at 96 messages per pop round trip (issue #32)."""
    quick = 20e-6
    assert _in_flight(0, queues=8, handler_s_per_msg=quick) == 8, "8 pops of 32 under 768"
    assert _in_flight(600, queues=8, handler_s_per_msg=quick) == 6, "600 + 5 x 32 <= 768: a sixth; 792 stops"
    assert _in_flight(769, queues=8, handler_s_per_msg=quick) == 0, "past 8 x 96: flow control"
    assert _in_flight(0, queues=8) == 4, ("until a job has measured the handler, Java's 96 for the assignment: "
                                          "held 0, 32, 64, 96 each let one more go (the threshold plus one pop)")
    assert _in_flight(0, queues=8, handler_s_per_msg=quick, orderly=True) == 1, "orderly POP: as Java's"
    assert _in_flight(0, queues=1, handler_s_per_msg=quick) == 3, "one queue: its threshold, three pops"


def test_the_window_of_many_queues_holds_no_more_than_half_a_second_of_the_workers_time() -> None:
    """Only quick handlers get the wider window: popped messages waiting for a worker are not extended, and a
    stop waits for them within its grace. 2 workers: 1 s of handler time in all."""
    cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"})
    assert cfg.pop_threshold_for_queue == 96
    every = PopRequest(MessageQueue("T", "b", -1), PopProcessQueue(MessageQueue("T", "b", -1)), queues=8)
    one = PopRequest(MessageQueue("T", "b", 3), PopProcessQueue(MessageQueue("T", "b", 3)))
    assert window(cfg, every, None, 2) == 96, "nothing measured yet: Java's threshold"
    assert window(cfg, every, 0.001, 2) == 768, "1 ms calls: 1,000 in half a second each; 8 x 96"
    assert window(cfg, every, 0.005, 2) == 200, "5 ms calls: 2 x 0.5 s / 5 ms"
    assert window(cfg, every, 0.005, 4) == 400, "twice the workers, twice the window"
    assert window(cfg, every, 0.1, 2) == 96, "100 ms calls: 10; never under Java's threshold"
    assert window(cfg, every, 0.0, 2) == 768, "a handler measured at no time at all"
    assert window(cfg, one, 0.00001, 2) == 96, "an assignment of one queue: its own threshold"
    orderly = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"}, orderly=True)
    assert window(orderly, every, 0.00001, 2) == 96, "orderly POP: Java's threshold for the assignment"
    assert [pops_in_flight(cfg, PopRequest(every.mq, every.pq, queues=n)) for n in (1, 2, 8, 16, 64)] \
        == [3, 3, 8, 16, 16], "three at the least, one per queue, sixteen at most"
    assert pops_in_flight(orderly, every) == 1


def test_every_loop_held_by_flow_control_wakes_when_acks_make_its_room() -> None:
    async def main() -> None:
        pq = PopProcessQueue(MessageQueue("T", "b", -1))
        entries = [_Entry() for _ in range(100)]
        pq.entries.update(entries)  # type: ignore[arg-type]
        high = asyncio.ensure_future(pq.wait_for_room(96, 60))
        low = asyncio.ensure_future(pq.wait_for_room(32, 60))  # the later waiter does not hide the earlier one
        await asyncio.sleep(0)
        for e in entries[:4]:
            pq.done(e)  # type: ignore[arg-type]
        await asyncio.wait_for(high, 5)  # 96 left: the loop waiting for 96 goes, the one for 32 waits on
        assert not low.done()
        for e in entries[4:68]:
            pq.done(e)  # type: ignore[arg-type]
        await asyncio.wait_for(low, 5)
    asyncio.run(main())


def test_a_loop_held_by_flow_control_looks_again_after_its_timeout_and_a_cancelled_one_leaves_nothing() -> None:
    """No ack makes room: the wait ends at its timeout all the same (the loop then checks again, as Java's
    50 ms retry). A wait cancelled with its loop (the assignment dropped) leaves no waiter behind, and the
    acks that come after it wake nobody and fail nothing."""
    async def main() -> None:
        pq = PopProcessQueue(MessageQueue("T", "b", -1))
        entries = [_Entry() for _ in range(100)]
        pq.entries.update(entries)  # type: ignore[arg-type]
        await asyncio.wait_for(pq.wait_for_room(10, 0.01), 5)
        assert pq.wait_ack_count == 100 and not pq._room
        held = asyncio.ensure_future(pq.wait_for_room(10, 60))
        await eventually_async(lambda: len(pq._room) == 1, what="the loop waiting")
        held.cancel()
        await asyncio.gather(held, return_exceptions=True)
        assert held.cancelled() and not pq._room
        pq.done_all(entries)  # type: ignore[arg-type]
        assert pq.wait_ack_count == 0
    asyncio.run(main())


def _refiltered(sub_string: str, tags: list[str | None]) -> tuple[list[int], list[int]]:
    """One pop of messages with ``tags`` under a subscription to ``sub_string``: (offsets handed to the consume
    service, offsets acked at once as unwanted)."""
    async def main() -> tuple[list[int], list[int]]:
        cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": sub_string})
        messages = [popped(i) for i in range(len(tags))]
        for msg, tag in zip(messages, tags):
            msg.tags = tag
        submitted: list[int] = []
        acked: list[int] = []

        async def pop(*args: Any, **kw: Any) -> Any:
            return PopResult(PopStatus.FOUND, messages)

        async def ack(addr: str, *, group: str, message: Any) -> Any:
            acked.append(message.queue_offset)

        async def broker_addr(mq: Any) -> str:
            return "addr"
        engine = SimpleNamespace(config=cfg, pop_client=SimpleNamespace(pop=pop, ack=ack), pop_stats=PopStats(),
                                 broker_addr=broker_addr, pop_service=SimpleNamespace(
                                     submit=lambda req, entries, lane=None: submitted.extend(e.message.queue_offset
                                                                                  for e in entries)))
        req = PopRequest(MessageQueue("T", "b", -1), PopProcessQueue(MessageQueue("T", "b", -1)))
        sub = build_subscription_data("T", sub_string)
        assert await _pop_once(engine, req, sub) is PopStatus.FOUND  # type: ignore[arg-type]
        await eventually_async(lambda: len(submitted) + len(acked) == len(tags), what="every message placed")
        return submitted, acked
    return asyncio.run(main())


def test_popped_messages_are_refiltered_by_tag_and_the_unwanted_acked() -> None:
    assert _refiltered("A || C", ["A", "B", None, "C"]) == ([0, 3], [1, 2]), "B and no tag: acked, not consumed"
    assert _refiltered("*", ["A", "B", None]) == ([0, 1, 2], []), "'*' keeps everything, tagged or not"


@pytest.mark.timeout(60)
def test_a_threshold_under_two_pops_holds_the_other_loops_without_spinning() -> None:
    """With ``pop_threshold_for_queue`` 32 the second pop takes it to 64 and the third loop must wait for their
    answers: a wait that counted only the un-acked messages (none yet) returned at once and that loop spun
    without ever yielding, so the event loop hung."""
    assert _in_flight(0, threshold=32) == 2, "0 + 32 <= 32: a second pop goes; 64 > 32 holds the third"
    assert _in_flight(0, threshold=1) == 1, "one pop at a time under a threshold of 1"


def test_a_loop_held_for_room_counts_the_pops_on_the_wire_when_woken_and_a_short_answer_makes_room() -> None:
    """40 un-acked and two pops of 32 on the wire (104 held): a third loop waits for 96. One pop answers with
    32 (72 un-acked, one pop out: 104 still) and it waits on; the other answers with nothing and it goes (72).
    A wait that subtracted the two pops from its threshold at the start waited for 32 un-acked instead."""
    async def main() -> None:
        pq = PopProcessQueue(MessageQueue("T", "b", -1))
        pq.entries.update(_Entry() for _ in range(40))  # type: ignore[misc]
        pq.reserve(32)
        pq.reserve(32)
        assert pq.held == 104
        waiting = asyncio.ensure_future(pq.wait_for_room(96, 3600))
        await asyncio.sleep(0)
        pq.add(_Entry() for _ in range(32))  # type: ignore[misc]
        pq.release(32)
        await asyncio.sleep(0)
        assert not waiting.done() and pq.held == 104
        pq.release(32)  # an empty answer
        await asyncio.wait_for(waiting, 5)
        assert pq.held == 72 and not pq._room
    asyncio.run(main())


def _lane_of(plain_topic: str | None, original_topic: str | None = None) -> tuple[Any, int]:
    """The lane key ``_pop_once`` hands the consume service with one pop's answer, and what it counts revived."""
    async def main() -> tuple[Any, int]:
        cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"})
        messages = [popped(i) for i in range(3)]
        got: list[Any] = []

        async def pop(*args: Any, **kw: Any) -> Any:
            return PopResult(PopStatus.FOUND, messages, plain_topic=plain_topic)

        async def broker_addr(mq: Any) -> str:
            return "addr"
        stats = PopStats()
        engine = SimpleNamespace(config=cfg, pop_client=SimpleNamespace(pop=pop), pop_stats=stats,
                                 broker_addr=broker_addr,
                                 pop_service=SimpleNamespace(submit=lambda req, entries, lane=None: got.append(lane)))
        req = PopRequest(MessageQueue("T", "b", -1), PopProcessQueue(MessageQueue("T", "b", -1)),
                         original_topic=original_topic)
        await _pop_once(engine, req, build_subscription_data("T", "*"))  # type: ignore[arg-type]
        return got[0], stats.revived
    return asyncio.run(main())


def test_only_an_answer_the_decoder_calls_plain_skips_the_per_message_lane_and_flag_look() -> None:
    assert _lane_of("T") == (("T", "b"), 0), "the usual answer: one lane, the topic's on this broker"
    assert _lane_of(None) == (None, 0), "any other answer: the consume service reads each message's lane"
    assert _lane_of("T", original_topic="T")[0] is None, "a pop retry topic popped on its own: read per message"
