"""The start-up loop that waits for the cluster (rmqrun/supervisor/cluster_wait.py), with fake consumers."""

from __future__ import annotations

import asyncio
import signal
from types import SimpleNamespace

import pytest
from loguru import logger

from rmqrun.client.errors import NameServerUnavailableError
from rmqrun.errors import ConfigError
from rmqrun.remoting.errors import AccessDeniedError, TlsError
from rmqrun.supervisor.cluster_wait import Backoff, start_when_reachable

FAST = Backoff(initial_s=0.01, cap_s=0.04, log_every_s=60.0)


class FakeEngine:
    """Fails its first ``failures`` starts with ``error``; records shutdowns."""

    made: list["FakeEngine"] = []

    def __init__(self, outcomes: list[BaseException | None]) -> None:
        self.error = outcomes.pop(0) if outcomes else None
        self.shut = False
        self.instance = SimpleNamespace(refusal=None)  # the client instance's first ACL refusal: none
        FakeEngine.made.append(self)

    async def start(self) -> None:
        if self.error is not None:
            raise self.error

    async def shutdown(self, grace: float = 0) -> None:
        self.shut = True


@pytest.fixture
def logs():  # type: ignore[no-untyped-def]
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    FakeEngine.made = []
    yield lines
    logger.remove(sink)


def test_retries_with_capped_backoff_reports_status_and_logs_once(logs: list[str]) -> None:
    outcomes: list[BaseException | None] = [NameServerUnavailableError("no name server answered among x:1")] * 5
    statuses: list[str] = []

    async def main():  # type: ignore[no-untyped-def]
        return await start_when_reachable(lambda: FakeEngine(outcomes), asyncio.Queue(), on_status=statuses.append,
                                          backoff=FAST)  # type: ignore[arg-type,return-value]

    engine = asyncio.run(main())
    assert engine is FakeEngine.made[-1] and len(FakeEngine.made) == 6
    assert all(e.shut for e in FakeEngine.made[:-1]) and not engine.shut
    assert [s.rsplit("next in ", 1)[1] for s in statuses] == ["0.01 s)", "0.02 s)", "0.04 s)", "0.04 s)", "0.04 s)"]
    assert all(s.startswith("waiting for the cluster: no name server answered among x:1 (attempt ") for s in statuses)
    assert sum("cannot start consuming yet" in line for line in logs) == 1
    assert any("reached the cluster after 6 attempts" in line for line in logs)


def test_sigterm_ends_the_wait_and_other_signals_are_handed_on() -> None:
    handled: list[int] = []

    async def main():  # type: ignore[no-untyped-def]
        signals: asyncio.Queue[int] = asyncio.Queue()
        signals.put_nowait(signal.SIGTTIN)
        signals.put_nowait(signal.SIGTERM)

        async def on_signal(sig: int) -> None:
            handled.append(sig)
        return await start_when_reachable(lambda: FakeEngine([OSError("refused")]), signals,  # type: ignore[arg-type,return-value]
                                          on_signal=on_signal, backoff=Backoff(10.0, 10.0, 60.0))

    assert asyncio.run(main()) is None
    assert handled == [signal.SIGTTIN]


@pytest.mark.parametrize("error", [ConfigError("group: bad"), TypeError("a bug")])
def test_what_waiting_cannot_fix_is_raised_at_once(error: BaseException) -> None:
    async def main():  # type: ignore[no-untyped-def]
        return await start_when_reachable(lambda: FakeEngine([error]), asyncio.Queue(), backoff=FAST)  # type: ignore[arg-type,return-value]

    FakeEngine.made = []
    with pytest.raises(type(error)):
        asyncio.run(main())
    assert len(FakeEngine.made) == 1 and FakeEngine.made[0].shut


@pytest.mark.parametrize("error", [
    AccessDeniedError(1, "org.apache.rocketmq.acl.common.AclException: No acl config for ak", 34,
                      message="access denied by b:1: HEART_BEAT (group G) with access key ak: No acl config for ak"),
    TlsError("TLS to n:1 failed: the server's certificate is not accepted: certificate has expired"),
])
def test_a_refusal_ends_the_wait_at_once(error: BaseException, logs: list[str]) -> None:
    """An ACL refusal or a failed TLS handshake is no outage: no second attempt, the error itself is raised."""
    async def main():  # type: ignore[no-untyped-def]
        return await start_when_reachable(lambda: FakeEngine([error]), asyncio.Queue(),  # type: ignore[arg-type,return-value]
                                          backoff=FAST)

    with pytest.raises(type(error)) as info:
        asyncio.run(main())
    assert info.value is error and len(FakeEngine.made) == 1 and FakeEngine.made[0].shut


def test_a_refusal_swallowed_during_start_still_ends_the_wait(logs: list[str]) -> None:
    """A heartbeat refused inside start() (logged, not raised) is recorded by the client instance: no start."""
    refusal = AccessDeniedError(1, "AclException: x", 34, message="access denied by b:1: HEART_BEAT")

    def make() -> FakeEngine:
        engine = FakeEngine([])
        engine.instance.refusal = refusal
        return engine

    async def main():  # type: ignore[no-untyped-def]
        return await start_when_reachable(make, asyncio.Queue(), backoff=FAST)  # type: ignore[arg-type,return-value]

    with pytest.raises(AccessDeniedError):
        asyncio.run(main())
    assert len(FakeEngine.made) == 1 and FakeEngine.made[0].shut


def test_tls_failure_behind_every_name_server_ends_the_wait(logs: list[str]) -> None:
    tls = TlsError("TLS to n:1 failed: the server does not speak TLS here")
    wrapped = NameServerUnavailableError("no name server answered among n:1")
    wrapped.__cause__ = tls

    async def main():  # type: ignore[no-untyped-def]
        return await start_when_reachable(lambda: FakeEngine([wrapped]), asyncio.Queue(),  # type: ignore[arg-type,return-value]
                                          backoff=FAST)

    with pytest.raises(TlsError):
        asyncio.run(main())
    assert len(FakeEngine.made) == 1
