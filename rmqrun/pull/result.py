"""The result of one pull: a status, where to continue, the queue's bounds and the messages.

:class:`PullStatus` is the client layer's enum (one definition for the push
engine and the pull API). What each status tells the caller:

* ``FOUND`` – messages were read from ``offset``; ``messages`` holds those whose
  tag matches the expression. It may be empty: the broker filters by the tag's
  hash only, and the client drops hash collisions afterwards, as Java does.
* ``NO_NEW_MSG`` – ``offset`` is the queue's end (for a blocking pull: nothing
  arrived while the broker held it).
* ``NO_MATCHED_MSG`` – everything the broker scanned was filtered out by tag;
  continue at ``next_begin_offset``.
* ``OFFSET_ILLEGAL`` – ``offset`` is outside ``[min_offset, max_offset]``; the
  broker suggests ``next_begin_offset``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqrun.client.broker import PullStatus
from rmqrun.model import Message

__all__ = ["PullResult", "PullStatus"]


@dataclass(slots=True)
class PullResult:
    """One pull's answer (Java ``PullResult``); ``remark`` is the broker's store status
    (e.g. ``OFFSET_TOO_SMALL`` for an OFFSET_ILLEGAL answer), for error messages."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[Message] = field(default_factory=list)
    remark: str | None = None

    @property
    def found(self) -> bool:
        return self.status is PullStatus.FOUND
