"""OpenTelemetry on the send side: a ``send`` span (kind PRODUCER) per message, its context in the message.

The consumer's process span (``rmqrun run --otel``, a RocketMQ 5.x client with tracing) is made the child
of the context a message carries as W3C ``traceparent``/``tracestate`` user properties; this module puts
them there, through the globally configured propagator, from a span started around each send (the current
span of the caller is its parent, so the message joins the request that sent it).

Nothing here imports OpenTelemetry unless asked: :func:`send_spans` returns None when ``otel`` is False,
and for ``None`` (the Producer's default) only when the application has already imported
``opentelemetry.trace`` itself; ``True`` without the package installed is a clear error.
"""

from __future__ import annotations

import sys
from typing import Any

SYSTEM = "rocketmq"


class SendSpans:
    """Starts a producer span for a send and writes its context into the message's properties."""

    def __init__(self) -> None:
        from opentelemetry import propagate, trace
        self._trace = trace
        self._propagate = propagate
        self._tracer = trace.get_tracer("rmqrun")

    def start(self, topic: str, props: dict[str, str]) -> Any:
        """A started span for sending to ``topic``; its context is injected into ``props``."""
        from opentelemetry.trace import SpanKind
        attrs: dict[str, Any] = {"messaging.system": SYSTEM, "messaging.destination.name": topic,
                                 "messaging.operation.name": "send", "messaging.operation.type": "send"}
        if props.get("TAGS"):
            attrs["messaging.rocketmq.message.tag"] = props["TAGS"]
        if props.get("KEYS"):
            attrs["messaging.rocketmq.message.keys"] = props["KEYS"].split(" ")
        span = self._tracer.start_span(f"send {topic}", kind=SpanKind.PRODUCER, attributes=attrs)
        self._propagate.inject(props, context=self._trace.set_span_in_context(span))
        return span

    def end(self, span: Any, msg_id: str | None, error: BaseException | None) -> None:
        from opentelemetry.trace import Status, StatusCode
        if msg_id:
            span.set_attribute("messaging.message.id", msg_id)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()


def send_spans(otel: bool | None) -> SendSpans | None:
    """What a Producer traces its sends with: None when off (``otel`` False, or None and no OpenTelemetry
    imported by the application)."""
    if otel is False or (otel is None and "opentelemetry.trace" not in sys.modules):
        return None
    try:
        return SendSpans()
    except ImportError as exc:
        if otel:
            raise ValueError(f"otel=True needs OpenTelemetry ({exc}): pip install 'rmqrun[otel]'") from None
        return None
