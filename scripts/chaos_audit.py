"""The chaos suite's audit: what the handlers recorded against what the broker holds.

Inputs: the handler's record files (``workers/chaos.py``, one per group, in
call order), the producer's acknowledged sends, the fault log, and what the
broker itself says, read through the pull consumer and the admin calls (every
message stored in the topic and in ``%RETRY%`` / ``%DLQ%``, the committed
offsets against the queues' max offsets).

Checks, per group:

* **lost**: a message stored in the topic (acknowledged or not: a send the
  broker stored but could not answer is still a message) that the group's
  handler never completed; an acknowledged send the broker does not hold;
  anything in ``%DLQ%<group>`` (no handler fails for good here);
* **out of order** (orderly groups): per queue, each completed offset is at most
  one past the previous completion (a rewind to redo work after a fault is
  allowed, a skip is not), and the first one is the queue's first offset;
* **duplicates**: a message completed more than once; it is *explained* when a
  fault was injected between its first and its last completion, or its first
  completion fell inside a fault's window (work in flight at the fault);
* **retry topic**: every message in ``%RETRY%<group>`` was completed;
* **offsets**: the committed offset of every queue (topic and retry topic) is its
  max offset.

Each loss, order violation and duplicate is attributed to a fault: the one
whose window holds the event's time, else the latest one injected before it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable


@dataclass(frozen=True, slots=True)
class Call:
    """One line of a handler record file."""

    event: str
    t: float
    pid: int
    queue: int
    offset: int
    reconsume: int
    msg_id: str
    what: str


def parse_calls(text: str) -> list[Call]:
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 8:  # a line cut by a kill
            continue
        try:
            out.append(Call(parts[0], float(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5]),
                            parts[6], parts[7]))
        except ValueError:
            continue
    return out


def read_calls(path: Path) -> list[Call]:
    return parse_calls(path.read_text(errors="replace")) if path.exists() else []


class RecordTail:
    """Counts the completed calls of a record file as it grows (the suite's progress condition)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pos = 0
        self._partial = b""
        self.ok = 0

    def poll(self) -> int:
        if not self.path.exists():
            return self.ok
        with open(self.path, "rb") as f:
            f.seek(self._pos)
            data = f.read()
        self._pos += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        self.ok += sum(1 for ln in lines if ln.startswith(b"ok "))
        return self.ok


@dataclass
class Fault:
    """One injected fault: when it started, when the system was back (``end``), and what it hit."""

    kind: str
    detail: str
    t_inject: float
    t_recovered: float = 0.0
    t_end: float = 0.0

    def holds(self, t: float) -> bool:
        return self.t_inject <= t <= (self.t_end or self.t_recovered or self.t_inject)


@dataclass(frozen=True, slots=True)
class Stored:
    """A message as the broker holds it."""

    topic: str
    queue: int
    offset: int
    msg_id: str
    store_t: float
    chaos: str


@dataclass
class KindRow:
    injected: int = 0
    affected: int = 0
    lost: int = 0
    out_of_order: int = 0
    duplicates: int = 0


@dataclass
class GroupAudit:
    group: str
    orderly: bool
    stored: int = 0
    completed: int = 0
    lost: list[str] = field(default_factory=list)
    order_violations: list[str] = field(default_factory=list)
    duplicates: int = 0
    unexplained_duplicates: list[str] = field(default_factory=list)
    retry_stored: int = 0
    retry_unhandled: list[str] = field(default_factory=list)
    dlq: list[str] = field(default_factory=list)
    offsets_behind: list[str] = field(default_factory=list)


def attribute(faults: list[Fault], t: float) -> str:
    """The fault kind an event at ``t`` is charged to ("none" before the first fault)."""
    holding = [f for f in faults if f.holds(t)]
    if holding:
        return holding[-1].kind
    before = [f for f in faults if f.t_inject <= t]
    return before[-1].kind if before else "none"


def explained_duplicate(faults: list[Fault], first: float, last: float) -> Fault | None:
    """The fault that explains a message completed at ``first`` and again at ``last``, if any."""
    best = None
    for f in faults:
        if f.holds(first) or first <= f.t_inject <= last:
            best = f
    return best


def check_order(calls: list[Call], start_offsets: dict[int, int]) -> list[tuple[Call, str]]:
    """Per queue, every completion at most one past the previous one; the first at the queue's start."""
    cursor: dict[int, int] = {}
    bad = []
    for c in calls:
        if c.event != "ok":
            continue
        prev = cursor.get(c.queue, start_offsets.get(c.queue, 0) - 1)
        if c.offset > prev + 1:
            bad.append((c, f"queue {c.queue}: offset {c.offset} completed right after {prev} "
                           f"(skipped {prev + 1}..{c.offset - 1}) at {c.t:.3f} by pid {c.pid}"))
        cursor[c.queue] = c.offset
    return bad


def audit_group(group: str, orderly: bool, calls: list[Call], stored: list[Stored], retry: list[Stored],
                dlq: list[Stored], acked: set[str], offsets: dict[str, tuple[int, int]], faults: list[Fault],
                rows: dict[str, KindRow], start_offsets: dict[int, int]) -> GroupAudit:
    """Audit one group; adds its losses, order violations and duplicates to ``rows`` (per fault kind)."""
    a = GroupAudit(group, orderly, stored=len(stored))
    ok_times: dict[str, list[float]] = defaultdict(list)
    for c in calls:
        if c.event == "ok":
            ok_times[c.msg_id].append(c.t)
    a.completed = len(ok_times)
    stored_ids = {m.msg_id for m in stored}
    for m in stored:
        if m.msg_id not in ok_times:
            a.lost.append(f"{m.topic} queue {m.queue} offset {m.offset} msg {m.msg_id} (never completed)")
            rows[attribute(faults, m.store_t)].lost += 1
    for msg_id in sorted(acked - stored_ids):
        a.lost.append(f"acknowledged send {msg_id} is not in the broker")
        rows["none"].lost += 1
    for m in dlq:  # (its original in the topic was never completed, so it is counted lost above)
        a.dlq.append(f"%DLQ% queue {m.queue} offset {m.offset} msg {m.msg_id}")
    if orderly:
        for c, why in check_order(calls, start_offsets):
            a.order_violations.append(why)
            rows[attribute(faults, c.t)].out_of_order += 1
    for msg_id, times in ok_times.items():
        if len(times) < 2:
            continue
        a.duplicates += len(times) - 1
        f = explained_duplicate(faults, times[0], times[-1])
        if f is None:
            a.unexplained_duplicates.append(f"msg {msg_id} completed {len(times)} times at "
                                            + ", ".join(f"{t:.3f}" for t in times))
            rows["none"].duplicates += len(times) - 1
            rows["none"].affected += 1
        else:
            rows[f.kind].duplicates += len(times) - 1
            rows[f.kind].affected += 1
    a.retry_stored = len(retry)
    for m in retry:
        if m.msg_id not in ok_times:
            a.retry_unhandled.append(f"%RETRY% queue {m.queue} offset {m.offset} msg {m.msg_id}")
    for name, (committed, max_offset) in sorted(offsets.items()):
        if committed != max_offset:
            a.offsets_behind.append(f"{name}: committed {committed}, max {max_offset}")
    return a


def handler_fault_rows(calls_by_group: dict[str, list[Call]], rows: dict[str, KindRow]) -> None:
    """Handler faults (raise / hang / leak): injected = misbehaving calls, affected = distinct messages."""
    for calls in calls_by_group.values():
        seen: set[tuple[str, str]] = set()
        for c in calls:
            if c.event in ("raise", "hang", "leak"):
                kind = f"handler_{c.event}"
                rows[kind].injected += 1
                if (kind, c.msg_id) not in seen:
                    seen.add((kind, c.msg_id))
                    rows[kind].affected += 1


def table(rows: dict[str, KindRow], order: Iterable[str]) -> str:
    head = "| fault | injected | messages affected | lost | out of order | duplicates |"
    lines = [head, "|---|---:|---:|---:|---:|---:|"]
    total = KindRow()
    for kind in order:
        r = rows.get(kind)
        if r is None:
            continue
        lines.append(f"| {kind} | {r.injected} | {r.affected} | {r.lost} | {r.out_of_order} | {r.duplicates} |")
        for name in ("injected", "affected", "lost", "out_of_order", "duplicates"):
            setattr(total, name, getattr(total, name) + getattr(r, name))
    lines.append(f"| **total** | {total.injected} | {total.affected} | {total.lost} | {total.out_of_order} | "
                 f"{total.duplicates} |")
    return "\n".join(lines)


def count_events(calls: list[Call]) -> Counter[str]:
    return Counter(c.event for c in calls)
