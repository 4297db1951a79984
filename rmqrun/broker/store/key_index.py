"""The message key index behind QUERY_MESSAGE (Java's ``IndexService`` / index files, in memory).

RocketMQ indexes every message under ``topic#key`` for each of its ``KEYS``
(space-separated) and under ``topic#UNIQ_KEY`` (the client-side message id),
so ``mqadmin queryMsgByKey`` and ``queryMsgByUniqueKey`` find a message without
knowing its queue or offset.

Durability choice: the index is *derived state, rebuilt from the commit log*,
not a file of its own. It keeps the commit-log position it has indexed up to
and catches up lazily before each query, scanning only the records written
since. After a restart or a kill -9 it starts from the commit log's minimum,
so the first query scans the whole (recovered) log once; everything the
recovered log holds is found, and nothing it lost can be. That trades a
one-off scan (fine at the sizes an embedded broker holds) for having no second
file that could disagree with the log after a crash. Entries whose record has
been deleted by retention are dropped once the log's minimum offset passes them.
A write rolled back for lack of space may have been indexed in between (the index
reads the log without the put lock); the next position may then hold another
record, so after any cut of the log's tail the index starts again from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from loguru import logger

from .errors import StoreError
from .record import parse_properties

if TYPE_CHECKING:
    from .message_store import MessageStore

PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_CLIENT_MESSAGE_ID_KEYIDX"
PROPERTY_UNIQ_KEY_SHORT = "UNIQ_KEY"
PROPERTY_TRAN_PREPARED = "TRAN_MSG"
KEY_SEPARATOR = " "


@dataclass(frozen=True, slots=True)
class IndexHit:
    commit_log_offset: int
    size: int
    store_timestamp: int


class KeyIndex:
    """``topic#key`` → commit-log positions, caught up from the commit log on demand."""

    def __init__(self, store: "MessageStore") -> None:
        self._store = store
        self._entries: dict[str, list[IndexHit]] = {}
        self._indexed_to = -1
        self._floor = 0  # entries below this commit-log offset were dropped (retention moved the minimum)
        self._cuts = store.commit_log_cuts  # the log's tail cuts this index has seen
        #: Position and store time of the last record indexed (QueryMessageResponseHeader).
        self.last_update_offset = 0
        self.last_update_timestamp = 0

    def catch_up(self) -> int:
        """Index every record written since the last call; returns how many were indexed."""
        cuts = self._store.commit_log_cuts
        if cuts != self._cuts:  # a rolled-back write may be indexed: what is at its position now is not it
            self._cuts = cuts
            self._entries.clear()
            self._indexed_to = -1
        self._prune(self._store.commit_log_min_offset)
        start = max(self._indexed_to, self._store.commit_log_min_offset)
        end = self._store.commit_log_max_offset
        if start >= end:
            self._indexed_to = max(self._indexed_to, start)
            return 0
        count = 0
        try:
            count = self._scan(start, end)
        except (OSError, ValueError, StoreError) as exc:
            # retention deleted the file being read (it runs on its own thread): the next query
            # starts again at the log's new minimum
            logger.warning("key index stopped at {}: {}; it resumes at the next query", self._indexed_to, exc)
        return count

    def _scan(self, start: int, end: int) -> int:
        count = 0
        for pos, header, buf, off in self._store.scan_records(start, end):
            self._indexed_to = pos + header.total_size
            count += 1
            raw = buf[off + header.properties_pos: off + header.properties_pos + header.properties_len]
            props = parse_properties(raw)
            if props.get(PROPERTY_TRAN_PREPARED) == "true":
                continue  # half messages are indexed when committed, as in Java
            hit = IndexHit(pos, header.total_size, header.store_timestamp)
            keys = [k for k in props.get(PROPERTY_KEYS, "").split(KEY_SEPARATOR) if k]
            uniq = props.get(PROPERTY_UNIQ_KEY_SHORT) or props.get(PROPERTY_UNIQ_KEY)
            if uniq:
                keys.append(uniq)
            for key in dict.fromkeys(keys):
                self._entries.setdefault(f"{header.topic}#{key}", []).append(hit)
            self.last_update_offset = pos
            self.last_update_timestamp = header.store_timestamp
        return count

    def _prune(self, floor: int) -> None:
        """Forget entries of records retention deleted, so the index does not outgrow the log."""
        if floor <= self._floor:
            return
        self._floor = floor
        for key in list(self._entries):
            kept = [h for h in self._entries[key] if h.commit_log_offset >= floor]
            if kept:
                self._entries[key] = kept
            else:
                del self._entries[key]

    def __len__(self) -> int:
        """Keys indexed (``topic#key``)."""
        return len(self._entries)

    def query(self, topic: str, key: str, max_num: int, begin_ms: int = 0,
              end_ms: int = 2**63 - 1) -> list[IndexHit]:
        """Up to ``max_num`` messages of ``topic`` indexed under ``key``, stored in [begin, end], oldest first."""
        self.catch_up()
        floor = self._store.commit_log_min_offset
        hits = [h for h in self._entries.get(f"{topic}#{key}", ())
                if h.commit_log_offset >= floor and begin_ms <= h.store_timestamp <= end_ms]
        return hits[-max_num:] if max_num > 0 else []
