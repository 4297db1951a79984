"""Consumer offset stores: remote (clustering, the broker keeps them) and local (broadcasting).

Both keep an in-memory table ``MessageQueue -> next offset to consume`` that the
consume path updates after every batch (:meth:`OffsetStore.update`, increase-only
for concurrent consumption so an out-of-order or stale result can never move an
offset backwards), and that is persisted periodically (every 5 s in Java), when a
queue is handed to another consumer, and at shutdown.

The broker calls are not made here: :class:`RemoteOffsetStore` is given two async
callables, ``commit(mq, offset)`` (UPDATE_CONSUMER_OFFSET) and optionally
``fetch(mq) -> int | None`` (QUERY_CONSUMER_OFFSET; ``None`` when the broker has
no offset for the group). Semantics mirror RemoteBrokerOffsetStore and
LocalFileOffsetStore of the Java 4.9.8 client, with the deviations noted on each
method.
"""

from __future__ import annotations

from loguru import logger

import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Iterable
from enum import Enum
from pathlib import Path
from typing import Any

from rmqrun.client.failure_log import FailureLog
from rmqrun.consumer.defaults import LOCAL_OFFSET_FILE_NAME, LOCAL_OFFSET_STORE_DIR
from rmqrun.errors import RmqrunError
from rmqrun.model import MessageQueue
from rmqrun.remoting import fastjson


CommitFn = Callable[[MessageQueue, int], Awaitable[Any]]
FetchFn = Callable[[MessageQueue], Awaitable["int | None"]]

OFFSET_NOT_FOUND = -1
"""read(): no offset known (memory miss, or the store has none)."""
OFFSET_READ_FAILED = -2
"""read(): the store could not be asked (network or broker error); try again later."""


class ReadOffsetType(Enum):
    """Where :meth:`OffsetStore.read` looks (Java ``ReadOffsetType``)."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStoreError(RmqrunError):
    """The local offset file and its backup are both unreadable."""


class OffsetUnreadableError(RmqrunError):
    """The store could not read a queue's committed offset (the broker did not answer, ``OFFSET_READ_FAILED``).

    Raised where a newly assigned queue's start is computed: the queue is not taken
    at a guessed offset, and the next rebalance (or lock) tries again.
    """


class OffsetStore(ABC):
    """The in-memory table shared by both stores; subclasses say where offsets persist."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._table: dict[MessageQueue, int] = {}

    def load(self) -> None:
        """Read persisted offsets at start (only the local store has any)."""

    def update(self, mq: MessageQueue, offset: int, increase_only: bool) -> bool:
        """Set the in-memory offset; True when the stored value changed.

        With ``increase_only`` a smaller offset is ignored (Java's
        compareAndIncreaseOnly). Unlike Java, a negative offset is never stored:
        -1 is every caller's "nothing to commit", and persisting it would tell
        the broker to restart the queue.
        """
        if offset < 0:
            logger.debug("group {}: ignoring negative offset {} for {}", self.group, offset, mq)
            return False
        old = self._table.get(mq)
        if old is None or (offset > old if increase_only else offset != old):
            self._table[mq] = offset
            return True
        return False

    def read_memory(self, mq: MessageQueue) -> int:
        """The in-memory offset, or -1 (what the pull path piggybacks as commitOffset)."""
        return self._table.get(mq, OFFSET_NOT_FOUND)

    async def read(self, mq: MessageQueue, read_type: ReadOffsetType = ReadOffsetType.READ_FROM_MEMORY) -> int:
        """Java ``readOffset``: -1 when unknown, -2 when the store failed (remote only).

        A value read from the store replaces the in-memory one (not increase-only):
        the rebalance reads from the store when it takes a queue over, and the
        store is the truth then.
        """
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            offset = self._table.get(mq)
            if offset is not None:
                return offset
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return OFFSET_NOT_FOUND
        return await self._read_from_store(mq)

    @abstractmethod
    async def _read_from_store(self, mq: MessageQueue) -> int: ...

    @abstractmethod
    async def persist_all(self, mqs: Iterable[MessageQueue],
                          held: Collection[MessageQueue] = ()) -> dict[MessageQueue, int]:
        """Persist the offsets of ``mqs`` (the queues still assigned); returns what was persisted.

        Queues also in ``held`` keep their offset in memory but are not persisted now (an
        orderly queue whose lock lapsed: another client may have committed past it).
        """

    @abstractmethod
    async def persist(self, mq: MessageQueue) -> bool:
        """Persist one queue's offset (before handing the queue to someone else)."""

    def remove(self, mq: MessageQueue) -> None:
        """Forget a queue that is no longer ours (memory only)."""
        if self._table.pop(mq, None) is not None:
            logger.info("group {}: removed offset of {}, {} left", self.group, mq, len(self._table))

    def clone_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        """A copy of the table, optionally of one topic (Java ``cloneOffsetTable``)."""
        return {mq: off for mq, off in self._table.items() if not topic or mq.topic == topic}

    def __contains__(self, mq: object) -> bool:
        return mq in self._table


