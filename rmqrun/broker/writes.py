"""What one put through the broker's single door returns: where it landed, or that it was not fsync'ed in time.

:meth:`rmqrun.broker.broker.Broker.put_messages` produces these and the send processor turns them into
answers. They live apart from :mod:`rmqrun.broker.broker` so a processor can name them without importing the
``Broker`` that registers it (the processors see the broker only through
:class:`rmqrun.broker.processors.context.BrokerContext`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqrun.broker.store import PutResult
from rmqrun.errors import RmqrunError


class FlushTimeout(RmqrunError):
    """Stored, but not fsync'ed within the timeout (answered FLUSH_DISK_TIMEOUT)."""

    def __init__(self, results: list[PutResult]) -> None:
        super().__init__("flush timed out")
        self.results = results


@dataclass(frozen=True, slots=True)
class Stored:
    """Where one put landed, with the message as finally stored (topic may be the schedule topic)."""

    result: PutResult
    topic: str
    queue_id: int
    offset_msg_id: str
