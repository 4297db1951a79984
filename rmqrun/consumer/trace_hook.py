"""Message traces of consumption: Java's ``ConsumeMessageTraceHookImpl`` as an :class:`Executor` wrapper.

Every consume mode (concurrent, orderly by queue or key, POP, orderly POP) hands its jobs to one
:class:`~rmqrun.consumer.executor.Executor`, so wrapping that one object traces them all without touching
the consume services: :func:`traced` returns an executor that records a ``SubBefore`` context when a job is
handed over and a ``SubAfter`` when its verdicts come back, and forwards everything else to the executor it
wraps. Both go to a :class:`~rmqrun.client.trace_dispatch.TraceDispatcher`, whose ``append`` never waits:
tracing cannot slow or stop consumption, and a full trace buffer drops trace records, never messages.

What Java writes, and so what is written here: the group without its namespace; a request id shared by a
job's SubBefore and SubAfter; per message its id (UNIQ_KEY, else the offset id), its reconsume count and
its KEYS (``null`` without); the context's region from the messages' ``MSG_REGION`` property; messages
carrying ``TRACE_ON=false`` skipped. A SubAfter's success and context code (ConsumeReturnType's ordinal)
follow the job's outcome. rmqrun knows the outcome per message, so a job whose messages fared differently
gets one SubAfter context for its successes and one for its failures (same request id): a Java consumer
would mark them all as its one batch status. The cost is the handler's time on the job per message when the
executor reports it (Java times the listener call), else the time since hand-over.
A message not run (NOT_RUN: behind an orderly failure, after a time limit, a job whose queue was given away
before it started) gets no SubAfter: it is delivered, and traced, again.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Mapping

from rmqrun.client.msgid import UniqueIdGenerator
from rmqrun.client.netutil import local_ip
from rmqrun.client.producer import Producer
from rmqrun.client.trace_dispatch import TraceDispatcher
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.context import HandlerCalls
from rmqrun.consumer.executor import ConsumeJob, Executor, JobResult
from rmqrun.model import Status
from rmqrun.consumer.process_queue import ProcessQueue
from rmqrun.protocol.trace import (
    PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH, TRACE_GROUP_PREFIX, ContextCode, TraceBean, TraceContext, TraceType,
)
from rmqrun.remoting.errors import ProtocolError
from rmqrun.remoting.message import record_ids, record_properties
from rmqrun.remoting.message_props import (
    PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, string_to_properties,
)

_SUCCESS = frozenset({Status.SUCCESS, Status.COMMIT})


def _beans(job: ConsumeJob) -> tuple[list[TraceBean | None], str | None]:
    """A bean per record (None for one not traced: TRACE_ON=false, or unreadable), and the region.

    Only the record's fixed fields and properties are read (the body is skipped): this runs in the
    supervisor for every consumed message while tracing is on."""
    beans: list[TraceBean | None] = []
    region: str | None = None
    for record in job.records:
        try:
            reconsume, text = record_properties(record)
        except ProtocolError:
            beans.append(None)
            continue
        props = string_to_properties(text)
        if props.get(PROPERTY_TRACE_SWITCH) == "false":
            beans.append(None)
            continue
        region = props.get(PROPERTY_MSG_REGION)
        msg_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or record_ids(record).offset_msg_id
        beans.append(TraceBean(msg_id=msg_id, tags=props.get(PROPERTY_TAGS), keys=props.get(PROPERTY_KEYS),
                               body_length=len(record), retry_times=reconsume))
    return beans, region


def context_code(result: JobResult) -> ContextCode:
    """ConsumeReturnType of a job with a failure: TIME_OUT, EXCEPTION (the handler raised) or FAILED."""
    if result.timed_out:
        return ContextCode.TIME_OUT
    if result.error and " raised " in result.error:
        return ContextCode.EXCEPTION
    return ContextCode.FAILED


class TracingExecutor:
    """An executor that traces the jobs it passes to ``inner``; every other attribute is ``inner``'s."""

    def __init__(self, inner: Executor, dispatcher: TraceDispatcher, group: str,
                 ids: UniqueIdGenerator | None = None) -> None:
        self._inner = inner
        self.dispatcher = dispatcher
        self.group = group
        self._ids = ids or UniqueIdGenerator()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def submit(self, job: ConsumeJob) -> "asyncio.Future[JobResult]":
        """The job traced, as a future: ``inner``'s own ``submit`` (which ``__getattr__`` would hand out) would
        skip the tracing."""
        return asyncio.ensure_future(self.run(job))

    async def run(self, job: ConsumeJob) -> JobResult:
        handed_over = time.time()
        beans, region = _beans(job)
        traced = [b for b in beans if b is not None]
        before: TraceContext | None = None
        if traced:
            before = TraceContext(TraceType.SUB_BEFORE, timestamp=int(handed_over * 1000), region_id=region,
                                  group=self.group, request_id=self._ids.next_id(), beans=traced)
            self.dispatcher.append(before)
        result = await self._inner.run(job)
        if before is not None:
            self._after(before, beans, result, handed_over)
        return result

    def _after(self, before: TraceContext, beans: list[TraceBean | None], result: JobResult,
               handed_over: float) -> None:
        verdicts = result.verdicts
        n = len(verdicts) or 1
        spent = result.handler_seconds if result.handler_seconds is not None else time.time() - handed_over
        cost = int(spent * 1000 / n)
        now = int(time.time() * 1000)
        ok = [b for b, v in zip(beans, verdicts) if b is not None and v in _SUCCESS]
        # NOT_RUN: never given to the handler (behind an orderly failure, cut off by a time limit or a stop);
        # redelivered, and traced again then
        failed = [b for b, v in zip(beans, verdicts)
                  if b is not None and v not in _SUCCESS and v is not Status.NOT_RUN]
        for group_beans, success in ((ok, True), (failed, False)):
            if group_beans:
                self.dispatcher.append(TraceContext(
                    TraceType.SUB_AFTER, timestamp=now, region_id=before.region_id, group=self.group,
                    request_id=before.request_id, cost_time=cost, success=success,
                    context_code=ContextCode.SUCCESS if success else context_code(result), beans=group_beans))


