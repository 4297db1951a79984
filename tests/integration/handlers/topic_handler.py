"""A handler that records the topic it is shown and fails chosen messages, for the namespace tests.

One line per delivery, appended with one ``write`` (``O_APPEND``) to ``RMQRUN_HANDLER_RECORD``::

    <event> <topic> <idx> <reconsume_times>

``idx`` is the message's ``idx`` property. Messages whose idx is in
``RMQRUN_HANDLER_FAIL_IDX`` (comma-separated) always fail (raise); those in
``RMQRUN_HANDLER_FAIL_ONCE_IDX`` fail on their first delivery only.
"""

from __future__ import annotations

import os

import rmqrun



def _idx_set(name: str) -> set[int]:
    return {int(x) for x in os.environ.get(name, "").split(",") if x.strip()}


FAIL_IDX = _idx_set("RMQRUN_HANDLER_FAIL_IDX")
FAIL_ONCE_IDX = _idx_set("RMQRUN_HANDLER_FAIL_ONCE_IDX")


def handle(msg: rmqrun.Message) -> None:
    idx = int(msg.properties.get("idx", "-1"))
    fail = idx in FAIL_IDX or (idx in FAIL_ONCE_IDX and msg.reconsume_times == 0)
    line = f"{'fail' if fail else 'ok'} {msg.topic} {idx} {msg.reconsume_times}\n"
    fd = os.open(os.environ["RMQRUN_HANDLER_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    if fail:
        raise RuntimeError(f"failing idx {idx} on purpose")


def deliveries(path: str | os.PathLike[str]) -> list[tuple[str, str, int, int]]:
    """(event, topic, idx, reconsume_times) per recorded delivery."""
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        event, topic, idx, times = line.split()
        out.append((event, topic, int(idx), int(times)))
    return out
