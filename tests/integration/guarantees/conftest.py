"""The guarantee × mode matrix's broker: one embedded broker per test file, each cell on a topic of its own.

A file may set ``BROKER_SETTINGS`` (e.g. a short ``lock_max_live_ms`` where an orderly instance is
killed and the survivor must get its queues' locks in seconds, not RocketMQ's 60 s).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.signals_kit import start_broker


@pytest.fixture(scope="module")
def gb(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    settings = dict(getattr(request.module, "BROKER_SETTINGS", {}))
    broker = start_broker(tmp_path_factory.mktemp("matrix"), **settings)
    try:
        yield broker
    finally:
        broker.stop_in_thread()
