"""Fixtures shared by the integration tests that run ``rmqrun run`` as real processes.

``record`` is the file the recording handlers write (via
``RMQRUN_HANDLER_RECORD_FILE``); ``runs`` starts and cleans up rmqrun child processes (see
:class:`tests.integration.signals_kit.Runs`); ``eb`` is an embedded broker on a
thread. A test module may define its own ``eb`` (e.g. module-scoped); that one wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.signals_kit import Runs, start_broker


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    r = Runs(tmp_path)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file the recording handlers (``workers/orderly_record.py`` and the like) append to."""
    path = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(path))
    return path


@pytest.fixture
def eb(tmp_path: Path):  # type: ignore[no-untyped-def]
    broker = start_broker(tmp_path)
    try:
        yield broker
    finally:
        broker.stop_in_thread()
