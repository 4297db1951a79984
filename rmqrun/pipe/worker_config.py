"""The settings a worker boots with: the BOOT frame's payload.

It lives beside the wire protocol because the supervisor builds it and the
worker reads it back from JSON; keeping it here lets the supervisor start
workers without importing the worker's code.
"""

from __future__ import annotations

from dataclasses import dataclass

#: how a worker runs handler calls (``worker_class``): see :mod:`rmqrun.worker.call_runners`
WORKER_CLASSES = ("process", "threads", "asyncio")
#: the most handler calls one worker may run at once (``worker_concurrency``); the progress block has a slot each
MAX_CONCURRENCY = 256


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """What a worker needs to know, sent once in the BOOT frame (as JSON, so plain fields only).

    ``time_limit`` is the soft limit of one handler call in seconds (0 = none),
    Java's consumeTimeout, which counts from the start of each consume call,
    not from the start of the pulled batch the call belongs to.
    ``kill_grace`` is how long after it the supervisor kills the worker; the
    worker re-announces a long batch (STARTED again) before each call often
    enough that the supervisor's hard limit counts from the current call too.
    ``max_messages`` (+ a random 0..``max_messages_jitter``) and ``max_memory``
    (RSS bytes) trigger recycling; 0 disables them.
    """

    handler: str
    worker_init: str | None = None
    worker_exit: str | None = None
    batch_size: int = 1
    time_limit: float = 900.0
    kill_grace: float = 10.0
    max_messages: int = 0
    max_messages_jitter: int = 0
    max_memory: int = 0
    log_level: str = "INFO"
    #: "text", or "json" for JSON lines (``rmqrun run --log-format json``)
    log_format: str = "text"
    #: the consumer's namespace: taken off each message's topic before the handler sees it
    namespace: str | None = None
    #: the longest log record a handler may write, in characters; longer ones are cut with a marker (0: no cap)
    max_log_record: int = 64 * 1024
    #: OpenTelemetry: a process span per handler call (rmqrun/worker/otel.py), with this consumer group
    otel: bool = False
    consumer_group: str = ""
    #: "process" (one call at a time, in the main thread), "threads" or "asyncio" (see WORKER_CLASSES)
    worker_class: str = "process"
    #: handler calls at once (threads, asyncio); 1 for process
    concurrency: int = 1
