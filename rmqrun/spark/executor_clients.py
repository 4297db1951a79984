"""One :class:`~rmqrun.pull.PullConsumer` per Spark Python worker, shared by the tasks it runs.

Spark reuses its Python workers across tasks (``spark.python.worker.reuse``,
on by default), so a partition that opened its own consumer paid, every task,
a loop thread, the name server's route, and a connection to each broker;
partitions of a small read are mostly that. Here the first task of a worker
process opens the consumer and later tasks of the same query, and of later
queries with the same connection settings, use it again.

The cache is keyed by what makes a connection different (name server, group,
pull timeout, namespace, ACL/TLS settings) and by the process id: a worker
forked after a consumer was started must not touch its parent's loop
(:class:`~rmqrun.pull.PullConsumer` refuses that), so a forked child opens its
own. These consumers never commit offsets, so they never register their group
(``register=False``): a cached one holds nothing on the brokers but a
connection. A task that fails drops its consumer (:func:`discard`), so a broken
connection is never handed to the next task; every consumer left is closed at
interpreter exit (a worker that Spark's daemon ends with ``os._exit`` skips
that, and the operating system closes its connections: nothing is held on the
brokers that would need a goodbye, since these consumers never register).
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from loguru import logger

from rmqrun.spark.errors import OptionError
from rmqrun.spark.options import ReadOptions

_LOCK = threading.Lock()
_CONSUMERS: dict[tuple[Any, ...], Any] = {}


def _key(opts: ReadOptions) -> tuple[Any, ...]:
    return (os.getpid(), opts.namesrv, opts.group or "", opts.pull_timeout, opts.namespace or "", opts.security)


def consumer_for(opts: ReadOptions) -> Any:
    """The started consumer of this process for ``opts``' connection settings (opened on first use)."""
    from rmqrun.pull import PullConsumer

    key = _key(opts)
    with _LOCK:
        consumer = _CONSUMERS.get(key)
        if consumer is None:
            kwargs = {"group": opts.group} if opts.group else {}
            try:
                consumer = PullConsumer(opts.namesrv, timeout=opts.pull_timeout, namespace=opts.namespace,
                                        security=opts.security, register=False, **kwargs).start()
            except ValueError as e:
                raise OptionError(f"rocketmq option namesrv: {e}") from None
            _CONSUMERS[key] = consumer
        return consumer


def discard(opts: ReadOptions, consumer: Any) -> None:
    """Forget and close ``consumer`` (a task using it failed: the next task opens a fresh one)."""
    with _LOCK:
        if _CONSUMERS.get(_key(opts)) is consumer:
            del _CONSUMERS[_key(opts)]
    _close(consumer)


def cached() -> int:
    """How many consumers this process holds (tests)."""
    with _LOCK:
        return sum(1 for key in _CONSUMERS if key[0] == os.getpid())


def _close(consumer: Any) -> None:
    try:
        consumer.close()
    except Exception as e:  # noqa: BLE001 - closing is best effort; the connection goes with the process
        logger.debug("rocketmq source: closing an executor consumer failed: {}", e)


@atexit.register
def close_all() -> None:
    """Close every consumer this process opened (those inherited through a fork are not ours to close)."""
    with _LOCK:
        mine = [key for key in _CONSUMERS if key[0] == os.getpid()]
        consumers = [_CONSUMERS.pop(key) for key in mine]
    for consumer in consumers:
        _close(consumer)
