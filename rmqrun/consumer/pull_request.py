"""A queue being pulled: the record the push consumer, the puller, rebalance and the consume services share.

It has its own module so that each of those parts can name it without
importing another part's logic (the puller imported the push consumer, which
imported the puller).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rmqrun.client.broker import PullTemplate
from rmqrun.consumer.process_queue import ProcessQueue
from rmqrun.model import MessageQueue


@dataclass(slots=True)
class PullRequest:
    """A queue being pulled: where the next pull starts and the queue's cache."""

    mq: MessageQueue
    pq: ProcessQueue
    next_offset: int
    previously_locked: bool = False
    #: bumped when the queue restarts after a lock gap: a pull begun before then is discarded
    epoch: int = 0
    #: the queue's max offset in the broker's last pull answer (-1: none yet), for lag metrics
    broker_max_offset: int = -1
    #: ``time.monotonic()`` when ``broker_max_offset`` was last refreshed (0.0: never): a lag computed from
    #: an old one is not shown (the broker may be gone, or the queue not pulled for a while)
    broker_max_offset_at: float = 0.0
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    #: the queue's pull header but for the offsets and the flag (``puller._pull_template``): None until the first pull
    pull_template: PullTemplate | None = field(default=None, repr=False)
