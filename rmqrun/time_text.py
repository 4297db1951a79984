"""Epoch milliseconds as text for people: one format for every command that prints a moment as ISO 8601."""

from __future__ import annotations

from datetime import datetime, timezone


def iso_ms(epoch_ms: int) -> str:
    """UTC with milliseconds: ``2024-11-24T08:00:00.123Z`` (before 1970 too: -1 is ``...23:59:59.999Z``)."""
    when = datetime.fromtimestamp(epoch_ms // 1000, tz=timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"
