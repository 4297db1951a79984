"""A small two-level table (row -> key -> value) saved to a crash-safe JSON file after every change.

The name server's KV table (rows are namespaces, values strings) and the broker's message-request-mode table
(rows are topics, keys groups, values the mode bodies) share this shape and its rules; each binds only its file
layout and its log lines:

* every change is saved before it returns; a save that fails (OSError) undoes the change and raises, so what a
  client was told matches what a restart will find;
* without a path the table lives in memory only (tests, a broker or name server without a data directory);
* a file that does not parse is moved aside and reported (:attr:`SavedTable.problem`), never overwritten
  silently (:class:`~rmqrun.broker.store.json_file.JsonFile`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Generic, TypeVar

from .json_file import JsonFile

V = TypeVar("V")
Rows = dict[str, dict[str, V]]


class SavedTable(Generic[V]):
    """Rows of keyed values; ``parse`` reads the file's JSON into rows (TypeError/ValueError: corrupt),
    ``dump`` writes rows as the file's JSON."""

    def __init__(self, path: Path | None, parse: Callable[[object], "Rows[V]"],
                 dump: Callable[["Rows[V]"], object]) -> None:
        self._file = JsonFile(path) if path is not None else None
        self._parse = parse
        self._dump = dump
        self._rows: Rows[V] = {}
        #: What was wrong with the file at load, if anything (the file is then moved aside).
        self.problem: str | None = None

    @property
    def path(self) -> Path | None:
        return self._file.path if self._file is not None else None

    def load(self) -> None:
        if self._file is None:
            return
        loaded = self._file.load(self._parse)
        self._rows = loaded.data or {}
        self.problem = loaded.problem

    def get(self, row: str, key: str) -> V | None:
        return self._rows.get(row, {}).get(key)

    def row(self, row: str) -> dict[str, V] | None:
        """A copy of one row (None when the row was never written)."""
        values = self._rows.get(row)
        return dict(values) if values is not None else None

    def rows(self) -> "Rows[V]":
        """A copy of every row."""
        return {row: dict(values) for row, values in self._rows.items()}

    def put(self, row: str, key: str, value: V) -> V | None:
        """Set one value and save; returns the value it replaced."""
        values = self._rows.setdefault(row, {})
        previous = values.get(key)
        values[key] = value
        try:
            self._save()
        except OSError:
            if previous is None:
                del values[key]
                if not values:
                    del self._rows[row]
            else:
                values[key] = previous
            raise
        return previous

    def delete(self, row: str, key: str) -> bool:
        """Remove one value and save; False when there was none (nothing saved). An emptied row stays."""
        values = self._rows.get(row)
        if values is None or key not in values:
            return False
        value = values.pop(key)
        try:
            self._save()
        except OSError:
            values[key] = value
            raise
        return True

    def _save(self) -> None:
        if self._file is not None:
            self._file.save(self._dump(self._rows))
