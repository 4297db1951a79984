"""The POP consumer's counters: what status, metrics and running info show of popping."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class PopStats:
    """POP counters for status, metrics and running info."""

    popped: int = 0
    acks: int = 0
    #: failures given back with a delay (CHANGE_MESSAGE_INVISIBLETIME)
    nacks: int = 0
    #: invisibility extended for a message still in flight
    extensions: int = 0
    extension_failures: int = 0
    #: popped messages whose invisibility lapsed before they started (the broker hands them out again)
    expired: int = 0
    #: messages from the pop retry topic (handed out again after a failure or a lapse)
    revived: int = 0
    ack_failures: int = 0
    dead_lettered: int = 0
