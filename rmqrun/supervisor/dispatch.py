"""Which worker gets which batch: pure bookkeeping, no processes, no I/O.

Two policies, matching the two consume modes:

* **Orderly** queues are pinned: a queue key maps to one worker by a stable
  hash (crc32 of ``str(key)`` mod the number of workers; not ``hash()``, which
  is randomised per process), and one batch of a queue is in flight, or
  several chained ones: a batch may *follow* the queue's batch in flight
  (``assign(..., follow=id)``) and then goes to that batch's worker, which
  runs it only if the batch it follows ran cleanly (``Batch.after``).
  Because the pin is computed only when a queue has nothing in flight, a
  change in the number of workers re-pins a queue at the first moment that
  cannot reorder it, and never earlier; a queue whose pin moved is not chained
  any further, so that moment comes even while its backlog lasts.
* **Concurrent** batches go to the least-loaded worker (load = messages in
  flight), ties broken round-robin so idle workers share the work.

Every worker has a bound on messages in flight, so a slow worker is not
buried under a queue of batches and memory stays bounded; a batch larger than
the bound is only given to an idle worker.

Pipelining (a concurrent batch sent to a busy worker, to run after its current
one) saves the worker a round trip to the supervisor, which matters only when
batches are short. Its risk: if the running call hangs, the queued batch
waits for that call's time limit (up to consumeTimeout, 15 min) while other
workers may be idle, and its messages hold back the queue's committed offset
all that time. So a busy worker is given a concurrent batch only while the
work it already holds is expected to take at most ``pipeline_budget``
seconds: messages in flight times the measured time per message, or, if
longer, how long its current batch has been running (a hung call makes that
grow, so nothing more is queued behind it). Short batches (a no-op handler)
still pipeline up to the message bound; long ones go to idle workers only.

A worker stuck in a long handler call (:mod:`rmqrun.supervisor.long_calls`
says which) or not responding at all (:mod:`rmqrun.supervisor.liveness`),
both through :meth:`Dispatcher.set_stuck`, is avoided while another worker
is not: an orderly queue that is pinned anew while it is stuck (the pin is
computed only when the queue has nothing in flight, so this cannot reorder
it: the pin moves with the work, once nothing of the queue can still run
there) hashes over the other workers; concurrent batches go to the others.

A ``threads`` or ``asyncio`` worker runs up to ``lanes`` batches at once
(:mod:`rmqrun.worker.lanes`): a concurrent batch given to it while it holds
fewer runs at once, in a lane of its own, behind nothing, so it needs no
pipeline budget; only the message bound applies (the executor sizes it for
``worker_concurrency`` calls running and as many waiting). Orderly queues
and keys are pinned as above: batches of different ones pinned to a worker
run there at once, one queue's (or key's) one at a time. With ``lanes`` 1
(the process class) nothing changes.

When no worker can take a batch,
:meth:`Dispatcher.assign` returns ``None``: the caller keeps the batch and
tries again after the next :meth:`Dispatcher.done` (back-pressure, not an
unbounded queue).
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable

from rmqrun.pipe.wire import ConsumeMode

DEFAULT_MAX_INFLIGHT_MESSAGES = 64
"""Two pull batches (pullBatchSize 32): one running, one waiting in the pipe, so a worker never idles."""

PIPELINE_BUDGET_S = 0.05
"""Expected work (seconds) a busy worker may hold when it is given one more concurrent batch
(``math.inf``: pipeline up to the message bound, whatever the batches cost)."""

_EWMA = 0.2  # weight of a new sample in the per-message time estimate


_CRC_CACHE_KEYS = 4096  # orderly keys whose crc32 a Dispatcher remembers at once


def key_crc(key: Hashable) -> int:
    """crc32 of ``str(key)``: the same in every process and every run (what a pin is taken modulo)."""
    return zlib.crc32(str(key).encode("utf-8"))


def stable_index(key: Hashable, n: int) -> int:
    """:func:`key_crc` mod ``n``."""
    return key_crc(key) % n


@dataclass(slots=True)
class _Flight:
    worker_id: int
    size: int
    queue_key: Hashable
    orderly: bool


class Dispatcher:
    """Assigns batches to worker ids and accounts for what is in flight."""

    def __init__(self, worker_ids: Iterable[int], *,
                 max_inflight_messages: int = DEFAULT_MAX_INFLIGHT_MESSAGES,
                 pipeline_budget: float = PIPELINE_BUDGET_S,
                 clock: Callable[[], float] = time.monotonic, lanes: int = 1) -> None:
        if max_inflight_messages < 1:
            raise ValueError(f"max_inflight_messages must be >= 1, got {max_inflight_messages}")
        self.max_inflight_messages = max_inflight_messages
        self.pipeline_budget = pipeline_budget
        #: batches a worker runs at once (threads / asyncio lanes; 1 for the process class)
        self.lanes = max(1, lanes)
        self._clock = clock
        #: measured seconds per message (batch run time / size, moving average); None until a batch
        #: has finished, and until then nothing is pipelined (a first batch may well hang)
        self.per_message_s: float | None = None
        self._ids: list[int] = []
        self._load: dict[int, int] = {}
        self._batches: dict[int, int] = {}  # batches in flight per worker
        self._head_since: dict[int, float] = {}  # when the worker (probably) started its current batch
        self._flights: dict[int, _Flight] = {}
        self._busy_queues: dict[Hashable, int] = {}  # orderly queue key -> its batches in flight
        self._rr = 0
        #: workers stuck, per watch that says so ("long call", "not responding"): new pins avoid them
        self._stuck_by: dict[str, frozenset[int]] = {}
        self.stuck: frozenset[int] = frozenset()
        #: crc32 of each orderly key's text, so a job's pin is a dict look-up, not a str() and a crc32
        #: (what :func:`stable_index` computes; bounded: key mode may pin many keys)
        self._crcs: dict[Hashable, int] = {}
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
            self._batches.setdefault(wid, 0)
        for wid in [w for w, load in self._load.items() if load == 0 and w not in self._ids]:
            del self._load[wid]
            self._batches.pop(wid, None)
            self._head_since.pop(wid, None)

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

    def _crc(self, queue_key: Hashable) -> int:
        """:func:`key_crc` of the key, remembered per key (so a pin is :func:`stable_index`'s)."""
        crc = self._crcs.get(queue_key)
        if crc is None:
            if len(self._crcs) >= _CRC_CACHE_KEYS:
                self._crcs.clear()
            crc = self._crcs[queue_key] = key_crc(queue_key)
        return crc

    def pinned_worker(self, queue_key: Hashable) -> int | None:
        """The worker an orderly queue maps to with the current worker set (None if there is none);
        while that one is stuck in a long call, one of the others (by the same hash over them)."""
        ids = self._ids
        if not ids:
            return None
        crc = self._crc(queue_key)
        worker = ids[crc % len(ids)]
        if worker in self.stuck:
            others = [w for w in ids if w not in self.stuck]
            if others:
                return others[crc % len(others)]
        return worker

    def set_stuck(self, worker_ids: Iterable[int], why: str = "long call") -> None:
        """The workers one watch now finds stuck (replaces that watch's previous set)."""
        self._stuck_by[why] = frozenset(worker_ids)
        self.stuck = frozenset().union(*self._stuck_by.values())

    def _takers(self) -> list[int]:
        """The workers concurrent batches may go to: those not stuck, or all when every one is."""
        if self.stuck and not self.stuck.issuperset(self._ids):
            return [w for w in self._ids if w not in self.stuck]
        return self._ids

    def _has_room(self, worker_id: int, size: int) -> bool:
        load = self._load[worker_id]
        return load == 0 or load + size <= self.max_inflight_messages

    def _may_pipeline(self, worker_id: int, size: int, now: float) -> bool:
        """Whether a concurrent batch of ``size`` may go to this worker now (see the module docstring)."""
        load = self._load[worker_id]
        if load == 0:
            return True
        if load + size > self.max_inflight_messages:
            return False
        if self._batches[worker_id] < self.lanes:  # a free lane: it runs at once, waiting behind nothing
            return True
        avg = self.per_message_s
        held = math.inf if avg is None else max(load * avg, now - self._head_since.get(worker_id, now))
        return held <= self.pipeline_budget

    def has_room(self, size: int = 1) -> bool:
        """Whether some worker could take a concurrent batch of ``size`` messages now."""
        now = self._clock()
        return any(self._may_pipeline(w, size, now) for w in self._takers())

    # ------------------------------------------------------------------ decisions
    def assign(self, batch_id: int, queue_key: Hashable, mode: ConsumeMode, size: int,
               follow: int = 0) -> int | None:
        """The worker id for this batch, recorded as in flight; or None: wait and try again later.

        ``follow`` (orderly): the id of the queue's batch in flight this one is chained to; it goes
        to that batch's worker. Without it, an orderly batch waits until its queue has nothing in flight.
        """
        if batch_id in self._flights:
            raise ValueError(f"batch {batch_id} is already in flight")
        if size < 1:
            raise ValueError(f"a batch has at least one message, got size {size}")
        if mode is ConsumeMode.ORDERLY:
            if follow:
                ahead = self._flights.get(follow)
                if ahead is None or ahead.queue_key != queue_key:
                    return None
                worker = ahead.worker_id
                if not self._ids or self._ids[self._crc(queue_key) % len(self._ids)] != worker:
                    # workers were added or removed and the queue's pin moved: chaining would keep it on its
                    # old worker for as long as its backlog lasts (a worker added for a backlog would idle, a
                    # removed one would never drain). Wait for the chain to end: the queue is pinned anew at
                    # the first moment that cannot reorder it. (A stuck worker keeps its chain: it is still
                    # the queue's pin, and long_calls.py takes the work behind a long call back.)
                    return None
            elif queue_key in self._busy_queues:
                return None
            else:
                worker = self.pinned_worker(queue_key)
            # a batch chained behind its queue's own skips the bound: the queue has at most a
            # couple in flight, and their messages are its cached ones (no extra memory)
            if worker is None or not (follow or self._has_room(worker, size)):
                return None
            self._busy_queues[queue_key] = self._busy_queues.get(queue_key, 0) + 1
        else:
            worker = self._least_loaded(size)
            if worker is None:
                return None
        self._flights[batch_id] = _Flight(worker, size, queue_key, mode is ConsumeMode.ORDERLY)
        self._load[worker] += size
        if self._batches[worker] == 0:
            self._head_since[worker] = self._clock()
        self._batches[worker] += 1
        return worker

    def _least_loaded(self, size: int) -> int | None:
        ids = self._takers()
        n = len(ids)
        best: int | None = None
        best_load = 0
        now = -1.0
        for k in range(n):
            wid = ids[(self._rr + k) % n]
            load = self._load[wid]
            if best is not None and load >= best_load:
                continue
            if load:
                if now < 0:
                    now = self._clock()
                if not self._may_pipeline(wid, size, now):
                    continue
            best, best_load = wid, load
            if load == 0:
                break
        if n:
            self._rr = (self._rr + 1) % n
        return best

    def done(self, batch_id: int, *, ran: bool = True) -> bool:
        """A batch finished (``ran``) or was given back by the pool; False if it was not in flight.

        A worker runs its batches in the order it got them, so a finished batch was its
        current one: it ran since ``_head_since``, and the next one starts now.
        """
        flight = self._flights.pop(batch_id, None)
        if flight is None:
            return False
        wid = flight.worker_id
        now = self._clock()
        if ran:
            sample = (now - self._head_since.get(wid, now)) / flight.size
            avg = self.per_message_s
            self.per_message_s = sample if avg is None else avg + _EWMA * (sample - avg)
        self._batches[wid] = max(0, self._batches.get(wid, 1) - 1)
        self._head_since[wid] = now
        load = self._load[wid] - flight.size
        if load == 0 and wid not in self._ids:
            del self._load[wid]
            self._batches.pop(wid, None)
            self._head_since.pop(wid, None)
        else:
            self._load[wid] = load
        if flight.orderly:
            left = self._busy_queues.get(flight.queue_key, 0) - 1
            if left > 0:
                self._busy_queues[flight.queue_key] = left
            else:
                self._busy_queues.pop(flight.queue_key, None)
        return True
