"""The process span of an ``async def`` handler (the asyncio worker class) lasts as long as the call itself."""

from __future__ import annotations

import asyncio

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import rmqrun
from rmqrun.handler.loading import Handler
from rmqrun.model import Message
from rmqrun.worker import otel


def _exporter() -> InMemorySpanExporter:
    """An exporter on the process's SDK provider (installed once: OpenTelemetry refuses to replace it)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())
    exporter = InMemorySpanExporter()
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[attr-defined]
    return exporter


def test_an_async_handlers_span_covers_the_awaited_call_and_its_failure() -> None:
    exporter = _exporter()
    inner: list[bool] = []

    async def handle(msg: Message) -> object:
        await asyncio.sleep(0.01)
        # after an await the process span is still current and open: a sync wrapper would have ended it
        inner.append(trace.get_current_span().is_recording())
        return rmqrun.ReconsumeLater() if msg.body == b"again" else None

    traced = otel.traced_handler(Handler("m:handle", handle, False), "G")
    msgs = [Message(topic="T", body=b, properties={}, queue_id=0, queue_offset=i) for i, b in enumerate([b"ok",
                                                                                                       b"again"])]

    async def main() -> list[object]:
        return [await traced.fn(m) for m in msgs]

    results = asyncio.run(main())
    assert results[0] is None and isinstance(results[1], rmqrun.ReconsumeLater)
    assert inner == [True, True]
    spans = [s for s in exporter.get_finished_spans() if s.name == "process T"]
    assert len(spans) == 2
    assert [s.status.status_code for s in spans] == [trace.StatusCode.UNSET, trace.StatusCode.ERROR]
