"""Recording handlers for the ``rmqrun spark`` tests (copied into a temporary working directory, so the
runner has to ship them to the executors as a user's module in the current directory).

Every call appends one line per message, ``queue_id queue_offset body result`` (batch: the call's id and
size instead of the result), and the message's reconsume count, to a file named after the process under ``$RMQRUN_HANDLER_RECORD_DIR``; ``worker_init`` appends its partition id to ``inits-<pid>``.
``$RMQRUN_HANDLER_FAIL`` lists bodies that fail: ``raise`` ones raise, ``later`` ones return ReconsumeLater,
``slow`` ones sleep 30 s (past the test's time limit), ``kill`` ones SIGKILL the Python worker the first time
(a marker file in the record directory says it happened), ``crash`` ones every time.
``$RMQRUN_HANDLER_FAIL_ALL`` makes every message raise. ``$RMQRUN_HANDLER_INIT_FAIL`` makes ``init`` raise.
"""

from __future__ import annotations

import itertools
import os
import signal
import time

import rmqrun

_calls = itertools.count()


def _fails() -> dict[str, str]:
    out = {}
    for item in os.environ.get("RMQRUN_HANDLER_FAIL", "").split(","):
        body, _, how = item.partition("=")
        if body:
            out[body] = how or "raise"
    return out


def _record(lines: list[str], name: str = "handled") -> None:
    path = os.path.join(os.environ["RMQRUN_HANDLER_RECORD_DIR"], f"{name}-{os.getpid()}")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, "".join(line + "\n" for line in lines).encode())
    finally:
        os.close(fd)


def _first_time(marker: str) -> bool:
    try:
        os.close(os.open(os.path.join(os.environ["RMQRUN_HANDLER_RECORD_DIR"], marker), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def handle(msg: rmqrun.Message):
    body = msg.body.decode()
    how = _fails().get(body)
    _record([f"{msg.queue_id} {msg.queue_offset} {body} {how or 'ok'} {msg.reconsume_times}"])
    if how == "raise" or os.environ.get("RMQRUN_HANDLER_FAIL_ALL"):
        raise ValueError(f"bad body {body}")
    if how == "crash" or (how == "kill" and _first_time(f"killed-{body}")):
        os.kill(os.getpid(), signal.SIGKILL)
    if how == "later":
        return rmqrun.ReconsumeLater()
    if how == "slow":
        time.sleep(30)
    return None


@rmqrun.batch
def handle_batch(msgs: list[rmqrun.Message]):
    """Acknowledges the messages before the first failing body; records each call's id and size."""
    fails = _fails()
    call = f"{os.getpid()}.{next(_calls)}"
    _record([f"{m.queue_id} {m.queue_offset} {m.body.decode()} call={call} size={len(msgs)}" for m in msgs])
    for i, m in enumerate(msgs):
        if m.body.decode() in fails:
            return rmqrun.AckIndex(i - 1)
    return None


def init(info) -> None:
    _record([f"{info.worker_id}"], "inits")
    if os.environ.get("RMQRUN_HANDLER_INIT_FAIL"):
        raise RuntimeError(f"init refused in partition {info.worker_id}")
