"""``rmqrun run --metrics-port``: scraped over real HTTP while it consumes from a real broker.

Every scrape is checked against the text exposition format 0.0.4 (HELP and
TYPE before samples, valid names and labels, cumulative histogram buckets
ending in +Inf = _count), and the numbers against what the test did: how many
messages it sent, failed on purpose, which worker it killed, when the backlog
was drained.
"""

from __future__ import annotations

import re
import signal
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.integration.cli_kit import (
    Child, child_env, embedded_broker, free_port, produce, run_args, run_cli, wait_for,
)

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


@dataclass
class Scrape:
    types: dict[str, str] = field(default_factory=dict)
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def value(self, name: str, **labels: str) -> float | None:
        for n, lab, v in self.samples:
            if n == name and all(lab.get(k) == val for k, val in labels.items()):
                return v
        return None

    def all(self, name: str) -> list[tuple[dict[str, str], float]]:
        return [(lab, v) for n, lab, v in self.samples if n == name]


def parse(text: str) -> Scrape:
    """A strict reader of the 0.0.4 text format, as much of it as rmqrun uses."""
    out = Scrape()
    helped: set[str] = set()
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert name not in helped, f"second HELP for {name}"
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram"), line
            assert name in helped and name not in out.types, f"TYPE of {name} without HELP, or twice"
            # rmqrun's own families, and prometheus_client's process, platform and GC collectors
            assert name.startswith(("rmqrun_", "process_", "python_")), name
            out.types[name] = kind
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels_text, value = m.group(1), m.group(3) or "", m.group(4)
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in out.types else name
        assert family in out.types, f"sample {name} before its TYPE line"
        labels = {k: v for k, v, _ in _LABEL.findall(labels_text)}
        assert ",".join(f'{k}="{v}"' for k, v in labels.items()) == labels_text, f"bad labels: {line!r}"
        out.samples.append((name, labels, float(value)))
    for name, kind in out.types.items():
        if kind == "histogram":
            buckets = out.all(name + "_bucket")
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), f"{name} buckets are not cumulative"
            assert buckets[-1][0]["le"] == "+Inf" and counts[-1] == out.value(name + "_count")
    return out


def scrape(port: int) -> Scrape:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        return parse(resp.read().decode("utf-8"))


def total(s: Scrape, name: str) -> float:
    return sum(v for _, v in s.all(name))


def worker_pids(pid: int) -> list[int]:
    return [p.pid for p in psutil.Process(pid).children() if " ".join(p.cmdline()).startswith("rmqrun: worker ")]


