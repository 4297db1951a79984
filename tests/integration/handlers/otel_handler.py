"""A handler for the OpenTelemetry tests: it starts a span of its own, fails or overruns chosen messages once.

``init`` (the worker_init) installs an SDK tracer provider whose batch processor writes every finished span
as a JSON line to ``RMQRUN_HANDLER_SPAN_FILE`` (the test process reads them back); rmqrun keeps a provider a
worker_init installed. Message property ``idx`` 1 raises on its first delivery, ``idx`` 2 sleeps past the
time limit on its first delivery; every delivery appends ``idx ok|fail reconsume_times`` to
``RMQRUN_HANDLER_RECORD_FILE``.
"""

from __future__ import annotations

import json
import os
import time
from typing import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import rmqrun


class FileSpanExporter(SpanExporter):
    """Finished spans as JSON lines, appended to a file (the SDK's in-memory exporter lives in one process)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as f:
            for s in spans:
                parent = s.parent
                f.write(json.dumps({
                    "name": s.name, "kind": s.kind.name, "trace_id": f"{s.context.trace_id:032x}",
                    "span_id": f"{s.context.span_id:016x}", "parent_id": f"{parent.span_id:016x}" if parent else None,
                    "status": s.status.status_code.name, "attributes": dict(s.attributes or {}),
                    "events": [e.name for e in s.events], "links": [f"{lk.context.span_id:016x}" for lk in s.links],
                    "pid": os.getpid()}) + "\n")
        return SpanExportResult.SUCCESS


def init(info: rmqrun.WorkerInfo) -> None:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(FileSpanExporter(os.environ["RMQRUN_HANDLER_SPAN_FILE"])))
    trace.set_tracer_provider(provider)


def _record(msg: rmqrun.Message, status: str) -> None:
    with open(os.environ["RMQRUN_HANDLER_RECORD_FILE"], "a", encoding="utf-8") as f:
        f.write(f"{msg.properties.get('idx')} {status} {msg.reconsume_times}\n")


def handle(msg: rmqrun.Message) -> None:
    with trace.get_tracer("otel_handler").start_as_current_span("handler-work"):
        idx = msg.properties.get("idx")
        if msg.reconsume_times == 0 and idx == "1":
            _record(msg, "fail")
            raise RuntimeError("failing on purpose")
        if msg.reconsume_times == 0 and idx == "2":
            _record(msg, "slow")
            time.sleep(30)  # the soft time limit interrupts it
        _record(msg, "ok")


@rmqrun.batch
def handle_batch(msgs: list[rmqrun.Message]) -> None:
    for msg in msgs:
        _record(msg, "ok")
