"""Order-mode POP on the embedded broker: a queue is blocked while a popped offset is un-acked and invisible,
acks commit and unblock (waking held pops), the same attempt may pop again, redeliveries are counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.pop import (
    POP_ORDER_REVIVE_QID,
    ChangeInvisibleTimeResponseHeader,
    PopMessageResponseHeader,
    order_count_for,
    parse_order_count_info,
)
from rmqrun.remoting.codes import ResponseCode
from tests.integration.pop_kit import ack, change_invisible, connect, pop, pop_all, popped, run, send_many
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(90)
G, T = "CG_order", "TOrder"


def test_a_popped_batch_blocks_its_queue_until_acked(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c1, c2 = await connect(eb), await connect(eb)
            await send_many(c1, T, 3, queue_id=0)
            resp = await pop(c1, G, T, queue_id=0, max_nums=2, order=True, attempt_id="a1")
            header = PopMessageResponseHeader.from_ext(resp.ext_fields)
            got = popped(resp)
            assert [m.body for m, _ in got] == [b"m0", b"m1"]
            assert header.revive_qid == POP_ORDER_REVIVE_QID and all(r.is_order for _, r in got)
            counts = parse_order_count_info(header.order_count_info)
            assert order_count_for(counts, "0", 0, 0) == 0
            assert len(eb.broker.pop.ck_log) == 0  # order mode keeps no checkpoints
            # another request finds the queue blocked, m2 included
            assert await pop_all(c2, G, T, queue_id=0, order=True, attempt_id="a2") == []
            # the same attempt retried gets its batch again
            again = popped(await pop(c1, G, T, queue_id=0, max_nums=2, order=True, attempt_id="a1"))
            assert [m.body for m, _ in again] == [b"m0", b"m1"]
            assert (await ack(c1, G, T, again[0][1])).code == ResponseCode.SUCCESS
            assert eb.broker.store.consumer_offsets.query(G, T, 0) == 1
            assert await pop_all(c2, G, T, queue_id=0, order=True, attempt_id="a2") == []  # m1 still out
            # a held pop is woken by the ack that unblocks the queue
            held = asyncio.create_task(pop(c2, G, T, queue_id=0, order=True, attempt_id="a3", poll_ms=10_000))
            await eventually_async(lambda: held.done() or eb.broker.pop_polling.polling_num(T, G, 0) > 0,
                                   what="the pop to be held")
            assert not held.done(), "a pop of a blocked queue must be held, not answered"
            assert (await ack(c1, G, T, again[1][1])).code == ResponseCode.SUCCESS
            nxt = popped(await asyncio.wait_for(held, 5))
            assert [m.body for m, _ in nxt] == [b"m2"]
            assert eb.broker.store.consumer_offsets.query(G, T, 0) == 2
            await c1.close()
            await c2.close()

    run(main())


def test_an_unacked_batch_comes_back_in_order_with_its_redelivery_count(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c1, c2 = await connect(eb), await connect(eb)
            await send_many(c1, T, 2, queue_id=1)
            first = popped(await pop(c1, G, T, order=True, attempt_id="a1", invisible_ms=1000))
            assert [m.body for m, _ in first] == [b"m0", b"m1"]
            # held while blocked, woken when the invisible time lapses (no send, no ack); held far longer than
            # the test may run, so only that wake answers it
            resp = await asyncio.wait_for(pop(c2, G, T, order=True, attempt_id="a2", poll_ms=600_000,
                                              invisible_ms=60_000), 30)
            header = PopMessageResponseHeader.from_ext(resp.ext_fields)
            back = popped(resp)
            assert [m.body for m, _ in back] == [b"m0", b"m1"]
            counts = parse_order_count_info(header.order_count_info)
            assert [order_count_for(counts, "0", 1, r.queue_offset) for _, r in back] == [1, 1]
            # an ack of the first pop is stale now: it neither commits nor fails
            assert (await ack(c1, G, T, first[0][1])).code == ResponseCode.SUCCESS
            assert eb.broker.store.consumer_offsets.query(G, T, 1) == 0
            await c1.close()
            await c2.close()

    run(main())


def test_change_invisible_time_in_order_mode_moves_the_block(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 1, queue_id=2)
            (m, r), = popped(await pop(c, G, T, order=True, attempt_id="a1", invisible_ms=60_000))
            resp = await change_invisible(c, G, T, r, 0)
            assert resp.code == ResponseCode.SUCCESS
            h = ChangeInvisibleTimeResponseHeader.from_ext(resp.ext_fields)
            assert h.pop_time == r.pop_time and h.revive_qid == POP_ORDER_REVIVE_QID and h.invisible_time <= 100
            again = await pop_all(c, G, T, order=True, attempt_id="a2")
            assert [x.body for x, _ in again] == [b"m0"]
            await c.close()

    run(main())
