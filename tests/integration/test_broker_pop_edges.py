"""The embedded broker's POP engine at its edges: an extended invisible time, the pop retry topic read on
every pop that found too little, NOTIFICATION counting revived messages, and a tag filter that matches
nothing in a queue. Requests are built as a client builds them (tests/integration/pop_kit.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.pop import NotificationRequestHeader, NotificationResponseHeader
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client
from tests.integration.pop_kit import change_invisible, connect, pop, pop_all, pop_until, popped, run, send_many
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(90)
G, T = "CG_pope", "TPopE"
RETRY = f"%RETRY%{G}_{T}"


async def _notify(c: Client) -> bool:
    h = NotificationRequestHeader(consumer_group=G, topic=T, queue_id=-1, poll_time=0,
                                  born_time=int(time.time() * 1000))
    r = await c.call(RequestCode.NOTIFICATION, h.to_ext(), timeout=5)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return NotificationResponseHeader.from_ext(r.ext_fields).has_msg


def test_an_extended_invisible_time_takes_the_message_out_of_its_pops_revive(tmp_path: Path) -> None:
    """What a POP client does for a handler call running long: it extends one message's invisibility.
    When the rest of that pop comes due, the extended message is not revived with it (it would be
    handled a second time while its first call still runs)."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 2, queue_id=0)
            got = popped(await pop(c, G, T, invisible_ms=1000))
            assert [m.body for m, _ in got] == [b"m0", b"m1"]
            resp = await change_invisible(c, G, T, got[0][1], 60_000)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            back = await pop_until(c, G, T, 1, invisible_ms=60_000)
            assert [m.body for m, _ in back] == [b"m1"]
            await eventually_async(lambda: eb.broker.pop.counters.revived >= 1, what="the revive pass", timeout=60)
            assert eb.broker.store.max_offset(RETRY, 0) == 1, "the extended message was revived too"
            await c.close()

    run(main())


def test_every_pop_that_finds_too_little_also_reads_the_retry_topic(tmp_path: Path) -> None:
    """Ten revived messages wait in the pop retry topic and the topic itself has nothing new: each pop of
    one message gets one (Java reads the retry topic after the topic when the batch is short, not only on
    the one pop in five that reads it first)."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 10, queue_id=0)
            assert len(popped(await pop(c, G, T, invisible_ms=1000))) == 10
            await eventually_async(lambda: eb.broker.pop.counters.revived == 10,
                                   what="ten revived messages", timeout=60)
            bodies = []
            for _ in range(10):
                got = await pop_all(c, G, T, max_nums=1, invisible_ms=60_000)
                assert len(got) == 1, f"a pop found nothing while {10 - len(bodies)} revived messages waited"
                bodies.append(got[0][0].body)
            assert sorted(bodies) == sorted(b"m%d" % i for i in range(10))
            await c.close()

    run(main())


def test_notification_counts_revived_messages_waiting_in_the_retry_topic(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 1, queue_id=0)
            assert len(popped(await pop(c, G, T, invisible_ms=1000))) == 1
            await eventually_async(lambda: eb.broker.pop.counters.revived == 1, what="the revived message", timeout=60)
            # the topic's queues are all popped: only the retry topic holds something to pop
            assert await _notify(c) is True
            assert [m.body for m, _ in await pop_all(c, G, T, invisible_ms=60_000)] == [b"m0"]
            await c.close()

    run(main())


def test_a_pop_that_matches_nothing_moves_the_group_past_what_it_read(tmp_path: Path) -> None:
    """A tag filter that matches none of a queue's messages: the group's offset moves past them, so its lag
    falls to 0 and NOTIFICATION stops saying there is something to pop (a long-polling client would spin)."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            for i in range(3):
                await c.send(T, f"a{i}".encode(), queue_id=0, tags="A")
            assert await pop_all(c, G, T, queue_id=0, exp="B") == []
            assert eb.broker.store.consumer_offsets.query(G, T, 0) == 3
            assert await _notify(c) is False
            await c.close()

    run(main())


def test_a_group_offset_past_the_queue_s_end_is_moved_back_to_it(tmp_path: Path) -> None:
    """The group's offset of a queue lies past its end (an offset written for an older store, say): the pop
    moves it to where the store says the queue ends, so the next message sent is popped (left there, the
    group would pop nothing until the queue grew past it)."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 2, queue_id=0)
            moved = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": G, "topic": T, "queueId": "0", "commitOffset": "50"})
            assert moved.code == ResponseCode.SUCCESS, moved.remark
            assert await pop_all(c, G, T, queue_id=0) == []
            assert eb.broker.store.consumer_offsets.query(G, T, 0) == 2
            await send_many(c, T, 1, queue_id=0, prefix="late")
            assert [m.body for m, _ in await pop_all(c, G, T, queue_id=0)] == [b"late0"]
            await c.close()

    run(main())


def test_an_extension_in_the_millisecond_of_its_pop_keeps_the_rest_of_the_pop(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The extension of a pop's first message made in the millisecond of the pop: its new checkpoint must not take
    the key of the pop's own (start offset and pop time alike), or the ack of the original drops both and the rest
    of the pop is never revived (found by a full run on a loaded machine; forced here with a stopped clock)."""
    from rmqrun.broker.pop import service

    stopped: list[int] = []
    real = service.now_ms
    monkeypatch.setattr(service, "now_ms", lambda: stopped[0] if stopped else real())

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 2, queue_id=0)
            stopped.append(real())
            got = popped(await pop(c, G, T, invisible_ms=1000))
            assert [m.body for m, _ in got] == [b"m0", b"m1"]
            resp = await change_invisible(c, G, T, got[0][1], 60_000)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            stopped.clear()
            back = await pop_until(c, G, T, 1, invisible_ms=60_000)
            assert [m.body for m, _ in back] == [b"m1"], "the rest of the pop was never revived"
            assert int(resp.ext_fields["popTime"]) != got[0][1].pop_time  # the extension has a checkpoint of its own
            await c.close()

    run(main())
