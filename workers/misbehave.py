"""Handlers that break their worker in every way a real one can, for pool tests.

=================  ==============================================================
``hang``           sleeps for an hour (interruptible: the soft time limit stops it)
``hang_hard``      swallows the soft time limit and keeps sleeping (only the hard
                   limit, SIGKILL, ends it)
``sleep``          sleeps ``RMQRUN_HANDLER_SLEEP_MS`` (default 200) per message
``leak``           keeps ``RMQRUN_HANDLER_LEAK_MB`` (default 16) MiB per message forever
``kill_self``      SIGKILLs its own process
``exit_hard``      ``os._exit(7)``
``exit3``          ``sys.exit(3)``: the worker's boot-error code, from a handler
``segfault``       dereferences NULL through ctypes
``escape``         raises a BaseException that escapes the worker loop
``by_property``    does what the message's ``MISBEHAVE`` property names (one of the
                   above), or nothing when it is absent
``init_fails``     a worker_init hook that raises
=================  ==============================================================
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

import rmqrun

_leaked: list[bytearray] = []


class Escape(BaseException):
    """Not an Exception: the worker does not catch it, so the process dies."""


def hang(msg: rmqrun.Message) -> None:
    time.sleep(3600)


def hang_hard(msg: rmqrun.Message) -> None:
    end = time.monotonic() + 3600
    while time.monotonic() < end:
        try:
            time.sleep(end - time.monotonic())
        except Exception:  # including SoftTimeLimitExceeded: the handler "ignores" it
            continue


def sleep(msg: rmqrun.Message) -> None:
    time.sleep(float(os.environ.get("RMQRUN_HANDLER_SLEEP_MS", "200")) / 1000.0)


def leak(msg: rmqrun.Message) -> None:
    chunk = bytearray(int(float(os.environ.get("RMQRUN_HANDLER_LEAK_MB", "16")) * 1024 * 1024))
    chunk[::4096] = b"x" * len(chunk[::4096])  # touch every page so it counts in RSS
    _leaked.append(chunk)


def kill_self(msg: rmqrun.Message) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def exit_hard(msg: rmqrun.Message) -> None:
    os._exit(7)


def exit3(msg: rmqrun.Message) -> None:
    sys.exit(3)


def segfault(msg: rmqrun.Message) -> None:
    ctypes.string_at(0)


def escape(msg: rmqrun.Message) -> None:
    raise Escape("escaping the worker loop")


_ACTIONS = {"hang": hang, "hang_hard": hang_hard, "sleep": sleep, "leak": leak, "kill_self": kill_self,
            "exit_hard": exit_hard, "exit3": exit3, "segfault": segfault, "escape": escape}


def by_property(msg: rmqrun.Message) -> None:
    action = msg.properties.get("MISBEHAVE")
    if action:
        _ACTIONS[action](msg)


def init_fails() -> None:
    raise RuntimeError("worker_init failing on purpose")
