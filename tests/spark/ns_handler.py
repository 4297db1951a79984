"""A handler for the Spark namespace test: records ``topic body`` per message, fails bodies listed in
``$RMQRUN_HANDLER_FAIL`` (comma-separated), under ``$RMQRUN_HANDLER_RECORD_DIR`` (one file per process)."""

from __future__ import annotations

import os

import rmqrun

FAIL = {b for b in os.environ.get("RMQRUN_HANDLER_FAIL", "").split(",") if b}


def handle(msg: rmqrun.Message) -> None:
    body = msg.body.decode()
    path = os.path.join(os.environ["RMQRUN_HANDLER_RECORD_DIR"], f"ns-{os.getpid()}")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{msg.topic} {body}\n".encode())
    finally:
        os.close(fd)
    if body in FAIL:
        raise ValueError(f"failing {body} on purpose")
