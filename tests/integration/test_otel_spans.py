"""OpenTelemetry across processes: the producer's send span is the parent of each handler call's process span.

The test process sends three messages with ``Producer(otel=True)`` inside a ``request`` span (SDK in-memory
exporter here); a supervisor with ``otel`` on runs them in a real worker whose ``worker_init`` installed a
provider writing spans to a file (``otel_handler``). Message 1 raises once, message 2 overruns the soft time
limit once. The worker's batch processor is told to wait ten minutes, so the spans reach the file only
because the worker flushes them as it exits (the stop at the end).

Shown: one ``process`` span (CONSUMER) per handler call with the messaging attributes, each the child of
its message's ``send`` span (PRODUCER) in the request's trace; the handler's own span nested inside; the
failed call and the time-limit call marked ERROR with their exception event; the successes OK.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rmqrun.client.producer import Producer
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, wait_for
from tests.integration.signals_kit import FAST_DELAYS

pytestmark = pytest.mark.timeout(240)

TOPIC, GROUP = "OtelT", "GOtel"
MEMORY = InMemorySpanExporter()


def _provider() -> None:
    """The test process's SDK (set once per process: OpenTelemetry refuses to replace a global provider)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(MEMORY))
        trace.set_tracer_provider(provider)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_process_spans_are_children_of_the_send_spans_across_processes(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _provider()
    MEMORY.clear()
    spans_file, record = tmp_path / "spans.jsonl", tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_SPAN_FILE", str(spans_file))
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(record))
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")  # exported only by the flush at worker exit

    async def main() -> None:
        async with broker(tmp_path, message_delay_levels=FAST_DELAYS, auto_create_queue_nums=1) as eb:
            with trace.get_tracer("test").start_as_current_span("request"):
                async with Producer(eb.namesrv_address, "PG_otel", otel=True) as producer:
                    for i in range(3):
                        await producer.send(TOPIC, f"m{i}".encode(), tags="TagO", keys=[f"k{i}", "shared"],
                                            properties={"idx": str(i)})
            cfg = consumer_config(eb.namesrv_address, GROUP, TOPIC)
            pool = pool_config("tests.integration.handlers.otel_handler:handle", workers=1, consumer=cfg, otel=True,
                               time_limit=1.0, worker_init="tests.integration.handlers.otel_handler:init")
            async with Running(cfg, pool) as r:
                await wait_for(lambda: sum(" ok " in line for line in _lines(record)) == 3, timeout=150,
                               what="the three messages handled")
                assert not spans_file.exists()  # nothing exported before the worker exits
                assert await r.stop() == 0
    asyncio.run(asyncio.wait_for(main(), 220))

    local = MEMORY.get_finished_spans()
    (request,) = [s for s in local if s.name == "request"]
    sends = {s.attributes["messaging.message.id"]: s for s in local if s.name == f"send {TOPIC}"}
    assert len(sends) == 3 and all(s.kind is trace.SpanKind.PRODUCER for s in sends.values())
    assert all(s.parent.span_id == request.context.span_id for s in sends.values())
    spans: list[dict[str, Any]] = [json.loads(line) for line in _lines(spans_file)]
    process = [s for s in spans if s["name"] == f"process {TOPIC}"]
    # three successes, one exception, one time limit: a span per handler call
    assert len(process) == 5, spans
    for s in process:
        a = s["attributes"]
        send = sends[a["messaging.message.id"]]
        assert s["kind"] == "CONSUMER"
        assert s["trace_id"] == f"{request.context.trace_id:032x}"
        assert s["parent_id"] == f"{send.context.span_id:016x}"
        i = int(send.attributes["messaging.rocketmq.message.keys"][0][1:])
        assert (a["messaging.system"], a["messaging.destination.name"], a["messaging.consumer.group.name"],
                a["messaging.rocketmq.message.tag"], a["messaging.rocketmq.message.keys"],
                a["messaging.operation.type"]) == ("rocketmq", TOPIC, GROUP, "TagO", [f"k{i}", "shared"], "process")
        assert a["messaging.destination.partition.id"].isdigit() and a["messaging.rocketmq.queue_offset"] >= 0
    by_status = sorted((s["attributes"]["messaging.rocketmq.reconsume_times"], s["status"], tuple(s["events"]))
                       for s in process)
    assert by_status == [(0, "ERROR", ("exception",)), (0, "ERROR", ("exception",)), (0, "UNSET", ()),
                         (1, "UNSET", ()), (1, "UNSET", ())]
    errors = [s for s in process if s["status"] == "ERROR"]
    assert sorted(sends[s["attributes"]["messaging.message.id"]].attributes["messaging.rocketmq.message.keys"][0]
                  for s in errors) == ["k1", "k2"]
    # the handler's own span is nested in the call's process span
    inner = [s for s in spans if s["name"] == "handler-work"]
    assert sorted(s["parent_id"] for s in inner) == sorted(s["span_id"] for s in process)


