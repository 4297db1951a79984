"""FailureLog: a repeating failure is an incident: a start line with its cause, a counted summary at most once
per interval, an end line; a traceback once per distinct cause, never for a plain transport failure."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rmqrun.client import failure_log
from rmqrun.client.errors import NameServerUnavailableError
from rmqrun.client.failure_log import FailureLog, is_transport
from rmqrun.remoting.errors import BrokerError, ConnectionClosedError, RequestTimeoutError, TlsError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _interval() -> object:
    failure_log.set_report_every(60.0)
    yield
    failure_log.set_report_every(failure_log.DEFAULT_REPORT_EVERY_S)


def lines(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level]


def test_start_summary_once_per_interval_and_end(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = FailureLog(clock)
    with caplog.at_level(logging.DEBUG):
        log.failed("b", "broker 10.0.0.5:10911", ConnectionClosedError("connection refused"), state="unreachable")
        for _ in range(300):  # one a second per queue for a while: all counted, none logged above DEBUG
            clock.now += 0.1
            log.failed("b", "broker 10.0.0.5:10911", ConnectionClosedError("connection refused"),
                       state="unreachable")
        assert lines(caplog) == [
            "broker 10.0.0.5:10911 unreachable: ConnectionClosedError: connection refused (retried; a summary every "
            "60 s while it lasts)"]
        clock.now += 31  # 61 s after the start: one summary, with the count since the last line
        log.failed("b", "broker 10.0.0.5:10911", ConnectionClosedError("still refused"), state="unreachable")
        summary = lines(caplog)[1]
        assert summary.startswith("broker 10.0.0.5:10911 still unreachable after 61 s: 301 failure(s) in the last "
                                  "61 s, 302 in all; latest: ConnectionClosedError: still refused"), summary
        clock.now += 1
        log.failed("b", "broker 10.0.0.5:10911", ConnectionClosedError("x"), state="unreachable")
        assert len(lines(caplog)) == 2  # no second summary within the interval
        clock.now += 2
        log.recovered("b")
        log.recovered("b")  # the end is said once
    assert lines(caplog)[2:] == ["broker 10.0.0.5:10911 recovered after 64 s (303 failure(s))"]
    assert not log.failing("b")


def test_keys_are_independent_and_a_new_failure_after_the_end_starts_a_new_incident(
        caplog: pytest.LogCaptureFixture) -> None:
    log = FailureLog(Clock())
    with caplog.at_level(logging.WARNING):
        log.failed("a", "A", "down")
        log.failed("b", "B", "down")
        log.recovered("a")
        log.failed("a", "A", "down again")
    assert lines(caplog, logging.WARNING) == [
        f"{w} failing: {c} (retried; a summary every 60 s while it lasts)"
        for w, c in (("A", "down"), ("B", "down"), ("A", "down again"))]


def test_a_traceback_once_per_distinct_cause_never_for_a_transport_failure(
        caplog: pytest.LogCaptureFixture) -> None:
    def boom(n: int) -> BaseException:
        try:
            raise KeyError(f"k{n}")  # one place of raise: one cause
        except KeyError as exc:
            return exc

    log = FailureLog(Clock())
    with caplog.at_level(logging.WARNING):
        log.failed("x", "task x", boom(1))
        log.recovered("x")
        log.failed("x", "task x", boom(2))
        log.failed("y", "task y", ConnectionClosedError("refused"))
    traced = [r for r in caplog.records if r.exc_info]
    assert len(traced) == 1 and "k1" in str(traced[0].exc_info[1])  # type: ignore[index]
    assert "Traceback" not in caplog.text.split("task x failing: KeyError: 'k2'")[1]


def test_transport_failures() -> None:
    assert is_transport(ConnectionClosedError("x")) and is_transport(RequestTimeoutError("x"))
    assert is_transport(NameServerUnavailableError("x")) and is_transport(asyncio.TimeoutError())
    assert is_transport(ConnectionRefusedError())
    assert not is_transport(TlsError("certificate expired"))  # a setting must change: never folded away
    assert not is_transport(BrokerError(1, "system error")) and not is_transport(KeyError("x"))


def test_a_periodic_client_task_failing_every_round_is_reported_once(caplog) -> None:  # type: ignore[no-untyped-def]
    """While the cluster is down a periodic job (routes, heartbeats) fails every round: the first failure is
    logged with its cause, the repeats within the interval at DEBUG only, and no traceback for a refused
    connection (the dead name server's 45-line traceback every 30 s)."""
    from rmqrun.client.instance import ClientInstance

    rounds = 0

    async def job() -> None:
        nonlocal rounds
        rounds += 1
        raise NameServerUnavailableError("name server down")

    async def main() -> None:
        task = asyncio.ensure_future(ClientInstance._every(0, 0.001, job))
        while rounds < 20:
            await asyncio.sleep(0.005)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert rounds >= 20
    assert len(warnings) == 1 and "periodic client task" in warnings[0].getMessage()
    assert "name server down" in warnings[0].getMessage() and not warnings[0].exc_info