def test_metrics_while_consuming(tmp_path: Path) -> None:
    port = free_port()
    n = 300
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "MT", n)
        env = child_env(RMQRUN_HANDLER_SLEEP_MS="15", RMQRUN_MAX_MESSAGES_PER_WORKER="100")
        args = run_args(eb.namesrv_address, "GMT", "MT", "workers.misbehave:sleep", "--workers", "2",
                        "--metrics-port", str(port))
        with Child(args, tmp_path, env=env) as child:
            child.wait_output("metrics on http://127.0.0.1:")
            # while the backlog drains: lag and in-flight messages are visible per queue
            # (a queue whose start offset could not be read at the first rebalance, e.g. a slow
            # answer under load, is taken at a later one: wait for all four)
            s = wait_for(lambda: (lambda x: x if x.value("rmqrun_ready") == 1 and total(x, "rmqrun_queue_lag_messages")
                                  > 0 and (x.value("rmqrun_assigned_queues") or 0) >= 4 else None)(scrape(port)),
                         30, "a scrape showing lag on all four queues")
            assert s.types["rmqrun_messages_consumed_total"] == "counter"
            assert s.types["rmqrun_handler_seconds"] == "histogram"
            consumed = s.value("rmqrun_messages_consumed_total")
            assert consumed is not None and consumed < n
            lag_queues = {lab["queue_id"] for lab, _ in s.all("rmqrun_queue_lag_messages") if lab["topic"] == "MT"}
            # every per-queue series names its group, as rmqrun exporter's do
            assert {lab["group"] for lab, _ in s.all("rmqrun_queue_lag_messages")} == {"GMT"}
            assert s.types["rmqrun_store_to_handler_seconds"] == "histogram"
            # the supervisor's own process, as every Python exporter shows it
            assert s.types["process_resident_memory_bytes"] == "gauge"
            assert (s.value("process_resident_memory_bytes") or 0) > 0
            assert s.value("process_start_time_seconds") is not None and "python_info" in s.types
            assert lag_queues <= {"0", "1", "2", "3"} and lag_queues
            assert total(s, "rmqrun_queue_inflight_messages") > 0
            assert s.value("rmqrun_assigned_queues") in (4, 5)  # MT's four queues (+ the retry queue once it exists)

            victim = worker_pids(child.pid)[0]
            psutil.Process(victim).kill()
            s = wait_for(lambda: (lambda x: x if x.value("rmqrun_worker_restarts_total") == 1 else None)(scrape(port)),
                         20, "the restart counted")

            s = wait_for(lambda: (lambda x: x if x.value("rmqrun_messages_consumed_total") >= n
                                  and total(x, "rmqrun_queue_lag_messages") == 0 else None)(scrape(port)),
                         60, "all consumed and no lag")
            assert s.value("rmqrun_messages_consumed_total") == n  # the killed worker's batch came back, once
            assert s.value("rmqrun_messages_failed_total") == 0
            assert s.value("rmqrun_handler_seconds_count") == n
            # each message slept 15 ms in its worker: nothing under 10 ms, the sum at least n * 15 ms
            assert s.value("rmqrun_handler_seconds_bucket", le="0.01") == 0
            assert s.value("rmqrun_handler_seconds_sum") >= n * 0.015
            # each message began in its worker after it was stored, behind a backlog of 300 * 15 ms / 2 workers
            assert s.value("rmqrun_store_to_handler_seconds_count") == n
            assert s.value("rmqrun_store_to_handler_seconds_sum") > s.value("rmqrun_handler_seconds_sum")
            assert s.value("rmqrun_worker_recycles_total") >= 1  # 100 messages per worker, 300 in all
            assert s.value("rmqrun_worker_restarts_total") == 1
            assert s.value("rmqrun_rebalances_total") >= 1
            assert s.value("rmqrun_lock_losses_total") == 0
            assert s.value("rmqrun_workers") == 2
            for lab, v in s.all("rmqrun_queue_broker_offset"):
                if lab["topic"] == "MT":
                    assert v == s.value("rmqrun_queue_consumer_offset", **lab)
            assert sum(v for lab, v in s.all("rmqrun_queue_broker_offset") if lab["topic"] == "MT") == n

            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0


def test_failures_and_http_errors(tmp_path: Path) -> None:
    port = free_port()
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "MF", 30, props=lambda i: {"FAIL": "1"} if i % 3 == 0 else {})
        args = run_args(eb.namesrv_address, "GMF", "MF", "workers.flaky:handle", "--workers", "1",
                        "--metrics-port", str(port))
        with Child(args, tmp_path) as child:
            child.wait_output("metrics on http://127.0.0.1:")
            # the ten failures go back to the broker with a 10 s delay: within this window each fails once
            s = wait_for(lambda: (lambda x: x if (x.value("rmqrun_messages_consumed_total") or 0) >= 20 and
                                  (x.value("rmqrun_messages_failed_total") or 0) >= 10 else None)(scrape(port)),
                         20, "20 consumed and 10 failed")
            assert s.value("rmqrun_messages_consumed_total") == 20
            assert s.value("rmqrun_messages_failed_total") == 10

            for method, path, code in (("GET", "/", 404), ("GET", "/metricsx", 404), ("POST", "/metrics", 405)):
                req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=b"" if
                                             method == "POST" else None)
                try:
                    urllib.request.urlopen(req, timeout=5)
                    raise AssertionError(f"{method} {path} succeeded")
                except urllib.error.HTTPError as exc:
                    assert exc.code == code, (method, path, exc.code)
            # a query string is fine, a client that sends nothing is dropped without harm
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics?x=1", timeout=5) as resp:
                assert resp.status == 200
            with socket.create_connection(("127.0.0.1", port)) as sock:
                sock.sendall(b"GARBAGE\r\n\r\n")
                assert sock.recv(100).startswith(b"HTTP/1.1 405")
            assert scrape(port).value("rmqrun_workers") == 1
            child.signal(signal.SIGTERM)
            assert child.wait(30) == 0


def test_metrics_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli(["run", "workers.noop:handle", "--namesrv", "127.0.0.1:1", "--group", "G", "--topic", "T",
                        "--metrics-port", str(port)])
    assert proc.returncode == 1  # a runtime condition, restarted by the unit; 2 is for bad settings only
    assert f"metrics_port={port} (command line --metrics-port): cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert "Traceback" not in proc.stderr
