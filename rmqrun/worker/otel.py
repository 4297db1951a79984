"""OpenTelemetry in a worker: a ``process`` span (kind CONSUMER) around every handler call.

Imported only when ``otel`` is on (``rmqrun run --otel``), so a worker without it loads no OpenTelemetry
module. The optional extra ``rmqrun[otel]`` brings ``opentelemetry-api`` and ``-sdk``.

* The SDK is configured the standard way, from ``OTEL_*`` variables (:func:`configure_sdk`): the resource
  from ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES``, the exporters named by ``OTEL_TRACES_EXPORTER``
  (default ``otlp``; ``none``; ``console``; any exporter package's entry point) behind a
  ``BatchSpanProcessor`` (``OTEL_BSP_*``). A tracer provider the handler's ``worker_init`` installed itself
  is kept as it is.
* Each call's span is the child of the producer's span when the message carries W3C ``traceparent`` /
  ``tracestate`` user properties (what the RocketMQ 5.x clients and rmqrun's Producer write), and is the
  current span while the handler runs, so spans the handler starts nest inside it. A batch handler's call
  gets one span linked to each message's producer context instead.
* Attributes follow the messaging semantic conventions (``messaging.system=rocketmq``, destination,
  consumer group, message id, keys, tag, queue, plus the queue offset and reconsume count under
  ``messaging.rocketmq.*``); an exception (a soft time limit included) is recorded as an event with status
  ERROR, a failure result (ReconsumeLater, SuspendCurrentQueue, Rollback) sets status ERROR.
* :func:`shutdown` flushes and closes the provider when the worker exits (recycled, reloaded, stopped).
  A worker killed by the hard time limit cannot: its span of the killed call is lost with it.
"""

from __future__ import annotations

import functools
import inspect
import os
from importlib.metadata import entry_points
from typing import Any, Callable

from loguru import logger
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from rmqrun.handler.loading import Handler
from rmqrun.handler.results import ReconsumeLater, Rollback, SuspendCurrentQueue
from rmqrun.model import Message

SYSTEM = "rocketmq"
_FAILURES = (ReconsumeLater, SuspendCurrentQueue, Rollback)


def configure_sdk() -> None:
    """Install an SDK tracer provider from the ``OTEL_*`` variables, unless one is installed already."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return  # the application (a worker_init) configured its own
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return
    provider = TracerProvider(resource=Resource.create({}))
    names = [n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    found = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    for name in names:
        if name == "none":
            continue
        ep = found.get(name)
        if ep is None:
            logger.warning("OTEL_TRACES_EXPORTER names {!r}, which no installed package provides (installed: {}); "
                           "its spans are not exported", name, ", ".join(sorted(found)) or "none")
            continue
        provider.add_span_processor(BatchSpanProcessor(ep.load()()))
    trace.set_tracer_provider(provider)


def shutdown() -> None:
    """Flush the spans still buffered and close the exporters (the worker is exiting)."""
    provider = trace.get_tracer_provider()
    for method in ("force_flush", "shutdown"):
        fn = getattr(provider, method, None)
        if fn is not None:
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - an exporter failing must not fail the worker's exit
                logger.warning("OpenTelemetry {}: {}", method, exc)


def message_attributes(msg: Message, group: str) -> dict[str, Any]:
    """The semantic-convention attributes of one message's process span."""
    props = msg.properties
    attrs: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": msg.topic,
        "messaging.message.id": msg.msg_id,
        "messaging.destination.partition.id": str(msg.queue_id),
        "messaging.message.body.size": len(msg.body),
        "messaging.rocketmq.queue_offset": msg.queue_offset,
        "messaging.rocketmq.reconsume_times": msg.reconsume_times,
    }
    if group:
        attrs["messaging.consumer.group.name"] = group
        attrs["messaging.rocketmq.client_group"] = group
    keys = props.get("KEYS")
    if keys:
        attrs["messaging.rocketmq.message.keys"] = keys.split(" ")
    tags = props.get("TAGS")
    if tags:
        attrs["messaging.rocketmq.message.tag"] = tags
    return attrs


def traced_handler(handler: Handler, group: str) -> Handler:
    """``handler`` with a process span around each call (the worker's hot loop is unchanged); an ``async def``
    handler (the asyncio worker class) gets an ``async def`` wrapper, so the span lasts as long as the call."""
    tracer = trace.get_tracer("rmqrun")
    fn = handler.fn

    def one(msg: Message) -> Any:
        parent = propagate.extract(msg.properties)
        return tracer.start_as_current_span(f"process {msg.topic}", context=parent, kind=SpanKind.CONSUMER,
                                            attributes=message_attributes(msg, group),
                                            record_exception=False, set_status_on_exception=False)

    def batch(msgs: list[Message]) -> Any:
        links = [Link(trace.get_current_span(propagate.extract(m.properties)).get_span_context()) for m in msgs]
        attrs = message_attributes(msgs[0], group) if msgs else {"messaging.system": SYSTEM}
        attrs.pop("messaging.message.id", None)
        attrs["messaging.batch.message_count"] = len(msgs)
        topic = msgs[0].topic if msgs else ""
        return tracer.start_as_current_span(f"process {topic}", context=otel_context.Context(),
                                            kind=SpanKind.CONSUMER, attributes=attrs,
                                            links=[lk for lk in links if lk.context.is_valid],
                                            record_exception=False, set_status_on_exception=False)

    span_of = batch if handler.is_batch else one

    def traced(arg: Any) -> Any:
        with span_of(arg) as span:
            return _call(span, fn, arg)

    async def traced_async(arg: Any) -> Any:
        with span_of(arg) as span:
            return await _call_async(span, fn, arg)

    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))
    wrapped: Callable[..., Any] = functools.wraps(fn)(traced_async if is_async else traced)
    return Handler(handler.ref, wrapped, handler.is_batch)


async def _call_async(span: Any, fn: Callable[..., Any], arg: Any) -> Any:
    """:func:`_call` for an ``async def`` handler: the span ends when the coroutine does."""
    try:
        value = await fn(arg)
    except BaseException as exc:  # the time limit's cancel too: recorded, then as before
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    if isinstance(value, _FAILURES):
        span.set_status(Status(StatusCode.ERROR, f"handler returned {type(value).__name__}"))
    return value


def _call(span: Any, fn: Callable[..., Any], arg: Any) -> Any:
    try:
        value = fn(arg)
    except BaseException as exc:  # a soft time limit, SIGTERM's WorkerTerminated: recorded, then as before
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        raise
    if isinstance(value, _FAILURES):
        span.set_status(Status(StatusCode.ERROR, f"handler returned {type(value).__name__}"))
    return value