class _TracingHandlerCalls(TracingExecutor):
    """The same, for an executor that says whose handler call has begun (kept visible to isinstance)."""

    def handler_calls(self, pq: ProcessQueue) -> Mapping[int, float | None]:
        return self._inner.handler_calls(pq)  # type: ignore[attr-defined]


def traced(inner: Executor, dispatcher: TraceDispatcher, group: str,
           ids: UniqueIdGenerator | None = None) -> TracingExecutor:
    """Wrap ``inner`` so that every job it runs is traced to ``dispatcher`` under ``group`` (no namespace)."""
    cls = _TracingHandlerCalls if isinstance(inner, HandlerCalls) else TracingExecutor
    return cls(inner, dispatcher, group, ids)


def consumer_tracing(config: ConsumerConfig, inner: Executor) -> TracingExecutor | None:
    """The traced executor for a consumer with ``msg_trace`` (None without), its dispatcher started.

    Its trace producer is a client of its own (Java: the trace dispatcher's own DefaultMQProducer), with the
    consumer's name servers and security, so trace sends are signed like every other request; its group is
    Java's ``_INNER_TRACE_PRODUCER-<group>-CONSUMER-1``. The trace topic is not under the namespace."""
    if not config.msg_trace:
        return None

    def producer() -> Producer:
        return Producer(config.namesrv, f"{TRACE_GROUP_PREFIX}-{config.group}-CONSUMER-1",
                        security=config.security)
    dispatcher = TraceDispatcher(producer, config.msg_trace_topic)
    return traced(inner, dispatcher, config.group, UniqueIdGenerator(config.client_ip or local_ip()))
