"""A worker's logging: rmqrun's own lines and everything the handler writes, one stream, one format.

Handlers log the way Python code does: the standard ``logging`` module,
``print``, ``sys.stderr.write``, ``warnings.warn``. Left alone, ``logging``
below WARNING is dropped (the root logger has no handler), warnings and
prints come out as bare text, and in ``--log-format json`` those lines break
the JSON-lines stream. So at boot the worker routes all of them into loguru:

* the root ``logging`` logger gets one handler forwarding each record at or
  above the configured level (loggers a handler configures itself keep their
  own levels and handlers; their records still reach the root unless they
  turned propagation off);
* ``warnings`` go through ``logging.captureWarnings`` (logger ``py.warnings``);
* ``sys.stdout`` and ``sys.stderr`` are replaced by line writers: each full
  line becomes one record, stdout at INFO, stderr at WARNING (a handler that
  writes to stderr usually means something is wrong; a traceback printed with
  ``traceback.print_exc`` becomes one record per line, each still valid JSON).

Every record carries ``worker_id`` and ``pid``, and while a message is in the
handler also ``topic``, ``queue`` (queue id), ``broker`` and ``offset`` (the
queue offset of the first message of the call) and ``position``, the text of
them (:func:`rmqrun.model.message_position`). They say where the message is
stored: for a redelivery, the retry topic's queue it was consumed from, with
``origin_topic`` (`` (from T)`` in the text) the topic the handler sees, so
``rmqrun read`` at that position shows this very message. The worker sets the context by reference
(:class:`MessageContext` keeps the batch's lists and the current index); the
fields are looked up only when something is logged, so a handler that does
not log pays nothing per message.

One record is capped at ``max_log_record`` characters (64 KiB by default):
a handler that writes 10 MB to stderr per message would otherwise make 10 MB
log lines (147 MB of log for 14 messages was seen). What is cut is said at
the end of the record: ``[... 9934464 more characters cut: ...]``. A line
that never ends is kept only up to the cap while it grows, so its memory is
bounded too. The cap applies to what every route logs (``logging``, loguru,
print, the standard streams); tracebacks attached to a record are not cut.

Writes to file descriptors 1 and 2 that bypass Python (C extensions,
subprocesses the handler starts) are not captured: they reach the terminal
or journal as they are.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from contextvars import ContextVar
from typing import Any, TextIO

from loguru import logger

from rmqrun.model import message_position

TEXT_FORMAT = ("{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | worker {extra[worker_id]} pid {extra[pid]} | "
               "{message}\n{exception}")
TEXT_FORMAT_IN_MESSAGE = ("{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | worker {extra[worker_id]} pid {extra[pid]} | "
                          "{extra[position]} | {message}\n{exception}")
#: levels of the lines a handler writes to its standard streams
STDOUT_LEVEL = "INFO"
STDERR_LEVEL = "WARNING"


class MessageContext:
    """The message in the handler now, by reference: set per batch and per call, read only when logging."""

    __slots__ = ("msgs", "offsets", "index", "topic")

    def __init__(self) -> None:
        self.msgs: list[Any] | None = None
        self.offsets: list[int] = []
        self.index = 0
        #: the topic whose queue holds the batch (a retry topic for redeliveries; "": the messages' own)
        self.topic = ""

    def begin(self, msgs: list[Any], offsets: list[int], topic: str = "") -> None:
        self.msgs = msgs
        self.offsets = offsets
        self.index = 0
        self.topic = topic

    def end(self) -> None:
        self.msgs = None

    def fields(self) -> dict[str, Any] | None:
        msgs = self.msgs
        index = CALL_INDEX.get()  # a call of several at once (threads / asyncio) logs as its own message
        if index < 0:
            index = self.index
        if msgs is None or index >= len(msgs):
            return None
        msg = msgs[index]
        offset = self.offsets[index]
        if msg is None:  # a record that did not decode: only its offset is known
            topic = self.topic or "?"
            return {"topic": topic, "broker": "?", "queue": "?", "offset": offset,
                    "position": message_position(topic, "?", "?", offset)}
        # the position is where the message is stored (the retry queue of a redelivery), with the topic the
        # handler sees as its origin: the original topic with the retry queue's offset names another message
        topic = self.topic or msg.topic
        found = {"topic": topic, "broker": msg.broker_name, "queue": msg.queue_id, "offset": offset,
                 "position": message_position(topic, msg.broker_name, msg.queue_id, offset, msg.topic)}
        if topic != msg.topic:
            found["origin_topic"] = msg.topic
        return found


#: the worker process's one context (one handler call at a time: the handler runs in the main thread)
CONTEXT = MessageContext()
#: with calls at once (threads / asyncio worker classes), the index of the message of the call this thread or task
#: runs; -1: the one call of ``CONTEXT.index``
CALL_INDEX: ContextVar[int] = ContextVar("rmqrun_call_index", default=-1)
#: with batches at once (a threads / asyncio worker's lanes), the batch of the call this thread or task runs;
#: None: the one batch of ``CONTEXT``
CALL_BATCH: ContextVar["MessageContext | None"] = ContextVar("rmqrun_call_batch", default=None)

#: the longest record a handler may log, in characters (0: no cap); set by :func:`setup`
MAX_RECORD = 64 * 1024


_MARKER_END = "(setting max_log_record)]"


def cut_marker(cut: int) -> str:
    """What ends a record that was cut: how much, and the setting that decides."""
    return f" [... {cut} more characters cut: log records are capped at {MAX_RECORD} {_MARKER_END}"


def _patch(record: Any) -> None:
    found = (CALL_BATCH.get() or CONTEXT).fields()
    if found is not None:
        record["extra"].update(found)
    cap = MAX_RECORD
    message = record["message"]
    if cap and len(message) > cap and not message.endswith(_MARKER_END):  # (a line writer's cut: done already)
        record["message"] = message[:cap] + cut_marker(len(message) - cap)


def _text_format(record: Any) -> str:
    return TEXT_FORMAT_IN_MESSAGE if "offset" in record["extra"] else TEXT_FORMAT


class InterceptHandler(logging.Handler):
    """Forwards standard ``logging`` records to loguru, keeping the level, logger name and exception."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        try:
            message = record.getMessage().rstrip("\n")
        except Exception:  # a bad format string in the handler's call: show it rather than lose the line
            message = f"{record.msg!r} % {record.args!r}"
        # name the handler's code as the place of the call, not this method (frames walked only when logging)
        frame, depth = sys._getframe(1), 1
        while frame.f_back is not None and frame.f_code.co_filename == logging.__file__:
            frame, depth = frame.f_back, depth + 1
        logger.bind(logger=record.name).opt(depth=depth, exception=record.exc_info).log(level, "{}", message)


