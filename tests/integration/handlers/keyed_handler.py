"""A handler for the key-ordered tests: records when each call on each message starts and ends.

Messages come from :func:`tests.integration.keyed_kit.produce_keyed` (body ``msg-<i>``, the
key in ``__SHARDINGKEY``). Every delivery appends two lines to ``RMQRUN_HANDLER_KEYED_FILE``,
each with one ``write`` (``O_APPEND``), so all workers share the file:

    S <pid> <key> <i> <queue> <offset> <monotonic ns> <reconsume>          (the call starts)
    E <pid> <key> <i> <queue> <offset> <monotonic ns> <reconsume> ok|fail  (the call ends)

``time.monotonic_ns`` is CLOCK_MONOTONIC, one clock for every process of the machine, so the
intervals of different workers and instances compare. ``RMQRUN_HANDLER_KEYED_SLEEP_MS`` sleeps
in each call (so calls overlap when they may); ``RMQRUN_HANDLER_KEYED_FAIL`` names
``key:i`` pairs whose calls always fail (raise: the orderly SUSPEND).
"""

from __future__ import annotations

import os
import time

import rmqrun

SLEEP_S = float(os.environ.get("RMQRUN_HANDLER_KEYED_SLEEP_MS", "0")) / 1000
FAIL = {x for x in os.environ.get("RMQRUN_HANDLER_KEYED_FAIL", "").split(",") if x}


def _write(line: str) -> None:
    fd = os.open(os.environ["RMQRUN_HANDLER_KEYED_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def handle(msg: rmqrun.Message) -> None:
    key = msg.properties.get("__SHARDINGKEY", "-")
    i = msg.body.decode().split("-", 1)[1]
    head = f"{os.getpid()} {key} {i} {msg.queue_id} {msg.queue_offset}"
    _write(f"S {head} {time.monotonic_ns()} {msg.reconsume_times}\n")
    if SLEEP_S:
        time.sleep(SLEEP_S)
    failing = f"{key}:{i}" in FAIL
    _write(f"E {head} {time.monotonic_ns()} {msg.reconsume_times} {'fail' if failing else 'ok'}\n")
    if failing:
        raise RuntimeError(f"key {key} message {i} fails on purpose")
