"""A consumer group's dead letters (``%DLQ%<group>``): list them, find one, send them back.

The reading and the re-drive themselves are the pull consumer's
(:mod:`rmqrun.pull.dead_letters`, :mod:`rmqrun.pull.redrive`); this module is
what an operator asks of them, as calls a program can make: every function
takes a :class:`DlqTarget` (the cluster, the group, the group whose offsets
record how far the re-drive went) and opens and closes its own clients.
Reading never commits anything but the re-drive's own offsets, so a second
:func:`redrive` moves none of what the first moved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, Callable

from rmqrun.client.producer import Producer
from rmqrun.errors import ConfigError
from rmqrun.model import Message, MessageQueue
from rmqrun.pull import AsyncPullConsumer
from rmqrun.pull.dead_letters import DeadLetterQueue, DlqFilter, QueueBounds, UndecodableRecord
from rmqrun.pull.redrive import Moved, RedriveReport, Redriver, redrive_group
from rmqrun.remoting.security import ClientSecurity


@dataclass(frozen=True)
class DlqTarget:
    """Where to connect and which group's DLQ to read; ``redrive_group`` holds the re-drive offsets
    (default ``<group>-redrive``)."""

    namesrv: str
    group: str
    redrive_group: str = ""
    security: ClientSecurity | None = None
    namespace: str | None = None

    def __post_init__(self) -> None:
        if not self.redrive_group:
            object.__setattr__(self, "redrive_group", redrive_group(self.group))

    def consumer(self) -> AsyncPullConsumer:
        """A pull consumer of the re-drive group: what reads the DLQ (closed by its ``async with``)."""
        return AsyncPullConsumer(self.namesrv, self.redrive_group, namespace=self.namespace,
                                 security=self.security, instance_name="rmqrun-dlq")


@dataclass(frozen=True)
class DeadLetter:
    """One record of the DLQ, with how far the re-drive group got on its queue (-1: nowhere yet)."""

    mq: MessageQueue
    item: Message | UndecodableRecord
    redriven_to: int


async def list_dead_letters(target: DlqTarget, selected: DlqFilter | None = None, limit: int | None = None,
                            queues: list[QueueBounds] | None = None) -> AsyncIterator[DeadLetter]:
    """Every dead letter ``selected`` matches, queue by queue, oldest offset first, at most ``limit``.

    An undecodable record is yielded only when no filter is active (nothing can be matched in it).
    ``queues``, when given, receives each DLQ queue's bounds as it is reached (every queue, also past the
    limit): what ``rmqrun dlq list`` sums up on stderr.
    """
    selected = selected or DlqFilter()
    shown = 0
    async with target.consumer() as consumer:
        dead = DeadLetterQueue(consumer, target.group)
        for mq in await dead.queues():
            bounds = await dead.bounds(mq)
            if queues is not None:
                queues.append(bounds)
            async for item in dead.read(mq, bounds.low, bounds.high):
                if limit is not None and shown >= limit:
                    break
                if isinstance(item, UndecodableRecord):
                    if selected.active:
                        continue
                elif not selected.matches(item):
                    continue
                yield DeadLetter(mq, item, bounds.redriven_to)
                shown += 1


async def find_dead_letter(target: DlqTarget, *, msg_id: str | None = None, offset: int | None = None,
                           queue_id: int = 0, broker: str | None = None) -> Message | UndecodableRecord | None:
    """The dead letter with ``msg_id`` (client, broker or original id), or the record at ``offset`` of DLQ queue
    ``queue_id`` (on ``broker``, needed when several brokers have that queue); None when there is none."""
    if (msg_id is None) == (offset is None):
        raise ConfigError("give exactly one of msg_id and offset")
    wanted = DlqFilter(msg_ids=frozenset({msg_id.strip()})) if msg_id else None
    async with target.consumer() as consumer:
        dead = DeadLetterQueue(consumer, target.group)
        queues = await dead.queues()
        if offset is not None:
            queues = [mq for mq in queues if mq.queue_id == queue_id and (not broker or mq.broker_name == broker)]
            if len(queues) > 1:
                raise ConfigError(f"--offset {offset}: %DLQ%{target.group} has queue {queue_id} on several brokers "
                                  f"({', '.join(sorted(mq.broker_name for mq in queues))}): give --broker")
        for mq in queues:
            bounds = await dead.bounds(mq, with_offset=False)
            start, end = (offset, offset + 1) if offset is not None else (bounds.low, bounds.high)
            async for item in dead.read(mq, start, end):
                if wanted is None or (not isinstance(item, UndecodableRecord) and wanted.matches(item)):
                    return item
    return None


async def redrive(target: DlqTarget, selected: DlqFilter | None = None, *, to_topic: str | None = None,
                  dry_run: bool = False, limit: int | None = None,
                  on_moved: Callable[[Moved], None] | None = None) -> RedriveReport:
    """Send the dead letters ``selected`` matches back to their original topic (or ``to_topic``), each once,
    committing the re-drive group's offsets as it goes; ``dry_run`` sends and commits nothing. ``on_moved``
    hears of each message as it is moved (or would be)."""
    producer = None if dry_run else Producer(target.namesrv, target.redrive_group, namespace=target.namespace,
                                             security=target.security)
    try:
        async with target.consumer() as consumer:
            if producer is not None:
                await producer.start()
            return await Redriver(DeadLetterQueue(consumer, target.group), producer, selected or DlqFilter(),
                                  to_topic=to_topic, dry_run=dry_run, limit=limit, namespace=target.namespace,
                                  on_moved=on_moved or (lambda m: None)).run()
    finally:
        if producer is not None:
            await producer.close()
