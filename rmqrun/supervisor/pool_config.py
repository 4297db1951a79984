"""The pool's settings and their validation, apart from the pool that acts on them.

Validation happens when the settings are built (``__post_init__``), so a bad
value is refused with its name and value before any process is spawned. What
each worker boots with is one :class:`WorkerConfig`, held here and sent as it
is; the fields below are the supervisor's own. Each default and check is
written once, on its field; the settings table (:mod:`rmqrun.cli.settings`)
reads them (see :mod:`rmqrun.setting_rules`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from typing import Any

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.setting_rules import at_least, between, check_fields, positive, ruled

__all__ = ["MAX_WORKERS", "PoolConfig", "worker_config_for"]

#: the most worker processes a pool may have: one bound for ``run --workers`` and ``demo --workers``
MAX_WORKERS = 4096


def worker_config_for(consumer: ConsumerConfig, handler: str, **settings: Any) -> WorkerConfig:
    """What the workers of a pool consuming for ``consumer`` boot with: its batch size, time limit
    (consumeTimeout, in seconds), namespace (taken off topics) and group (named in spans) are the consumer's,
    set here once; ``settings`` are the workers' own (WorkerConfig fields)."""
    return WorkerConfig(handler, batch_size=consumer.consume_message_batch_max_size,
                        time_limit=consumer.consume_timeout_minutes * 60, namespace=consumer.namespace,
                        consumer_group=consumer.group, **settings)


def _cpu_count() -> int:
    return os.cpu_count() or 1


@dataclass(frozen=True)
class PoolConfig:
    """Settings of the pool: the workers' :class:`WorkerConfig` and how the supervisor runs them.

    ``max_messages_jitter`` (the worker's) defaults to 10% of ``max_messages``.
    ``crash_limit`` defaults to max(10, 2 * workers); it counts only deaths that
    no message explains (outside a handler call, or at boot).
    """

    #: what every worker boots with (the BOOT frame), sent unchanged
    worker: WorkerConfig
    workers: int = ruled(default_factory=_cpu_count, ok=between(1, MAX_WORKERS),
                         allowed=f"an integer from 1 to {MAX_WORKERS}")
    boot_timeout: float = ruled(60.0, ok=positive, allowed="a positive number of seconds")
    crash_limit: int | None = ruled(None, ok=at_least(1), allowed="1 or more")
    crash_window: float = ruled(60.0, ok=positive, allowed="a positive number of seconds")
    #: seconds after which a handler call is long (or 10 x the usual time per message, if longer): logged,
    #: and the work queued behind it on its worker goes to other workers (0: off)
    long_call_seconds: float = ruled(5.0, ok=at_least(0), allowed="0 or more seconds")
    #: seconds a worker holding work may show no sign of life (outside a handler call, or stopped) before
    #: it is stuck and the batches it has not begun move (0: off); see :mod:`rmqrun.supervisor.liveness`
    worker_liveness_timeout: float = ruled(20.0, ok=at_least(0), allowed="0 or more seconds")
    #: seconds a stuck worker may stay stuck before it is killed and replaced (0: never)
    stuck_worker_kill_after: float = ruled(60.0, ok=at_least(0), allowed="0 or more seconds")

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def effective_crash_limit(self) -> int:
        return self.crash_limit if self.crash_limit is not None else max(10, 2 * self.workers)
