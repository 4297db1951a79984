"""A handler that records what bodies it was given: one line per message, ``<idx> <sha256 of body>``.

The file is named by ``PROBE_BODIES`` (``O_APPEND``, one write per message, so
several workers can share it). ``idx`` is the message's ``idx`` property.
"""

from __future__ import annotations

import hashlib
import os

import rmqrun

_PATH = os.environ.get("PROBE_BODIES", "")


def handle(msg: rmqrun.Message) -> None:
    line = f"{msg.properties.get('idx', '-')} {hashlib.sha256(msg.body).hexdigest()}\n".encode()
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
