"""A sink task's rows, each checked as the producer would check it, all of them before the first send.

A row the broker or the producer would refuse (a null or empty body, a body
over the maximum message size, a property or tag holding the separator
characters of the wire format) fails the task *before anything of it is sent*:
otherwise the rows around it are stored, the task fails, and every retry of
the task stores them again. So :func:`checked_rows` reads the whole partition
first, turning each row into a :class:`SinkRow`, and raises naming the first
bad row. Rows are held in memory up to :data:`SPILL_BYTES` of bodies, then in a
temporary file of the executor, so a large partition does not need its size in
memory.
"""

from __future__ import annotations

import pickle
import tempfile
from dataclasses import dataclass
from typing import IO, Any, Iterable, Iterator

from rmqrun.client.producer import MAX_MESSAGE_SIZE, OutgoingMessage, check_topic
from rmqrun.remoting import message_props as m
from rmqrun.spark.errors import SourceError

#: bodies held in memory before the rest of a partition's rows go to a temporary file
SPILL_BYTES = 64 * 1024 * 1024

SYSTEM_PROPERTIES = m.SYSTEM_PROPERTIES


@dataclass(slots=True)
class SinkRow:
    """One row as the message it becomes."""

    body: bytes
    tags: str | None
    keys: str | None
    properties: dict[str, str] | None
    sharding_key: str | None
    #: the row's ``topic`` column, or the sink's option topic where it is null or absent
    topic: str | None = None


class BadRowError(SourceError):
    """A row of the sink's partition cannot become a message; nothing of the task was sent."""


def _problem(row: SinkRow, max_size: int) -> str | None:
    if row.topic is None:
        return "a null topic column and no option topic to fall back to"
    try:
        check_topic(row.topic)
    except ValueError as exc:
        return f"its topic: {exc}"
    if not row.body:
        return "an empty body"
    if len(row.body) > max_size:
        return f"a body of {len(row.body)} bytes, over the maximum message size of {max_size} bytes"
    try:  # the producer's own check (rmqrun.remoting.message_props), so the wording is the same everywhere
        OutgoingMessage(row.body, row.tags, row.keys, row.properties).build_properties()
        if row.sharding_key:
            m.check_property_text("sharding_key", row.sharding_key)
    except ValueError as exc:
        return str(exc)
    return None


def to_sink_row(row: Any) -> SinkRow | None:
    """A Spark row (or dict) as a :class:`SinkRow`; None for a null body."""
    d = row.asDict() if hasattr(row, "asDict") else dict(row)
    d = {k.lower(): v for k, v in d.items()}
    body = d.get("body")
    if body is None:
        return None
    if isinstance(body, str):
        body = body.encode("utf-8")
    props = {k: v for k, v in (d.get("properties") or {}).items()
             if k not in SYSTEM_PROPERTIES and v is not None} or None
    key = d.get("sharding_key")
    return SinkRow(bytes(body), d.get("tags"), d.get("keys"), props, None if key is None else str(key),
                   d.get("topic"))


class HeldRows:
    """Checked rows in order: a list, then a temporary file once :data:`SPILL_BYTES` of bodies are held."""

    def __init__(self, spill_bytes: int = SPILL_BYTES) -> None:
        self.spill_bytes = spill_bytes
        self.count = 0
        self.topics: set[str] = set()
        self._rows: list[SinkRow] = []
        self._bytes = 0
        self._file: IO[bytes] | None = None

    def add(self, row: SinkRow) -> None:
        self.count += 1
        if self._file is None:
            self._rows.append(row)
            self._bytes += len(row.body)
            if self._bytes > self.spill_bytes:
                self._file = tempfile.TemporaryFile(prefix="rmqrun-sink-")
                for held in self._rows:
                    pickle.dump(held, self._file, protocol=pickle.HIGHEST_PROTOCOL)
                self._rows = []
        else:
            pickle.dump(row, self._file, protocol=pickle.HIGHEST_PROTOCOL)

    def __iter__(self) -> Iterator[SinkRow]:
        if self._file is None:
            yield from self._rows
            return
        self._file.seek(0)
        while True:
            try:
                yield pickle.load(self._file)
            except EOFError:
                return

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._rows = []


def checked_rows(topic: str | None, rows: Iterable[Any], max_size: int = MAX_MESSAGE_SIZE) -> HeldRows:
    """Every row of the partition, checked; :class:`BadRowError` naming the first bad one (1-based).
    ``topic`` (the sink's option) fills in a row whose ``topic`` column is null or absent;
    ``held.topics`` is the set of topics the rows go to."""
    held = HeldRows()
    try:
        for n, raw in enumerate(rows, 1):
            row = to_sink_row(raw)
            if row is not None and row.topic is None:
                row.topic = topic
            problem = "a null body" if row is None else _problem(row, max_size)
            if problem:
                named = row.topic if row is not None and row.topic else topic
                where = f"topic {named}: " if named else ""
                raise BadRowError(f"rocketmq sink: {where}row {n} of this task cannot be sent ({problem}); "
                                  f"nothing of this task was sent")
            held.add(row)  # type: ignore[arg-type]
            held.topics.add(row.topic)  # type: ignore[union-attr,arg-type]
    except BaseException:
        held.close()
        raise
    return held
