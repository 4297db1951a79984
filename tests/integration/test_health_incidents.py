"""The two commonest incidents, as a real ``rmqrun run`` reports them: a killed broker, a stuck pool.

**Broker killed.** The name server and broker (``python -m rmqrun.broker``, one
process: both go down) are ``kill -9``ed under a consuming ``rmqrun run``.
Within ``ready_broker_timeout`` ``/readyz`` is 503 and ``rmqrun_ready`` 0, and
the scrape carries no lag or broker offset that is only a memory. The outage
lasts 60 s and costs a handful of log lines (no line per queue per second, no
traceback every 30 s). The broker is started again on the same ports and data:
ready again, lag back, and the log says when each failure ended.

**Every worker stuck.** Each handler call hangs, batches wait: within
``stall_timeout`` ``/healthz`` and ``/readyz`` are 503, ``rmqrun_ready`` is 0
and the systemd watchdog pings stop (a fake systemd on a real NOTIFY_SOCKET).
On SIGTERM the STATUS= line keeps saying "stopping" and the stop log counts the
whole grace.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rmqrun.broker.app import BrokerProcess
from tests.integration import engine_kit
from tests.integration.cli_kit import Child, child_env, free_port, run_args, wait_for
from tests.integration.test_health_endpoints import get
from tests.integration.test_systemd_notify import FakeSystemd

pytestmark = pytest.mark.timeout(300)

READY_BROKER_TIMEOUT = 3.0
OUTAGE_S = 60.0
STALL_TIMEOUT = 4.0
#: the periodic progress line is not a failure line (status_interval, every 10 s by design)
STATUS_LINE = re.compile(r"\| (stopping: )?\d+ consumed \(\d+/s now\)")  # supervisor/status_line.py


def samples(port: int) -> dict[str, list[float]]:
    status, text = get(port, "/metrics")
    assert status == 200
    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s.value)
    return out


def log_lines(child: Child, start: int = 0) -> list[str]:
    """Log records (not traceback lines) written since byte ``start`` of the child's stderr."""
    return [ln for ln in child.stderr[start:].splitlines() if re.match(r"\d{4}-\d\d-\d\d ", ln)]


def test_broker_killed_not_ready_quiet_log_and_ready_again(tmp_path: Path) -> None:
    ns_port, broker_port, port = free_port(), free_port(), free_port()
    data = tmp_path / "broker"
    bp = BrokerProcess(data, namesrv_port=ns_port, broker_port=broker_port, auto_create_queue_nums=8).start()
    env = child_env(RMQRUN_READY_BROKER_TIMEOUT=str(READY_BROKER_TIMEOUT))
    try:
        asyncio.run(engine_kit.produce(bp.namesrv_address, "Outage", 40))
        args = run_args(bp.namesrv_address, "G_outage", "Outage", "workers.noop:handle", "--workers", "2",
                        "--metrics-port", str(port))
        with Child(args, tmp_path, env=env) as child:
            child.wait_output("metrics on http://127.0.0.1:")
            wait_for(lambda: get(port, "/readyz")[0] == 200, 60, "ready")
            wait_for(lambda: sum(samples(port).get("rmqrun_messages_consumed_total", [0])) == 40, 60, "40 consumed")
            wait_for(lambda: len(samples(port).get("rmqrun_queue_lag_messages", [])) >= 8, 30, "a lag per queue")

            mark = len(child.stderr)
            bp.kill()  # kill -9: the name server and the broker with it
            killed = time.monotonic()
            status, body = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(get(port, "/readyz")),
                                    READY_BROKER_TIMEOUT + 30, "not ready after the kill")  # type: ignore[misc]
            # not ready for the reason the limit gives (how soon the test's poll saw it is the scheduler's)
            assert body.startswith("not ready: no broker has answered for "), body
            assert body.rstrip().endswith(f"(ready_broker_timeout {READY_BROKER_TIMEOUT:g} s)"), body
            scrape = samples(port)
            assert scrape["rmqrun_ready"] == [0.0]
            assert "rmqrun_queue_lag_messages" not in scrape, "a lag from a dead broker is a stale number"
            assert "rmqrun_queue_broker_offset" not in scrape
            assert get(port, "/healthz")[0] == 200  # alive: waiting for a broker is not a reason to restart

            while time.monotonic() - killed < OUTAGE_S:
                assert child.proc.poll() is None, child.stderr[-3000:]
                assert get(port, "/readyz")[0] == 503
                time.sleep(2)
            during = [ln for ln in log_lines(child, mark) if not STATUS_LINE.search(ln)]
            assert len(during) <= 6, "a 60 s outage logged more than a handful of lines:\n" + "\n".join(during)
            assert "Traceback" not in child.stderr[mark:], child.stderr[mark:]
            text = "\n".join(during)
            assert f"broker {bp.broker_address} unreachable: " in text, text
            assert f"name server {bp.namesrv_address} unreachable: " in text, text
            assert "not ready: no broker has answered" in text, text

            mark = len(child.stderr)
            bp = BrokerProcess(data, namesrv_port=ns_port, broker_port=broker_port, auto_create_queue_nums=8).start()
            status, body = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(get(port, "/readyz")),
                                    60, "ready again")  # type: ignore[misc]
            assert body.startswith("ready: consuming"), body
            assert samples(port)["rmqrun_ready"] == [1.0]
            wait_for(lambda: len(samples(port).get("rmqrun_queue_lag_messages", [])) >= 8, 40, "the lag back")
            wait_for(lambda: f"broker {bp.broker_address} recovered after " in child.stderr[mark:], 30,
                     "the end of the broker's incident")
            assert "ready again: consuming" in child.stderr[mark:]
            child.signal(signal.SIGTERM)
            assert child.wait(60) == 0
    finally:
        bp.kill()


