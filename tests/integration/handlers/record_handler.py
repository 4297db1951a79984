"""A handler that records every message it is handed: ``<topic> <queue_id> <queue_offset> <tags> <body>``.

One line per message, appended with one ``write`` (``O_APPEND``) to the file named by
``RMQRUN_HANDLER_RECORD`` (the prefix rmqrun leaves to handlers), so several workers share a file.
"""

from __future__ import annotations

import os

import rmqrun


def handle(msg: rmqrun.Message) -> None:
    line = (f"{msg.topic} {msg.queue_id} {msg.queue_offset} {msg.properties.get('TAGS', '-')} "
            f"{msg.body.decode('utf-8', 'replace')}\n")
    fd = os.open(os.environ["RMQRUN_HANDLER_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def records(path: str | os.PathLike[str]) -> list[tuple[str, int, int, str, str]]:
    """The recorded lines, parsed."""
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        topic, qid, offset, tags, body = line.split(" ", 4)
        out.append((topic, int(qid), int(offset), tags, body))
    return out
