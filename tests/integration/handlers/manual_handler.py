"""An orderly handler for manual-commit tests (``auto_commit: false``), scripted per queue offset.

``MANUAL_SCRIPT`` maps offsets to results, e.g. ``1:commit,3:rollback,5:commit``; other
offsets return None (SUCCESS: consumed, not committed). A ``rollback`` is returned
only on the first delivery of its offset; ``suspend`` (SuspendCurrentQueue(10 ms)) on every one. Every delivery is appended to ``MANUAL_RECORD``
as ``<offset> <result>``; the handler reads that file to know whether it saw an offset
before (orderly: one call at a time per queue).
"""

from __future__ import annotations

import os

import rmqrun


def _script() -> dict[int, str]:
    out = {}
    for part in os.environ.get("MANUAL_SCRIPT", "").split(","):
        if part.strip():
            offset, result = part.split(":")
            out[int(offset)] = result
    return out


def handle(msg: rmqrun.Message):  # type: ignore[no-untyped-def]
    path = os.environ["MANUAL_RECORD"]
    seen = open(path).read().split("\n") if os.path.exists(path) else []
    result = _script().get(msg.queue_offset, "ok")
    if result == "rollback" and any(line.split(" ")[0] == str(msg.queue_offset) for line in seen if line):
        result = "ok"
    with open(path, "a") as f:
        f.write(f"{msg.queue_offset} {result}\n")
    if result == "commit":
        return rmqrun.Commit()
    if result == "rollback":
        return rmqrun.Rollback()
    if result == "suspend":
        return rmqrun.SuspendCurrentQueue(ms=10)
    return None