class RemoteOffsetStore(OffsetStore):
    """Clustering: offsets live on the broker that holds each queue."""

    def __init__(self, group: str, commit: CommitFn, fetch: FetchFn | None = None, *,
                 reported: Callable[[BaseException], bool] = lambda exc: False) -> None:
        super().__init__(group)
        self._commit = commit
        self._fetch = fetch
        #: whether a failure is reported already (an unreachable broker is the broker client's incident)
        self._reported = reported
        self._failures = FailureLog()

    async def _read_from_store(self, mq: MessageQueue) -> int:
        """Ask the broker. Java maps *every* broker error to -1 ("no offset"), which
        makes a transient broker error look like a new group and can move the
        consumer to the max offset; here only a ``None`` answer (QUERY_NOT_FOUND)
        means -1 and any exception means -2."""
        if self._fetch is None:
            logger.warning("group {}: no broker query configured; cannot read offset of {}", self.group, mq)
            return OFFSET_READ_FAILED
        try:
            offset = await self._fetch(mq)
        except Exception as exc:  # noqa: BLE001 - any failure means "ask again later"
            logger.warning("group {}: reading offset of {} from the broker failed: {!r}", self.group, mq, exc)
            return OFFSET_READ_FAILED
        if offset is None or offset < 0:
            return OFFSET_NOT_FOUND
        self.update(mq, offset, increase_only=False)
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue],
                          held: Collection[MessageQueue] = ()) -> dict[MessageQueue, int]:
        """Commit every assigned queue's offset but the ``held`` ones; forget offsets of queues not in ``mqs``.

        An empty ``mqs`` does nothing (Java returns early, so a transient empty
        assignment does not wipe the table). A failed commit is logged and the
        others still go out; the next period retries it.
        """
        wanted = set(mqs)
        if not wanted:
            return {}
        persisted: dict[MessageQueue, int] = {}
        for mq, offset in list(self._table.items()):
            if mq not in wanted:
                self.remove(mq)
                continue
            if mq in held:
                continue
            if await self._commit_one(mq, offset):
                persisted[mq] = offset
        return persisted

    async def persist(self, mq: MessageQueue) -> bool:
        offset = self._table.get(mq)
        if offset is None:
            return False
        return await self._commit_one(mq, offset)

    async def _commit_one(self, mq: MessageQueue, offset: int) -> bool:
        key = (self.group, mq.broker_name)
        try:
            await self._commit(mq, offset)
        except Exception as exc:  # noqa: BLE001 - one broker's failure must not stop the others
            # A broker that is down fails every queue's commit every period: one incident per broker (its
            # queues together; the next period retries them all). An unreachable broker is reported by
            # the broker client already: then DEBUG only.
            text = f"committing offset {offset} of {mq}: {exc!r}"
            if self._reported(exc):
                logger.debug("group {}: {}", self.group, text)
            else:
                self._failures.failed(key, f"group {self.group}: offset commits to {mq.broker_name}", text,
                                      level="ERROR")
            return False
        self._failures.recovered(key)
        return True


