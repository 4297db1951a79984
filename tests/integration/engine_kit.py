"""Helpers for the push-consumer engine's end-to-end tests.

The embedded broker runs on the test's event loop; the supervisor (engine +
real worker processes) runs on the same loop, as ``rmqrun run`` would in its
own process. Handlers come from ``workers/`` and record what they consumed
into a file, so the tests check what the handler really saw.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections import defaultdict
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.producer import Producer
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.model import MessageQueue
from rmqrun.pipe.worker_config import WorkerConfig
from rmqrun.supervisor.pool_config import PoolConfig, worker_config_for
from rmqrun.supervisor.supervisor import RunSettings, Supervisor
from tests.waiting import SEND_ANSWER_TIMEOUT_S, eventually_async

FAST_DELAYS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


@asynccontextmanager
async def broker(tmp_path: Path, **settings: object) -> AsyncIterator[EmbeddedBroker]:
    eb = EmbeddedBroker(tmp_path / "broker", **settings)  # type: ignore[arg-type]
    await eb.start()
    try:
        yield eb
    finally:
        await eb.stop()


async def produce(namesrv: str, topic: str, n: int, *, tags: list[str] | None = None,
                  sharding_keys: int = 0, props: dict[str, str] | None = None, start: int = 0,
                  key_names: tuple[str, ...] = ()) -> list[str]:
    """Send n messages with bodies ``msg-<i>``; returns their msg ids.

    Message ``i`` has sharding key ``str(i % sharding_keys)``, or ``key_names[i % len(key_names)]`` when
    those are given (a test that needs its keys on given queues and given workers picks them).
    """
    ids = []
    async with Producer(namesrv, "PG_test", send_timeout=SEND_ANSWER_TIMEOUT_S) as producer:
        for i in range(start, start + n):
            tag = tags[i % len(tags)] if tags else None
            key = key_names[i % len(key_names)] if key_names else str(i % sharding_keys) if sharding_keys else None
            r = await producer.send(topic, f"msg-{i}".encode(), tags=tag, keys=f"k{i}",
                                    properties={"idx": str(i), **(props or {})}, sharding_key=key)
            ids.append(r.msg_id)
    return ids


def consumer_config(namesrv: str, group: str, topic: str, **kw: object) -> ConsumerConfig:
    kw.setdefault("consume_from_where", "CONSUME_FROM_FIRST_OFFSET")
    kw.setdefault("rebalance_interval_ms", 2000)
    kw.setdefault("persist_offset_interval_ms", 500)
    return ConsumerConfig(group=group, namesrv=namesrv, subscriptions={topic: str(kw.pop("tags", "*"))},
                          **kw)  # type: ignore[arg-type]


#: the settings each worker boots with; the rest of a pool_config() keyword goes to the PoolConfig
WORKER_FIELDS = frozenset(f.name for f in dataclasses.fields(WorkerConfig))


def pool_config(handler: str, workers: int = 2, consumer: ConsumerConfig | None = None, **kw: object) -> PoolConfig:
    """A pool of ``workers`` running ``handler``; with ``consumer``, its workers take that consumer's namespace
    and group (as ``rmqrun run`` builds them)."""
    kw.setdefault("boot_timeout", 30.0)
    own = {k: v for k, v in kw.items() if k in WORKER_FIELDS}
    if consumer is not None:  # a test may still give its workers another batch size or time limit
        given = {k: own.pop(k) for k in ("batch_size", "time_limit") if k in own}
        worker = dataclasses.replace(worker_config_for(consumer, handler, **own), **given)
    else:
        worker = WorkerConfig(handler, **{"batch_size": 1, "time_limit": 900.0, **own})  # type: ignore[arg-type]
    return PoolConfig(worker, workers=workers,
                      **{k: v for k, v in kw.items() if k not in WORKER_FIELDS})  # type: ignore[arg-type]


class Running:
    """A supervisor running as a task on the current loop."""

    def __init__(self, consumer: ConsumerConfig, pool: PoolConfig, grace: float = 10.0) -> None:
        self.supervisor = Supervisor(RunSettings(consumer=consumer, pool=pool, grace=grace, status_interval=0))
        self.task: asyncio.Task[int] | None = None

    async def __aenter__(self) -> "Running":
        self.task = asyncio.ensure_future(self.supervisor.run())
        # wait until the engine has taken its queues (or died)
        def consuming() -> bool:
            if self.task.done():
                raise RuntimeError(f"supervisor exited early with {self.task.result()}")
            engine = self.supervisor.engine
            return bool(self.supervisor.ready and engine is not None and engine.table)  # first rebalance done

        await eventually_async(consuming, what="the supervisor to start consuming", interval=0.05)
        return self

    async def stop(self, timeout: float = 60) -> int:
        assert self.task is not None
        if not self.task.done():
            self.supervisor.request_stop()
        return await asyncio.wait_for(self.task, timeout)

    async def __aexit__(self, *exc: object) -> None:
        if self.task is not None and not self.task.done():
            await self.stop()


def read_records(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines() if line.strip()]  # type: ignore[misc]


async def wait_for(predicate, timeout: float = 60, interval: float = 0.1, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    """:func:`tests.waiting.eventually_async` with this kit's argument order, for its many callers."""
    await eventually_async(predicate, what=what, timeout=timeout, interval=interval)


def by_queue(records: list[tuple[int, int]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for qid, off in records:
        out[qid].append(off)
    return out


async def committed_offsets(eb: EmbeddedBroker, group: str, topic: str) -> dict[int, int | None]:
    """What the broker stores for the group, per queue (None = nothing)."""
    from rmqrun.client.instance import ClientInstance
    inst = ClientInstance(eb.namesrv_address, instance_name="probe")
    try:
        out = {}
        for mq in await inst.subscribe_queues(topic):
            out[mq.queue_id] = await inst.broker.query_consumer_offset(eb.broker_address, group, mq)
        return out
    finally:
        await inst.close()


def env_for_workers(**env: str) -> None:
    """Workers inherit the supervisor's environment."""
    os.environ.update(env)


__all__ = ["broker", "produce", "consumer_config", "pool_config", "Running", "read_records", "wait_for",
           "by_queue", "committed_offsets", "env_for_workers", "FAST_DELAYS", "MessageQueue"]
