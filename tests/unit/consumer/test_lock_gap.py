"""An orderly queue whose lock was not held continuously (``rmqrun/consumer/lock_gap.py`` and its hooks)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.lock_gap import settle_gap
from rmqrun.consumer.offsets import RemoteOffsetStore
from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.consumer.puller import pull_loop
from rmqrun.model import MessageQueue
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.errors import ConnectionClosedError

MQ = MessageQueue("T", "broker-a", 0)


def locked_pq(now: int | None = None) -> ProcessQueue:
    """Locked at ``now`` (ms; the wall clock when None)."""
    pq = ProcessQueue(MQ, now_ms=now)
    pq.locked = True
    return pq


def test_a_renewal_in_time_is_no_gap() -> None:
    pq = locked_pq(1_000_000)
    pq.note_locked(1_000_000 + 20_000)
    assert not pq.lock_lapsed and pq.holds_lock(1_000_000 + 20_000)


def test_a_grant_after_the_lock_was_lost_is_a_gap() -> None:
    pq = locked_pq(1_000_000)
    pq.locked = False  # a renewal refused: another client holds it
    pq.note_locked(1_000_000 + 1_000)
    assert pq.locked and pq.lock_lapsed and not pq.holds_lock(1_000_000 + 1_000)


def test_a_grant_after_the_local_lock_expired_is_a_gap() -> None:
    """A process frozen past the local expiry: still 'locked' in memory, but nothing vouches for it."""
    pq = locked_pq(1_000_000)
    later = 1_000_000 + pq.lock_max_live_ms + 1
    assert not pq.holds_lock(later)  # not even before the renewal: its offset is not committed
    pq.note_locked(later)
    assert pq.lock_lapsed and not pq.holds_lock(later)


def store(broker_offset: int | None | Exception) -> RemoteOffsetStore:
    async def commit(mq: MessageQueue, offset: int) -> None:
        raise AssertionError("settling commits nothing")

    async def fetch(mq: MessageQueue) -> int | None:
        if isinstance(broker_offset, Exception):
            raise broker_offset
        return broker_offset
    return RemoteOffsetStore("G", commit, fetch)


def settle(req: PullRequest, offsets: RemoteOffsetStore) -> bool | None:
    return asyncio.run(settle_gap(offsets, req))


def gapped(broker_offset: int | None | Exception) -> tuple[PullRequest, RemoteOffsetStore]:
    """Relocked after a gap: offsets 240..249 cached, 240 committed in memory, the broker at ``broker_offset``."""
    req = PullRequest(MQ, locked_pq(), next_offset=250, previously_locked=True)
    req.pq.put([QueuedMessage(o, 1) for o in range(240, 250)])
    req.pq.lock_lapsed = True
    offsets = store(broker_offset)
    offsets.update(MQ, 240, False)
    return req, offsets


def test_another_owner_committed_past_ours_the_queue_restarts_from_there() -> None:
    req, offsets = gapped(473)
    assert settle(req, offsets) is True
    assert req.next_offset == 473 and req.epoch == 1 and req.pq.msg_count == 0 and not req.pq.lock_lapsed
    assert offsets.read_memory(MQ) == 473 and req.pq.holds_lock()


def test_nobody_committed_past_ours_the_queue_goes_on_as_it_was() -> None:
    """Our own offset is ahead of the broker's (not committed yet): nothing is dropped or handled again."""
    req, offsets = gapped(200)
    assert settle(req, offsets) is False
    assert req.next_offset == 250 and req.epoch == 0 and req.pq.msg_count == 10 and not req.pq.lock_lapsed
    assert offsets.read_memory(MQ) == 240


def test_a_broker_that_cannot_say_leaves_the_queue_held() -> None:
    req, offsets = gapped(ConnectionClosedError("down"))
    assert settle(req, offsets) is None
    assert req.pq.lock_lapsed and offsets.read_memory(MQ) == 240


def test_a_pull_broken_by_a_lost_connection_leaves_the_lock_unconfirmed() -> None:
    """A restarted broker has forgotten every lock: no new job until it grants the queue's lock again."""
    kicked: list[PullRequest] = []

    async def pull(*args: Any, **kw: Any) -> Any:
        raise ConnectionClosedError("the broker went away")

    async def address(mq: MessageQueue) -> str:
        return "127.0.0.1:10911"

    cfg = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"}, orderly=True,
                         pull_time_delay_ms_when_exception=10)
    engine = SimpleNamespace(
        config=cfg, paused=False, offset_store=store(0),
        instance=SimpleNamespace(broker=SimpleNamespace(pull=pull), broker_address=lambda name: "127.0.0.1:10911"),
        consume_service=SimpleNamespace(kick=kicked.append),
        queue_thresholds=lambda: (1000, 100.0), subscription=lambda topic: SubscriptionData.build("T", "*"),
        pull_address=address)
    req = PullRequest(MQ, locked_pq(), next_offset=5, previously_locked=True)

    async def main() -> None:
        task = asyncio.ensure_future(pull_loop(engine, req))  # type: ignore[arg-type]
        for _ in range(200):
            if kicked:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    asyncio.run(main())
    assert kicked == [req] and not req.pq.locked
