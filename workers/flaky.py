"""Handlers that fail on purpose, for retry, DLQ and result-mapping tests.

``handle`` raises when the message asks for it:

* property ``FAIL`` is ``"1"`` / ``"true"``, or the body starts with ``b"fail"``;
* or the message has been delivered fewer than ``RMQRUN_HANDLER_FLAKY_FIRST`` times
  before (its ``reconsume_times`` is below that number): the first k
  deliveries fail, the next one succeeds.

``scripted`` / ``scripted_batch`` return the result the message's ``RESULT``
property names, so every return type can be driven through real workers::

    ok | raise | reconsume[:level] | ackindex:n[:level] | suspend[:ms] | commit | rollback
    | bad (returns a generator: its work never ran) | badclass (returns the class Commit)
    | false | true | str (returns 'ok') | int (returns 7): plain values (False fails, the others succeed)

(``scripted_batch`` uses the first message's property.)
"""

from __future__ import annotations

import os

import rmqrun

FAIL_FIRST = int(os.environ.get("RMQRUN_HANDLER_FLAKY_FIRST", "0"))


class FlakyError(RuntimeError):
    """What these handlers raise, so tests can tell it from a real bug."""


def should_fail(msg: rmqrun.Message) -> bool:
    if msg.properties.get("FAIL", "").lower() in ("1", "true"):
        return True
    if msg.body.startswith(b"fail"):
        return True
    return msg.reconsume_times < FAIL_FIRST


def handle(msg: rmqrun.Message) -> None:
    if should_fail(msg):
        raise FlakyError(f"failing on purpose: offset {msg.queue_offset}, reconsume_times {msg.reconsume_times}")


def _result(spec: str):  # type: ignore[no-untyped-def]
    name, _, arg = spec.partition(":")
    args = [int(a) for a in arg.split(":") if a]
    if name in ("", "ok"):
        return None
    if name == "raise":
        raise FlakyError("scripted failure")
    if name == "reconsume":
        return rmqrun.ReconsumeLater(*args)
    if name == "ackindex":
        return rmqrun.AckIndex(*args)
    if name == "suspend":
        return rmqrun.SuspendCurrentQueue(*args)
    if name == "commit":
        return rmqrun.Commit()
    if name == "rollback":
        return rmqrun.Rollback()
    if name == "bad":
        return (m for m in ())
    if name in ("false", "true"):
        return name == "true"
    if name == "str":
        return "ok"
    if name == "int":
        return int(arg or 7)
    if name == "badclass":
        return rmqrun.Commit
    raise ValueError(f"unknown RESULT {spec!r}")


def scripted(msg: rmqrun.Message):  # type: ignore[no-untyped-def]
    return _result(msg.properties.get("RESULT", "ok"))


@rmqrun.batch
def scripted_batch(msgs: list[rmqrun.Message]):  # type: ignore[no-untyped-def]
    return _result(msgs[0].properties.get("RESULT", "ok"))