def test_every_worker_stuck_is_unhealthy_and_the_watchdog_stops(tmp_path: Path) -> None:
    port = free_port()
    systemd = FakeSystemd(str(tmp_path / "notify.sock"))
    bp = BrokerProcess(tmp_path / "broker", auto_create_queue_nums=4).start()
    try:
        asyncio.run(engine_kit.produce(bp.namesrv_address, "Stuck", 30))
        env = child_env(NOTIFY_SOCKET=systemd.address, WATCHDOG_USEC="1000000",
                        RMQRUN_STALL_TIMEOUT=str(STALL_TIMEOUT), RMQRUN_STATUS_INTERVAL="0.5")
        args = run_args(bp.namesrv_address, "G_stuck", "Stuck", "workers.misbehave:hang", "--workers", "2",
                        "--metrics-port", str(port), "--graceful-timeout", "3")
        with Child(args, tmp_path, env=env) as child:
            wait_for(lambda: systemd.first("READY", "1"), 60, "READY=1")
            child.wait_output("metrics on http://127.0.0.1:")
            ready_at = time.monotonic()

            def unhealthy() -> tuple[int, str] | None:
                systemd.drain()  # as systemd does: it always reads (an unread socket fills in 10 datagrams)
                answer = get(port, "/healthz")
                return answer if answer[0] == 503 else None

            status, body = wait_for(unhealthy, STALL_TIMEOUT + 15, "unhealthy")  # type: ignore[misc]
            assert body.startswith("unhealthy: pool wedged: no handler call has finished for "), body
            assert f"(stall_timeout {STALL_TIMEOUT:g} s)" in body
            unhealthy_at = time.monotonic()
            assert unhealthy_at - ready_at <= STALL_TIMEOUT + 5
            ready_status, ready_body = get(port, "/readyz")
            assert ready_status == 503 and ready_body.startswith("not ready: pool wedged"), ready_body
            assert samples(port)["rmqrun_ready"] == [0.0]

            # the watchdog: pinged every 0.5 s while alive, then no more (systemd restarts after WatchdogSec)
            wait_for(lambda: systemd.drain() and "systemd watchdog pings stop (unhealthy: pool wedged"
                     in child.stderr, 10, "the watchdog pings stopping")
            stopped_at = time.monotonic()
            for _ in range(30):
                systemd.drain()
                time.sleep(0.1)
            pings = systemd.times("WATCHDOG")
            assert pings and any(t < unhealthy_at for t in pings), "no ping while alive"
            assert not [t for t in pings if t > stopped_at + 0.2], "pinged while the pool was wedged"
            assert child.stderr.count("pool wedged: no handler call has finished") == 2  # the watch, the watchdog

            child.signal(signal.SIGTERM)
            assert child.wait(60) == 0
            statuses = [f["STATUS"] for _, f in systemd.drain() if "STATUS" in f]
            after = statuses[next(i for i, s in enumerate(statuses) if s.startswith("stopping: finishing")):]
            assert after and all(s.startswith("stopping") for s in after), after
            assert "worker(s) still busy after 3 s; stopping them now" in child.stderr, child.stderr[-2000:]
    finally:
        bp.kill()
        systemd.close()


def test_every_worker_past_the_consume_time_limit_is_unhealthy(tmp_path: Path) -> None:
    """The other wedge: calls that outlive consumeTimeout (a handler swallowing the soft limit), before the
    pool's hard kill (kill_grace later) frees them; the stall rule is off here."""
    port = free_port()
    bp = BrokerProcess(tmp_path / "broker", auto_create_queue_nums=2).start()
    try:
        asyncio.run(engine_kit.produce(bp.namesrv_address, "PastLimit", 4))
        env = child_env(RMQRUN_STALL_TIMEOUT="0", RMQRUN_KILL_GRACE="120")
        args = run_args(bp.namesrv_address, "G_limit", "PastLimit", "workers.misbehave:hang_hard", "--workers",
                        "2", "--consume-timeout", "0.05", "--metrics-port", str(port), "--graceful-timeout", "1")
        with Child(args, tmp_path, env=env) as child:
            child.wait_output("metrics on http://127.0.0.1:")
            wait_for(lambda: get(port, "/readyz")[0] == 200, 60, "ready")
            status, body = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(get(port, "/healthz")),
                                    30, "unhealthy")  # type: ignore[misc]
            assert body.startswith("unhealthy: pool wedged: every worker (2) has been in one handler call for "
                                   "over 3 s (the consume time limit"), body
            assert samples(port)["rmqrun_ready"] == [0.0]
            child.signal(signal.SIGTERM)
            assert child.wait(60) == 0
    finally:
        bp.kill()
