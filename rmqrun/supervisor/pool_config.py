"""The pool's settings and their validation, apart from the pool that acts on them.

Validation happens when the settings are built (``__post_init__``), so a bad
value is refused with its name and value before any process is spawned; the
settings table (:mod:`rmqrun.cli.settings`) maps rmqrun's options onto these.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rmqrun.errors import ConfigError
from rmqrun.pipe.worker_config import MAX_CONCURRENCY, WORKER_CLASSES, WorkerConfig

__all__ = ["PoolConfig"]


@dataclass(frozen=True)
class PoolConfig:
    """Settings of the pool (the settings table maps rmqrun's options onto these).

    ``batch_size`` is consumeMessageBatchMaxSize (messages per handler call of
    an ``@rmqrun.batch`` handler). ``time_limit`` is consumeTimeout in seconds,
    per handler call (0 = none); ``kill_grace`` is how long after it the worker
    is SIGKILLed. ``max_messages_jitter`` defaults to 10% of
    ``max_messages_per_worker``; ``max_memory_per_worker`` is RSS in bytes.
    ``crash_limit`` defaults to max(10, 2 * workers); it counts only deaths that
    no message explains (outside a handler call, or at boot).
    """

    handler: str
    workers: int = field(default_factory=lambda: os.cpu_count() or 1)
    worker_init: str | None = None
    worker_exit: str | None = None
    batch_size: int = 1
    time_limit: float = 15 * 60.0
    kill_grace: float = 10.0
    max_messages_per_worker: int = 0
    max_messages_jitter: int | None = None
    max_memory_per_worker: int = 0
    boot_timeout: float = 60.0
    crash_limit: int | None = None
    crash_window: float = 60.0
    log_level: str = "INFO"
    log_format: str = "text"
    #: the consumer's namespace, which workers take off message topics (the supervisor sets it)
    namespace: str | None = None
    #: the longest log record a handler may write (characters); the rest is cut with a marker (0: no cap)
    max_log_record: int = 64 * 1024
    #: seconds after which a handler call is long (or 10 x the usual time per message, if longer): logged,
    #: and the work queued behind it on its worker goes to other workers (0: off)
    long_call_seconds: float = 5.0
    #: OpenTelemetry spans per handler call in the workers (needs ``rmqrun[otel]``); the group is their
    #: consumer group attribute (the supervisor sets it)
    otel: bool = False
    consumer_group: str = ""
    #: seconds a worker holding work may show no sign of life (outside a handler call, or stopped) before
    #: it is stuck and the batches it has not begun move (0: off); see :mod:`rmqrun.supervisor.liveness`
    worker_liveness_timeout: float = 20.0
    #: seconds a stuck worker may stay stuck before it is killed and replaced (0: never)
    stuck_worker_kill_after: float = 60.0
    #: how each worker runs handler calls: "process" (one at a time), "threads" or "asyncio" (up to
    #: ``worker_concurrency`` at once); see :mod:`rmqrun.worker.call_runners`
    worker_class: str = "process"
    worker_concurrency: int = 1

    def __post_init__(self) -> None:
        checks = [
            (self.worker_class in WORKER_CLASSES, f"worker_class must be one of {', '.join(WORKER_CLASSES)}, "
                                                  f"got {self.worker_class!r}"),
            (1 <= self.worker_concurrency <= MAX_CONCURRENCY, f"worker_concurrency must be from 1 to "
                                                              f"{MAX_CONCURRENCY}, got {self.worker_concurrency}"),
            (self.worker_class != "process" or self.worker_concurrency == 1,
             f"worker_concurrency {self.worker_concurrency} needs worker_class threads or asyncio: the process "
             f"class runs one handler call at a time per worker (add more workers for more at once)"),
            (self.workers >= 1, f"workers must be >= 1, got {self.workers}"),
            (self.batch_size >= 1, f"batch_size (consumeMessageBatchMaxSize) must be >= 1, got {self.batch_size}"),
            (self.time_limit >= 0, f"time_limit must be >= 0 (0 = none), got {self.time_limit}"),
            (self.kill_grace > 0, f"kill_grace must be > 0, got {self.kill_grace}"),
            (self.max_messages_per_worker >= 0, f"max_messages_per_worker must be >= 0, got "
                                                f"{self.max_messages_per_worker}"),
            (self.max_messages_jitter is None or self.max_messages_jitter >= 0,
             f"max_messages_jitter must be >= 0, got {self.max_messages_jitter}"),
            (self.max_memory_per_worker >= 0, f"max_memory_per_worker must be >= 0, got "
                                              f"{self.max_memory_per_worker}"),
            (self.boot_timeout > 0, f"boot_timeout must be > 0, got {self.boot_timeout}"),
            (self.crash_limit is None or self.crash_limit >= 1, f"crash_limit must be >= 1, got {self.crash_limit}"),
            (self.crash_window > 0, f"crash_window must be > 0, got {self.crash_window}"),
            (self.max_log_record >= 0, f"max_log_record must be >= 0, got {self.max_log_record}"),
            (self.long_call_seconds >= 0, f"long_call_seconds must be >= 0 (0 = off), got {self.long_call_seconds}"),
            (self.worker_liveness_timeout >= 0, f"worker_liveness_timeout must be >= 0 (0 = off), got "
                                                f"{self.worker_liveness_timeout}"),
            (self.stuck_worker_kill_after >= 0, f"stuck_worker_kill_after must be >= 0 (0 = never), got "
                                                f"{self.stuck_worker_kill_after}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    def worker_config(self) -> WorkerConfig:
        jitter = self.max_messages_jitter
        if jitter is None:
            jitter = self.max_messages_per_worker // 10
        return WorkerConfig(handler=self.handler, worker_init=self.worker_init, worker_exit=self.worker_exit,
                            batch_size=self.batch_size, time_limit=self.time_limit, kill_grace=self.kill_grace,
                            max_messages=self.max_messages_per_worker, max_messages_jitter=jitter,
                            max_memory=self.max_memory_per_worker, log_level=self.log_level,
                            log_format=self.log_format, namespace=self.namespace,
                            max_log_record=self.max_log_record, otel=self.otel,
                            consumer_group=self.consumer_group, worker_class=self.worker_class,
                            concurrency=self.worker_concurrency)

    @property
    def effective_crash_limit(self) -> int:
        return self.crash_limit if self.crash_limit is not None else max(10, 2 * self.workers)
