"""Repeating failures logged as incidents: a line when one starts, a summary now and then, a line when it ends.

A consumer retries through an outage on fixed periods (a pull per queue per
second, commits every 5 s, heartbeats, routes, the group's member list), and
every retry fails the same way. Logging each one buried the first, useful
line: a dead broker gave 531 WARNING lines a minute, a dead name server a
45-line traceback every 30 s. What an operator needs is when it started and
why, that it still lasts and how much it costs, and when it ended.

:class:`FailureLog` keeps one incident per key (a broker address, a name
server, a periodic task, a queue):

* the first failure logs ``<what> <state>: <cause>`` at WARNING (a
  traceback only for a cause that is not a plain transport failure, and once
  per distinct cause in the whole process: a bug's stack is worth reading
  once, a refused connection's never);
* further failures are counted at DEBUG, and at most once per
  :func:`report_every` seconds one summary says ``<what> still <state> after
  N s: M failure(s) in the last T s ...``;
* the first success logs ``<what> recovered after N s (M failures)`` at INFO.

The interval is process-wide (``log_repeat_interval``, set once by the
command line): every incident of one process reports at the same pace.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Callable, Hashable

from loguru import logger

from rmqrun.client.errors import NameServerUnavailableError
from rmqrun.remoting.errors import ConnectionClosedError, RequestTimeoutError, TlsError

#: seconds between two summary lines of one incident (the ``log_repeat_interval`` setting)
DEFAULT_REPORT_EVERY_S = 60.0
_report_every = DEFAULT_REPORT_EVERY_S
#: causes whose traceback was logged already, process-wide: (exception type, file, line of the raise)
_traced: set[tuple[str, str, int]] = set()


def set_report_every(seconds: float) -> None:
    """The summary interval of every incident of this process (the ``log_repeat_interval`` setting)."""
    global _report_every
    _report_every = float(seconds)


def report_every() -> float:
    return _report_every


def is_transport(exc: BaseException) -> bool:
    """A failure to reach the peer at all (refused, dropped, timed out), which waiting may heal.

    A TLS handshake failure is not one: the settings or a certificate must change, so it is never folded
    into an outage summary."""
    if isinstance(exc, TlsError):
        return False
    return isinstance(exc, (ConnectionClosedError, RequestTimeoutError, NameServerUnavailableError,
                            asyncio.TimeoutError, OSError))


def cause_of(exc: BaseException | str) -> str:
    if isinstance(exc, str):
        return exc
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _trace_key(exc: BaseException) -> tuple[str, str, int]:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = (tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb is not None else ("", 0)
    return type(exc).__name__, where[0], where[1]


@dataclass(slots=True)
class _Incident:
    what: str
    state: str
    started: float
    cause: str
    failures: int = 1
    reported_at: float = 0.0
    #: failures since the last line about this incident
    unreported: int = 0


class FailureLog:
    """Incidents by key: start, periodic summary, end (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open: dict[Hashable, _Incident] = {}

    def failing(self, key: Hashable) -> bool:
        return key in self._open

    def failed(self, key: Hashable, what: str, exc: BaseException | str, *, state: str = "failing",
               level: str = "WARNING") -> None:
        """One failure of ``key``: the start line, a summary when one is due, else a DEBUG line.

        ``what`` names the subject (``broker 10.0.0.5:10911``), ``state`` what is wrong with it
        (``unreachable``), ``exc`` the cause."""
        now = self._clock()
        cause = cause_of(exc)
        incident = self._open.get(key)
        if incident is None:
            self._open[key] = _Incident(what, state, now, cause, reported_at=now)
            trace = isinstance(exc, BaseException) and not is_transport(exc) and _first_trace(exc)
            logger.opt(exception=exc if trace else None).log(
                level, "{} {}: {} (retried; a summary every {:g} s while it lasts)", what, state, cause,
                _report_every)
            return
        incident.failures += 1
        incident.unreported += 1
        incident.cause = cause
        if now - incident.reported_at < _report_every:
            logger.debug("{} failed again: {}", what, cause)
            return
        logger.log(level, "{} still {} after {:.0f} s: {} failure(s) in the last {:.0f} s, {} in all; "
                   "latest: {}", what, incident.state, now - incident.started, incident.unreported,
                   now - incident.reported_at, incident.failures, cause)
        incident.reported_at = now
        incident.unreported = 0

    def recovered(self, key: Hashable) -> None:
        """``key`` works again: the end line, if it was failing."""
        incident = self._open.pop(key, None)
        if incident is not None:
            logger.info("{} recovered after {:.0f} s ({} failure(s))", incident.what,
                        self._clock() - incident.started, incident.failures)


def _first_trace(exc: BaseException) -> bool:
    """True the first time this cause (type and place of the raise) is seen in this process."""
    key = _trace_key(exc)
    if key in _traced:
        return False
    _traced.add(key)
    return True
