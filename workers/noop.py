"""Handlers that do nothing: the baseline for pool overhead (``workers.noop:handle``)."""

from __future__ import annotations

import rmqrun


def handle(msg: rmqrun.Message) -> None:
    """Consume one message successfully, doing nothing."""


@rmqrun.batch
def handle_batch(msgs: list[rmqrun.Message]) -> None:
    """Batch form (``workers.noop:handle_batch``): consume every message of the list."""
