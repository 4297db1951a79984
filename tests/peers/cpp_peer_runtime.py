"""What every C++ peer command needs: exit codes, the JSON-lines output, a watchdog, the library.

Kept free of any import of the ``rocketmq`` package at module level: the
library must only load after ``prepare_home`` has pointed ``$HOME`` elsewhere,
and ``tests/peers/cpp.py`` imports the exit codes from here without loading it.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_SEND_FAILED = 1  # a send raised, or its status was not SEND_OK
EXIT_USAGE = 2  # bad arguments (argparse uses 2 as well)
EXIT_TIMEOUT = 3  # consume: --timeout passed before --expect messages
EXIT_CLIENT_ERROR = 4  # the library did not load or the client did not start
EXIT_HUNG = 5  # a native call overran its deadline and the watchdog ended the process

LOG_LEVELS = {"fatal": 1, "error": 2, "warn": 3, "info": 4, "debug": 5, "trace": 6}  # the C API's CLogLevel
LOOPBACK_HOSTS = ("localhost", "::1", "[::1]")


class Output:
    """The JSON-lines stream on the real stdout; safe to call from any thread.

    File descriptor 1 is handed to stderr once this exists, so whatever the
    native code prints can never interleave with a JSON line.
    """

    def __init__(self) -> None:
        sys.stdout.flush()
        self._stream = io.TextIOWrapper(os.fdopen(os.dup(1), "wb", buffering=0), encoding="utf-8",
                                        write_through=True)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields}, default=str, ensure_ascii=False)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


class Watchdog:
    """Ends the process when one native call runs past its deadline.

    A Python thread cannot interrupt a blocked ctypes call; against a silent
    name server the C++ producer sits in one send for 60 s. Exiting with a
    clear line beats letting the parent's timeout guess what happened.
    """

    def __init__(self, out: Output) -> None:
        self._out = out
        self._cond = threading.Condition()
        self._label: str | None = None
        self._deadline = 0.0
        self._limit = 0.0
        threading.Thread(target=self._run, name="watchdog", daemon=True).start()

    def arm(self, label: str, seconds: float) -> None:
        with self._cond:
            self._label, self._limit = label, seconds
            self._deadline = time.monotonic() + seconds
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._label = None
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                if self._label is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)
                    continue
                self._out.emit("error", kind="deadline", operation=self._label, deadline_s=self._limit,
                               message=f"{self._label} still blocked in librocketmq after {self._limit:g}s")
                sys.stderr.flush()
                os._exit(EXIT_HUNG)


def finish(out: Output, code: int, **fields: Any) -> NoReturn:
    """Report and leave without running native static destructors (they can crash at exit)."""
    out.emit("done", exit_code=code, **fields)
    sys.stderr.flush()
    os._exit(code)


def check_loopback(namesrv: str) -> str | None:
    """An error text unless every name server address is on loopback."""
    for addr in filter(None, namesrv.split(";")):
        host, _, port = addr.rpartition(":")
        if not port.isdigit() or not host:
            return f"bad name server address {addr!r}: expected H:P"
        if not (host.startswith("127.") or host in LOOPBACK_HOSTS):
            return f"name server {addr!r} is not on loopback (pass --allow-non-loopback to allow it)"
    return None


def prepare_home(requested: str | None) -> str:
    """Make the C++ client's $HOME a directory we own, before the library reads it.

    This build logs to ``$HOME/logs/rocketmq-cpp`` whatever ``Set*LogPath`` says
    (a no-op), and keeps broadcasting offsets in ``$HOME/.rocketmq_offsets``.
    """
    home = os.path.abspath(requested) if requested else tempfile.mkdtemp(prefix="cpp-peer-")
    os.makedirs(home, exist_ok=True)
    os.environ["HOME"] = home  # assigning os.environ also calls putenv(), which the C getenv() sees
    return home


def log_files(home: str) -> list[str]:
    logdir = os.path.join(home, "logs", "rocketmq-cpp")
    if not os.path.isdir(logdir):
        return []
    return sorted(os.path.join(logdir, name) for name in os.listdir(logdir))


@dataclass(frozen=True)
class Library:
    """The parts of the ``rocketmq`` wrapper the peer uses."""

    client: Any  # rocketmq.client: Producer, PushConsumer, Message
    ffi: Any  # rocketmq.ffi: MessageModel, MSG_CALLBACK_FUNC
    dll: Any  # the ctypes handle on librocketmq.so, for calls the wrapper does not expose
    check: Any  # rocketmq.exceptions.ffi_check: raises on a non-OK C status
    error: type[Exception]  # rocketmq.exceptions.RocketMQException
    path: str


def load_library() -> Library:
    """Import the wrapper, which loads librocketmq.so (call after prepare_home)."""
    from rocketmq import client, ffi  # noqa: PLC0415
    from rocketmq.exceptions import RocketMQException, ffi_check  # noqa: PLC0415
    return Library(client=client, ffi=ffi, dll=ffi.dll, check=ffi_check, error=RocketMQException,
                   path=ffi._DYLIB_PATH)
