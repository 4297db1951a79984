"""The lag exporter's readings: every group in turn from the brokers alone, the latest reading of each kept.

What ``rmqrun exporter`` serves on ``/metrics`` (:mod:`rmqrun.cli.exporter.command`
renders it at scrape time); a program can drive a :class:`LagExporter` itself
(``await exporter.read_all()`` on its own schedule) and read
``exporter.readings``.

A group that cannot be read (its broker down, a refusal) has no rows until it
can be read again, never the last good numbers, and ``ok`` False: a stale lag
that looks healthy is the worst answer during an outage. Failures are logged
when they start (with the cause), at most once a minute while they last, and
when they end.

A group no broker knows (no stored offsets, no online consumer, no
subscription: a typo, or a group not deployed yet) reads fine with no rows,
which a lag alert cannot tell from "nothing to report": ``known`` is False
for it and a warning says so when it is first seen unknown (and a line again
whenever that changes).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Sequence

from loguru import logger

from rmqrun.admin.status import group_view
from rmqrun.client.failure_log import FailureLog
from rmqrun.client.group_lag import CommitClock, QueueLag, dead_lettered, read_group_lag
from rmqrun.client.instance import ClientInstance
from rmqrun.errors import RmqrunError
from rmqrun.model import MessageQueue
from rmqrun.namespace import wrap


@dataclass
class GroupReading:
    """The latest reading of one group; ``rows`` is empty while the group cannot be read."""

    group: str
    rows: Sequence[QueueLag] = ()
    ok: bool = False
    read_at: float | None = None
    read_seconds: float = 0.0
    failures: int = 0
    #: messages %DLQ%<group> ever received (None until read)
    dead_lettered: int | None = None
    #: per queue, when its committed offset last moved (CommitClock)
    commits: dict[MessageQueue, float] = field(default_factory=dict)
    #: whether any broker knows the group (None until read, or when an old broker cannot say)
    known: bool | None = None


class LagExporter:
    """Reads every group in turn on the loop; the collector renders the latest readings at scrape time."""

    def __init__(self, instance: ClientInstance, groups: Sequence[str], namespace: str | None) -> None:
        self.instance = instance
        self.namespace = namespace
        self.readings = {g: GroupReading(g) for g in groups}
        self.started_at = time.time()
        self._clock = CommitClock()
        #: a group that cannot be read is one incident: a line when it starts, a summary at most every
        #: ``log_repeat_interval``, a line when it is read again (``client/failure_log.py``)
        self._failures = FailureLog()

    async def read_all(self) -> None:
        for reading in self.readings.values():
            await self._read(reading)

    async def _read(self, reading: GroupReading) -> None:
        began = time.monotonic()
        try:
            rows = await read_group_lag(self.instance, wrap(self.namespace, reading.group))
            dead = await dead_lettered(self.instance, wrap(self.namespace, reading.group))
            known = True if rows else await self._known(reading.group)
        except (RmqrunError, OSError, asyncio.TimeoutError) as exc:  # name server or broker silent, a refusal
            reading.rows, reading.ok = (), False
            reading.failures += 1
            self._failures.failed(reading.group, f"group {reading.group}:", exc,
                                  state="cannot read its lag (no lag series until it can)")
            return
        now = time.time()
        reading.rows, reading.ok, reading.read_at, reading.dead_lettered = rows, True, now, dead
        reading.read_seconds = time.monotonic() - began
        reading.commits = {r.mq: self._clock.observe(reading.group, r.mq, r.consumer_offset, now) for r in rows}
        self._failures.recovered(reading.group)
        self._note_known(reading, known)

    async def _known(self, group: str) -> bool | None:
        """Whether a broker has stored offsets, an online consumer or a subscription of the group (as
        ``rmqrun status``); None when a broker too old for GET_CONSUME_STATS cannot say."""
        view = await group_view(self.instance, wrap(self.namespace, group))
        if view is None:
            return None
        return bool(view.committed or view.subscribed or view.online)

    def _note_known(self, reading: GroupReading, known: bool | None) -> None:
        """One line when a group is first seen unknown, one each time that changes (never one per reading)."""
        before, reading.known = reading.known, known
        if known is False and before is not False:
            logger.warning("group {}: no broker knows it (no stored offsets, online consumers or subscription: a "
                           "typo in --group, or not deployed yet); rmqrun_exporter_group_known is 0 and it has no "
                           "lag series", reading.group)
        elif known and before is False:
            logger.info("group {}: known to the brokers now; its lag is exported", reading.group)
