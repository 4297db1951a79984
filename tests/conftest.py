"""Shared pytest setup.

rmqrun logs through loguru; pytest's ``caplog`` only sees the standard
``logging`` module, so this fixture forwards loguru records to it.
"""

from __future__ import annotations

import pytest
from loguru import logger


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    handler_id = logger.add(caplog.handler, format="{message}", level=0)
    yield caplog
    logger.remove(handler_id)
