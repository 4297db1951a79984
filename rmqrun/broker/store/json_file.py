"""Crash-safe JSON files: atomic replace, a ``.bak`` of the previous version, loud on corruption.

Saving writes ``<name>.tmp``, fsyncs it, moves the current file to ``<name>.bak``,
renames the temp file into place and fsyncs the directory. A crash at any point
leaves either the new file, or the old one as ``.bak`` (which ``load`` falls back to).
A file that does not parse is never silently overwritten: it is moved aside to
``<name>.corrupt`` and the problem is returned to the caller to report.
"""

from __future__ import annotations

from loguru import logger

import json
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable

from .segmented_file import fsync_dir



class LoadSource(str, Enum):
    MAIN = "main"
    BACKUP = "backup"
    EMPTY = "empty"  # neither file existed (or both were unusable)


@dataclass(frozen=True)
class JsonLoad:
    data: Any
    source: LoadSource
    #: Human-readable description of what was wrong, None when the main file was fine.
    problem: str | None = None


class JsonFile:
    def __init__(self, path: Path, *, keep_backup: bool = True) -> None:
        self.path = Path(path)
        self.keep_backup = keep_backup

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    @property
    def corrupt_path(self) -> Path:
        return self.path.with_name(self.path.name + ".corrupt")

    def load(self, parse: Callable[[Any], Any] | None = None) -> JsonLoad:
        """Load the file (else the backup). ``parse`` turns the JSON into the caller's data;
        if it raises (KeyError, TypeError, ValueError, AttributeError) the file counts as
        corrupt just like one that is not JSON at all."""
        problems: list[str] = []
        main = self._try(self.path, problems, parse)
        if main is not _MISSING:
            return JsonLoad(main, LoadSource.MAIN, None)
        backup = self._try(self.backup_path, problems, parse) if self.keep_backup else _MISSING
        problem = "; ".join(problems) or None
        if problem:
            logger.warning("{}: {}", self.path, problem)
        if backup is not _MISSING:
            return JsonLoad(backup, LoadSource.BACKUP, problem or f"{self.path.name} missing, used backup")
        return JsonLoad(None, LoadSource.EMPTY, problem)

    def _try(self, path: Path, problems: list[str], parse: Callable[[Any], Any] | None) -> Any:
        try:
            text = path.read_text(encoding="utf-8", errors="strict")
        except FileNotFoundError:
            return _MISSING
        except UnicodeDecodeError as exc:
            text = f"\x00{exc}"  # not JSON either: handled below
        try:
            data = json.loads(text)
            return parse(data) if parse is not None else data
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            aside = path.with_name(path.name + ".corrupt")
            os.replace(path, aside)
            problems.append(f"{path.name} is corrupt ({exc}); moved to {aside.name}")
            return _MISSING

    def save(self, data: Any) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        payload = json.dumps(data, indent=1, sort_keys=True).encode("utf-8")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        if self.keep_backup and self.path.exists():
            os.replace(self.path, self.backup_path)
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)


class _Missing:
    pass


_MISSING: Any = _Missing()
