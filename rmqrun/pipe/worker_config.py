"""The settings a worker boots with: the BOOT frame's payload.

It lives beside the wire protocol because the supervisor builds it and the
worker reads it back from JSON; keeping it here lets the supervisor start
workers without importing the worker's code. The pool holds one
(``PoolConfig.worker``) and sends it unchanged; each field's default and check
are written here once, and the settings table of ``rmqrun run`` reads them
(see :mod:`rmqrun.setting_rules`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rmqrun.errors import ConfigError
from rmqrun.setting_rules import at_least, between, check_fields, one_of, positive, ruled, words

#: the log levels a worker (and the supervisor) may log at, loguru's names
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")

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

    ``batch_size``, ``time_limit``, ``namespace`` and ``consumer_group`` are the
    consumer's (consumeMessageBatchMaxSize, consumeTimeout, its namespace and
    group): set from the consumer's settings where both are built
    (``rmqrun.supervisor.pool_config.worker_config_for``) and checked there, so
    the first two have no default here (the consumer's is the one).
    """

    handler: str
    worker_init: str | None = None
    worker_exit: str | None = None
    batch_size: int = field(kw_only=True)
    time_limit: float = field(kw_only=True)
    kill_grace: float = ruled(10.0, ok=positive, allowed="a positive number of seconds")
    max_messages: int = ruled(0, ok=at_least(0), allowed="0 or more")
    #: None: 10% of ``max_messages``, resolved on construction (the BOOT frame carries the number)
    max_messages_jitter: int | None = ruled(None, ok=at_least(0), allowed="0 or more")
    max_memory: int = ruled(0, ok=at_least(0), allowed="0 or a size")
    log_level: str = ruled("INFO", ok=one_of(*LOG_LEVELS))
    #: "text", or "json" for JSON lines (``rmqrun run --log-format json``)
    log_format: str = ruled("text", ok=words("text", "json"))
    #: the consumer's namespace: taken off each message's topic before the handler sees it
    namespace: str | None = None
    #: the longest log record a handler may write, in characters; longer ones are cut with a marker (0: no cap)
    max_log_record: int = ruled(64 * 1024, ok=at_least(0), allowed="0 or a size")
    #: OpenTelemetry: a process span per handler call (rmqrun/worker/otel.py), with this consumer group
    otel: bool = False
    consumer_group: str = ""
    #: how this worker runs handler calls: "process" (one call at a time, in the main thread), "threads" or
    #: "asyncio" (up to ``concurrency`` at once); see :mod:`rmqrun.worker.call_runners`
    worker_class: str = ruled("process", ok=words(*WORKER_CLASSES))
    #: handler calls at once (threads, asyncio); 1 for process
    concurrency: int = ruled(1, ok=between(1, MAX_CONCURRENCY), allowed=f"an integer from 1 to {MAX_CONCURRENCY}")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.worker_class == "process" and self.concurrency != 1:
            raise ConfigError(f"worker_concurrency {self.concurrency} needs worker_class threads or asyncio: the "
                              f"process class runs one handler call at a time per worker (add more workers for "
                              f"more at once)")
        if self.max_messages_jitter is None:
            object.__setattr__(self, "max_messages_jitter", self.max_messages // 10)
