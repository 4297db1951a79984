"""Which orderly batches ran in this worker with every message SUCCESS: the gate of a chained batch.

The orderly service hands a queue's next batch over while the current one
runs; that batch names the one ahead of it (``Run.after``) and waits behind it
in this worker's pipe. It may run only if the batch ahead ran here, just
before, and succeeded in full: after a failure (or a skip, a time limit, a
batch that ran elsewhere) nothing of the queue runs until the consume service
has resolved the failure, so the chained batch is answered NOT_RUN instead.
"""

from __future__ import annotations

KEPT = 256  # ids remembered: a chained batch comes within a few batches of the one it follows


class CleanBatches:
    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[int, None] = {}  # insertion-ordered: the oldest first

    def add(self, batch_id: int) -> None:
        """An orderly batch ran here with every message SUCCESS."""
        ids = self._ids
        ids[batch_id] = None
        if len(ids) > KEPT:
            del ids[next(iter(ids))]

    def may_follow(self, after: int) -> bool:
        """Whether a batch chained to ``after`` may run (once: the id is forgotten)."""
        if after not in self._ids:
            return False
        del self._ids[after]
        return True

    def __len__(self) -> int:
        return len(self._ids)
