"""An orderly queue whose broker lock was not held continuously checks the broker's offset before going on.

The Java client re-reads a queue's committed offset only when the queue is newly
allocated to it. A client that keeps the queue in its table but loses the lock for a
while (frozen past the broker's lock and channel expiry, a broker restart, a
renewal refused because another client took the queue) and then wins it back
carries on from its own position in memory: behind whatever the other owner
committed meanwhile. It handles all of that again, and its commits move the
group's offset backwards while it catches up (duplicates growing with the length of
the gap, not bounded by the work in flight).

rmqrun's rule, in both orderly modes:

1. the gap is noticed where the lock is granted: :meth:`ProcessQueue.note_locked`
   sets ``lock_lapsed`` when the queue was not locked just before (lost at a
   renewal, or left unconfirmed by a broken connection: a restarted broker has
   forgotten every lock) or its lock had expired locally;
2. from then on the queue's offset is not committed to the broker (its in-memory
   value may be stale: :meth:`ProcessQueue.holds_lock` is False), the puller waits,
   and no new job starts, not even one made before the gap that still waits for a
   worker (the executor checks ``holds_lock`` as a job would start:
   ``ConsumeJob.under_lock``); jobs already running finish;
3. once none runs, the consume service calls :func:`settle_gap`, which reads the
   committed offset from the broker. If another client committed past this one's
   own offset, everything pulled and not handed to a worker is dropped, pulls begun
   before are discarded when they return, and the queue goes on from the broker's
   offset. Otherwise nobody committed past this client's own position: everything
   below it was done here, and what it has cached is still its own to finish, so
   it goes on as it was (no message is handled again for the gap's sake).
"""

from __future__ import annotations

from loguru import logger

from rmqrun.consumer.offsets import OffsetStore, ReadOffsetType
from rmqrun.consumer.pull_request import PullRequest


async def settle_gap(offset_store: OffsetStore, req: PullRequest) -> bool | None:
    """Step 3 of the rule, with no job of the queue running.

    Returns True when the queue restarted from the broker's offset (the caller drops
    what it holds of the queue: lanes, suspended keys), False when it goes on as it
    was, None when the broker could not be asked (the queue stays held; ask again).
    """
    mq, pq = req.mq, req.pq
    mine = offset_store.read_memory(mq)
    theirs = await offset_store.read(mq, ReadOffsetType.READ_FROM_STORE)  # (replaces the value in memory)
    if theirs < -1:
        offset_store.update(mq, mine, False)
        return None
    if theirs <= mine:
        offset_store.update(mq, mine, False)
        pq.lock_lapsed = False
        logger.info("{}: locked again after a gap; nobody committed past {} meanwhile, going on", mq, mine)
        return False
    dropped = pq.msg_count
    pq.clear()
    pq.consuming = False
    req.epoch += 1  # a pull begun before is discarded when it returns
    req.next_offset = theirs
    req.previously_locked = True  # the offset is the broker's, just read
    pq.lock_lapsed = False
    logger.warning("{}: locked again after a gap; another client committed up to {} (this one was at {}): "
                   "{} cached message(s) dropped, going on from {}", mq, theirs, mine, dropped, theirs)
    return True