def _configured(exporters: str) -> "subprocess.CompletedProcess[str]":
    probe = ("from opentelemetry import trace\n"
             "from rmqrun.worker import otel\n"
             "otel.configure_sdk()\n"
             "with trace.get_tracer('probe').start_as_current_span('probe-span'):\n"
             "    pass\n"
             "otel.shutdown()\n"
             "print('provider', type(trace.get_tracer_provider()).__name__)\n")
    env = {**os.environ, "OTEL_TRACES_EXPORTER": exporters, "OTEL_SERVICE_NAME": "svc-probe",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)


def test_the_sdk_is_configured_from_the_otel_variables() -> None:
    console = _configured("console")
    assert console.returncode == 0, console.stderr
    assert '"name": "probe-span"' in console.stdout and '"service.name": "svc-probe"' in console.stdout
    assert "provider TracerProvider" in console.stdout
    quiet = _configured("none")
    assert quiet.returncode == 0 and "probe-span" not in quiet.stdout and "provider TracerProvider" in quiet.stdout
    unknown = _configured("nosuch")
    assert unknown.returncode == 0 and "OTEL_TRACES_EXPORTER names 'nosuch'" in unknown.stderr


def test_nothing_of_opentelemetry_is_imported_when_off() -> None:
    probe = ("import sys\n"
             "import rmqrun.worker.main, rmqrun.supervisor.supervisor, rmqrun.cli.produce.command\n"
             "from rmqrun.client.producer import Producer\n"
             "p = Producer('127.0.0.1:9876', 'PG')\n"
             "print(p._spans, sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "[]"]


def test_a_batch_handler_call_is_one_span_linked_to_each_producer_span(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _provider()
    MEMORY.clear()
    spans_file, record = tmp_path / "spans.jsonl", tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_SPAN_FILE", str(spans_file))
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(record))

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            async with Producer(eb.namesrv_address, "PG_otel_batch", otel=True) as producer:
                for i in range(5):
                    await producer.send("OtelB", f"m{i}".encode(), properties={"idx": str(i)})
            cfg = consumer_config(eb.namesrv_address, "GOtelB", "OtelB", consume_message_batch_max_size=4)
            pool = pool_config("tests.integration.handlers.otel_handler:handle_batch", workers=1, consumer=cfg, otel=True,
                               batch_size=4, worker_init="tests.integration.handlers.otel_handler:init")
            async with Running(cfg, pool) as r:
                await wait_for(lambda: len(_lines(record)) == 5, timeout=120, what="the five messages handled")
                assert await r.stop() == 0
    asyncio.run(asyncio.wait_for(main(), 220))
    sends = {f"{s.context.span_id:016x}" for s in MEMORY.get_finished_spans() if s.name == "send OtelB"}
    process = [s for s in map(json.loads, _lines(spans_file)) if s["name"] == "process OtelB"]
    assert len(sends) == 5 and process
    for s in process:
        assert s["parent_id"] is None and s["kind"] == "CONSUMER"
        assert s["attributes"]["messaging.batch.message_count"] == len(s["links"]) <= 4
    assert sorted(lk for s in process for lk in s["links"]) == sorted(sends)


def test_a_producer_injects_by_default_when_the_application_uses_opentelemetry(tmp_path: Path) -> None:
    from rmqrun.pull.async_consumer import AsyncPullConsumer
    _provider()
    MEMORY.clear()

    async def main() -> tuple[dict[str, str], dict[str, str]]:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            with trace.get_tracer("test").start_as_current_span("request"):
                async with Producer(eb.namesrv_address, "PG_auto") as auto, \
                        Producer(eb.namesrv_address, "PG_off", otel=False) as off:
                    a = await auto.send("OtelAuto", b"a")
                    o = await off.send("OtelAuto", b"o")
            async with AsyncPullConsumer(eb.namesrv_address, "reader", register=False) as c:
                return ((await c.view_message(a.msg_id, topic="OtelAuto")).properties,
                        (await c.view_message(o.msg_id, topic="OtelAuto")).properties)
    auto_props, off_props = asyncio.run(asyncio.wait_for(main(), 120))
    (send,) = [s for s in MEMORY.get_finished_spans() if s.name == "send OtelAuto"]
    version, trace_id, span_id, _flags = auto_props["traceparent"].split("-")
    assert (version, trace_id, span_id) == ("00", f"{send.context.trace_id:032x}", f"{send.context.span_id:016x}")
    assert "traceparent" not in off_props