class LineWriter(io.TextIOBase):
    """A text stream whose every full line becomes one log record (``print``, ``sys.stderr.write``)."""

    def __init__(self, name: str, level: str, original: TextIO) -> None:
        self.name = name
        self.level = level
        self.original = original
        self._buf = ""
        self._cut = 0  # characters of the current line dropped past the cap
        self._busy = False
        self._lock = threading.RLock()  # handler threads may print too; re-entered only by loguru's own error report
        self._log = logger.bind(stream=name)

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.original.fileno()

    @property
    def buffer(self) -> Any:
        """Bytes written here bypass the log (there is no line to label): the real stream's buffer."""
        return self.original.buffer

    def write(self, text: str) -> int:
        with self._lock:
            if self._busy:  # loguru reporting its own error to sys.stderr: straight out, no loop
                return self.original.write(text)
            if "\n" not in text:
                self._grow(text)
                return len(text)
            first, *lines = text.split("\n")
            self._grow(first)
            lines.insert(0, self._take())
            tail = lines.pop()
            self._emit(lines)
            self._grow(tail)
            return len(text)

    def _grow(self, text: str) -> None:
        """Add to the line being written, keeping at most the cap (the rest is counted, not kept)."""
        cap = MAX_RECORD
        room = cap - len(self._buf) if cap else len(text)
        if room >= len(text):
            self._buf += text
        else:
            self._buf += text[:max(0, room)]
            self._cut += len(text) - max(0, room)

    def _take(self) -> str:
        """The line written so far, with its cut marker; the buffer is empty after."""
        line, cut = self._buf, self._cut
        self._buf, self._cut = "", 0
        return line + cut_marker(cut) if cut else line

    def flush(self) -> None:
        with self._lock:
            if self._buf and not self._busy:
                self._emit([self._take()])

    def _emit(self, lines: list[str]) -> None:
        """One record per non-empty line, placed at the caller of write/flush (print is C: its caller)."""
        self._busy = True
        log = self._log.opt(depth=2)
        try:
            for line in lines:
                line = line.rstrip("\r")
                if line:
                    log.log(self.level, "{}", line)
        finally:
            self._busy = False


def setup(worker_id: int, pid: int, level: str, fmt: str = "text", max_record: int = MAX_RECORD) -> None:
    """Configure the worker's sink and route the handler's logging, warnings and standard streams into it."""
    global MAX_RECORD
    MAX_RECORD = max_record
    level = level.upper()
    out = sys.stderr  # the real stream, captured before it is replaced below
    logger.remove()
    logger.configure(extra={"worker_id": worker_id, "pid": pid, "role": "worker"}, patcher=_patch)
    if fmt == "json":  # every field travels in record.extra
        logger.add(out, level=level, serialize=True, backtrace=False, diagnose=False)
    else:
        logger.add(out, level=level, format=_text_format, backtrace=False, diagnose=False)
    route_std_logging(level)
    sys.stdout = LineWriter("stdout", STDOUT_LEVEL, sys.stdout)
    sys.stderr = LineWriter("stderr", STDERR_LEVEL, out)


def route_std_logging(level: str) -> None:
    """Standard ``logging`` at or above ``level`` and ``warnings`` into loguru (idempotent).

    Also used by the supervisor and the other commands, so that a library's
    log record or a warning is a JSON line like the rest, not bare text.
    """
    root = logging.getLogger()
    for old in list(root.handlers):
        if isinstance(old, InterceptHandler):
            root.removeHandler(old)
    root.addHandler(InterceptHandler())
    root.setLevel(logger.level(level.upper()).no)  # loguru's level numbers are logging's (TRACE 5, SUCCESS 25)
    logging.captureWarnings(True)  # Python's warning filters (-W, PYTHONWARNINGS) still decide what is shown


def flush() -> None:
    """Emit a last partial line of the handler's streams (at exit)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, LineWriter):
            stream.flush()
