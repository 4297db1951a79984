"""While the pool is wedged, systemd's STATUS= says so (issue #33, item 8).

The watchdog's ``STATUS=unhealthy: pool wedged ...`` used to be replaced 0.1 s
later by the next progress line (``20 consumed (0/s now), lag 40, ...``), so
``systemctl status`` hid the wedge; without a watchdog the wedge never reached
STATUS= at all. A fake systemd on a real NOTIFY_SOCKET reads what arrives.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.integration.cli_kit import Child, child_env, embedded_broker, produce, run_args, wait_for
from tests.integration.test_systemd_notify import FakeSystemd

pytestmark = pytest.mark.timeout(180)


def _statuses(systemd: FakeSystemd) -> list[str]:
    return [f["STATUS"] for _, f in systemd.drain() if "STATUS" in f]


def test_every_status_line_while_wedged_says_unhealthy(tmp_path: Path) -> None:
    systemd = FakeSystemd(str(tmp_path / "notify.sock"))
    try:
        with embedded_broker(tmp_path) as eb:
            produce(eb.namesrv_address, "Wedge", 6)
            env = child_env(NOTIFY_SOCKET=systemd.address, RMQRUN_STALL_TIMEOUT="2",
                            RMQRUN_STATUS_INTERVAL="0.3")
            args = run_args(eb.namesrv_address, "G_wedge", "Wedge", "workers.misbehave:hang", "--workers", "1",
                            "--graceful-timeout", "1")
            with Child(args, tmp_path, env=env) as child:
                wait_for(lambda: systemd.first("READY", "1"), 60, "READY=1")
                child.wait_output("pool wedged: no handler call has finished", 60)
                seen = len(_statuses(systemd))
                # three more progress lines after the wedge was logged: each one names it first
                wait_for(lambda: len(_statuses(systemd)) >= seen + 3, 30, "three more STATUS= lines")
                later = _statuses(systemd)[seen:]
                assert all(s.startswith("unhealthy: pool wedged: no handler call has finished for ") for s in later), later
                assert all(" consumed (" in s for s in later), later  # and still the progress after it
                child.signal(signal.SIGTERM)
                assert child.wait(60) == 0
                assert _statuses(systemd)[-1].startswith("stopping"), _statuses(systemd)[-3:]
    finally:
        systemd.close()
