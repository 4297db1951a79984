"""The worker's side of the handler contract: orderly return values as pipe statuses.

The contract itself (loading, results, the concurrent mapping) is
:mod:`rmqrun.handler`, shared with the Spark runner; only the orderly mapping
needs the pipe's :class:`~rmqrun.pipe.wire.Status`, so it stays here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmqrun.handler.outcome import bad_result, is_plain_success
from rmqrun.handler.results import Commit, Rollback, SuspendCurrentQueue
from rmqrun.pipe.wire import Status

__all__ = ["OrderlyOutcome", "map_orderly"]


@dataclass(frozen=True, slots=True)
class OrderlyOutcome:
    """The orderly status of the whole call; ``warning`` is set for Java's "illegal result" case."""

    status: Status
    suspend_ms: int = -1
    warning: str | None = None


def map_orderly(value: Any, handler_ref: str, *, auto_commit: bool = True) -> OrderlyOutcome:
    """An orderly-mode return value (raises BadResultError); plain values as
    :func:`~rmqrun.handler.outcome.is_plain_success` says, ``False`` as ``SuspendCurrentQueue()``."""
    if is_plain_success(value):
        return OrderlyOutcome(Status.SUCCESS)
    if value is False:  # "not done": the queue is suspended and the messages delivered again, as on a raise
        return OrderlyOutcome(Status.SUSPEND)
    if isinstance(value, SuspendCurrentQueue):
        return OrderlyOutcome(Status.SUSPEND, value.ms)
    if isinstance(value, (Commit, Rollback)):
        if auto_commit:
            return OrderlyOutcome(Status.SUCCESS, warning=(
                f"handler '{handler_ref}' returned {type(value).__name__}() but the consumer commits "
                f"automatically; treating it as SUCCESS (as the Java client does)"))
        return OrderlyOutcome(Status.COMMIT if isinstance(value, Commit) else Status.ROLLBACK)
    raise bad_result(value, handler_ref, orderly=True)
