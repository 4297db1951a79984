"""Which worker gets which batch: pure bookkeeping, no processes, no I/O.

Two policies, matching the two consume modes:

* **Orderly** queues are pinned: a queue key maps to one worker by a stable
  hash (crc32 of ``str(key)`` mod the number of workers; not ``hash()``, which
  is randomised per process), and at most one batch of a queue is in flight.
  Because the pin is computed only when a queue has nothing in flight, a
  change in the number of workers re-pins a queue at the first moment that
  cannot reorder it, and never earlier.
* **Concurrent** batches go to the least-loaded worker (load = messages in
  flight), ties broken round-robin so idle workers share the work.

Every worker has a bound on messages in flight, so a slow worker is not
buried under a queue of batches and memory stays bounded; a batch larger than
the bound is only given to an idle worker. When no worker can take a batch,
:meth:`Dispatcher.assign` returns ``None``: the caller keeps the batch and
tries again after the next :meth:`Dispatcher.done` (back-pressure, not an
unbounded queue).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Hashable, Iterable

from rmqrun.supervisor.wire import ConsumeMode

DEFAULT_MAX_INFLIGHT_MESSAGES = 64
"""Two pull batches (pullBatchSize 32): one running, one waiting in the pipe, so a worker never idles."""


def stable_index(key: Hashable, n: int) -> int:
    """crc32 of ``str(key)`` mod ``n``: the same in every process and every run."""
    return zlib.crc32(str(key).encode("utf-8")) % n


@dataclass(slots=True)
class _Flight:
    worker_id: int
    size: int
    queue_key: Hashable
    orderly: bool


class Dispatcher:
    """Assigns batches to worker ids and accounts for what is in flight."""

    def __init__(self, worker_ids: Iterable[int], *,
                 max_inflight_messages: int = DEFAULT_MAX_INFLIGHT_MESSAGES) -> None:
        if max_inflight_messages < 1:
            raise ValueError(f"max_inflight_messages must be >= 1, got {max_inflight_messages}")
        self.max_inflight_messages = max_inflight_messages
        self._ids: list[int] = []
        self._load: dict[int, int] = {}
        self._flights: dict[int, _Flight] = {}
        self._busy_queues: dict[Hashable, int] = {}
        self._rr = 0
        self.set_workers(worker_ids)

    # ------------------------------------------------------------------ workers
    @property
    def worker_ids(self) -> list[int]:
        return list(self._ids)

    def set_workers(self, worker_ids: Iterable[int]) -> None:
        """The pool's current worker ids (after add/remove). In-flight accounting is kept."""
        self._ids = sorted(set(worker_ids))
        for wid in self._ids:
            self._load.setdefault(wid, 0)
        for wid in [w for w, load in self._load.items() if load == 0 and w not in self._ids]:
            del self._load[wid]

    # ------------------------------------------------------------------ queries
    def load(self, worker_id: int) -> int:
        """Messages in flight on a worker."""
        return self._load.get(worker_id, 0)

    @property
    def in_flight(self) -> int:
        """Batches in flight."""
        return len(self._flights)

    def is_busy(self, queue_key: Hashable) -> bool:
        """True while an orderly queue has a batch in flight."""
        return queue_key in self._busy_queues

    def pinned_worker(self, queue_key: Hashable) -> int | None:
        """The worker an orderly queue maps to with the current worker set (None if there is none)."""
        if not self._ids:
            return None
        return self._ids[stable_index(queue_key, len(self._ids))]

    def _has_room(self, worker_id: int, size: int) -> bool:
        load = self._load[worker_id]
        return load == 0 or load + size <= self.max_inflight_messages

    def has_room(self, size: int = 1) -> bool:
        """Whether some worker could take a concurrent batch of ``size`` messages now."""
        return any(self._has_room(w, size) for w in self._ids)

    # ------------------------------------------------------------------ decisions
    def assign(self, batch_id: int, queue_key: Hashable, mode: ConsumeMode, size: int) -> int | None:
        """The worker id for this batch, recorded as in flight; or None: wait and try again later."""
        if batch_id in self._flights:
            raise ValueError(f"batch {batch_id} is already in flight")
        if size < 1:
            raise ValueError(f"a batch has at least one message, got size {size}")
        if mode is ConsumeMode.ORDERLY:
            if queue_key in self._busy_queues:
                return None
            worker = self.pinned_worker(queue_key)
            if worker is None or not self._has_room(worker, size):
                return None
            self._busy_queues[queue_key] = batch_id
        else:
            worker = self._least_loaded(size)
            if worker is None:
                return None
        self._flights[batch_id] = _Flight(worker, size, queue_key, mode is ConsumeMode.ORDERLY)
        self._load[worker] += size
        return worker

    def _least_loaded(self, size: int) -> int | None:
        ids = self._ids
        n = len(ids)
        best: int | None = None
        best_load = 0
        for k in range(n):
            wid = ids[(self._rr + k) % n]
            load = self._load[wid]
            if (load == 0 or load + size <= self.max_inflight_messages) and (best is None or load < best_load):
                best, best_load = wid, load
                if load == 0:
                    break
        if n:
            self._rr = (self._rr + 1) % n
        return best

    def done(self, batch_id: int) -> bool:
        """A batch finished or was given back by the pool; False if it was not in flight."""
        flight = self._flights.pop(batch_id, None)
        if flight is None:
            return False
        load = self._load[flight.worker_id] - flight.size
        if load == 0 and flight.worker_id not in self._ids:
            del self._load[flight.worker_id]
        else:
            self._load[flight.worker_id] = load
        if flight.orderly and self._busy_queues.get(flight.queue_key) == batch_id:
            del self._busy_queues[flight.queue_key]
        return True