class LocalFileOffsetStore(OffsetStore):
    """Broadcasting: every consumer keeps its own offsets in a JSON file.

    The file is ``<store_dir>/<client_id>/<group>/offsets.json``, Java's layout.
    Java writes it with fastjson, whose MessageQueue map keys are JSON objects
    (not valid JSON). We write valid, human-readable JSON with the same
    structure, keys being ``str(mq)``::

        {"offsetTable": {"MessageQueue [topic=T, brokerName=broker-a, queueId=0]": 42}}

    and we read both forms, so offsets a Java broadcasting consumer left behind
    are picked up. Writes are atomic (temp file, fsync, rename); the previous
    version is kept as ``offsets.json.bak`` and read when the main file is
    missing, empty or corrupt.
    """

    def __init__(self, group: str, client_id: str, store_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(group)
        base = Path(store_dir if store_dir is not None else LOCAL_OFFSET_STORE_DIR)
        self.path = base / client_id / group / LOCAL_OFFSET_FILE_NAME
        self.backup_path = self.path.with_name(self.path.name + ".bak")

    def load(self) -> None:
        """Fill the table from disk; raises OffsetStoreError when file and backup are both corrupt."""
        stored = self._read_file()
        for mq, offset in stored.items():
            self._table[mq] = offset
            logger.info("group {}: loaded offset {} of {} from {}", self.group, offset, mq, self.path)

    async def _read_from_store(self, mq: MessageQueue) -> int:
        try:
            stored = self._read_file()
        except OffsetStoreError as exc:
            logger.warning("group {}: {}", self.group, exc)
            return OFFSET_NOT_FOUND
        offset = stored.get(mq)
        if offset is None:
            return OFFSET_NOT_FOUND
        self.update(mq, offset, increase_only=False)
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue],
                          held: Collection[MessageQueue] = ()) -> dict[MessageQueue, int]:
        """Merge the offsets of ``mqs`` (but the ``held`` ones) into the file (other entries in it are kept,
        as in Java)."""
        wanted = set(mqs)
        if not wanted:
            return {}
        chosen = {mq: off for mq, off in self._table.items() if mq in wanted and mq not in held}
        return chosen if self._merge_and_write(chosen) else {}

    async def persist(self, mq: MessageQueue) -> bool:
        offset = self._table.get(mq)
        if offset is None:
            return False
        return self._merge_and_write({mq: offset})

    # --- file handling ---------------------------------------------------------------
    def _merge_and_write(self, updates: dict[MessageQueue, int]) -> bool:
        try:
            merged = self._read_file()
        except OffsetStoreError as exc:
            logger.error("group {}: not persisting offsets: {}", self.group, exc)
            return False
        merged.update(updates)
        try:
            self._write_file(merged)
        except OSError as exc:
            logger.error("group {}: writing {} failed: {!r}", self.group, self.path, exc)
            return False
        return True

    def _read_file(self) -> dict[MessageQueue, int]:
        """The main file, else the backup; {} when neither exists (a first start)."""
        try:
            content = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            content = ""
        except OSError as exc:
            logger.warning("group {}: cannot read {}: {!r}", self.group, self.path, exc)
            content = ""
        if content.strip():
            try:
                return parse_offset_table(content)
            except ValueError as exc:
                logger.warning("group {}: {} is corrupt ({}); trying the backup", self.group, self.path, exc)
        try:
            backup = self.backup_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise OffsetStoreError(f"cannot read {self.backup_path}: {exc!r}") from exc
        if not backup.strip():
            return {}
        try:
            return parse_offset_table(backup)
        except ValueError as exc:
            raise OffsetStoreError(f"{self.path} and its backup are both unreadable: {exc}") from exc

    def _write_file(self, table: dict[MessageQueue, int]) -> None:
        text = format_offset_table(table)
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        _write_synced(tmp, text)
        if self.path.exists():
            # Keep the previous version, itself written atomically, before replacing it.
            previous = self.path.read_bytes()
            bak_tmp = self.backup_path.with_name(self.backup_path.name + ".tmp")
            _write_synced(bak_tmp, previous)
            os.replace(bak_tmp, self.backup_path)
        os.replace(tmp, self.path)
        _fsync_dir(directory)


def _write_synced(path: Path, data: str | bytes) -> None:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with open(path, "wb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_MQ_TEXT = re.compile(r"^MessageQueue \[topic=(.*?), brokerName=(.*), queueId=(-?\d+)\]$")


def format_offset_table(table: dict[MessageQueue, int]) -> str:
    """The file's text: queues sorted the Java way, one per line."""
    body = {str(mq): offset for mq, offset in sorted(table.items())}
    return json.dumps({"offsetTable": body}, indent=2, ensure_ascii=False) + "\n"


def parse_offset_table(text: str) -> dict[MessageQueue, int]:
    """Read our format or Java's fastjson one; ValueError when it is neither."""
    try:
        data = fastjson.loads(text)
    except Exception as exc:  # ProtocolError and friends: not parseable at all
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("offsetTable", {}), dict):
        raise ValueError("no offsetTable object")
    table: dict[MessageQueue, int] = {}
    for key, value in (data.get("offsetTable") or {}).items():
        mq = _parse_mq_key(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"offset of {key!r} is not an integer: {value!r}")
        table[mq] = value
    return table


def _parse_mq_key(key: str) -> MessageQueue:
    match = _MQ_TEXT.match(key)
    if match:
        return MessageQueue(match.group(1), match.group(2), int(match.group(3)))
    if key.startswith("{"):
        # fastjson object key, handed back by fastjson.loads as canonical JSON text.
        try:
            return MessageQueue.from_json(fastjson.object_key(key))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad message queue key {key!r}") from exc
    raise ValueError(f"bad message queue key {key!r}")
