"""``/healthz`` and ``/readyz`` through a whole ``rmqrun run``: waiting, consuming, draining; the scrape's format.

A real ``rmqrun run`` is started before its cluster exists (it waits), with
``--metrics-port``: alive but not ready. The embedded broker then comes up on
the ports it was told: ready once it has rebalanced, while it consumes. On
SIGTERM, with a slow handler still busy, it is not ready while it drains, and
the process still exits 0. The scrape is read with ``prometheus_client``'s own
parser, the reference reader of the format.
"""

from __future__ import annotations

import json
import re
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.cli_kit import Child, child_env, free_port, run_args, wait_for
from tests.integration.signals_kit import REPO, produce, start_broker

pytestmark = pytest.mark.timeout(180)


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


def families(port: int) -> dict[str, object]:
    status, text = get(port, "/metrics")
    assert status == 200
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams: dict[str, object], family: str, name: str | None = None) -> float:
    return sum(s.value for s in fams[family].samples if s.name == (name or family))  # type: ignore[attr-defined]


def test_health_through_wait_consume_and_drain(tmp_path: Path) -> None:
    ns_port, broker_port, port = free_port(), free_port(), free_port()
    env = child_env(RMQRUN_HANDLER_SLEEP_MS="1500")
    args = run_args(f"127.0.0.1:{ns_port}", "GHZ", "HZ", "workers.misbehave:sleep", "--workers", "2",
                    "--metrics-port", str(port), "--graceful-timeout", "60")
    eb = None
    with Child(args, tmp_path, env=env) as child:
        try:
            child.wait_output("metrics on http://127.0.0.1:")
            child.wait_output("cannot start consuming yet")
            # waiting for the cluster: alive, not ready, and the reason names the wait
            assert get(port, "/healthz") == (200, "alive: waiting\n")
            status, body = wait_for(lambda: (lambda r: r if "attempt" in r[1] else None)(get(port, "/readyz")),
                                    30, "/readyz naming the wait")  # type: ignore[misc]
            assert status == 503 and body.startswith("not ready: ") and f"127.0.0.1:{ns_port}" in body, body
            fams = families(port)
            assert sample(fams, "rmqrun_ready") == 0
            assert "rmqrun_messages_consumed" not in fams  # no consumer yet: no consumer families

            eb = start_broker(tmp_path, namesrv_port=ns_port, broker_port=broker_port)
            produce(eb, "HZ", 8)
            status, body = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(get(port, "/readyz")),
                                    60, "ready after the first rebalance")  # type: ignore[misc]
            assert body.startswith("ready: consuming"), body
            assert get(port, "/healthz") == (200, "alive: consuming\n")
            fams = wait_for(lambda: (lambda f: f if sample(f, "rmqrun_messages_consumed",
                                                           "rmqrun_messages_consumed_total") >= 1 else None)(
                families(port)), 60, "a consumed message in the scrape")
            assert fams["rmqrun_messages_consumed"].type == "counter"  # type: ignore[attr-defined]
            assert fams["rmqrun_handler_seconds"].type == "histogram"  # type: ignore[attr-defined]
            assert fams["rmqrun_queue_lag_messages"].type == "gauge"  # type: ignore[attr-defined]
            assert sample(fams, "rmqrun_ready") == 1
            # the example dashboard asks only for series this scrape has
            known = set(fams) | {s.name for f in fams.values() for s in f.samples}  # type: ignore[attr-defined]
            dashboard = json.loads((REPO / "config" / "grafana-dashboard.json").read_text())
            exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]
                     if not p["description"].startswith("rmqrun exporter:")]  # test_exporter.py checks those
            asked = {name for e in exprs for name in re.findall(r"rmqrun_[a-z_]+", e)}
            assert len(asked) >= 10 and asked <= known, sorted(asked - known)
            assert sample(fams, "rmqrun_workers") == 2
            # 1.5 s per message, 8 messages, 2 workers: a busy worker is there to drain on SIGTERM
            wait_for(lambda: sample(families(port), "rmqrun_inflight_batches") >= 1, 30, "a batch in a worker")

            child.signal(signal.SIGTERM)
            status, body = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(get(port, "/readyz")),
                                    30, "not ready while draining")  # type: ignore[misc]
            assert body.startswith("not ready: draining (graceful stop, grace 60 s)"), body
            assert child.wait(60) == 0
        finally:
            if eb is not None:
                eb.stop_in_thread()
