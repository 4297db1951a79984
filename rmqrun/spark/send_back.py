"""Where one ``rmqrun spark`` task puts the messages its handler failed on, as it goes.

A task never keeps its failures to the end nor returns them to the driver (a
backfill where everything fails would otherwise hold every body in the task's
memory and then in the driver's). Each failure goes, after the handler call
that produced it, to one of:

* :class:`RetrySink` (``--group``): republished to ``%RETRY%<group>`` with the
  properties of Java's send-back fallback, :data:`SEND_EVERY` at a time over one
  client kept for the whole task. A copy that cannot be stored fails the task
  (Spark retries it; nothing is committed past a message that went nowhere).
  Copies sent by an attempt that fails later are sent again by the retry: the
  retry topic gets them at least once, as a push consumer's send-back does.
* :class:`PartSink` (``--failed-to``): streamed to the attempt's own part of the
  file (:mod:`rmqrun.spark.failure_parts`), committed by the driver exactly once.
* :class:`CountSink`: neither given; the failures are only counted.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Protocol

from rmqrun.errors import RmqrunError
from rmqrun.model import Message
from rmqrun.namespace import wrap
from rmqrun.spark.backfill import MAX_RECONSUME_TIMES, FailedMessage, TaskConfig

#: failures republished per round trip of the task's event loop
SEND_EVERY = 256


class RetrySendError(RmqrunError, RuntimeError):
    """Failed messages could not be republished to the retry topic (the task fails; Spark retries it)."""


class FailureSink(Protocol):
    def add(self, f: FailedMessage) -> None: ...

    def close(self) -> None:
        """All added failures are stored (raises when they cannot be)."""

    def abort(self) -> None:
        """The task failed: release what is held; nothing more is promised."""


class CountSink:
    def add(self, f: FailedMessage) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


class PartSink:
    """The attempt's part of ``--failed-to``; ``part`` / ``written`` go into the task's report."""

    def __init__(self, cfg: TaskConfig, partition: int) -> None:
        from rmqrun.spark.failure_parts import PartWriter

        assert cfg.failed_parts is not None
        self.writer = PartWriter(cfg.failed_parts, partition, cfg.failed_parquet)
        self.part: str | None = None

    def add(self, f: FailedMessage) -> None:
        self.writer.add(f)

    def close(self) -> None:
        self.part = self.writer.close()

    def abort(self) -> None:
        self.writer.abort()

    @property
    def written(self) -> int:
        return self.writer.rows


class RetrySink:
    """Republishes to ``%RETRY%<group>`` (RetryPublisher.republish: RETRY_TOPIC, reconsume times + 1,
    ORIGIN_MESSAGE_ID) from one event loop and one client instance kept for the task."""

    def __init__(self, cfg: TaskConfig) -> None:
        self.cfg = cfg
        self.sent = 0
        self._pending: list[FailedMessage] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._instance: Any = None
        self._sender: Any = None

    def add(self, f: FailedMessage) -> None:
        self._pending.append(f)
        if len(self._pending) >= SEND_EVERY:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        batch, self._pending = self._pending, []
        self._loop.run_until_complete(self._send(batch))

    async def _open(self) -> None:
        from rmqrun.client.instance import ClientInstance
        from rmqrun.client.republish import RetryPublisher

        cfg = self.cfg
        self._instance = ClientInstance(cfg.namesrv, instance_name=f"rmqrun-spark-{os.getpid()}",
                                        api_timeout=cfg.timeout, connect_timeout=cfg.timeout, security=cfg.security)
        await self._instance.start()
        # the retry topic and the original topic as the cluster names them (Java wraps both before a send-back)
        self._sender = RetryPublisher(self._instance, wrap(cfg.namespace, cfg.group))

    async def _send(self, batch: list[FailedMessage]) -> None:
        if self._sender is None:
            await self._open()
        cfg = self.cfg
        for f in batch:
            msg = Message(topic=wrap(cfg.namespace, f.topic), body=f.body, properties=dict(f.properties),
                          msg_id=f.msg_id, broker_name=f.broker, queue_id=f.queue_id, queue_offset=f.queue_offset,
                          reconsume_times=f.reconsume_times)
            # ReconsumeLater(delay_level=-1) means "straight to the DLQ": the broker moves a retry message
            # whose reconsume count reached the maximum to %DLQ%<group>.
            times = MAX_RECONSUME_TIMES if f.delay_level == -1 else f.reconsume_times + 1
            if not await self._sender.republish(msg, MAX_RECONSUME_TIMES, times):
                raise RetrySendError(f"could not republish {f.msg_id} ({f.topic} {f.broker}:{f.queue_id}@"
                                     f"{f.queue_offset}) to %RETRY%{cfg.group}")
            self.sent += 1

    async def _shut(self) -> None:
        if self._sender is not None:
            await self._sender.close()
        if self._instance is not None:
            await self._instance.close()
        self._sender = self._instance = None

    def close(self) -> None:
        try:
            self._flush()
        finally:
            self.abort()

    def abort(self) -> None:
        self._pending = []
        if self._loop is not None:
            try:
                self._loop.run_until_complete(self._shut())
            finally:
                self._loop.close()
                self._loop = None


def sink_for(cfg: TaskConfig, partition: int) -> FailureSink:
    if cfg.failures == "retry":
        return RetrySink(cfg)
    if cfg.failures == "parts":
        return PartSink(cfg, partition)
    return CountSink()
